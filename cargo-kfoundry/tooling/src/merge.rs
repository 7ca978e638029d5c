//! Combining lockfiles written on different machines and devices (`cargo kfoundry merge`, and
//! the git merge driver), by rules that make the result the same whatever the order of the
//! inputs and however they are grouped (commutative, associative, idempotent: property tests
//! in `tests/properties.rs`):
//!
//! 1. **Versions**: every input must have the same schema version (an older file is rewritten
//!    by merging it alone first); a version newer than this build understands is refused when
//!    it is read.
//! 2. **Fingerprints**: when the inputs disagree on a kernel's fingerprint, the one the current
//!    sources give wins and the entries with another are dropped, with a note. Without the
//!    sources at hand, or for a kernel the sources no longer have, a disagreement is an error
//!    for the first and a drop (with a note) for the second.
//! 3. **One variant per kernel, device and workload**: when two inputs have one, the complete
//!    one beats a partial one (from an interrupted tune), then the faster (`time_ns`: both were
//!    verified on a device with this key), then the one with more evaluations; a last tie is
//!    broken by the variant's text, so no order of inputs changes the outcome.
//! 4. **Devices**: the description of every device key in the inputs (also of one whose
//!    variants were all dropped: the next `tune` prunes it); two different descriptions of one
//!    key (a driver reporting other memory sizes) resolve by their text.

use std::collections::BTreeMap;

use kfoundry_rt::model::device::DeviceInfo;
use kfoundry_rt::model::variant::Variant;

use crate::lockfile::{KernelEntry, Lockfile};

/// Why lockfiles could not be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("the inputs have different schema versions ({0}); merge the older one alone first to rewrite it in this kfoundry's version")]
    Versions(String),
    #[error(
        "kernel `{kernel}` has different fingerprints in the inputs ({fingerprints}) and the sources are not at hand to say which is current: run the merge in the workspace, or with --bundle"
    )]
    Fingerprints { kernel: String, fingerprints: String },
}

/// The merge of `inputs` (each with a name for the notes), given `current`: a kernel's
/// fingerprint in the sources (`Err(())` when the sources are not at hand, `Ok(None)` when they
/// have no such kernel). Returns the merged lockfile and one note per dropped entry.
pub fn merge(inputs: &[(&str, &Lockfile)], current: &dyn Fn(&str) -> Result<Option<String>, ()>) -> Result<(Lockfile, Vec<String>), MergeError> {
    let mut versions: Vec<u32> = inputs.iter().map(|(_, l)| l.version).collect();
    versions.sort_unstable();
    versions.dedup();
    if versions.len() > 1 {
        let each: Vec<String> = inputs.iter().map(|(name, l)| format!("{name}: {}", l.version)).collect();
        return Err(MergeError::Versions(each.join(", ")));
    }
    let mut notes = Vec::new();
    let mut out = Lockfile::default();
    let ids: std::collections::BTreeSet<&String> = inputs.iter().flat_map(|(_, l)| l.kernels.keys()).collect();
    for id in ids {
        let entries: Vec<(&str, &KernelEntry)> = inputs.iter().filter_map(|(name, l)| l.kernels.get(id).map(|e| (*name, e))).collect();
        let mut prints: Vec<&str> = entries.iter().map(|(_, e)| e.fingerprint.as_str()).collect();
        prints.sort_unstable();
        prints.dedup();
        let keep: String = match prints.as_slice() {
            [one] => one.to_string(),
            _ => match current(id) {
                Ok(Some(now)) => now,
                Ok(None) => {
                    notes.push(format!("dropped `{id}`: its fingerprints differ ({}) and the sources no longer have it", prints.join(", ")));
                    continue;
                }
                Err(()) => return Err(MergeError::Fingerprints { kernel: id.clone(), fingerprints: prints.join(", ") }),
            },
        };
        let mut slots: BTreeMap<(String, String), Variant> = BTreeMap::new();
        for (name, entry) in &entries {
            if entry.fingerprint != keep {
                notes.push(format!("dropped `{id}` from {name}: fingerprint {} is stale (the sources give {keep})", entry.fingerprint));
                continue;
            }
            for v in &entry.variants {
                let slot = (v.device.clone(), v.workload.clone());
                match slots.get(&slot) {
                    Some(held) if !better(v, held) => {}
                    _ => {
                        slots.insert(slot, v.clone());
                    }
                }
            }
        }
        if slots.is_empty() && entries.iter().all(|(_, e)| e.fingerprint != keep) {
            continue;
        }
        out.kernels.insert(id.clone(), KernelEntry { fingerprint: keep, variants: slots.into_values().collect() });
    }
    let mut devices: BTreeMap<String, DeviceInfo> = BTreeMap::new();
    for (_, l) in inputs {
        for (key, info) in &l.devices {
            match devices.get(key) {
                Some(held) if text_of(held) >= text_of(info) => {}
                _ => {
                    devices.insert(key.clone(), info.clone());
                }
            }
        }
    }
    // Not pruned: which descriptions survive must not depend on how merges are grouped (a
    // description dropped with a stale entry halfway could have won against another later).
    // The next `tune` prunes descriptions no variant uses.
    out.devices = devices;
    Ok((out, notes))
}

