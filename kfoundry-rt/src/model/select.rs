//! Which variant runs: the dispatch rules, as plain logic over the embedded specification and
//! lockfile variants (no OpenCL here, so every rule is unit-tested).
//!
//! The chain: exact device → same device with another driver → same product family
//! ([`DeviceKey::family`]) → the nearest known device by hardware description
//! ([`DeviceInfo::distance`], same kind of device only) → the reference. At each step only
//! variants whose constraints and geometry hold for the call's sizes are eligible (on another
//! device, also its work-group limit); among them the one whose workload is nearest to the
//! call's sizes (in log2 distance) wins; a tie goes to a workload's winner before its general
//! variant (the one that serves where the winner does not run: sizes its constraints refuse,
//! calls below its floor), then to the
//! first workload by name, then to the first in the lockfile, never to the time an entry
//! claims. At the nearest-device step
//! the nearest device is taken first, then its nearest workload.

use std::fmt;

use super::device::{DeviceInfo, DeviceKey, DeviceTraits};
use super::spec::{fmt_assignments, KernelSpec, LaunchError, Params, Sizes};
use super::variant::Variant;

/// A step of the dispatch chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    /// A variant tuned on this very device and driver.
    ExactDevice,
    /// A variant tuned on the same device with another driver version.
    SameDeviceOtherDriver,
    /// A variant tuned on another device of the same product family.
    SameFamily,
    /// A variant tuned on the most similar known device of the same kind.
    NearestDevice,
    /// The plain reference kernel.
    Reference,
}

