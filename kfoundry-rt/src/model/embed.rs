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
        Some(entry) if entry.fingerprint == spec.fingerprint() => entry
            .variants
            .iter()
            .map(|v| Variant { device_info: lock.devices.get(&v.device).cloned(), ..v.clone() })
            .collect(),
        _ => Vec::new(),
    }
}

/// A generated source to embed: its hash, file (tracked for rebuilds) and text.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedSource {
    pub hash: String,
    pub path: PathBuf,
    pub text: String,
}

/// Splits `variants` into those that can be embedded with their generated sources: a variant
/// referencing a source that is missing or was edited since it was tuned is dropped (never
/// embedded; `cargo kfoundry check` says why).
pub fn with_generated_sources(lockfile: &Path, spec: &KernelSpec, variants: Vec<Variant>) -> (Vec<Variant>, Vec<EmbeddedSource>) {
    let mut kept = Vec::new();
    let mut sources: Vec<EmbeddedSource> = Vec::new();
    for v in variants {
        match &v.source {
            None => kept.push(v),
            Some(hash) => {
                if let Ok((path, text)) = super::generated::read_verified(lockfile, &spec.id, hash) {
                    if !sources.iter().any(|s| s.hash == *hash) {
                        sources.push(EmbeddedSource { hash: hash.clone(), path, text });
                    }
                    kept.push(v);
                }
            }
        }
    }
    (kept, sources)
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

    /// A variant of `spec`'s reference parameters for device "a".
    fn plain(spec: &KernelSpec) -> Variant {
        Variant {
            device: "a".into(),
            workload: "large".into(),
            sizes: Default::default(),
            params: spec.reference.clone(),
            time_ns: 1,
            reference_time_ns: 2,
            evaluations: 1,
            failures: 0,
            source: None,
            device_info: None,
        }
    }

    #[test]
    fn stale_entries_are_not_embedded() {
        let spec = saxpy();
        let variant = plain(&spec);
        let mut lock = Lockfile::default();
        let info = DeviceInfo { name: "A".into(), kind: "gpu".into(), ..Default::default() };
        lock.record(&spec.id, &spec.fingerprint(), "a", info.clone(), vec![variant.clone()]);
        // embedded with its device's description, for the nearest-device step
        assert_eq!(embeddable_variants(&lock, &spec), vec![Variant { device_info: Some(info), ..variant.clone() }]);
        // which is never written to a lockfile
        let mut embedded = lock.clone();
        if let Some(entry) = embedded.kernels.get_mut(&spec.id) {
            entry.variants = embeddable_variants(&lock, &spec);
        }
        assert!(!embedded.to_toml().contains("device_info"));
        assert_eq!(embedded.to_toml(), lock.to_toml());
        let mut changed = spec.clone();
        changed.source.push_str("\n// edited");
        assert!(embeddable_variants(&lock, &changed).is_empty());
    }

    #[test]
    fn variants_with_missing_or_edited_sources_are_not_embedded() {
        let spec = saxpy();
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(FILE_NAME);
        let text = spec.source.replace("a * x", "x * a");
        let hash = super::super::generated::write(&lock, &spec.id, &text).unwrap();
        let plain = plain(&spec);
        let generated = Variant { source: Some(hash.clone()), device: "b".into(), ..plain.clone() };
        let missing = Variant { source: Some("00000000000000ff".into()), device: "c".into(), ..plain.clone() };
        let (kept, sources) = with_generated_sources(&lock, &spec, vec![plain.clone(), generated.clone(), missing]);
        assert_eq!(kept, vec![plain.clone(), generated.clone()]);
        assert_eq!(sources.len(), 1);
        assert_eq!(sources[0].text, text);
        std::fs::write(&sources[0].path, "edited").unwrap();
        let (kept, sources) = with_generated_sources(&lock, &spec, vec![plain.clone(), generated]);
        assert_eq!(kept, vec![plain]);
        assert!(sources.is_empty());
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
