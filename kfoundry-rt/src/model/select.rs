//! Which variant runs: the dispatch rules, as plain logic over the embedded specification and
//! lockfile variants (no OpenCL here, so every rule is unit-tested).
//!
//! The chain: exact device → same device with another driver → (same vendor family and nearest
//! known device: later) → the reference. At each step only variants whose constraints and
//! geometry hold for the call's sizes are eligible; among them the one whose workload is
//! nearest to the call's sizes (in log2 distance) wins. Ties go to the faster variant.

use std::fmt;

use super::device::DeviceKey;
use super::lockfile::Variant;
use super::spec::{fmt_assignments, KernelSpec, LaunchError, Params, Sizes};

/// A step of the dispatch chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    /// A variant tuned on this very device and driver.
    ExactDevice,
    /// A variant tuned on the same device with another driver version.
    SameDeviceOtherDriver,
    /// The plain reference kernel.
    Reference,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::ExactDevice => "exact device",
            Step::SameDeviceOtherDriver => "same device, other driver",
            Step::Reference => "reference",
        })
    }
}

/// The outcome of dispatch: the parameters to build with and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub step: Step,
    /// Index into the kernel's variants (None for the reference).
    pub variant: Option<usize>,
    pub params: Params,
    /// One line per consideration, in order.
    pub reasons: Vec<String>,
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "chosen: {} ({})", self.step, fmt_assignments(&self.params, ", "))?;
        for r in &self.reasons {
            writeln!(f, "  - {r}")?;
        }
        Ok(())
    }
}

/// log2 distance between a workload's sizes and the call's.
fn distance(workload: &Sizes, call: &Sizes) -> f64 {
    call.iter()
        .map(|(k, v)| {
            let w = workload.get(k).copied().unwrap_or(1).max(1) as f64;
            (((*v).max(1) as f64).log2() - w.log2()).abs()
        })
        .sum()
}

fn fmt_sizes(sizes: &Sizes) -> String {
    fmt_assignments(sizes, ", ")
}

/// Chooses the variant for `device` at `sizes`. Errors only when even the reference cannot
/// run at these sizes (its constraints or geometry fail): then the call itself is invalid.
pub fn choose(spec: &KernelSpec, variants: &[Variant], device: &DeviceKey, sizes: &Sizes) -> Result<Choice, LaunchError> {
    let mut reasons = vec![format!("device key `{device}`; call sizes {}", fmt_sizes(sizes))];
    let steps: [(Step, &dyn Fn(&DeviceKey) -> bool); 2] = [
        (Step::ExactDevice, &|k: &DeviceKey| k == device),
        (Step::SameDeviceOtherDriver, &|k: &DeviceKey| k != device && k.same_device(device)),
    ];
    for (step, matches) in steps {
        let mut eligible: Vec<(usize, f64)> = Vec::new();
        let mut considered = 0;
        for (i, v) in variants.iter().enumerate() {
            let Some(key) = DeviceKey::parse(&v.device) else { continue };
            if !matches(&key) {
                continue;
            }
            considered += 1;
            match spec.geometry(&v.params, sizes) {
                Ok(_) => eligible.push((i, distance(&v.sizes, sizes))),
                Err(e) => reasons.push(format!(
                    "{step}: variant for workload `{}` ({}) skipped: {e}",
                    v.workload,
                    fmt_params(&v.params)
                )),
            }
        }
        if considered == 0 {
            reasons.push(format!("{step}: no variant in the lockfile"));
            continue;
        }
        let best = eligible.iter().min_by(|a, b| {
            a.1.total_cmp(&b.1).then(variants[a.0].time_ns.cmp(&variants[b.0].time_ns))
        });
        if let Some(&(i, d)) = best {
            let v = &variants[i];
            reasons.push(format!(
                "{step}: workload `{}` ({}) is the nearest of {} eligible (log2 distance {d:.2}); tuned {} ns vs reference {} ns",
                v.workload,
                fmt_sizes(&v.sizes),
                eligible.len(),
                v.time_ns,
                v.reference_time_ns
            ));
            return Ok(Choice { step, variant: Some(i), params: v.params.clone(), reasons });
        }
    }
    spec.geometry(&spec.reference, sizes)?;
    reasons.push("reference: the plain kernel, valid at these sizes".into());
    Ok(Choice { step: Step::Reference, variant: None, params: spec.reference.clone(), reasons })
}