impl Step {
    /// A step that runs parameters tuned on another device: they may exceed this device's
    /// limits in ways only a build shows (local memory), so a failure falls back to the
    /// reference.
    pub fn is_foreign(self) -> bool {
        matches!(self, Step::SameFamily | Step::NearestDevice)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::ExactDevice => "exact device",
            Step::SameDeviceOtherDriver => "same device, other driver",
            Step::SameFamily => "same family",
            Step::NearestDevice => "nearest device",
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
        writeln!(
            f,
            "chosen: {} ({})",
            self.step,
            fmt_assignments(&self.params, ", ")
        )?;
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

/// The values of a call's integer scalar arguments that are not sizes, by name.
pub type Scalars = std::collections::BTreeMap<String, i64>;

/// How a reason names an entry: a variant by its workload and parameters, an entry that kept
/// the reference (its tune found nothing faster) as that, never as a "variant".
fn entry_name(spec: &KernelSpec, v: &Variant) -> String {
    if v.params == spec.reference && v.source.is_none() {
        format!(
            "the reference's entry for workload `{}` (its tune found nothing faster)",
            v.workload
        )
    } else if v.general {
        format!(
            "general variant for workload `{}` ({}; it serves where the workload's winner does not run)",
            v.workload,
            fmt_params(&v.params)
        )
    } else {
        format!(
            "variant for workload `{}` ({})",
            v.workload,
            fmt_params(&v.params)
        )
    }
}

/// Chooses the variant for `device` (described by `info` when known: the nearest-device step
/// and the work-group check of foreign variants need it) at `sizes`, with the call's integer
/// scalars (`None` when they are not known, as for `explain`: then the ranges a variant was
/// verified with are only named among the reasons). Errors only when even the reference
/// cannot run at these sizes (its constraints or geometry fail): then the call itself is
/// invalid.
pub fn choose(
    spec: &KernelSpec,
    variants: &[Variant],
    device: &DeviceKey,
    info: Option<&DeviceInfo>,
    traits: Option<&DeviceTraits>,
    sizes: &Sizes,
    scalars: Option<&Scalars>,
) -> Result<Choice, LaunchError> {
    let mut reasons = vec![format!(
        "device key `{device}`; call sizes {}",
        fmt_sizes(sizes)
    )];
    if let Some(values) = scalars.filter(|s| !s.is_empty()) {
        reasons.push(format!("integer scalars {}", fmt_assignments(values, ", ")));
    }
    let (steps, nearest) = steps_and_nearest(variants, device, info);
    // A variant was proven only where the reference runs (the proof compares with it): where
    // the reference's constraints or geometry do not hold, no variant is eligible, and the
    // call is invalid (as it would be for the reference).
    if let Err(e) = spec.geometry(&spec.reference, sizes, traits) {
        reasons.push(format!(
            "reference: cannot run at these sizes ({e}), so no variant was proven here"
        ));
        return Err(e);
    }
    for step in [
        Step::ExactDevice,
        Step::SameDeviceOtherDriver,
        Step::SameFamily,
        Step::NearestDevice,
    ] {
        let mut eligible: Vec<(usize, f64)> = Vec::new();
        let mut considered = 0;
        for (i, v) in variants.iter().enumerate() {
            if steps[i] != Some(step) {
                continue;
            }
            considered += 1;
            if let (false, Some(outside)) = (spec.extrapolate, outside_proven(v, sizes)) {
                reasons.push(format!(
                    "{step}: {} skipped: {outside} (`extrapolate = true` in the annotation allows it)",
                    entry_name(spec, v)
                ));
                continue;
            }
            if let Some(floor) = v.floor.as_ref().filter(|f| below_floor(f, sizes)) {
                reasons.push(format!(
                    "{step}: {} skipped: the call is smaller than its floor ({}), below which the reference was measured faster",
                    entry_name(spec, v),
                    fmt_sizes(floor)
                ));
                continue;
            }
            if let Some(why) = outside_scalars(spec, v, scalars) {
                reasons.push(format!("{step}: {} skipped: {why}", entry_name(spec, v)));
                continue;
            }
            match spec.geometry(&v.params, sizes, traits) {
                Ok(g) => {
                    let local: u64 = g.local.map_or(1, |l| l.iter().map(|&x| x as u64).product());
                    match info {
                        Some(me) if step.is_foreign() && local > me.max_work_group_size => reasons
                            .push(format!(
                            "{step}: {} skipped: work-group size {local} exceeds this device's {}",
                            entry_name(spec, v),
                            me.max_work_group_size
                        )),
                        _ => eligible.push((i, distance(&v.sizes, sizes))),
                    }
                }
                Err(e) => reasons.push(format!("{step}: {} skipped: {e}", entry_name(spec, v))),
            }
        }
        if step == Step::NearestDevice {
            if let Some((d, dist)) = &nearest {
                reasons.push(format!(
                    "{step}: `{d}` is the most similar known device (distance {dist:.2})"
                ));
            } else if info.is_none() {
                reasons.push(format!("{step}: this device's description is unknown"));
            }
        }
        if considered == 0 {
            reasons.push(format!("{step}: no variant in the lockfile"));
            continue;
        }
        // Ties go by what the entries are, never by the times they claim (a time is a number
        // anyone can write in the lockfile): a winner before its workload's general variant,
        // the first workload by name, then the first in the lockfile (`min_by` keeps the
        // first of equals).
        let best = eligible.iter().min_by(|a, b| {
            let (va, vb) = (&variants[a.0], &variants[b.0]);
            a.1.total_cmp(&b.1)
                .then_with(|| va.general.cmp(&vb.general))
                .then_with(|| va.workload.cmp(&vb.workload))
        });
        if let Some(&(i, d)) = best {
            let v = &variants[i];
            let tied = eligible
                .iter()
                .filter(|&&(j, e)| j != i && e.total_cmp(&d).is_eq())
                .count();
            let tie = if tied == 0 {
                String::new()
            } else {
                format!(", tied with {tied} other(s): a winner before a general variant, then the first by workload name, then lockfile order (never by a claimed time)")
            };
            let general = if v.general { "'s general variant" } else { "" };
            reasons.push(format!(
                "{step}: workload `{}`{general} ({}) is the nearest of {} eligible (log2 distance {d:.2}{tie}); tuned {} ns vs reference {} ns",
                v.workload,
                fmt_sizes(&v.sizes),
                eligible.len(),
                v.time_ns,
                v.reference_time_ns
            ));
            if scalars.is_none() {
                for (name, _) in integer_scalars(spec) {
                    if let Some([lo, hi]) = v.scalars.get(name) {
                        reasons.push(format!("{step}: it runs only when `{name}` is within {lo}..={hi}, the values it was verified with"));
                    }
                }
            }
            if !spec.ranges.is_empty() {
                let same_device: Vec<&Variant> =
                    variants.iter().filter(|o| o.device == v.device).collect();
                let buckets = super::ranges::describe_buckets(spec, &same_device);
                if !buckets.is_empty() {
                    reasons.push(format!(
                        "{step}: the buckets of `ranges` on `{}`: {}",
                        v.device,
                        buckets.join("; ")
                    ));
                }
            }
            return Ok(Choice {
                step,
                variant: Some(i),
                params: v.params.clone(),
                reasons,
            });
        }
    }
    reasons.push("reference: the plain kernel, valid at these sizes".into());
    Ok(Choice {
        step: Step::Reference,
        variant: None,
        params: spec.reference.clone(),
        reasons,
    })
}

/// Whether a call at `sizes` is below an entry's `floor`: its work (the product of its sizes,
/// compared in logs, each at least 1) is smaller than the floor's.
pub fn below_floor(floor: &Sizes, sizes: &Sizes) -> bool {
    let work = |s: &Sizes| -> f64 { s.values().map(|&v| (v.max(1) as f64).log2()).sum() };
    let call: Sizes = floor
        .keys()
        .map(|k| (k.clone(), sizes.get(k).copied().unwrap_or(1)))
        .collect();
    work(&call) < work(floor) - 1e-9
}

/// The step of the dispatch chain at which a call on `device` (described by `info` when known)
/// considers each variant (`None`: never, whatever the sizes), and the nearest known device
/// of the same kind with its distance. Whichever variant a call on `device` may run is one
/// with a step here: what `cargo kfoundry check --verify` re-proves on the device.
pub fn steps_and_nearest(
    variants: &[Variant],
    device: &DeviceKey,
    info: Option<&DeviceInfo>,
) -> (Vec<Option<Step>>, Option<(String, f64)>) {
    let family = device.family();
    // the nearest known device of the same kind, by hardware description
    let nearest: Option<(String, f64)> = info.and_then(|me| {
        variants
            .iter()
            .filter(|v| DeviceKey::parse(&v.device).is_ok_and(|k| k.family() != family))
            .filter_map(|v| {
                v.device_info
                    .as_ref()
                    .and_then(|d| me.distance(d))
                    .map(|d| (v.device.clone(), d))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)))
    });
    let steps = variants
        .iter()
        .map(|v| {
            // a key that is not canonical is never dispatched (the build refuses it too)
            let k = DeviceKey::parse(&v.device).ok()?;
            if k == *device {
                Some(Step::ExactDevice)
            } else if k.same_device(device) {
                Some(Step::SameDeviceOtherDriver)
            } else if k.family() == family
                && match (info, &v.device_info) {
                    (Some(me), Some(them)) => me.kind == them.kind,
                    _ => true,
                }
            {
                Some(Step::SameFamily)
            } else if nearest.as_ref().is_some_and(|(d, _)| *d == v.device) {
                Some(Step::NearestDevice)
            } else {
                None
            }
        })
        .collect();
    (steps, nearest)
}

/// The kernel's integer scalar arguments that are not sizes: dispatch runs a variant only at
/// values it was verified with.
pub fn integer_scalars(
    spec: &KernelSpec,
) -> impl Iterator<Item = (&str, crate::model::signature::ScalarType)> {
    spec.drawn_scalars().filter(|(_, ty)| !ty.is_float())
}

/// Why the call's integer scalars lie outside the values `variant` was verified with, if they
/// do (`None` also when the values are not known).
fn outside_scalars(
    spec: &KernelSpec,
    variant: &Variant,
    scalars: Option<&Scalars>,
) -> Option<String> {
    let values = scalars?;
    integer_scalars(spec).find_map(|(name, _)| {
        let v = values.get(name);
        match (variant.scalars.get(name), v) {
            (Some([lo, hi]), Some(v)) if (lo..=hi).contains(&v) => None,
            (Some([lo, hi]), Some(v)) => Some(format!(
                "`{name}` = {v} is outside {lo}..={hi}, the values it was verified with"
            )),
            (Some([lo, hi]), None) => Some(format!(
                "`{name}` does not fit the values it was verified with ({lo}..={hi})"
            )),
            (None, _) => Some(format!(
                "it was never verified with a value of the integer argument `{name}` (re-tune it)"
            )),
        }
    })
}

/// Why `sizes` lie outside the range `variant` was verified at, if they do.
fn outside_proven(variant: &Variant, sizes: &Sizes) -> Option<String> {
    let range = variant.proven_range();
    sizes.iter().find_map(|(name, &v)| match range.get(name) {
        Some(&(lo, hi)) if (lo..=hi).contains(&v) => None,
        Some(&(lo, hi)) => Some(format!(
            "{name}={v} is outside {lo}..={hi}, the range it was verified at"
        )),
        None => Some(format!("it was never verified with a size `{name}`")),
    })
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

    fn variant(
        device: &DeviceKey,
        workload: &str,
        n: i64,
        wg: i64,
        vec: i64,
        time_ns: u64,
    ) -> Variant {
        Variant {
            device: device.to_string(),
            workload: workload.into(),
            sizes: [("n".to_string(), n)].into_iter().collect(),
            params: [("WG".to_string(), wg), ("VEC".to_string(), vec)]
                .into_iter()
                .collect(),
            time_ns,
            reference_time_ns: 10 * time_ns,
            evaluations: 10,
            failures: 0,
            source: None,
            // verified from 64 to twice the tuned size
            proven: vec![
                [("n".to_string(), 64)].into(),
                [("n".to_string(), n)].into(),
                [("n".to_string(), n * 2)].into(),
            ],
            scalars: Default::default(),
            proof: crate::model::variant::PROOF_VERSION,
            partial: false,
            general: false,
            floor: None,
            device_info: None,
        }
    }

    fn n(v: i64) -> Sizes {
        [("n".to_string(), v)].into_iter().collect()
    }

    #[test]
    fn exact_device_nearest_workload() {
        let spec = saxpy();
        let dev = key("580");
        let variants = vec![
            variant(&dev, "small", 1 << 12, 32, 2, 100),
            variant(&dev, "large", 1 << 20, 128, 4, 900),
        ];
        let c = choose(&spec, &variants, &dev, None, None, &n(1 << 19), None).unwrap();
        assert_eq!(c.step, Step::ExactDevice);
        assert_eq!(c.variant, Some(1));
        let c = choose(&spec, &variants, &dev, None, None, &n(1 << 13), None).unwrap();
        assert_eq!(c.variant, Some(0));
        assert!(c.to_string().contains("workload `small`"), "{c}");
    }

    #[test]
    fn other_driver_then_reference() {
        let spec = saxpy();
        let tuned_on = key("575");
        let variants = vec![variant(&tuned_on, "large", 1 << 20, 128, 4, 900)];
        let c = choose(&spec, &variants, &key("580"), None, None, &n(1 << 20), None).unwrap();
        assert_eq!(c.step, Step::SameDeviceOtherDriver);
        let stranger = DeviceKey::from_reported(0x1002, "gfx90a", "3.0", "OpenCL 2.0");
        let c = choose(&spec, &variants, &stranger, None, None, &n(1 << 20), None).unwrap();
        assert_eq!(c.step, Step::Reference);
        assert_eq!(c.params, spec.reference);
        assert!(c.reasons.iter().any(|r| r.contains("no variant")));
    }

    #[test]
    fn constraint_violation_falls_through() {
        let spec = saxpy();
        let dev = key("580");
        // WG=128, VEC=4 needs n % 512 == 0; WG=32,VEC=2 needs n % 64 == 0.
        let variants = vec![
            variant(&dev, "large", 1 << 20, 128, 4, 900),
            variant(&dev, "small", 1 << 12, 32, 2, 100),
        ];
        let c = choose(&spec, &variants, &dev, None, None, &n(64 * 3), None).unwrap();
        assert_eq!(c.variant, Some(1), "{c}");
        assert!(c.reasons.iter().any(|r| r.contains("skipped")), "{c}");
        // Only the reference (WG=64, VEC=1: n % 64 == 0) is valid at n = 64 * 5 with this set.
        let variants = vec![variant(&dev, "large", 1 << 20, 128, 4, 900)];
        let c = choose(&spec, &variants, &dev, None, None, &n(64 * 5), None).unwrap();
        assert_eq!(c.step, Step::Reference);
        // Nothing is valid at n = 100: an error, not a panic.
        assert!(choose(&spec, &variants, &dev, None, None, &n(100), None).is_err());
        // A variant that could run where the reference cannot (WG=16, VEC=2 at n = 32 * 3,
        // which is not a multiple of the reference's 64) was never proven there: no dispatch,
        // the call is invalid as it is for the reference.
        let mut narrow = spec.clone();
        narrow.params[0].values.push(16);
        let variants = vec![variant(&dev, "small", 1 << 12, 16, 2, 100)];
        let e = choose(&narrow, &variants, &dev, None, None, &n(32 * 3), None).unwrap_err();
        assert!(matches!(e, LaunchError::Constraint(_)), "{e}");
    }

    #[test]
    fn device_constraints_are_rechecked_on_the_device_that_runs() {
        let mut spec = saxpy();
        spec.require
            .push(crate::model::expr::Expr::parse("VEC == 1 || device_sm >= 80").unwrap());
        // Tuned on an H100 (same family as the H200 that runs here), with VEC = 4.
        let h100 = DeviceKey::from_reported(0x10de, "NVIDIA H100", "580", "OpenCL 3.0 CUDA");
        let h200 = DeviceKey::from_reported(0x10de, "NVIDIA H200", "580", "OpenCL 3.0 CUDA");
        let variants = vec![variant(&h100, "large", 1 << 20, 128, 4, 900)];
        let here = |sm: u32| DeviceTraits {
            vendor_id: 0x10de,
            kind: "gpu".into(),
            nv_compute_capability: sm,
            ..Default::default()
        };
        let c = choose(
            &spec,
            &variants,
            &h200,
            None,
            Some(&here(90)),
            &n(1 << 20),
            None,
        )
        .unwrap();
        assert_eq!(c.step, Step::SameFamily, "{c}");
        // A device that cannot run the path: the variant is skipped with the reason, the reference runs.
        let c = choose(
            &spec,
            &variants,
            &h200,
            None,
            Some(&here(75)),
            &n(1 << 20),
            None,
        )
        .unwrap();
        assert_eq!(c.step, Step::Reference, "{c}");
        assert!(
            c.to_string()
                .contains("constraint `VEC == 1 || device_sm >= 80` does not hold on this device"),
            "{c}"
        );
        // A reference that cannot run on the device is an error, not a wrong launch.
        spec.require
            .push(crate::model::expr::Expr::parse("device_gpu == 1").unwrap());
        let cpu = DeviceTraits {
            kind: "cpu".into(),
            ..Default::default()
        };
        assert!(matches!(
            choose(&spec, &variants, &h200, None, Some(&cpu), &n(1 << 20), None),
            Err(LaunchError::DeviceConstraint(_))
        ));
    }

    #[test]
    fn variants_run_only_where_they_were_proven_unless_the_kernel_opts_in() {
        let mut spec = saxpy();
        let dev = key("580");
        let mut verified = variant(&dev, "large", 1 << 20, 128, 4, 900);
        verified.proven = vec![n(1 << 18), n(1 << 20), n(1 << 21)];
        let variants = vec![verified];
        // verified from 2^18 to 2^21
        for inside in [1 << 18, 1 << 20, 1 << 21] {
            assert_eq!(
                choose(&spec, &variants, &dev, None, None, &n(inside), None)
                    .unwrap()
                    .step,
                Step::ExactDevice
            );
        }
        for outside in [1 << 17, 1 << 22] {
            let c = choose(&spec, &variants, &dev, None, None, &n(outside), None).unwrap();
            assert_eq!(c.step, Step::Reference, "{c}");
            assert!(
                c.to_string()
                    .contains("outside 262144..=2097152, the range it was verified at"),
                "{c}"
            );
        }
        spec.extrapolate = true;
        assert_eq!(
            choose(&spec, &variants, &dev, None, None, &n(1 << 22), None)
                .unwrap()
                .step,
            Step::ExactDevice
        );
        // A version 1 entry (no `proven`) counts as verified at its tuned sizes only.
        spec.extrapolate = false;
        let old = Variant {
            proven: vec![],
            ..variants[0].clone()
        };
        assert_eq!(
            choose(
                &spec,
                std::slice::from_ref(&old),
                &dev,
                None,
                None,
                &n(1 << 20),
                None
            )
            .unwrap()
            .step,
            Step::ExactDevice
        );
        assert_eq!(
            choose(&spec, &[old], &dev, None, None, &n(1 << 19), None)
                .unwrap()
                .step,
            Step::Reference
        );
    }

    /// Below its floor an entry gives way: to another entry that may run, else the reference.
    #[test]
    fn an_entry_does_not_run_below_its_floor() {
        let spec = saxpy();
        let dev = key("580");
        let mut large = variant(&dev, "large", 1 << 20, 128, 1, 900);
        large.floor = Some(n(1 << 16));
        let c = choose(&spec, &[large.clone()], &dev, None, None, &n(1 << 16), None).unwrap();
        assert_eq!(c.step, Step::ExactDevice, "{c}");
        let c = choose(&spec, &[large.clone()], &dev, None, None, &n(1 << 15), None).unwrap();
        assert_eq!(c.step, Step::Reference, "{c}");
        assert!(
            c.to_string().contains("smaller than its floor (n=65536)"),
            "{c}"
        );
        let small = variant(&dev, "small", 1 << 14, 32, 1, 100);
        let c = choose(&spec, &[large, small], &dev, None, None, &n(1 << 15), None).unwrap();
        assert_eq!(c.variant, Some(1), "{c}");
    }

    /// A workload's general variant runs where its winner's constraints refuse the call, and
    /// only there: at equal distance the winner goes first, whatever the lockfile's order.
    #[test]
    fn the_general_variant_serves_where_the_winner_cannot_run() {
        let spec = saxpy();
        let dev = key("580");
        // the winner (WG=128, VEC=4) needs n % 512 == 0; the general one (WG=32, VEC=1) n % 32
        let general = Variant {
            general: true,
            floor: None,
            ..variant(&dev, "large", 1 << 20, 32, 1, 950)
        };
        let variants = vec![general, variant(&dev, "large", 1 << 20, 128, 4, 900)];
        let c = choose(&spec, &variants, &dev, None, None, &n(1 << 19), None).unwrap();
        assert_eq!(c.variant, Some(1), "{c}");
        assert!(c.reasons.iter().any(|r| r.contains("tied with 1")), "{c}");
        let c = choose(&spec, &variants, &dev, None, None, &n(64 * 3), None).unwrap();
        assert_eq!(c.variant, Some(0), "{c}");
        assert!(
            c.to_string().contains("workload `large`'s general variant")
                && c.to_string()
                    .contains("variant for workload `large` (VEC=4"),
            "{c}"
        );
    }

    #[test]
    fn a_tie_is_never_broken_by_a_claimed_time() {
        let mut spec = saxpy();
        spec.extrapolate = true;
        let dev = key("580");
        // Two workloads equally near the call (2^16 is 4 doublings from each): the first by
        // name wins, whatever time either claims.
        let variants = vec![
            variant(&dev, "b-large", 1 << 20, 128, 4, 900),
            variant(&dev, "a-small", 1 << 12, 32, 2, 1),
        ];
        for claimed in [1, 900, 5000] {
            let mut vs = variants.clone();
            vs[0].time_ns = claimed;
            let c = choose(&spec, &vs, &dev, None, None, &n(1 << 16), None).unwrap();
            assert_eq!(c.variant, Some(1), "{c}");
            assert!(
                c.to_string()
                    .contains("tied with 1 other(s): a winner before a general variant, then the first by workload name"),
                "{c}"
            );
        }
        // Two entries for one workload (a lockfile twin the build would refuse): the first in
        // the lockfile, even when the second claims to be faster.
        let twin = Variant {
            time_ns: 1,
            params: [("WG".to_string(), 32), ("VEC".to_string(), 4)].into(),
            ..variants[0].clone()
        };
        let vs = vec![variants[0].clone(), twin.clone()];
        let c = choose(&spec, &vs, &dev, None, None, &n(1 << 20), None).unwrap();
        assert_eq!(c.variant, Some(0), "{c}");
        assert!(c.to_string().contains("then lockfile order"), "{c}");
        let vs = vec![twin, variants[0].clone()];
        let c = choose(&spec, &vs, &dev, None, None, &n(1 << 20), None).unwrap();
        assert_eq!(c.variant, Some(0), "{c}");
        // Only one nearest: no tie to speak of.
        let c = choose(&spec, &variants, &dev, None, None, &n(1 << 19), None).unwrap();
        assert!(!c.to_string().contains("tied"), "{c}");
    }

    #[test]
    fn a_key_spelled_otherwise_is_never_dispatched() {
        let spec = saxpy();
        let dev = DeviceKey::from_reported(0x8086, "cpu", "1", "OpenCL 3.0");
        let honest = variant(&dev, "large", 1 << 20, 64, 1, 900);
        for twin in ["+8086|cpu|1|3.0", "08086|cpu|1|3.0", "8086|CPU|1|3.0"] {
            let hostile = Variant {
                device: twin.into(),
                time_ns: 1,
                ..variant(&dev, "large", 1 << 20, 128, 4, 1)
            };
            for vs in [
                vec![honest.clone(), hostile.clone()],
                vec![hostile.clone(), honest.clone()],
            ] {
                let c = choose(&spec, &vs, &dev, None, None, &n(1 << 20), None).unwrap();
                assert_eq!(c.params, honest.params, "{twin}: {c}");
                assert!(c.to_string().contains("nearest of 1 eligible"), "{c}");
            }
        }
    }

    #[test]
    fn unparsable_device_entries_are_ignored() {
        let spec = saxpy();
        let mut v = variant(&key("580"), "large", 1 << 20, 128, 4, 900);
        v.device = "garbage".into();
        let c = choose(&spec, &[v], &key("580"), None, None, &n(1 << 20), None).unwrap();
        assert_eq!(c.step, Step::Reference);
    }

    fn gpu(name: &str, cu: u32, wg: u64) -> DeviceInfo {
        DeviceInfo {
            name: name.into(),
            vendor: "NVIDIA Corporation".into(),
            kind: "gpu".into(),
            compute_units: cu,
            max_work_group_size: wg,
            local_mem_bytes: 49152,
            global_mem_bytes: 80 << 30,
            max_clock_mhz: 1900,
            ..Default::default()
        }
    }

    fn described(v: Variant, info: DeviceInfo) -> Variant {
        Variant {
            device_info: Some(info),
            ..v
        }
    }

    #[test]
    fn same_family_then_nearest_device_of_the_same_kind() {
        let spec = saxpy();
        let h100 =
            DeviceKey::from_reported(0x10de, "NVIDIA H100 80GB HBM3", "570", "OpenCL 3.0 CUDA");
        let a100 =
            DeviceKey::from_reported(0x10de, "NVIDIA A100-PCIE-40GB", "570", "OpenCL 3.0 CUDA");
        let l4 = DeviceKey::from_reported(0x10de, "NVIDIA L4", "570", "OpenCL 3.0 CUDA");
        let cpu =
            DeviceKey::from_reported(0x8086, "pthread-haswell-AMD EPYC", "3.1", "OpenCL 3.0 PoCL");
        let cpu_info = DeviceInfo {
            kind: "cpu".into(),
            compute_units: 132,
            ..gpu("cpu", 132, 4096)
        };
        let h200 = key("580");
        let me = gpu("NVIDIA H200", 132, 1024);
        let variants = vec![
            described(
                variant(&a100, "large", 1 << 20, 64, 2, 900),
                gpu("A100", 108, 1024),
            ),
            described(
                variant(&l4, "large", 1 << 20, 32, 1, 900),
                gpu("L4", 58, 1024),
            ),
            described(variant(&cpu, "large", 1 << 20, 256, 8, 900), cpu_info),
            described(
                variant(&h100, "large", 1 << 20, 128, 4, 900),
                gpu("H100", 114, 1024),
            ),
        ];
        // H100 is of the H200's family
        let c = choose(&spec, &variants, &h200, Some(&me), None, &n(1 << 20), None).unwrap();
        assert_eq!((c.step, c.variant), (Step::SameFamily, Some(3)), "{c}");
        // without it: the most similar GPU (A100: 108 units), never the CPU (132 units)
        let c = choose(
            &spec,
            &variants[..3],
            &h200,
            Some(&me),
            None,
            &n(1 << 20),
            None,
        )
        .unwrap();
        assert_eq!((c.step, c.variant), (Step::NearestDevice, Some(0)), "{c}");
        assert!(c.to_string().contains("most similar known device"), "{c}");
        // only the CPU's variant: the reference
        let c = choose(
            &spec,
            &variants[2..3],
            &h200,
            Some(&me),
            None,
            &n(1 << 20),
            None,
        )
        .unwrap();
        assert_eq!(c.step, Step::Reference, "{c}");
        // this device's description unknown: no nearest-device step
        let c = choose(&spec, &variants[..3], &h200, None, None, &n(1 << 20), None).unwrap();
        assert_eq!(c.step, Step::Reference, "{c}");
        assert!(c.to_string().contains("description is unknown"), "{c}");
    }

    #[test]
    fn foreign_variants_must_fit_the_work_group_limit() {
        let spec = saxpy();
        let h100 = DeviceKey::from_reported(0x10de, "NVIDIA H100 PCIe", "570", "OpenCL 3.0 CUDA");
        let variants = vec![described(
            variant(&h100, "large", 1 << 20, 128, 4, 900),
            gpu("H100", 114, 1024),
        )];
        let small_wg = gpu("NVIDIA H200", 132, 64);
        let c = choose(
            &spec,
            &variants,
            &key("580"),
            Some(&small_wg),
            None,
            &n(1 << 20),
            None,
        )
        .unwrap();
        assert_eq!(c.step, Step::Reference, "{c}");
        assert!(c.to_string().contains("exceeds this device's 64"), "{c}");
        assert!(
            Step::SameFamily.is_foreign()
                && Step::NearestDevice.is_foreign()
                && !Step::ExactDevice.is_foreign()
        );
    }
}
