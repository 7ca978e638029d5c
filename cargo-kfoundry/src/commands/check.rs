//! `cargo kfoundry check [--locked]`: is `Kfoundry.lock` in step with the sources?

use std::collections::BTreeSet;
use std::fmt;

use anyhow::Result;
use kfoundry_rt::model::spec::KernelSpec;
use kfoundry_tooling::embed::embeddable;
use kfoundry_tooling::fingerprint;
use kfoundry_tooling::lockfile::Lockfile;

use crate::cli::{CheckArgs, MessageFormat};
use kfoundry_tune::error::Exit;
use kfoundry_tune::messages::Message;
use kfoundry_tune::pipeline::discover::sources;

/// One way the lockfile disagrees with the sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    NoLockfile,
    /// The kernel changed since it was tuned: its variants will not be embedded.
    Stale {
        kernel: String,
        locked: String,
        current: String,
    },
    /// The kernel has never been tuned.
    Untuned {
        kernel: String,
    },
    /// A device tuned the kernel but not this workload (one meant for its kind): a gap in what
    /// was tuned there, not drift from the sources (`tune --workload` tunes some workloads
    /// only, and each device is tuned where it is). Reported, but `--locked` passes: dispatch
    /// at those sizes there takes another of the device's entries that covers them, else the
    /// next step of its chain.
    MissingWorkload {
        kernel: String,
        device: String,
        workload: String,
    },
    /// The lockfile has an entry for a kernel that no longer exists.
    Orphaned {
        kernel: String,
    },
    /// A variant for a workload the kernel no longer declares.
    OrphanedWorkload {
        kernel: String,
        workload: String,
    },
    /// An entry for the current fingerprint that disagrees with the annotation (parameters
    /// not declared or outside their domains, another workload's sizes, constraints that do
    /// not hold) or whose generated source is missing, edited or has another signature: the
    /// build fails on it.
    BadEntry {
        kernel: String,
        problem: String,
    },
    /// A result of an interrupted search: `tune --resume` continues it.
    Partial {
        kernel: String,
        device: String,
        workload: String,
    },
    /// A variant proven by an earlier, weaker proof than this kfoundry's (see
    /// [`kfoundry_rt::model::variant::PROOF_VERSION`]).
    OldProof {
        kernel: String,
        device: String,
        workload: String,
        proof: u32,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::NoLockfile => write!(f, "no Kfoundry.lock (or one without any tuned kernel): every kernel runs its reference; run `cargo kfoundry tune`"),
            Finding::Stale { kernel, locked, current } => write!(
                f,
                "stale: `{kernel}` changed since it was tuned (fingerprint {locked} in the lockfile, {current} now): its variants are not embedded; re-run `cargo kfoundry tune`"
            ),
            Finding::Untuned { kernel } => write!(f, "missing: `{kernel}` has no entry; run `cargo kfoundry tune`"),
            Finding::MissingWorkload { kernel, device, workload } => write!(
                f,
                "not tuned: `{kernel}` was tuned on `{device}` but not for workload `{workload}` (`cargo kfoundry tune --workload {workload}` on that device adds it; not drift: --locked passes)"
            ),
            Finding::Orphaned { kernel } => write!(f, "orphaned: the lockfile has `{kernel}`, which is not in the sources"),
            Finding::OrphanedWorkload { kernel, workload } => {
                write!(f, "orphaned: `{kernel}` has a variant for workload `{workload}`, which it no longer declares")
            }
            Finding::BadEntry { kernel, problem } => {
                write!(f, "bad entry: `{kernel}`: {problem}; `cargo build` refuses it: fix or remove it, or re-tune")
            }
            Finding::Partial { kernel, device, workload } => write!(
                f,
                "partial: `{kernel}` on `{device}` at `{workload}` comes from an interrupted tune; `cargo kfoundry tune --resume` continues it"
            ),
            Finding::OldProof { kernel, device, workload, proof } => write!(
                f,
                "weak proof: `{kernel}` on `{device}` at `{workload}` passed proof version {proof} (fixed sizes, outputs poisoned one way, declared inputs only), not version {}: re-tune it, or run `cargo kfoundry check --verify` on that device",
                kfoundry_rt::model::variant::PROOF_VERSION
            ),
        }
    }
}