/// Whether variant `a` beats `b` for the same kernel, device and workload (rule 3).
fn better(a: &Variant, b: &Variant) -> bool {
    let key = |v: &Variant| (v.partial, v.time_ns, std::cmp::Reverse(v.evaluations));
    match key(a).cmp(&key(b)) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal => text_of(a) < text_of(b),
    }
}

/// A value's canonical text, for the last tie-breaks.
fn text_of<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(device: &str, workload: &str, time_ns: u64, partial: bool) -> Variant {
        Variant {
            device: device.into(),
            workload: workload.into(),
            sizes: [("n".to_string(), 1 << 20)].into_iter().collect(),
            params: [("WG".to_string(), (time_ns % 7) as i64)].into_iter().collect(),
            time_ns,
            reference_time_ns: 4 * time_ns,
            evaluations: 40,
            failures: 0,
            source: None,
            proven: vec![],
            partial,
            device_info: None,
        }
    }

    fn lock(fingerprint: &str, variants: Vec<Variant>) -> Lockfile {
        let mut l = Lockfile::default();
        for v in &variants {
            l.devices.insert(v.device.clone(), DeviceInfo { name: v.device.clone(), kind: "gpu".into(), ..Default::default() });
        }
        l.kernels.insert("k".into(), KernelEntry { fingerprint: fingerprint.into(), variants });
        l
    }

    #[test]
    fn devices_and_workloads_combine_and_the_faster_wins_a_slot() {
        let a = lock("f1", vec![variant("gpu-a", "full", 100, false), variant("gpu-a", "small", 10, false)]);
        let b = lock("f1", vec![variant("gpu-b", "full", 90, false), variant("gpu-a", "full", 80, false)]);
        let (m, notes) = merge(&[("a", &a), ("b", &b)], &|_| Err(())).unwrap();
        assert!(notes.is_empty());
        let vs = &m.kernels["k"].variants;
        assert_eq!(vs.len(), 3);
        assert_eq!(vs.iter().find(|v| v.device == "gpu-a" && v.workload == "full").unwrap().time_ns, 80);
        assert_eq!(m.devices.len(), 2);
    }

    #[test]
    fn a_complete_result_beats_a_faster_partial_one() {
        let a = lock("f1", vec![variant("gpu-a", "full", 50, true)]);
        let b = lock("f1", vec![variant("gpu-a", "full", 90, false)]);
        let (m, _) = merge(&[("a", &a), ("b", &b)], &|_| Err(())).unwrap();
        assert!(!m.kernels["k"].variants[0].partial);
    }

    #[test]
    fn the_stale_side_is_dropped_with_a_note_and_without_sources_it_is_an_error() {
        let old = lock("f1", vec![variant("gpu-a", "full", 50, false)]);
        let new = lock("f2", vec![variant("gpu-b", "full", 90, false)]);
        let (m, notes) = merge(&[("old.lock", &old), ("new.lock", &new)], &|_| Ok(Some("f2".into()))).unwrap();
        assert_eq!(m.kernels["k"].fingerprint, "f2");
        assert_eq!(m.kernels["k"].variants.len(), 1);
        assert!(m.kernels["k"].variants.iter().all(|v| v.device == "gpu-b"), "the stale side's variants went");
        assert!(notes[0].contains("old.lock") && notes[0].contains("stale"), "{notes:?}");
        let e = merge(&[("old.lock", &old), ("new.lock", &new)], &|_| Err(())).unwrap_err();
        assert!(e.to_string().contains("different fingerprints"), "{e}");
        let (m, notes) = merge(&[("old.lock", &old), ("new.lock", &new)], &|_| Ok(None)).unwrap();
        assert!(m.kernels.is_empty() && notes[0].contains("no longer have it"), "{notes:?}");
    }

    #[test]
    fn versions_must_agree() {
        let a = lock("f1", vec![]);
        let mut b = a.clone();
        b.version = 1;
        assert!(matches!(merge(&[("a", &a), ("b", &b)], &|_| Err(())), Err(MergeError::Versions(_))));
    }
}
