//! A tuned variant as the lockfile records it and a binary embeds it: one kernel, one device,
//! one workload, the parameters that won and the sizes they were proven at; and the check that
//! a variant agrees with its kernel's annotation, which both the build and the runtime apply.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::device::{DeviceInfo, DeviceKey};
use super::spec::{fmt_assignments, KernelSpec, Param, Params, Sizes};

/// The winner of one tune: one kernel, one device, one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// Device key (its `Display` form).
    pub device: String,
    pub workload: String,
    pub sizes: Sizes,
    pub params: Params,
    /// Median kernel time of the winner, nanoseconds.
    #[serde(serialize_with = "super::saturating")]
    pub time_ns: u64,
    /// Median kernel time of the reference in the same run, nanoseconds.
    #[serde(serialize_with = "super::saturating")]
    pub reference_time_ns: u64,
    #[serde(serialize_with = "super::saturating")]
    pub evaluations: u64,
    #[serde(serialize_with = "super::saturating")]
    pub failures: u64,
    /// Hash of a generated source stored beside the lockfile (source-level variants only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Every set of sizes the variant was verified at against the reference (the tuned
    /// sizes, smaller ones and larger ones). Dispatch uses it only where each size lies within
    /// the range of its verified values (unless the kernel opts into `extrapolate`). Empty in
    /// version 1 files: then only `sizes` counts as proven.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "columns")]
    pub proven: Vec<Sizes>,
    /// For each integer scalar argument that is not a size, the smallest and largest value the
    /// variant was verified with. Dispatch runs the variant only at calls whose values lie
    /// within (whatever `extrapolate` says): a kernel that unrolls by a scalar `k` without a
    /// remainder loop is right at the `k` it was tuned with and wrong at others.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scalars: BTreeMap<String, [i64; 2]>,
    /// The version of the proof the variant passed ([`PROOF_VERSION`]; 0 in files written
    /// before versions were recorded: fixed sizes, one poison, one input distribution).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub proof: u32,
    /// The search was interrupted (Ctrl-C, SIGTERM) before its budget was spent: `cargo
    /// kfoundry tune --resume` continues it. A partial result never replaces a complete one
    /// unless it is faster on re-measure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// The slot's general variant: the tune's winner for this workload and device cannot run
    /// everywhere in the region it was proven over (its constraints refuse some sizes, say a
    /// vector width that must divide `n`), and this entry, the fastest candidate that runs
    /// wherever the reference does, was proven over the same region to serve the rest.
    /// Dispatch prefers the winner wherever both can run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub general: bool,
    /// The smallest sizes at which the tune measured this entry no slower than the reference
    /// (walking down from its workload, every size divided together): dispatch runs it only at
    /// calls whose work, the product of their sizes, is at least this set's. `None`: it was
    /// never slower (or the file predates floors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Sizes>,
    /// The description of the device the variant was tuned on, copied from `[devices]` when
    /// the variant is embedded (dispatch to the nearest known device needs it); never written
    /// to the lockfile, where `[devices]` holds it once per device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_info: Option<DeviceInfo>,
}

/// The proof a variant passes since kfoundry 0.1's proof of 2026-12: drawn sizes covering every
/// residue, the corners of the proven box, outputs pre-filled three ways, edge values, integer
/// scalars over their declared range, in place where declared.
pub const PROOF_VERSION: u32 = 2;

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// Size sets stored as one column per size (`n = [4096, 2560, 8192]`): one line per size in
/// the lockfile instead of a table per set. Every column must have the same length.
mod columns {
    use std::collections::BTreeMap;

    use serde::{de::Error as _, Deserialize, Deserializer, Serialize, Serializer};

    use super::Sizes;