impl Finding {
    /// The lockfile disagrees with the sources (`--locked` fails): everything but a workload
    /// one device was not tuned at.
    pub fn is_drift(&self) -> bool {
        !matches!(self, Finding::MissingWorkload { .. })
    }
}

/// Checks every entry of the current fingerprint as the macro does before embedding it
/// (against the annotation, and its generated source), and notes partial results.
pub fn entry_findings(
    kernels: &[&KernelSpec],
    lock: &Lockfile,
    lockfile: &std::path::Path,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for spec in kernels {
        if let Err(problems) = embeddable(lockfile, lock, spec) {
            out.extend(problems.into_iter().map(|problem| Finding::BadEntry {
                kernel: spec.id.clone(),
                problem,
            }));
        }
        let current = fingerprint(spec).ok();
        let Some(entry) = lock
            .kernels
            .get(&spec.id)
            .filter(|e| Some(&e.fingerprint) == current.as_ref())
        else {
            continue;
        };
        for v in entry.variants.iter().filter(|v| v.partial) {
            out.push(Finding::Partial {
                kernel: spec.id.clone(),
                device: v.device.clone(),
                workload: v.workload.clone(),
            });
        }
        for v in entry.variants.iter().filter(|v| {
            v.proof < kfoundry_rt::model::variant::PROOF_VERSION && v.params != spec.reference
        }) {
            out.push(Finding::OldProof {
                kernel: spec.id.clone(),
                device: v.device.clone(),
                workload: v.workload.clone(),
                proof: v.proof,
            });
        }
    }
    out
}

/// Compares the lockfile (if any) with the kernels in the sources, those of `packages` when
/// `-p` named some (empty: the whole workspace or bundle). An entry of another package is not
/// this check's business: only one whose id says it is of a checked package (`package::Item`,
/// the id a kernel gets unless `name = ...` gives another) and is not in the sources is
/// orphaned.
pub fn findings(
    kernels: &[&KernelSpec],
    lock: Option<&Lockfile>,
    packages: &[String],
) -> Result<Vec<Finding>, kfoundry_tooling::FingerprintError> {
    // The first build creates an empty lockfile (so that cargo tracks it): the same as none.
    let Some(lock) = lock.filter(|l| !l.kernels.is_empty()) else {
        return Ok(vec![Finding::NoLockfile]);
    };
    let mut out = Vec::new();
    let ids: BTreeSet<&str> = kernels.iter().map(|k| k.id.as_str()).collect();
    for spec in kernels {
        let Some(entry) = lock.kernels.get(&spec.id) else {
            out.push(Finding::Untuned {
                kernel: spec.id.clone(),
            });
            continue;
        };
        let current = fingerprint(spec)?;
        if entry.fingerprint != current {
            out.push(Finding::Stale {
                kernel: spec.id.clone(),
                locked: entry.fingerprint.clone(),
                current,
            });
            continue;
        }
        let declared: BTreeSet<&str> = spec.workloads.iter().map(|w| w.name.as_str()).collect();
        let devices: BTreeSet<&str> = entry.variants.iter().map(|v| v.device.as_str()).collect();
        for device in devices {
            // Only the workloads meant for this kind of device (`on = ...`); a device whose
            // kind the lockfile does not say is asked for every workload.
            let kind = lock
                .devices
                .get(device)
                .map(|d| d.kind.as_str())
                .filter(|k| !k.is_empty());
            for w in spec
                .workloads
                .iter()
                .filter(|w| kind.is_none_or(|k| w.is_for(k)))
            {
                if !entry
                    .variants
                    .iter()
                    .any(|v| v.device == device && v.workload == w.name && !v.general)
                {
                    out.push(Finding::MissingWorkload {
                        kernel: spec.id.clone(),
                        device: device.to_string(),
                        workload: w.name.clone(),
                    });
                }
            }
        }
        let mut reported = BTreeSet::new();
        for v in &entry.variants {
            if !declared.contains(v.workload.as_str()) && reported.insert(v.workload.as_str()) {
                out.push(Finding::OrphanedWorkload {
                    kernel: spec.id.clone(),
                    workload: v.workload.clone(),
                });
            }
        }
    }
    for id in lock.kernels.keys() {
        if !ids.contains(id.as_str()) && of_checked_package(id, packages) {
            out.push(Finding::Orphaned { kernel: id.clone() });
        }
    }
    Ok(out)
}

