//! Combining lockfiles written on different machines and devices (`cargo kfoundry merge`, and
//! the git merge driver), by rules that make the result the same whatever the order of the
//! inputs and however they are grouped (commutative, associative where no slot conflicts,
//! idempotent: property tests in `tests/properties.rs`):
//!
//! 1. **Versions**: every input must have the same schema version (an older file is rewritten
//!    by merging it alone first); a version newer than this build understands is refused when
//!    it is read.
//! 2. **Fingerprints**: when the inputs disagree on a kernel's fingerprint, the one the current
//!    sources give wins and the entries with another are dropped, with a note. Without the
//!    sources at hand, or for a kernel the sources no longer have, a disagreement is an error
//!    for the first and a drop (with a note) for the second.
//! 3. **One variant per kernel, device and workload (a slot), never chosen by what an input
//!    claims**: a `time_ns` is a number anyone can write, so no slot is settled by it. Every
//!    device key must be canonical (one device, one key: a twin spelled `08086|...` would
//!    be a slot of its own), else the merge is refused ([`MergeError::Key`]); two different
//!    variants for one slot in one input are a conflict (reading a lockfile refuses both
//!    already, [`Lockfile::validate`]). When the
//!    inputs hold the same variant for a slot (the same code at the same proven sizes: device,
//!    workload, sizes, parameters, generated source, proven sizes and scalars, proof version)
//!    it is kept (differing only in their measurements, the one a deterministic order puts
//!    first). With a common ancestor (`base`: git's `%O`, or `merge --base`), a slot only one
//!    side changed takes that side's state (a variant, or its removal). Any other
//!    disagreement is a [`Conflict`], left for a person to resolve: re-tune the slot, or
//!    `cargo kfoundry check --verify` each side on the device and keep the one that holds.
//! 4. **Devices**: the description of every device key in the inputs (also of one whose
//!    variants were all dropped: the next `tune` prunes it); two different descriptions of one
//!    key (a driver reporting other memory sizes) resolve by their text.

use std::collections::BTreeMap;
use std::fmt;

use kfoundry_rt::model::device::{DeviceInfo, DeviceKey};
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
    Fingerprints {
        kernel: String,
        fingerprints: String,
    },
    /// An input names a device by a key that is not canonical: a twin of the device's own
    /// key would be a slot of its own, merged without a conflict.
    #[error("{input}: {message}")]
    Key { input: String, message: String },
}