    pub fn serialize<S: Serializer>(sets: &[Sizes], s: S) -> Result<S::Ok, S::Error> {
        let mut columns: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for (i, set) in sets.iter().enumerate() {
            for (name, &v) in set {
                let column = columns.entry(name.as_str()).or_default();
                if column.len() != i {
                    return Err(serde::ser::Error::custom(
                        "proven size sets must all name the same sizes",
                    ));
                }
                column.push(v);
            }
        }
        if columns.values().any(|c| c.len() != sets.len()) {
            return Err(serde::ser::Error::custom(
                "proven size sets must all name the same sizes",
            ));
        }
        columns.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Sizes>, D::Error> {
        let columns: BTreeMap<String, Vec<i64>> = BTreeMap::deserialize(d)?;
        let len = columns.values().next().map_or(0, Vec::len);
        if columns.values().any(|c| c.len() != len) {
            return Err(D::Error::custom(
                "every size in `proven` needs the same number of values",
            ));
        }
        Ok((0..len)
            .map(|i| columns.iter().map(|(k, c)| (k.clone(), c[i])).collect())
            .collect())
    }
}

impl Variant {
    /// The sizes the variant was verified at (its tuned sizes when the file predates `proven`).
    pub fn proven_sizes(&self) -> &[Sizes] {
        if self.proven.is_empty() {
            std::slice::from_ref(&self.sizes)
        } else {
            &self.proven
        }
    }

