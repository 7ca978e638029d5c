//! What the macro embeds: the lockfile it reads, the variants of one kernel that are valid for
//! the kernel's current fingerprint, and the shape of the typed launcher it generates.

use std::path::{Path, PathBuf};

use super::lockfile::{Lockfile, Variant, FILE_NAME};
use super::signature::{AddressSpace, KernelArg, ScalarType};
use super::spec::KernelSpec;

/// Finds `Kfoundry.lock` for the crate at `manifest_dir`: the nearest one in it or its
/// ancestors, searching no higher than the workspace root (the first ancestor whose
/// `Cargo.toml` has a `[workspace]` table).
pub fn find_lockfile(manifest_dir: &Path) -> Option<PathBuf> {
    for dir in manifest_dir.ancestors() {
        let candidate = dir.join(FILE_NAME);
        if candidate.is_file() {
            return Some(candidate);
        }
        let is_root = std::fs::read_to_string(dir.join("Cargo.toml"))
            .map(|t| t.lines().any(|l| l.trim() == "[workspace]"))
            .unwrap_or(false);
        if is_root {
            return None;
        }
    }
    None
}

/// The variants of `spec` in `lock` that may be embedded: none when the lockfile's entry was
/// tuned for another fingerprint (a stale entry is never embedded).
pub fn embeddable_variants(lock: &Lockfile, spec: &KernelSpec) -> Vec<Variant> {
    match lock.kernels.get(&spec.id) {
        Some(entry) if entry.fingerprint == spec.fingerprint() => entry.variants.clone(),
        _ => Vec::new(),
    }
}

/// One parameter of a generated launcher, after the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LauncherParam {
    /// A problem size (`usize`); passed to kernel arguments of the same name too.
    Size(String),
    /// A device buffer: `&ocl::Buffer<elem>`.
    Buffer { name: String, elem: ScalarType },
    /// A scalar of the kernel's type.
    Scalar { name: String, ty: ScalarType },
}

/// Launcher parameters: the sizes in declaration order, then every kernel argument in
/// signature order except `__local` buffers (sized from the spec) and scalars that are sizes.
pub fn launcher_params(spec: &KernelSpec) -> Vec<LauncherParam> {
    let mut out: Vec<LauncherParam> = spec.sizes.iter().cloned().map(LauncherParam::Size).collect();
    for arg in &spec.signature.args {
        match arg {
            KernelArg::Buffer { space: AddressSpace::Local, .. } => {}
            KernelArg::Buffer { name, elem, .. } => out.push(LauncherParam::Buffer { name: name.clone(), elem: *elem }),
            KernelArg::Scalar { name, .. } if spec.sizes.contains(name) => {}
            KernelArg::Scalar { name, ty } => out.push(LauncherParam::Scalar { name: name.clone(), ty: *ty }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::device::DeviceInfo;
    use crate::model::spec::tests::saxpy;

    #[test]
    fn launcher_shape() {
        let p = launcher_params(&saxpy());
        assert_eq!(
            p,
            vec![
                LauncherParam::Size("n".into()),
                LauncherParam::Scalar { name: "a".into(), ty: ScalarType::F32 },
                LauncherParam::Buffer { name: "x".into(), elem: ScalarType::F32 },
                LauncherParam::Buffer { name: "y".into(), elem: ScalarType::F32 },
            ]
        );
    }

    #[test]
    fn stale_entries_are_not_embedded() {
        let spec = saxpy();
        let variant = Variant {
            device: "a".into(),
            workload: "large".into(),
            sizes: Default::default(),
            params: spec.reference.clone(),
            time_ns: 1,
            reference_time_ns: 2,
            evaluations: 1,
            failures: 0,
            source: None,
        };
        let mut lock = Lockfile::default();
        lock.record(&spec.id, &spec.fingerprint(), "a", DeviceInfo::default(), vec![variant.clone()]);
        assert_eq!(embeddable_variants(&lock, &spec), vec![variant.clone()]);
        let mut changed = spec.clone();
        changed.source.push_str("\n// edited");
        assert!(embeddable_variants(&lock, &changed).is_empty());
    }

    #[test]
    fn lockfile_search_stops_at_the_workspace_root() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let member = ws.join("crates/member");
        std::fs::create_dir_all(&member).unwrap();
        std::fs::write(ws.join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
        std::fs::write(member.join("Cargo.toml"), "[package]\n").unwrap();
        // A lockfile above the workspace root is not ours.
        std::fs::write(dir.path().join(FILE_NAME), "version = 1\n").unwrap();
        assert_eq!(find_lockfile(&member), None);
        std::fs::write(ws.join(FILE_NAME), "version = 1\n").unwrap();
        assert_eq!(find_lockfile(&member), Some(ws.join(FILE_NAME)));
    }
}
