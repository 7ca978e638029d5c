//! What the macro embeds: where the workspace's lockfile is, the variants of one kernel that
//! match the kernel's current fingerprint (each checked against the annotation), their
//! generated sources, and the shape of the typed launcher.

use std::path::{Path, PathBuf};

use kfoundry_rt::model::declared::declared_params;
use kfoundry_rt::model::signature::{KernelArg, ScalarType};
use kfoundry_rt::model::spec::{ArgRole, KernelSpec};
use kfoundry_rt::model::variant::{check_unique, check_variant, Variant};

use crate::fingerprint::fingerprint;
use crate::lockfile::{Lockfile, FILE_NAME};

/// The workspace root of the crate at `manifest_dir`, as cargo finds it: the directory named
/// by the crate's `package.workspace`, else the nearest ancestor (the crate's own directory
/// included) whose `Cargo.toml` has a `[workspace]` table that does not exclude the crate,
/// else the crate's own directory.
pub fn workspace_root(manifest_dir: &Path) -> PathBuf {
    let manifest = |dir: &Path| -> Option<toml::Table> {
        toml::from_str(
            &crate::files::read_text_bounded(&dir.join("Cargo.toml"), 16 << 20, "Cargo.toml")
                .ok()?,
        )
        .ok()
    };
    if let Some(explicit) = manifest(manifest_dir).as_ref().and_then(|m| {
        m.get("package")?
            .get("workspace")?
            .as_str()
            .map(|p| manifest_dir.join(p))
    }) {
        return explicit;
    }
    for dir in manifest_dir.ancestors() {
        let Some(workspace) = manifest(dir).and_then(|m| m.get("workspace").cloned()) else {
            continue;
        };
        let relative = manifest_dir.strip_prefix(dir).unwrap_or(manifest_dir);
        let excluded = workspace
            .get("exclude")
            .and_then(|e| e.as_array())
            .is_some_and(|list| {
                list.iter()
                    .filter_map(|e| e.as_str())
                    .any(|e| !e.is_empty() && relative.starts_with(e))
            });
        if !excluded {
            return dir.to_path_buf();
        }
    }
    manifest_dir.to_path_buf()
}

/// Where the lockfile of the crate at `manifest_dir` is: `Kfoundry.lock` at its workspace
/// root (where `cargo kfoundry tune` writes it).
pub fn lockfile_path(manifest_dir: &Path) -> PathBuf {
    workspace_root(manifest_dir).join(FILE_NAME)
}

/// A generated source to embed: its hash, file (tracked for rebuilds) and text.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedSource {
    pub hash: String,
    pub path: PathBuf,
    pub text: String,
}

/// What one kernel embeds from a lockfile.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Embedded {
    /// Variants tuned for the kernel's current fingerprint, each with its device's description.
    pub variants: Vec<Variant>,
    /// The generated sources they reference.
    pub sources: Vec<EmbeddedSource>,
}