    /// Per size name, the smallest and largest value the variant was verified at.
    pub fn proven_range(&self) -> BTreeMap<String, (i64, i64)> {
        let mut range: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        for sizes in self.proven_sizes() {
            for (k, &v) in sizes {
                let r = range.entry(k.clone()).or_insert((v, v));
                r.0 = r.0.min(v);
                r.1 = r.1.max(v);
            }
        }
        range
    }
}

/// What makes a variant the one of its slot: its device (canonical: a key spelled otherwise
/// counts as the key it names), its workload, and whether it is the workload's general
/// variant. A kernel holds one variant per slot: a workload's winner and at most one general
/// variant beside it on each device.
pub fn slot(v: &Variant) -> (String, &str, bool) {
    (DeviceKey::canonical(&v.device), &v.workload, v.general)
}

/// Checks that no two of one kernel's `variants` are for the same device (however its key is
/// spelled) and workload: which of two would run is not something a claimed time may settle,
/// so a twin is refused wherever variants are read. One message per extra variant, naming its
/// device and workload (the anchors of `ranges` are workloads of their own, so a portfolio's
/// buckets never share a slot).
pub fn check_unique(variants: &[Variant]) -> Result<(), Vec<String>> {
    let mut first: BTreeMap<(String, &str, bool), &Variant> = BTreeMap::new();
    let mut twins = Vec::new();
    for v in variants {
        let (device, workload, general) = slot(v);
        let Some(held) = first.get(&(device.clone(), workload, general)) else {
            first.insert((device, workload, general), v);
            continue;
        };
        let kind = if general {
            "general variant"
        } else {
            "variant"
        };
        let spelled = if held.device == device && v.device == device {
            String::new()
        } else {
            format!(" (keyed `{}` and `{}`)", held.device, v.device)
        };
        twins.push(format!("a second {kind} for device `{device}` at workload `{workload}`{spelled}: one kernel holds one variant (and one general variant) per device and workload; remove one, or re-tune"));
    }
    if twins.is_empty() {
        Ok(())
    } else {
        Err(twins)
    }
}

/// Checks a lockfile variant against the annotation: a canonical device key, exactly the declared
/// parameters (the annotation's and those its generated source `declared`) with values of
/// their domains, a declared workload with its sizes, constraints and geometry that hold at
/// those sizes and at every size it was proven at.
pub fn check_variant(spec: &KernelSpec, v: &Variant, declared: &[Param]) -> Result<(), String> {
    DeviceKey::parse(&v.device).map_err(|e| e.to_string())?;
    spec.check_params(&v.params, declared)?;
    let Some(workload) = spec.workloads.iter().find(|w| w.name == v.workload) else {
        return Err(format!("the kernel declares no workload `{}`", v.workload));
    };
    if v.sizes != workload.sizes {
        return Err(format!(
            "sizes {} differ from those the annotation gives workload `{}` ({})",
            fmt_assignments(&v.sizes, ", "),
            workload.name,
            fmt_assignments(&workload.sizes, ", ")
        ));
    }
    if let Some(floor) = &v.floor {
        if floor.keys().ne(v.sizes.keys()) {
            return Err(format!(
                "its floor ({}) does not name the kernel's sizes",
                fmt_assignments(floor, ", ")
            ));
        }
    }
    if !v.proven.is_empty() && !v.proven.contains(&v.sizes) {
        return Err("its proven sizes do not include the tuned ones".into());
    }
    for sizes in v.proven_sizes() {
        spec.geometry(&v.params, sizes, None)
            .map_err(|e| format!("cannot run at sizes {}: {e}", fmt_assignments(sizes, ", ")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(device: &str, workload: &str) -> Variant {
        Variant {
            device: device.into(),
            workload: workload.into(),
            sizes: Sizes::new(),
            params: Params::new(),
            time_ns: 1,
            reference_time_ns: 1,
            evaluations: 1,
            failures: 0,
            source: None,
            proven: vec![],
            scalars: BTreeMap::new(),
            proof: PROOF_VERSION,
            partial: false,
            general: false,
            floor: None,
            device_info: None,
        }
    }

    #[test]
    fn one_variant_per_device_and_workload() {
        let key = "8086|cpu|1|3.0";
        let other = "10de|nvidia h200|580|3.0";
        assert_eq!(
            check_unique(&[at(key, "small"), at(key, "large"), at(other, "small")]),
            Ok(())
        );
        // the same key twice
        let e =
            check_unique(&[at(key, "small"), at(other, "small"), at(key, "small")]).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("a second variant for device `8086|cpu|1|3.0` at workload `small`"),
            "{e:?}"
        );
        // the same device under another spelling of its key
        for twin in ["+8086|cpu|1|3.0", "08086|cpu|1|3.0", "8086|CPU|1|3.0"] {
            let e = check_unique(&[at(key, "small"), at(twin, "small")]).unwrap_err();
            assert!(
                e[0].contains(&format!(
                    "device `8086|cpu|1|3.0` at workload `small` (keyed `{key}` and `{twin}`)"
                )),
                "{e:?}"
            );
        }
        // a workload's general variant has a slot of its own, once
        let general = Variant {
            general: true,
            floor: None,
            ..at(key, "small")
        };
        assert_eq!(check_unique(&[at(key, "small"), general.clone()]), Ok(()));
        let e = check_unique(&[at(key, "small"), general.clone(), general]).unwrap_err();
        assert!(
            e[0].contains(
                "a second general variant for device `8086|cpu|1|3.0` at workload `small`"
            ),
            "{e:?}"
        );
        // a key that names no device is its own slot (check_variant refuses it)
        assert_eq!(check_unique(&[at("zz", "w"), at(key, "w")]), Ok(()));
        assert!(check_unique(&[at("zz", "w"), at("zz", "w")]).is_err());
    }

    #[test]
    fn a_key_spelled_otherwise_is_refused() {
        let spec = crate::model::spec::tests::saxpy();
        let w = &spec.workloads[0];
        let mut v = at("08086|cpu|1|3.0", &w.name);
        v.sizes = w.sizes.clone();
        v.params = spec.reference.clone();
        let e = check_variant(&spec, &v, &[]).unwrap_err();
        assert!(
            e.contains("device key `08086|cpu|1|3.0` is not canonical: write `8086|cpu|1|3.0`"),
            "{e}"
        );
        v.device = "8086|cpu|1|3.0".into();
        assert_eq!(check_variant(&spec, &v, &[]), Ok(()));
    }

    /// A floor edited by hand to name other sizes than the kernel's is refused where variants
    /// are read (dispatch would compare it with sizes the calls do not have).
    #[test]
    fn a_floor_must_name_the_kernels_sizes() {
        let spec = crate::model::spec::tests::saxpy();
        let w = &spec.workloads[0];
        let mut v = at("8086|cpu|1|3.0", &w.name);
        v.sizes = w.sizes.clone();
        v.params = spec.reference.clone();
        v.floor = Some(w.sizes.clone());
        assert_eq!(check_variant(&spec, &v, &[]), Ok(()));
        v.floor = Some([("m".to_string(), 64)].into());
        let e = check_variant(&spec, &v, &[]).unwrap_err();
        assert!(
            e.contains("its floor (m=64) does not name the kernel's sizes"),
            "{e}"
        );
        v.floor = Some(Sizes::new());
        assert!(check_variant(&spec, &v, &[]).is_err());
    }
}