/// Whether the lockfile's kernel `id` is of one of `packages` (every id is when none is named),
/// by its `package::` prefix; package names compare as cargo's do (`-` and `_` alike).
fn of_checked_package(id: &str, packages: &[String]) -> bool {
    let normal = |n: &str| n.to_ascii_lowercase().replace('_', "-");
    packages.is_empty()
        || id
            .split_once("::")
            .is_some_and(|(package, _)| packages.iter().any(|p| normal(p) == normal(package)))
}

/// `Exit::Drift` when `--locked` and the lockfile is out of date with the sources.
pub fn run(args: &CheckArgs) -> Result<Exit> {
    let src = sources(
        &args.ws.options(),
        args.bundle.as_deref(),
        args.lockfile.as_deref(),
    )?;
    let lock = Lockfile::read(&src.lockfile)?;
    let specs: Vec<&KernelSpec> = src.kernels.iter().map(|k| &k.spec).collect();
    let mut found = findings(&specs, lock.as_ref(), &args.ws.packages)?;
    if let Some(lock) = &lock {
        found.extend(entry_findings(&specs, lock, &src.lockfile));
    }
    let json = args.ws.message_format == MessageFormat::Json;
    for f in &found {
        if json {
            Message::Finding {
                message: f.to_string(),
            }
            .emit();
        } else {
            println!("{f}");
        }
    }
    let drift = found.iter().filter(|f| f.is_drift()).count();
    if drift == 0 && !json && !args.ws.quiet {
        match found.len() {
            0 => println!("Kfoundry.lock is up to date for {} kernel(s)", specs.len()),
            gaps => println!(
                "Kfoundry.lock is up to date for {} kernel(s); {gaps} workload(s) not tuned on a device that tuned others (above)",
                specs.len()
            ),
        }
    }
    if args.locked && drift > 0 {
        eprintln!(
            "error: {drift} problem(s) with {} (--locked)",
            src.lockfile.display()
        );
        return Ok(Exit::Drift);
    }
    if args.verify {
        let Some(lock) = &lock else {
            return Ok(Exit::Success);
        };
        return super::verify::run(args, &src.kernels, lock, &src.lockfile);
    }
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfoundry_rt::model::variant::Variant;
    use kfoundry_rt::DeviceInfo;
    use kfoundry_tooling::annotation::{parse, Context};

    fn spec(name: &str, workloads: &str) -> KernelSpec {
        let args: proc_macro2::TokenStream = format!(
            r#"code = "__kernel void k(const int n, __global float* y) {{}}", global = n, buffers(y = n), check(y), workloads({workloads}), name = "{name}""#
        )
        .parse()
        .unwrap();
        let item: syn::Item = syn::parse_str("struct K;").unwrap();
        let cx = Context {
            package: "p",
            manifest_dir: std::path::Path::new("."),
        };
        match parse(args, &item, &cx) {
            Ok(a) => a.spec,
            Err(e) => panic!("{e}"),
        }
    }

    fn variant(device: &str, workload: &str) -> Variant {
        Variant {
            device: device.into(),
            workload: workload.into(),
            sizes: Default::default(),
            params: Default::default(),
            time_ns: 1,
            reference_time_ns: 1,
            evaluations: 1,
            failures: 0,
            source: None,
            proven: vec![],
            scalars: Default::default(),
            proof: 0,
            partial: false,
            general: false,
            floor: None,
            device_info: None,
        }
    }

    #[test]
    fn bad_and_partial_entries_are_listed() {
        let a = spec("a", "w(n = 64)");
        let device = "10de|gpu|1|3.0";
        let good = Variant {
            sizes: [("n".to_string(), 64)].into(),
            proof: kfoundry_rt::model::variant::PROOF_VERSION,
            ..variant(device, "w")
        };
        let mut lock = Lockfile::default();
        lock.record(
            "a",
            &fingerprint(&a).unwrap(),
            device,
            DeviceInfo::default(),
            vec![good.clone()],
        );
        assert_eq!(
            entry_findings(&[&a], &lock, std::path::Path::new("Kfoundry.lock")),
            vec![]
        );
        let injected = Variant {
            params: [("X -cl-fast-relaxed-math".to_string(), 1)].into(),
            ..good.clone()
        };
        lock.record(
            "a",
            &fingerprint(&a).unwrap(),
            device,
            DeviceInfo::default(),
            vec![injected],
        );
        let found = entry_findings(&[&a], &lock, std::path::Path::new("Kfoundry.lock"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .to_string()
                .contains("`X -cl-fast-relaxed-math` is not a parameter"),
            "{}",
            found[0]
        );
        lock.record(
            "a",
            &fingerprint(&a).unwrap(),
            device,
            DeviceInfo::default(),
            vec![Variant {
                partial: true,
                general: false,
                floor: None,
                ..good.clone()
            }],
        );
        let found = entry_findings(&[&a], &lock, std::path::Path::new("Kfoundry.lock"));
        assert!(matches!(&found[..], [Finding::Partial { .. }]), "{found:?}");
        // a variant (other than the reference) proven by the earlier proof
        let mut a_tuned = a.clone();
        a_tuned.params = vec![kfoundry_rt::model::spec::Param {
            name: "P".into(),
            values: vec![0, 1],
        }];
        a_tuned.reference = [("P".to_string(), 0)].into();
        let old = Variant {
            params: [("P".to_string(), 1)].into(),
            proof: 0,
            ..good
        };
        lock.record(
            "a",
            &fingerprint(&a_tuned).unwrap(),
            device,
            DeviceInfo::default(),
            vec![old],
        );
        let found = entry_findings(&[&a_tuned], &lock, std::path::Path::new("Kfoundry.lock"));
        assert!(
            found
                .iter()
                .any(|f| matches!(f, Finding::OldProof { proof: 0, .. })),
            "{found:?}"
        );
    }

    #[test]
    fn every_kind_of_finding() {
        let a = spec("a", "small(n = 64), large(n = 128)");
        let b = spec("b", "w(n = 64)");
        let c = spec("c", "w(n = 64)");
        assert_eq!(
            findings(&[&a], None, &[]).unwrap(),
            vec![Finding::NoLockfile]
        );
        assert_eq!(
            findings(&[&a], Some(&Lockfile::default()), &[]).unwrap(),
            vec![Finding::NoLockfile]
        );
        let mut lock = Lockfile::default();
        lock.record(
            "a",
            &fingerprint(&a).unwrap(),
            "dev",
            DeviceInfo::default(),
            vec![variant("dev", "small"), variant("dev", "old")],
        );
        lock.record(
            "b",
            "0000",
            "dev",
            DeviceInfo::default(),
            vec![variant("dev", "w")],
        );
        lock.record(
            "gone",
            "1111",
            "dev",
            DeviceInfo::default(),
            vec![variant("dev", "w")],
        );
        let f = findings(&[&a, &b, &c], Some(&lock), &[]).unwrap();
        assert_eq!(
            f,
            vec![
                Finding::MissingWorkload {
                    kernel: "a".into(),
                    device: "dev".into(),
                    workload: "large".into()
                },
                Finding::OrphanedWorkload {
                    kernel: "a".into(),
                    workload: "old".into()
                },
                Finding::Stale {
                    kernel: "b".into(),
                    locked: "0000".into(),
                    current: fingerprint(&b).unwrap()
                },
                Finding::Untuned { kernel: "c".into() },
                Finding::Orphaned {
                    kernel: "gone".into()
                },
            ]
        );
        let mut clean = Lockfile::default();
        clean.record(
            "c",
            &fingerprint(&c).unwrap(),
            "dev",
            DeviceInfo::default(),
            vec![variant("dev", "w")],
        );
        assert!(findings(&[&c], Some(&clean), &[]).unwrap().is_empty());
    }

    #[test]
    fn a_check_of_some_packages_leaves_the_others_entries_alone() {
        let a = spec("p::A", "w(n = 64)");
        let mut lock = Lockfile::default();
        for (id, fingerprint) in [
            ("p::A", fingerprint(&a).unwrap()),
            ("q::B", "1111".to_string()),
            ("p_x::C", "2222".to_string()),
            ("p::Gone", "3333".to_string()),
        ] {
            lock.record(
                id,
                &fingerprint,
                "dev",
                DeviceInfo::default(),
                vec![variant("dev", "w")],
            );
        }
        // `-p p`: q's and p_x's kernels are not in the sources checked, and not orphaned
        assert_eq!(
            findings(&[&a], Some(&lock), &["p".into()]).unwrap(),
            vec![Finding::Orphaned {
                kernel: "p::Gone".into()
            }]
        );
        // `-p p-x` names `p_x` as cargo does
        assert_eq!(
            findings(&[], Some(&lock), &["p-x".into()]).unwrap(),
            vec![Finding::Orphaned {
                kernel: "p_x::C".into()
            }]
        );
        // the whole workspace: every entry without a kernel is orphaned
        assert_eq!(
            findings(&[&a], Some(&lock), &[]).unwrap().len(),
            3,
            "p::Gone, p_x::C and q::B"
        );
    }

    #[test]
    fn a_workload_one_device_was_not_tuned_at_is_a_gap_not_drift() {
        let a = spec("a", "small(n = 64), full(n = 4096)");
        let mut lock = Lockfile::default();
        lock.record(
            "a",
            &fingerprint(&a).unwrap(),
            "gpu-dev",
            DeviceInfo::default(),
            vec![variant("gpu-dev", "full")],
        );
        let found = findings(&[&a], Some(&lock), &[]).unwrap();
        assert!(
            matches!(&found[..], [f @ Finding::MissingWorkload { .. }] if !f.is_drift()),
            "{found:?}"
        );
        assert!(
            found[0].to_string().contains("--locked passes"),
            "{}",
            found[0]
        );
        assert!(Finding::Untuned { kernel: "a".into() }.is_drift());
        assert!(Finding::Orphaned { kernel: "a".into() }.is_drift());
    }

    #[test]
    fn a_device_is_asked_only_for_the_workloads_meant_for_its_kind() {
        let a = spec("a", "small(n = 64), full(n = 4096, on = gpu)");
        let mut lock = Lockfile::default();
        let cpu = DeviceInfo {
            kind: "cpu".into(),
            ..Default::default()
        };
        let gpu = DeviceInfo {
            kind: "gpu".into(),
            ..Default::default()
        };
        lock.record(
            "a",
            &fingerprint(&a).unwrap(),
            "cpu-dev",
            cpu,
            vec![variant("cpu-dev", "small")],
        );
        lock.record(
            "a",
            &fingerprint(&a).unwrap(),
            "gpu-dev",
            gpu,
            vec![variant("gpu-dev", "small")],
        );
        assert_eq!(
            findings(&[&a], Some(&lock), &[]).unwrap(),
            vec![Finding::MissingWorkload {
                kernel: "a".into(),
                device: "gpu-dev".into(),
                workload: "full".into()
            }],
            "the CPU is not asked for `full`, the GPU is"
        );
    }
}