fn fmt_params(p: &Params) -> String {
    fmt_assignments(p, ", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::tests::saxpy;

    fn key(driver: &str) -> DeviceKey {
        DeviceKey::from_reported(0x10de, "NVIDIA H200", driver, "OpenCL 3.0 CUDA")
    }

    fn variant(device: &DeviceKey, workload: &str, n: i64, wg: i64, vec: i64, time_ns: u64) -> Variant {
        Variant {
            device: device.to_string(),
            workload: workload.into(),
            sizes: [("n".to_string(), n)].into_iter().collect(),
            params: [("WG".to_string(), wg), ("VEC".to_string(), vec)].into_iter().collect(),
            time_ns,
            reference_time_ns: 10 * time_ns,
            evaluations: 10,
            failures: 0,
            source: None,
        }
    }

    fn n(v: i64) -> Sizes {
        [("n".to_string(), v)].into_iter().collect()
    }

    #[test]
    fn exact_device_nearest_workload() {
        let spec = saxpy();
        let dev = key("580");
        let variants = vec![variant(&dev, "small", 1 << 12, 32, 2, 100), variant(&dev, "large", 1 << 20, 128, 4, 900)];
        let c = choose(&spec, &variants, &dev, &n(1 << 19)).unwrap();
        assert_eq!(c.step, Step::ExactDevice);
        assert_eq!(c.variant, Some(1));
        let c = choose(&spec, &variants, &dev, &n(1 << 13)).unwrap();
        assert_eq!(c.variant, Some(0));
        assert!(c.to_string().contains("workload `small`"), "{c}");
    }

    #[test]
    fn other_driver_then_reference() {
        let spec = saxpy();
        let tuned_on = key("575");
        let variants = vec![variant(&tuned_on, "large", 1 << 20, 128, 4, 900)];
        let c = choose(&spec, &variants, &key("580"), &n(1 << 20)).unwrap();
        assert_eq!(c.step, Step::SameDeviceOtherDriver);
        let stranger = DeviceKey::from_reported(0x1002, "gfx90a", "3.0", "OpenCL 2.0");
        let c = choose(&spec, &variants, &stranger, &n(1 << 20)).unwrap();
        assert_eq!(c.step, Step::Reference);
        assert_eq!(c.params, spec.reference);
        assert!(c.reasons.iter().any(|r| r.contains("no variant")));
    }

    #[test]
    fn constraint_violation_falls_through() {
        let spec = saxpy();
        let dev = key("580");
        // WG=128, VEC=4 needs n % 512 == 0; WG=32,VEC=2 needs n % 64 == 0.
        let variants = vec![variant(&dev, "large", 1 << 20, 128, 4, 900), variant(&dev, "small", 1 << 12, 32, 2, 100)];
        let c = choose(&spec, &variants, &dev, &n(64 * 3)).unwrap();
        assert_eq!(c.variant, Some(1), "{c}");
        assert!(c.reasons.iter().any(|r| r.contains("skipped")), "{c}");
        // Only the reference (WG=64, VEC=1: n % 64 == 0) is valid at n = 64 * 5 with this set.
        let variants = vec![variant(&dev, "large", 1 << 20, 128, 4, 900)];
        let c = choose(&spec, &variants, &dev, &n(64 * 5)).unwrap();
        assert_eq!(c.step, Step::Reference);
        // Nothing is valid at n = 100: an error, not a panic.
        assert!(choose(&spec, &variants, &dev, &n(100)).is_err());
    }

    #[test]
    fn unparsable_device_entries_are_ignored() {
        let spec = saxpy();
        let mut v = variant(&key("580"), "large", 1 << 20, 128, 4, 900);
        v.device = "garbage".into();
        let c = choose(&spec, &[v], &key("580"), &n(1 << 20)).unwrap();
        assert_eq!(c.step, Step::Reference);
    }
}
