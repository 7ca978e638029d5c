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

/// Checks a lockfile variant against the annotation: a device key, exactly the declared
/// parameters (the annotation's and those its generated source `declared`) with values of
/// their domains, a declared workload with its sizes, constraints and geometry that hold at
/// those sizes and at every size it was proven at.
pub fn check_variant(spec: &KernelSpec, v: &Variant, declared: &[Param]) -> Result<(), String> {
    if DeviceKey::parse(&v.device).is_none() {
        return Err(format!("`{}` is not a device key", v.device));
    }
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
    if !v.proven.is_empty() && !v.proven.contains(&v.sizes) {
        return Err("its proven sizes do not include the tuned ones".into());
    }
    for sizes in v.proven_sizes() {
        spec.geometry(&v.params, sizes, None)
            .map_err(|e| format!("cannot run at sizes {}: {e}", fmt_assignments(sizes, ", ")))?;
    }
    Ok(())
}