/// A slot the inputs disagree on and the rules cannot settle.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Conflict {
    pub kernel: String,
    pub device: String,
    pub workload: String,
    /// Each side that holds something else: (input name, what it holds).
    pub sides: Vec<(String, String)>,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` on `{}` at `{}`: ",
            self.kernel, self.device, self.workload
        )?;
        let sides: Vec<String> = self
            .sides
            .iter()
            .map(|(name, what)| format!("{name} has {what}"))
            .collect();
        f.write_str(&sides.join("; "))
    }
}

/// What a merge gives: the lockfile, one note per dropped entry, and the slots it could not
/// settle (each holds, in `lock`, the first input's variant: git's "ours"; or, when that input
/// has none, the next one's).
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub lock: Lockfile,
    pub notes: Vec<String>,
    pub conflicts: Vec<Conflict>,
}

/// One slot's state in one input: a variant, or none.
type State<'a> = Option<&'a Variant>;

/// An input's variants by slot (device, workload, whether it is the workload's general
/// variant).
type Slots<'a> = BTreeMap<(String, String, bool), Vec<&'a Variant>>;

/// The merge of `inputs` (each with a name for the notes), against their common ancestor
/// `base` when there is one, given `current`: a kernel's fingerprint in the sources (`Err(())`
/// when the sources are not at hand, `Ok(None)` when they have no such kernel).
pub fn merge(
    inputs: &[(&str, &Lockfile)],
    base: Option<&Lockfile>,
    current: &dyn Fn(&str) -> Result<Option<String>, ()>,
) -> Result<Merged, MergeError> {
    let mut versions: Vec<u32> = inputs.iter().map(|(_, l)| l.version).collect();
    versions.sort_unstable();
    versions.dedup();
    if versions.len() > 1 {
        let each: Vec<String> = inputs
            .iter()
            .map(|(name, l)| format!("{name}: {}", l.version))
            .collect();
        return Err(MergeError::Versions(each.join(", ")));
    }
    // Rule 3's slots are keyed by device key: every key must be the one its device has.
    for (name, l) in inputs.iter().copied().chain(base.map(|b| ("the base", b))) {
        let keys = l.devices.keys().chain(
            l.kernels
                .values()
                .flat_map(|e| e.variants.iter().map(|v| &v.device)),
        );
        for key in keys {
            DeviceKey::parse(key).map_err(|e| MergeError::Key {
                input: name.to_string(),
                message: e.to_string(),
            })?;
        }
    }
    let mut notes = Vec::new();
    let mut conflicts = Vec::new();
    let mut out = Lockfile::default();
    let ids: std::collections::BTreeSet<&String> =
        inputs.iter().flat_map(|(_, l)| l.kernels.keys()).collect();
    for id in ids {
        let entries: Vec<(&str, &KernelEntry)> = inputs
            .iter()
            .filter_map(|(name, l)| l.kernels.get(id).map(|e| (*name, e)))
            .collect();
        let mut prints: Vec<&str> = entries
            .iter()
            .map(|(_, e)| e.fingerprint.as_str())
            .collect();
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
                Err(()) => {
                    return Err(MergeError::Fingerprints {
                        kernel: id.clone(),
                        fingerprints: prints.join(", "),
                    })
                }
            },
        };
        for (name, entry) in &entries {
            if entry.fingerprint != keep {
                notes.push(format!(
                    "dropped `{id}` from {name}: fingerprint {} is stale (the sources give {keep})",
                    entry.fingerprint
                ));
            }
        }
        // Each input's slots (an input whose entry is stale, or which lacks the kernel, holds
        // none), and the ancestor's.
        fn slots_of<'l>(l: &'l Lockfile, id: &str, keep: &str) -> Slots<'l> {
            let mut m: Slots<'l> = BTreeMap::new();
            if let Some(e) = l.kernels.get(id).filter(|e| e.fingerprint == keep) {
                for v in &e.variants {
                    m.entry((v.device.clone(), v.workload.clone(), v.general))
                        .or_default()
                        .push(v);
                }
            }
            m
        }
        let sides: Vec<(&str, Slots)> = inputs
            .iter()
            .map(|(n, l)| (*n, slots_of(l, id, &keep)))
            .collect();
        let ancestor = base.map(|b| slots_of(b, id, &keep));
        let keys: std::collections::BTreeSet<(String, String, bool)> =
            sides.iter().flat_map(|(_, m)| m.keys().cloned()).collect();
        let mut kept = Vec::new();
        for key in keys {
            // An input holding two different variants for one slot disagrees with itself.
            let mut states: Vec<(&str, Result<State, ()>)> = Vec::new();
            for (name, m) in &sides {
                states.push((
                    name,
                    one_state(m.get(&key).map(Vec::as_slice).unwrap_or(&[])),
                ));
            }
            let base_state = ancestor
                .as_ref()
                .map(|a| one_state(a.get(&key).map(Vec::as_slice).unwrap_or(&[])));
            match settle(&states, base_state) {
                Ok(Some(v)) => kept.push(v.clone()),
                Ok(None) => {}
                Err(()) => {
                    let describe = |s: &Result<State, ()>| match s {
                        Ok(Some(v)) => summary(v),
                        Ok(None) => "no variant".to_string(),
                        Err(()) => "two different variants".to_string(),
                    };
                    conflicts.push(Conflict {
                        kernel: id.clone(),
                        device: key.0.clone(),
                        workload: if key.2 {
                            format!("{} (its general variant)", key.1)
                        } else {
                            key.1.clone()
                        },
                        sides: states
                            .iter()
                            .map(|(n, s)| (n.to_string(), describe(s)))
                            .collect(),
                    });
                    // the first input's ("ours") in the written file, else the next one's that holds one
                    if let Some(v) = sides
                        .iter()
                        .find_map(|(_, m)| m.get(&key).and_then(|held| held.first()))
                    {
                        kept.push((*v).clone());
                    }
                }
            }
        }
        if kept.is_empty() && entries.iter().all(|(_, e)| e.fingerprint != keep) {
            continue;
        }
        out.kernels.insert(
            id.clone(),
            KernelEntry {
                fingerprint: keep,
                variants: kept,
            },
        );
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
    conflicts.sort();
    Ok(Merged {
        lock: out,
        notes,
        conflicts,
    })
}

/// The state of a slot in one input: its variant, none, or `Err` when the input holds two
/// different ones.
fn one_state<'a>(held: &[&'a Variant]) -> Result<State<'a>, ()> {
    let Some(first) = held
        .iter()
        .copied()
        .reduce(|a, b| if first_of(a, b) { a } else { b })
    else {
        return Ok(None);
    };
    if held.iter().all(|v| same_variant(v, first)) {
        Ok(Some(first))
    } else {
        Err(())
    }
}

/// Rule 3 for one slot: `Ok(state)` settled, `Err(())` a conflict.
fn settle<'a>(
    states: &[(&str, Result<State<'a>, ()>)],
    base: Option<Result<State<'a>, ()>>,
) -> Result<State<'a>, ()> {
    let same = |a: &State, b: &State| match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => same_variant(x, y),
        _ => false,
    };
    let held: Vec<State> = states.iter().map(|(_, s)| *s).collect::<Result<_, ()>>()?;
    let candidates: Vec<State> = match base {
        // Three-way: only what changed from the ancestor counts.
        Some(base) => {
            let base = base?;
            let changed: Vec<State> = held.iter().copied().filter(|s| !same(s, &base)).collect();
            if changed.is_empty() {
                return Ok(base);
            }
            changed
        }
        // Two-way: an input without the slot has no opinion.
        None => held.iter().copied().filter(Option::is_some).collect(),
    };
    let Some(first) = candidates.first().copied() else {
        return Ok(None);
    };
    if !candidates.iter().all(|s| same(s, &first)) {
        return Err(());
    }
    // The same variant everywhere: a deterministic pick among their measurements.
    Ok(candidates
        .into_iter()
        .flatten()
        .reduce(|a, b| if first_of(a, b) { a } else { b }))
}

/// Whether two variants run the same code at the same proven sizes (they may differ in what
/// they measured: times, evaluations, whether the search was interrupted).
fn same_variant(a: &Variant, b: &Variant) -> bool {
    (
        &a.device,
        &a.workload,
        &a.sizes,
        &a.params,
        &a.source,
        &a.proven,
        &a.scalars,
        a.proof,
    ) == (
        &b.device,
        &b.workload,
        &b.sizes,
        &b.params,
        &b.source,
        &b.proven,
        &b.scalars,
        b.proof,
    )
}

/// Of two copies of the same variant, whether `a` is kept: a complete one before a partial
/// one, then by text (so that no order of inputs changes the outcome).
fn first_of(a: &Variant, b: &Variant) -> bool {
    (a.partial, text_of(a)) <= (b.partial, text_of(b))
}

/// A variant in one line, for conflicts.
fn summary(v: &Variant) -> String {
    let params = kfoundry_rt::model::spec::fmt_assignments(&v.params, " ");
    let source = v
        .source
        .as_deref()
        .map(|h| format!(", generated source {h}"))
        .unwrap_or_default();
    format!("{params}{source} (claims {} ns)", v.time_ns)
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
            params: [("WG".to_string(), (time_ns % 7) as i64)]
                .into_iter()
                .collect(),
            time_ns,
            reference_time_ns: 4 * time_ns,
            evaluations: 40,
            failures: 0,
            source: None,
            proven: vec![],
            scalars: Default::default(),
            proof: 0,
            partial,
            general: false,
            floor: None,
            device_info: None,
        }
    }

    fn lock(fingerprint: &str, variants: Vec<Variant>) -> Lockfile {
        let mut l = Lockfile::default();
        for v in &variants {
            l.devices.insert(
                v.device.clone(),
                DeviceInfo {
                    name: v.device.clone(),
                    kind: "gpu".into(),
                    ..Default::default()
                },
            );
        }
        l.kernels.insert(
            "k".into(),
            KernelEntry {
                fingerprint: fingerprint.into(),
                variants,
            },
        );
        l
    }

    #[test]
    fn devices_and_workloads_combine_and_claimed_times_settle_nothing() {
        let a = lock(
            "f1",
            vec![
                variant("10de|gpu-a|1|3.0", "full", 100, false),
                variant("10de|gpu-a|1|3.0", "small", 10, false),
            ],
        );
        let b = lock(
            "f1",
            vec![
                variant("10de|gpu-b|1|3.0", "full", 90, false),
                variant("10de|gpu-a|1|3.0", "full", 80, false),
            ],
        );
        let m = merge(&[("a", &a), ("b", &b)], None, &|_| Err(())).unwrap();
        assert!(m.notes.is_empty());
        let vs = &m.lock.kernels["k"].variants;
        assert_eq!(vs.len(), 3);
        assert_eq!(m.lock.devices.len(), 2);
        // gpu-a at full: other parameters on each side, and a claim of 80 ns does not win it
        assert_eq!(m.conflicts.len(), 1, "{:?}", m.conflicts);
        let c = &m.conflicts[0];
        assert_eq!(
            (c.device.as_str(), c.workload.as_str()),
            ("10de|gpu-a|1|3.0", "full")
        );
        assert!(
            c.to_string().contains("a has WG=2") && c.to_string().contains("b has WG=3"),
            "{c}"
        );
        // ours (the first input) is written for it
        assert_eq!(
            vs.iter()
                .find(|v| v.device == "10de|gpu-a|1|3.0" && v.workload == "full")
                .unwrap()
                .time_ns,
            100
        );
    }

    #[test]
    fn a_twin_key_is_refused_not_merged_as_a_slot_of_its_own() {
        let key = "8086|cpu|1|3.0";
        let ours = lock("f1", vec![variant(key, "full", 100, false)]);
        for twin in ["+8086|cpu|1|3.0", "08086|cpu|1|3.0", "8086|CPU|1|3.0"] {
            let theirs = lock("f1", vec![variant(twin, "full", 1, false)]);
            for inputs in [
                [("ours", &ours), ("theirs", &theirs)],
                [("theirs", &theirs), ("ours", &ours)],
            ] {
                let e = merge(&inputs, None, &|_| Err(())).unwrap_err();
                assert_eq!(
                    e.to_string(),
                    format!("theirs: device key `{twin}` is not canonical: write `{key}` (one device has one key)")
                );
            }
            // in the common ancestor too, and in `[devices]` alone
            let e = merge(&[("ours", &ours)], Some(&theirs), &|_| Err(())).unwrap_err();
            assert!(e.to_string().starts_with("the base: device key"), "{e}");
            let mut described = ours.clone();
            described.devices.insert(twin.into(), DeviceInfo::default());
            assert!(matches!(
                merge(&[("ours", &described)], None, &|_| Err(())),
                Err(MergeError::Key { .. })
            ));
        }
        // two different variants for one slot in one input: a conflict, never one of them kept
        // silently
        let mut both = ours.clone();
        both.kernels
            .get_mut("k")
            .unwrap()
            .variants
            .push(variant(key, "full", 1, false));
        let m = merge(&[("both", &both)], None, &|_| Err(())).unwrap();
        assert_eq!(m.conflicts.len(), 1, "{:?}", m.conflicts);
        assert!(
            m.conflicts[0]
                .to_string()
                .contains("two different variants"),
            "{}",
            m.conflicts[0]
        );
    }

    #[test]
    fn the_same_variant_with_other_measurements_is_no_conflict() {
        let a = lock("f1", vec![variant("10de|gpu-a|1|3.0", "full", 50, true)]);
        let mut b = a.clone();
        let v = &mut b.kernels.get_mut("k").unwrap().variants[0];
        v.partial = false;
        v.time_ns = 1;
        let m = merge(&[("a", &a), ("b", &b)], None, &|_| Err(())).unwrap();
        assert!(m.conflicts.is_empty(), "{:?}", m.conflicts);
        assert!(
            !m.lock.kernels["k"].variants[0].partial,
            "the complete copy"
        );
    }

    #[test]
    fn with_a_common_ancestor_the_side_that_changed_wins() {
        let base = lock(
            "f1",
            vec![
                variant("10de|gpu-a|1|3.0", "full", 100, false),
                variant("10de|gpu-a|1|3.0", "small", 10, false),
            ],
        );
        // ours re-tuned full; theirs left it alone and re-tuned small
        let ours = lock(
            "f1",
            vec![
                variant("10de|gpu-a|1|3.0", "full", 90, false),
                variant("10de|gpu-a|1|3.0", "small", 10, false),
            ],
        );
        let theirs = lock(
            "f1",
            vec![
                variant("10de|gpu-a|1|3.0", "full", 100, false),
                variant("10de|gpu-a|1|3.0", "small", 12, false),
            ],
        );
        let m = merge(
            &[("ours", &ours), ("theirs", &theirs)],
            Some(&base),
            &|_| Err(()),
        )
        .unwrap();
        assert!(m.conflicts.is_empty(), "{:?}", m.conflicts);
        let time = |w: &str| {
            m.lock.kernels["k"]
                .variants
                .iter()
                .find(|v| v.workload == w)
                .unwrap()
                .time_ns
        };
        assert_eq!((time("full"), time("small")), (90, 12));
        // both changed the same slot differently: a conflict, whatever they claim
        let liar = lock(
            "f1",
            vec![
                variant("10de|gpu-a|1|3.0", "full", 1, false),
                variant("10de|gpu-a|1|3.0", "small", 10, false),
            ],
        );
        let m = merge(&[("ours", &ours), ("theirs", &liar)], Some(&base), &|_| {
            Err(())
        })
        .unwrap();
        assert_eq!(m.conflicts.len(), 1, "{:?}", m.conflicts);
        // one side removed a slot the other left alone: removed
        let removed = lock("f1", vec![variant("10de|gpu-a|1|3.0", "full", 100, false)]);
        let m = merge(
            &[("ours", &removed), ("theirs", &base)],
            Some(&base),
            &|_| Err(()),
        )
        .unwrap();
        assert!(m.conflicts.is_empty() && m.lock.kernels["k"].variants.len() == 1);
    }

    #[test]
    fn the_stale_side_is_dropped_with_a_note_and_without_sources_it_is_an_error() {
        let old = lock("f1", vec![variant("10de|gpu-a|1|3.0", "full", 50, false)]);
        let new = lock("f2", vec![variant("10de|gpu-b|1|3.0", "full", 90, false)]);
        let m = merge(&[("old.lock", &old), ("new.lock", &new)], None, &|_| {
            Ok(Some("f2".into()))
        })
        .unwrap();
        assert_eq!(m.lock.kernels["k"].fingerprint, "f2");
        assert_eq!(m.lock.kernels["k"].variants.len(), 1);
        assert!(
            m.lock.kernels["k"]
                .variants
                .iter()
                .all(|v| v.device == "10de|gpu-b|1|3.0"),
            "the stale side's variants went"
        );
        assert!(
            m.notes[0].contains("old.lock") && m.notes[0].contains("stale"),
            "{:?}",
            m.notes
        );
        let e = merge(
            &[("old.lock", &old), ("new.lock", &new)],
            None,
            &|_| Err(()),
        )
        .unwrap_err();
        assert!(e.to_string().contains("different fingerprints"), "{e}");
        let m = merge(&[("old.lock", &old), ("new.lock", &new)], None, &|_| {
            Ok(None)
        })
        .unwrap();
        assert!(
            m.lock.kernels.is_empty() && m.notes[0].contains("no longer have it"),
            "{:?}",
            m.notes
        );
    }

    #[test]
    fn versions_must_agree() {
        let a = lock("f1", vec![]);
        let mut b = a.clone();
        b.version = 1;
        assert!(matches!(
            merge(&[("a", &a), ("b", &b)], None, &|_| Err(())),
            Err(MergeError::Versions(_))
        ));
    }
}