/// The variants of `spec` in `lock` (read from `lockfile`) to embed, with their generated
/// sources. An entry tuned for another fingerprint is stale and embeds nothing (editing a
/// kernel must not break its build). An entry for the current fingerprint is embedded only
/// when every variant passes [`check_variant`] (a canonical device key among others) and no
/// two share a device and workload ([`check_unique`]); otherwise every problem is returned, each
/// naming the variant, so that the build fails instead of shipping something the lockfile does
/// not say.
pub fn embeddable(
    lockfile: &Path,
    lock: &Lockfile,
    spec: &KernelSpec,
) -> Result<Embedded, Vec<String>> {
    let current = fingerprint(spec).map_err(|e| vec![e.to_string()])?;
    let entry = match lock.kernels.get(&spec.id) {
        Some(entry) if entry.fingerprint == current => entry,
        _ => return Ok(Embedded::default()),
    };
    let mut out = Embedded::default();
    // One variant per device and workload: of two, which runs would be for dispatch to guess.
    let mut problems = check_unique(&entry.variants).err().unwrap_or_default();
    for v in &entry.variants {
        let located = |why: String| {
            format!(
                "variant for device `{}` at workload `{}`: {why}",
                v.device, v.workload
            )
        };
        // Inline assembly only in sources meant for GPUs (on a CPU device a kernel is native
        // code in the host process).
        let gpu = lock.devices.get(&v.device).is_some_and(|d| d.kind == "gpu");
        let source = match &v.source {
            None => None,
            Some(hash) => match generated_source(lockfile, spec, hash, gpu) {
                Ok(source) => Some(source),
                Err(why) => {
                    problems.push(located(why));
                    continue;
                }
            },
        };
        let declared = match source
            .as_ref()
            .map(|s| declared_params(&s.text))
            .transpose()
        {
            Ok(d) => d.unwrap_or_default(),
            Err(e) => {
                problems.push(located(format!(
                    "its generated source, line {}: {}",
                    e.line, e.problem
                )));
                continue;
            }
        };
        if let Err(why) = check_variant(spec, v, &declared) {
            problems.push(located(why));
            continue;
        }
        if let Some(source) = source {
            if !out.sources.iter().any(|s| s.hash == source.hash) {
                out.sources.push(source);
            }
        }
        out.variants.push(Variant {
            device_info: lock.devices.get(&v.device).cloned(),
            ..v.clone()
        });
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The generated source `hash` of `spec`, checked: present, unedited, within what a source
/// kfoundry did not get from the user may contain
/// ([`kfoundry_rt::model::source_policy`]: no `#include` however spelled, assembly only for a
/// GPU), same signature.
fn generated_source(
    lockfile: &Path,
    spec: &KernelSpec,
    hash: &str,
    gpu: bool,
) -> Result<EmbeddedSource, String> {
    let (path, text) =
        crate::generated::read_verified(lockfile, &spec.id, hash).map_err(|e| e.to_string())?;
    use kfoundry_rt::model::source_policy::{check, Policy};
    check(&text, Policy { allow_asm: gpu }).map_err(|e| format!("{}: {e}", path.display()))?;
    match kfoundry_rt::model::signature::find_kernel(&text, Some(&spec.signature.name)) {
        Ok(sig) if spec.has_signature(&sig) => Ok(EmbeddedSource {
            hash: hash.to_string(),
            path,
            text,
        }),
        Ok(_) => Err(format!("{} changes the kernel's signature", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
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

/// Launcher parameters: the sizes in declaration order, then the caller's arguments
/// ([`KernelSpec::caller_args`]) in signature order.
pub fn launcher_params(spec: &KernelSpec) -> Vec<LauncherParam> {
    let mut out: Vec<LauncherParam> = spec
        .sizes
        .iter()
        .cloned()
        .map(LauncherParam::Size)
        .collect();
    for (arg, role) in spec.args_with_roles() {
        match (arg, role) {
            (KernelArg::Buffer { name, elem, .. }, ArgRole::CallerBuffer) => {
                out.push(LauncherParam::Buffer {
                    name: name.clone(),
                    elem: *elem,
                })
            }
            (KernelArg::Scalar { name, ty }, ArgRole::CallerScalar) => {
                out.push(LauncherParam::Scalar {
                    name: name.clone(),
                    ty: *ty,
                })
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::saxpy;
    use kfoundry_rt::model::device::{DeviceInfo, DeviceKey};

    #[test]
    fn launcher_shape() {
        let p = launcher_params(&saxpy());
        assert_eq!(
            p,
            vec![
                LauncherParam::Size("n".into()),
                LauncherParam::Scalar {
                    name: "a".into(),
                    ty: ScalarType::F32
                },
                LauncherParam::Buffer {
                    name: "x".into(),
                    elem: ScalarType::F32
                },
                LauncherParam::Buffer {
                    name: "y".into(),
                    elem: ScalarType::F32
                },
            ]
        );
    }

    /// A variant of `spec`'s reference parameters for a device, at workload `large`.
    fn plain(spec: &KernelSpec) -> Variant {
        let device = DeviceKey::from_reported(0x10de, "A", "1", "OpenCL 3.0").to_string();
        let sizes = spec.workloads[1].sizes.clone();
        Variant {
            device,
            workload: "large".into(),
            sizes: sizes.clone(),
            params: spec.reference.clone(),
            time_ns: 1,
            reference_time_ns: 2,
            evaluations: 1,
            failures: 0,
            source: None,
            proven: vec![sizes],
            scalars: Default::default(),
            proof: 0,
            partial: false,
            general: false,
            floor: None,
            device_info: None,
        }
    }

    fn lock_with(spec: &KernelSpec, variants: Vec<Variant>) -> Lockfile {
        let mut lock = Lockfile::default();
        let info = DeviceInfo {
            name: "A".into(),
            kind: "gpu".into(),
            ..Default::default()
        };
        for v in variants {
            let device = v.device.clone();
            let mut kept: Vec<Variant> = lock
                .kernels
                .get(&spec.id)
                .map(|e| e.variants.clone())
                .unwrap_or_default();
            kept.retain(|k| k.device == device);
            kept.push(v);
            lock.record(
                &spec.id,
                &fingerprint(spec).unwrap(),
                &device,
                info.clone(),
                kept,
            );
        }
        lock
    }

    #[test]
    fn stale_entries_are_not_embedded() {
        let spec = saxpy();
        let variant = plain(&spec);
        let lock = lock_with(&spec, vec![variant.clone()]);
        let info = lock.devices[&variant.device].clone();
        let nowhere = Path::new("/nonexistent/Kfoundry.lock");
        // embedded with its device's description, for the nearest-device step
        let embedded = embeddable(nowhere, &lock, &spec).unwrap();
        assert_eq!(
            embedded.variants,
            vec![Variant {
                device_info: Some(info),
                ..variant.clone()
            }]
        );
        // which is never written to a lockfile
        let mut written = lock.clone();
        if let Some(entry) = written.kernels.get_mut(&spec.id) {
            entry.variants = embedded.variants;
        }
        assert!(!written.to_toml().unwrap().contains("device_info"));
        assert_eq!(written.to_toml().unwrap(), lock.to_toml().unwrap());
        let mut changed = spec.clone();
        changed.source.push_str("\n// edited");
        assert_eq!(
            embeddable(nowhere, &lock, &changed).unwrap(),
            Embedded::default()
        );
    }

    #[test]
    fn entries_that_disagree_with_the_annotation_are_refused() {
        let spec = saxpy();
        let nowhere = Path::new("/nonexistent/Kfoundry.lock");
        let good = plain(&spec);
        type Edit = Box<dyn Fn(&mut Variant)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|v| {
                    v.params.insert("X -cl-fast-relaxed-math -DVEC".into(), 1);
                }),
                "is not a parameter",
            ),
            (
                Box::new(|v| {
                    v.params.remove("VEC");
                }),
                "no value for parameter `VEC`",
            ),
            (
                Box::new(|v| {
                    v.params.insert("WG".into(), 3);
                }),
                "WG=3 is not in the parameter's domain",
            ),
            (
                Box::new(|v| {
                    v.params.insert("WG".into(), 8192);
                }),
                "WG=8192 is not in the parameter's domain",
            ),
            (
                Box::new(|v| v.workload = "huge".into()),
                "no workload `huge`",
            ),
            (
                Box::new(|v| {
                    v.sizes.insert("n".into(), 100);
                }),
                "differ from those the annotation gives",
            ),
            (
                Box::new(|v| {
                    v.proven = vec![[("n".to_string(), 100)].into()];
                }),
                "do not include the tuned ones",
            ),
            (
                Box::new(|v| {
                    v.proven.push([("n".to_string(), 100)].into());
                }),
                "cannot run at sizes n=100",
            ),
            (
                Box::new(|v| v.device = "garbage".into()),
                "not a device key",
            ),
        ];
        for (i, (mutate, needle)) in cases.into_iter().enumerate() {
            // on another device, so that only the edit is wrong with it
            let mut bad = Variant {
                device: DeviceKey::from_reported(0x10de, "B", "1", "OpenCL 3.0").to_string(),
                ..good.clone()
            };
            mutate(&mut bad);
            let mut lock = lock_with(&spec, vec![good.clone()]);
            if let Some(e) = lock.kernels.get_mut(&spec.id) {
                e.variants = vec![good.clone(), bad];
            }
            let problems = embeddable(nowhere, &lock, &spec).unwrap_err();
            assert_eq!(problems.len(), 1, "case {i}: {problems:?}");
            assert!(
                problems[0].contains(needle),
                "case {i}: expected {needle:?} in {problems:?}"
            );
        }
    }

    #[test]
    fn a_twin_entry_is_refused() {
        let spec = saxpy();
        let nowhere = Path::new("/nonexistent/Kfoundry.lock");
        let good = plain(&spec);
        let faster = Variant {
            params: [("WG".to_string(), 128), ("VEC".to_string(), 1)].into(),
            time_ns: 0,
            ..good.clone()
        };
        let canonical = good.device.clone();
        for (device, needles) in [
            (
                canonical.clone(),
                vec![format!(
                    "a second variant for device `{canonical}` at workload `large`"
                )],
            ),
            (
                format!("+{canonical}"),
                vec![
                    format!("device key `+{canonical}` is not canonical: write `{canonical}`"),
                    format!(
                        "a second variant for device `{canonical}` at workload `large` (keyed `"
                    ),
                ],
            ),
            (
                format!("0{canonical}"),
                vec![format!(
                    "device key `0{canonical}` is not canonical: write `{canonical}`"
                )],
            ),
            (
                canonical.replace("|a|", "|A|"),
                vec![format!("is not canonical: write `{canonical}`")],
            ),
        ] {
            for order in [false, true] {
                let twin = Variant {
                    device: device.clone(),
                    ..faster.clone()
                };
                let mut lock = lock_with(&spec, vec![good.clone()]);
                if let Some(e) = lock.kernels.get_mut(&spec.id) {
                    e.variants = if order {
                        vec![twin, good.clone()]
                    } else {
                        vec![good.clone(), twin]
                    };
                }
                let problems = embeddable(nowhere, &lock, &spec).unwrap_err();
                for needle in &needles {
                    assert!(
                        problems.iter().any(|p| p.contains(needle.as_str())),
                        "{device}: expected {needle:?} in {problems:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn variants_with_missing_or_edited_sources_are_refused() {
        let spec = saxpy();
        let dir = tempfile::tempdir().unwrap();
        let lock_path = dir.path().join(FILE_NAME);
        let text = spec.source.replace("{}", "{ /* rewritten */ }");
        let hash = super::super::generated::write(&lock_path, &spec.id, &text).unwrap();
        let plain = plain(&spec);
        let other =
            |name: &str| DeviceKey::from_reported(0x10de, name, "1", "OpenCL 3.0").to_string();
        let generated = Variant {
            source: Some(hash.clone()),
            device: other("B"),
            ..plain.clone()
        };
        let lock = lock_with(&spec, vec![plain.clone(), generated.clone()]);
        let embedded = embeddable(&lock_path, &lock, &spec).unwrap();
        assert_eq!(embedded.variants.len(), 2);
        assert_eq!(embedded.sources.len(), 1);
        assert_eq!(embedded.sources[0].text, text);
        // missing
        let missing = Variant {
            source: Some("00000000000000ff".into()),
            device: other("C"),
            ..plain.clone()
        };
        let problems = embeddable(
            &lock_path,
            &lock_with(&spec, vec![plain.clone(), missing]),
            &spec,
        )
        .unwrap_err();
        assert!(problems[0].contains("is missing"), "{problems:?}");
        // edited
        std::fs::write(&embedded.sources[0].path, "edited").unwrap();
        let problems = embeddable(&lock_path, &lock, &spec).unwrap_err();
        assert!(problems[0].contains("was edited"), "{problems:?}");
        // another signature
        let changed = spec.source.replace("const float a", "const float b");
        let hash = super::super::generated::write(&lock_path, &spec.id, &changed).unwrap();
        let resigned = Variant {
            source: Some(hash),
            device: other("D"),
            ..plain.clone()
        };
        let problems =
            embeddable(&lock_path, &lock_with(&spec, vec![resigned]), &spec).unwrap_err();
        assert!(
            problems[0].contains("changes the kernel's signature"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_lockfile_is_at_the_workspace_root() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let member = ws.join("crates/member");
        let excluded = ws.join("vendor/other");
        let pointed = dir.path().join("elsewhere/crate");
        for d in [&member, &excluded, &pointed] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(
            ws.join("Cargo.toml"),
            "[workspace]\nmembers = [\"crates/*\"]\nexclude = [\"vendor\"]\n",
        )
        .unwrap();
        std::fs::write(member.join("Cargo.toml"), "[package]\nname = \"member\"\n").unwrap();
        std::fs::write(excluded.join("Cargo.toml"), "[package]\nname = \"other\"\n").unwrap();
        std::fs::write(
            pointed.join("Cargo.toml"),
            "[package]\nname = \"p\"\nworkspace = \"../../ws\"\n",
        )
        .unwrap();
        assert_eq!(lockfile_path(&member), ws.join(FILE_NAME));
        assert_eq!(lockfile_path(&excluded), excluded.join(FILE_NAME));
        assert_eq!(workspace_root(&pointed), pointed.join("../../ws"));
        // A single crate without a workspace table is its own root; nothing above it counts.
        let single = dir.path().join("single");
        std::fs::create_dir_all(&single).unwrap();
        std::fs::write(single.join("Cargo.toml"), "[package]\nname = \"single\"\n").unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "version = 2\n").unwrap();
        assert_eq!(lockfile_path(&single), single.join(FILE_NAME));
    }
}
