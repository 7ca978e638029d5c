//! The sizes a finalist is proven at before it may win. A kernel that is right only at the
//! tuned sizes (a hard-coded length, a tile that silently assumes one shape, a work-group that
//! relies on another's local memory, which breaks once more work-groups run at once) is caught
//! here, and dispatch later uses the winner only within the range of sizes it was proven at.
//!
//! Three kinds of size sets, each satisfying the constraints for the candidate and the
//! reference and fitting the device:
//! - [`probe_sizes`] and [`axis_probe_sizes`]: smaller and larger than the tuned ones (all
//!   together, then each alone), which span the box of sizes dispatch may run the winner at;
//! - [`corner_sizes`]: the corners of that box (every combination of each size's smallest and
//!   largest value), so that a variant wrong at extreme aspect ratios (rows far above columns)
//!   is caught inside the box it would run in;
//! - [`residue_sizes`]: sizes drawn across the box (seeded, and the seed drawn afresh for each
//!   proof, so nobody can predict them) such that every size takes every residue modulo
//!   [`residue_modulus`] (at least 16) of its step: a partial last vector, tile or unrolled
//!   iteration that is right for one remainder and wrong for another is met.
//!
//! The scaled probes are smaller and larger than the tuned ones, each as unaligned as the annotation's
//! constraints allow: every size is scaled by a fraction and rounded to an *odd* multiple of the
//! smallest power-of-two step at which both the candidate and the reference can launch (odd
//! numbers when nothing is required; `64 × odd` when a constraint needs multiples of 64, so never
//! a multiple of 128). Larger sizes must fit the device's memory next to the tuned workload's
//! buffers, which stay allocated while the probes run (on the H200, probes of the 6.4 GB
//! softmax at twice its size failed to allocate and rejected every finalist).

use std::collections::BTreeMap;

use kfoundry_rt::model::spec::{ArgRole, KernelSpec, Params, Sizes};
use rand::seq::SliceRandom as _;
use rand::Rng as _;
use rand_chacha::ChaCha8Rng;

use crate::evaluate::{check_launchable, Limits, FRONT_GUARD_BYTES, GUARD_ELEMS};

/// Fractions of the tuned sizes tried below them, in order.
const SMALLER: [(i64, i64); 4] = [(5, 8), (3, 8), (7, 8), (1, 2)];
/// Fractions tried above them, in order (the largest that fits comes first).
const LARGER: [(i64, i64); 4] = [(2, 1), (3, 2), (5, 4), (9, 8)];
/// Rounding steps tried, smallest first: 1, 2, 4, ..., 2^20.
const MAX_STEP_LOG2: u32 = 20;
/// Share of the device's global memory a probe's buffers may take (the reference's and the
/// candidate's copies, with their guard zones).
const MEMORY_SHARE: f64 = 0.8;

/// Up to `smaller` size sets below `sizes` and `larger` above, at which both `params` and the
/// reference satisfy the constraints, have a valid launch geometry and fit the device.
pub fn probe_sizes(
    spec: &KernelSpec,
    params: &Params,
    sizes: &Sizes,
    limits: &Limits,
    smaller: usize,
    larger: usize,
) -> Vec<Sizes> {
    let mut out: Vec<Sizes> = Vec::new();
    if sizes.is_empty() {
        return out;
    }
    let held = footprint(spec, params, sizes, limits);
    let fits = |params: &Params, probe: &Sizes| fits(spec, params, probe, held, limits);
    for (factors, max) in [(&SMALLER, smaller), (&LARGER, larger)] {
        let mut found = 0;
        for &(num, den) in factors.iter() {
            if found >= max {
                break;
            }
            for step_log2 in 0..=MAX_STEP_LOG2 {
                let step = 1i64 << step_log2;
                let Some(probe) = sizes
                    .iter()
                    .map(|(k, &v)| scaled(v, num, den, step).map(|s| (k.clone(), s)))
                    .collect::<Option<Sizes>>()
                else {
                    break;
                };
                if probe != *sizes
                    && !out.contains(&probe)
                    && fits(params, &probe)
                    && fits(&spec.reference, &probe)
                {
                    out.push(probe);
                    found += 1;
                    break;
                }
            }
        }
    }
    out
}

/// Size sets that change one size at a time: for each size (when there are two or more), one
/// set with only that size smaller and one with only it larger, the others at their tuned
/// values. Together with [`probe_sizes`] they make the proof cover every direction of the box
/// that dispatch then trusts, not only its diagonal: a kernel that confuses two sizes (indexes
/// rows by the column count) is right on square shapes only.
pub fn axis_probe_sizes(
    spec: &KernelSpec,
    params: &Params,
    sizes: &Sizes,
    limits: &Limits,
) -> Vec<Sizes> {
    let mut out: Vec<Sizes> = Vec::new();
    if sizes.len() < 2 {
        return out;
    }
    let held = footprint(spec, params, sizes, limits);
    let fits = |params: &Params, probe: &Sizes| fits(spec, params, probe, held, limits);
    for name in sizes.keys() {
        for factors in [&SMALLER, &LARGER] {
            'factor: for &(num, den) in factors.iter() {
                for step_log2 in 0..=MAX_STEP_LOG2 {
                    let step = 1i64 << step_log2;
                    let Some(v) = scaled(sizes[name], num, den, step) else {
                        break;
                    };
                    let mut probe = sizes.clone();
                    probe.insert(name.clone(), v);
                    if probe != *sizes
                        && !out.contains(&probe)
                        && fits(params, &probe)
                        && fits(&spec.reference, &probe)
                    {
                        out.push(probe);
                        break 'factor;
                    }
                }
            }
        }
    }
    out
}

/// The smallest and largest value of each size over `sets`.
pub fn size_box(sets: &[Sizes]) -> BTreeMap<String, (i64, i64)> {
    let mut b: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for set in sets {
        for (k, &v) in set {
            let r = b.entry(k.clone()).or_insert((v, v));
            r.0 = r.0.min(v);
            r.1 = r.1.max(v);
        }
    }
    b
}

/// The residues every size of a proof takes: the smallest power of two that is at least every
/// value of every parameter (a vector width, tile or unroll factor), between 16 and 64.
pub fn residue_modulus(spec: &KernelSpec) -> i64 {
    let largest = spec
        .params
        .iter()
        .flat_map(|p| p.values.iter().map(|v| v.unsigned_abs()))
        .max()
        .unwrap_or(1);
    (largest.next_power_of_two().clamp(16, 64)) as i64
}

/// Most corners tried (2^4: every corner of up to four sizes; a sample beyond).
const MAX_CORNERS: usize = 16;
/// A corner may take at most this many times the workload's buffers (else it moves toward the
/// tuned sizes until it does): with five sizes at twice their tuned value, a corner is 32
/// times the work, and a proof of sixteen such would take longer than the search.
const CORNER_COST: f64 = 4.0;

/// How far the drawn cases of a proof reach into the box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// A tune's proof: corners within [`CORNER_COST`] times the workload's buffers (the scaled
    /// probes proved the box's far end), residues on both sides of the tuned sizes.
    Tune,
    /// A claimed box (`check --verify`): every corner as it is, the largest included, and
    /// residues anywhere in it. What the box claims is what is proven, however large.
    Claimed,
}

/// The corners of `bounds` (each size at its smallest or largest value, every combination for
/// up to four sizes, else a sample of [`MAX_CORNERS`] with the largest corner always among
/// them), each moved toward `sizes` as little as the constraints (and with [`Reach::Tune`]
/// the cost) need; those equal to a set in `known` are left out.
#[allow(clippy::too_many_arguments)]
pub fn corner_sizes(
    spec: &KernelSpec,
    params: &Params,
    sizes: &Sizes,
    bounds: &BTreeMap<String, (i64, i64)>,
    limits: &Limits,
    known: &[Sizes],
    reach: Reach,
    rng: &mut ChaCha8Rng,
) -> Vec<Sizes> {
    let names: Vec<&String> = sizes
        .keys()
        .filter(|k| bounds.get(*k).is_some_and(|(lo, hi)| lo < hi))
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    let count = 1usize << names.len().min(16);
    let mut masks: Vec<usize> = (0..count).collect();
    if count > MAX_CORNERS {
        masks.shuffle(rng);
        masks.truncate(MAX_CORNERS - 1);
        masks.push(count - 1);
    }
    let held = footprint(spec, params, sizes, limits);
    let affordable = |set: &Sizes| match (reach, footprint(spec, params, set, limits), held) {
        (Reach::Tune, Some(c), Some(h)) if h > 0 => c as f64 <= CORNER_COST * h as f64,
        _ => true,
    };
    // A claimed box's far corner must fit as it is (else it cannot be verified here).
    let shrink: &[(i64, i64)] = match reach {
        Reach::Tune => &[(1, 1), (7, 8), (3, 4), (1, 2), (3, 8), (1, 4)],
        Reach::Claimed => &[(1, 1)],
    };
    let mut out: Vec<Sizes> = Vec::new();
    for mask in masks {
        'shrink: for &(num, den) in shrink {
            let mut target = sizes.clone();
            for (bit, name) in names.iter().enumerate() {
                let (lo, hi) = bounds[*name];
                let corner = if mask & (1 << bit) == 0 { lo } else { hi };
                let tuned = sizes[*name];
                // in i128: a claimed bound may be anything an i64 holds
                let v =
                    tuned as i128 + (corner as i128 - tuned as i128) * num as i128 / den as i128;
                target.insert((*name).clone(), v.clamp(1, i64::MAX as i128) as i64);
            }
            if let Some(fit) =
                fit_near(spec, params, &target, held, limits).filter(|f| affordable(f))
            {
                if !known.contains(&fit) && !out.contains(&fit) {
                    out.push(fit);
                }
                break 'shrink;
            }
        }
    }
    out
}

/// `target` itself when the candidate and the reference can run there and it fits, else the
/// nearest set whose sizes are all odd multiples of the smallest power-of-two step that works.
fn fit_near(
    spec: &KernelSpec,
    params: &Params,
    target: &Sizes,
    held: Option<u128>,
    limits: &Limits,
) -> Option<Sizes> {
    let ok = |probe: &Sizes| {
        fits(spec, params, probe, held, limits) && fits(spec, &spec.reference, probe, held, limits)
    };
    if ok(target) {
        return Some(target.clone());
    }
    for step_log2 in 0..=MAX_STEP_LOG2 {
        let step = 1i64 << step_log2;
        let probe = target
            .iter()
            .map(|(k, &v)| scaled(v, 1, 1, step).map(|s| (k.clone(), s)))
            .collect::<Option<Sizes>>()?;
        if ok(&probe) {
            return Some(probe);
        }
    }
    None
}

/// `m` size sets (`m` from [`residue_modulus`]) drawn in `bounds`, in which each size takes
/// every residue `0..m` of its step once (in an order of its own, so that residues of
/// different sizes combine differently): size `x` is `step · (m · q + r)` for a `q` drawn so
/// that the value lies, in a tune, between the range's smallest value and the tuned one for
/// half of the sets and between the tuned one and the range's largest for the other half
/// (log-uniformly: what a remainder does not depend on the magnitude; a set above costs at
/// most [`CORNER_COST`] times the workload), anywhere in a claimed box, at
/// the smallest power-of-two step at which candidate and reference can run. A residue that
/// no step makes valid keeps the size drawn without it.
#[allow(clippy::too_many_arguments)]
pub fn residue_sizes(
    spec: &KernelSpec,
    params: &Params,
    sizes: &Sizes,
    bounds: &BTreeMap<String, (i64, i64)>,
    m: i64,
    limits: &Limits,
    reach: Reach,
    rng: &mut ChaCha8Rng,
) -> Vec<Sizes> {
    let held = footprint(spec, params, sizes, limits);
    let ok = |probe: &Sizes| {
        fits(spec, params, probe, held, limits) && fits(spec, &spec.reference, probe, held, limits)
    };
    let orders: BTreeMap<&String, Vec<i64>> = sizes
        .keys()
        .map(|k| {
            let mut order: Vec<i64> = (0..m).collect();
            order.shuffle(rng);
            (k, order)
        })
        .collect();
    // Each size's step: the smallest power of two at which a value of residue 1 can run (so
    // that the residues are of the step the constraints allow, not of a finer one that only
    // some residues happen to satisfy).
    // The value of residue `residue` of `step` nearest below `target` within `lo..=hi`, or the
    // nearest above it; none when the range holds no such value.
    let value_at = |step: i64, residue: i64, target: i64, lo: i64, hi: i64| -> Option<i64> {
        let period = step.checked_mul(m)?;
        let base = (target / period)
            .checked_mul(period)?
            .checked_add(residue.checked_mul(step)?)?;
        [base, base.checked_sub(period)?, base.checked_add(period)?]
            .into_iter()
            .filter(|v| (lo.max(1)..=hi).contains(v))
            .min_by_key(|v| (v - target).abs())
    };
    let steps: BTreeMap<&String, i64> = sizes
        .keys()
        .map(|name| {
            let (lo, hi) = bounds
                .get(name)
                .copied()
                .unwrap_or((sizes[name], sizes[name]));
            // powers of two first, then the small steps a constraint like `n % 3 == 0` needs
            let step = (0..=MAX_STEP_LOG2)
                .map(|k| 1i64 << k)
                .chain((3..=64).filter(|s: &i64| s.count_ones() > 1))
                .find(|&step| {
                    value_at(
                        step,
                        1,
                        sizes[name],
                        lo,
                        hi.max(sizes[name].saturating_mul(2)),
                    )
                    .is_some_and(|v| {
                        let mut probe = sizes.clone();
                        probe.insert(name.clone(), v);
                        ok(&probe)
                    })
                })
                .unwrap_or(1);
            (name, step)
        })
        .collect();
    let mut out = Vec::new();
    // the residue each size takes in each set
    let by_set: Vec<BTreeMap<&String, i64>> = (0..m as usize)
        .map(|i| {
            orders
                .iter()
                .map(|(name, order)| (*name, order[i]))
                .collect()
        })
        .collect();
    // The set of `residues`, each size drawn below the tuned one or (`above`) above it.
    let mut set_of = |residues: &BTreeMap<&String, i64>, above: bool| -> Sizes {
        let mut set = sizes.clone();
        for name in sizes.keys() {
            let (lo, hi) = bounds
                .get(name)
                .copied()
                .unwrap_or((sizes[name], sizes[name]));
            let residue = residues[name];
            let tuned = sizes[name].clamp(lo, hi.max(lo));
            let (bottom, top) = match reach {
                Reach::Tune if above => (tuned, hi.max(tuned)),
                Reach::Tune => (lo, tuned),
                Reach::Claimed => (lo, hi),
            };
            let target = log_uniform(bottom.max(1), top.max(1), rng);
            // the size's step, or coarser ones should this residue need them; a range too
            // narrow for every residue is covered value by value instead
            let mut step = steps[name];
            let mut found = false;
            while step <= 1 << MAX_STEP_LOG2 {
                let Some(v) = value_at(step, residue, target, lo, hi) else {
                    break;
                };
                let mut probe = set.clone();
                probe.insert(name.clone(), v);
                if ok(&probe) {
                    set = probe;
                    found = true;
                    break;
                }
                step *= 2;
            }
            let span = hi.saturating_sub(lo.max(1)).saturating_add(1);
            if !found && span > 0 && span < steps[name].saturating_mul(m) {
                for k in 0..span {
                    let mut probe = set.clone();
                    probe.insert(name.clone(), lo.max(1) + (residue + k) % span);
                    if ok(&probe) {
                        set = probe;
                        break;
                    }
                }
            }
        }
        set
    };
    // A set above the tuned sizes costs at most what a corner may.
    let affordable = |set: &Sizes| match (footprint(spec, params, set, limits), held) {
        (Some(c), Some(h)) if h > 0 => c as f64 <= CORNER_COST * h as f64,
        _ => true,
    };
    for (index, residues) in by_set.iter().enumerate() {
        // A tune's sets alternate below and above the tuned sizes (a later pass of a
        // persistent kernel, a second tile, exists only above them); one above that would
        // cost too much is drawn below instead.
        let mut set = set_of(residues, reach == Reach::Tune && index % 2 == 1);
        if !affordable(&set) {
            set = set_of(residues, false);
        }
        if ok(&set) && !out.contains(&set) {
            out.push(set);
        }
    }
    out
}

/// Whether both `params` and the reference can run at `sizes` (constraints, launch geometry)
/// and their buffers fit the device next to those of the workload at `tuned` and (with
/// [`Reach::Tune`]) take at most [`CORNER_COST`] times its buffers: where a proof may try a
/// size set it did not plan.
pub fn runnable(
    spec: &KernelSpec,
    params: &Params,
    tuned: &Sizes,
    sizes: &Sizes,
    limits: &Limits,
    reach: Reach,
) -> bool {
    let held = footprint(spec, params, tuned, limits);
    let affordable = match (reach, footprint(spec, params, sizes, limits), held) {
        (Reach::Tune, Some(c), Some(h)) if h > 0 => c as f64 <= CORNER_COST * h as f64,
        _ => true,
    };
    affordable
        && fits(spec, params, sizes, held, limits)
        && fits(spec, &spec.reference, sizes, held, limits)
}

/// A value drawn log-uniformly in `lo..=hi`.
pub fn log_uniform(lo: i64, hi: i64, rng: &mut ChaCha8Rng) -> i64 {
    if hi <= lo {
        return lo;
    }
    let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
    (rng.gen_range(a..=b).exp().round() as i64).clamp(lo, hi)
}

/// `v · num / den` rounded to the nearest odd multiple of `step` (at least `step`; `v` itself
/// when `v` is at most `step` and the fraction is below 1). `None` on overflow.
fn scaled(v: i64, num: i64, den: i64, step: i64) -> Option<i64> {
    if v <= step && num < den {
        return Some(v);
    }
    let target = v.checked_mul(num)? / den;
    let k = target.checked_add(step / 2)? / step;
    let odd = if k % 2 == 1 {
        k
    } else if k.checked_mul(step)? > target {
        k - 1
    } else {
        k.checked_add(1)?
    };
    odd.max(1).checked_mul(step)
}

/// Whether `params` can run at `sizes` on this device, with every buffer (and its guard
/// zone) within the allocation limit and all of them, twice over (the reference's and the
/// candidate's copies), next to the tuned workload's (`held`, its [`footprint`], also twice
/// over) within the memory share.
fn fits(
    spec: &KernelSpec,
    params: &Params,
    sizes: &Sizes,
    held: Option<u128>,
    limits: &Limits,
) -> bool {
    if check_launchable(spec, limits, params, sizes).is_err() {
        return false;
    }
    let (Some(total), Some(held)) = (footprint(spec, params, sizes, limits), held) else {
        return false;
    };
    limits.global_mem_bytes == 0
        || (2 * (total + held)) as f64 <= MEMORY_SHARE * limits.global_mem_bytes as f64
}

/// Bytes of the caller's buffers and of `params`' scratch buffers at `sizes`, guard zones
/// included; `None` when a length cannot be computed or a buffer is over the allocation limit.
fn footprint(spec: &KernelSpec, params: &Params, sizes: &Sizes, limits: &Limits) -> Option<u128> {
    let mut total: u128 = 0;
    for (arg, role) in spec.args_with_roles() {
        if role != ArgRole::CallerBuffer && role != ArgRole::Scratch {
            continue;
        }
        let kfoundry_rt::model::signature::KernelArg::Buffer { name, elem, .. } = arg else {
            continue;
        };
        let len = spec.buffer_len(name, params, sizes).ok()?;
        let bytes =
            (len as u128 + GUARD_ELEMS as u128) * elem.size() as u128 + FRONT_GUARD_BYTES as u128;
        if limits.max_alloc_bytes > 0 && bytes > limits.max_alloc_bytes as u128 {
            return None;
        }
        total += bytes;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> KernelSpec {
        let src = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)]; }";
        crate::test_spec::spec(&format!(
            "code = {src:?}, params(WG = [16, 64], V = [1, 4]), reference(WG = 16, V = 1), {extra} global = n / V, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"
        ))
    }

    fn n(s: &Sizes) -> i64 {
        s["n"]
    }

    fn roomy() -> Limits {
        crate::test_spec::roomy_limits()
    }

    #[test]
    fn probes_are_smaller_and_larger_unaligned_and_satisfy_the_constraints() {
        let spec = spec("require(n % (WG * V) == 0),");
        let sizes: Sizes = [("n".to_string(), 4096)].into();
        let params: Params = [("WG".to_string(), 64), ("V".to_string(), 4)].into();
        let probes = probe_sizes(&spec, &params, &sizes, &roomy(), 2, 2);
        assert_eq!(probes.len(), 4, "{probes:?}");
        for p in &probes {
            // multiples of 256 (the constraint), never of 512
            assert!(n(p) % 256 == 0 && n(p) % 512 != 0, "{p:?}");
        }
        assert!(n(&probes[0]) < 4096 && n(&probes[1]) < 4096, "{probes:?}");
        assert!(n(&probes[2]) > 4096 && n(&probes[3]) > 4096, "{probes:?}");
        // 5/8 of 4096 = 2560 = 10 × 256: the next odd multiple, 11 × 256
        assert_eq!(n(&probes[0]), 2816);
        // twice 4096 = 32 × 256: 33 × 256
        assert_eq!(n(&probes[2]), 8448);
    }

    #[test]
    fn unconstrained_sizes_get_odd_probes() {
        let spec = spec("");
        let sizes: Sizes = [("n".to_string(), 4096)].into();
        let params: Params = [("WG".to_string(), 16), ("V".to_string(), 1)].into();
        // No constraint, but the launch geometry still needs n / V to be a multiple of WG
        // (OpenCL 1.2 uniform work-groups): geometry() enforces what the device would.
        let probes = probe_sizes(&spec, &params, &sizes, &roomy(), 2, 2);
        assert!(!probes.is_empty());
        assert!(
            probes.iter().all(|p| n(p) != 4096 && n(p) % 32 == 16),
            "{probes:?}"
        );
    }

    #[test]
    fn larger_probes_must_fit_the_device() {
        let spec = spec("");
        let sizes: Sizes = [("n".to_string(), 1 << 20)].into();
        let params = spec.reference.clone();
        // 2 buffers of 4 MiB (+ guards), twice over, next to the workload's 16 MiB: 2× (32 MiB
        // more) does not fit 80% of 56 MiB, 3/2 (24 MiB more) does.
        let tight = Limits {
            global_mem_bytes: 56 << 20,
            ..roomy()
        };
        let probes = probe_sizes(&spec, &params, &sizes, &tight, 0, 1);
        assert_eq!(probes.len(), 1);
        assert!(
            n(&probes[0]) > 1 << 20 && n(&probes[0]) < 2 << 20,
            "{probes:?}"
        );
        // Without the workload's buffers 3/2 would fit 80% of 40 MiB; with them nothing larger does.
        let held = Limits {
            global_mem_bytes: 40 << 20,
            ..roomy()
        };
        assert!(probe_sizes(&spec, &params, &sizes, &held, 0, 2).is_empty());
        let none = Limits {
            global_mem_bytes: 16 << 20,
            ..roomy()
        };
        assert!(probe_sizes(&spec, &params, &sizes, &none, 0, 2).is_empty());
    }

    #[test]
    fn no_sizes_no_probes() {
        let spec = spec("");
        assert!(probe_sizes(&spec, &spec.reference, &Sizes::new(), &roomy(), 2, 2).is_empty());
        assert_eq!(scaled(3, 1, 2, 4), Some(3));
        assert_eq!(scaled(100, 5, 8, 4), Some(60));
        assert_eq!(scaled(100, 5, 8, 1), Some(63));
        assert_eq!(scaled(i64::MAX, 2, 1, 1), None);
        assert_eq!(
            scaled(i64::MAX / 2, 2, 1, 1 << 20),
            None,
            "no overflow in the rounding"
        );
    }
}

#[cfg(test)]
mod residue_tests {
    use super::*;
    use rand::SeedableRng;

    use crate::test_spec::spec;

    fn limits() -> Limits {
        Limits {
            max_work_group_size: 1024,
            max_alloc_bytes: 1 << 30,
            global_mem_bytes: 4 << 30,
            ..Limits::default()
        }
    }

    /// A power-of-two workload (n = 65536): every residue modulo 16 is met, inside the box.
    #[test]
    fn every_residue_of_every_size_is_met() {
        let s = spec(
            r#"code = "__kernel void k(const int n, __global float* y) {}", params(VEC = [1, 2, 4]), reference(VEC = 1),
               global = ceil_div(n, VEC), buffers(y = n), check(y), workloads(w(n = 65536))"#,
        );
        assert_eq!(residue_modulus(&s), 16);
        let sizes: Sizes = [("n".to_string(), 65536)].into();
        let bounds: BTreeMap<String, (i64, i64)> = [("n".to_string(), (24577, 131073))].into();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let sets = residue_sizes(
            &s,
            &[("VEC".to_string(), 4)].into(),
            &sizes,
            &bounds,
            16,
            &limits(),
            Reach::Tune,
            &mut rng,
        );
        assert_eq!(sets.len(), 16);
        let mut residues: Vec<i64> = sets.iter().map(|p| p["n"] % 16).collect();
        residues.sort();
        assert_eq!(residues, (0..16).collect::<Vec<_>>());
        assert!(
            sets.iter().all(|p| (24577..=131073).contains(&p["n"])),
            "{sets:?}"
        );
        // a range narrower than the modulus: every value of it, never one outside
        let tiny: BTreeMap<String, (i64, i64)> = [("n".to_string(), (1, 3))].into();
        let one: Sizes = [("n".to_string(), 1)].into();
        let sets = residue_sizes(
            &s,
            &s.reference,
            &one,
            &tiny,
            16,
            &limits(),
            Reach::Tune,
            &mut ChaCha8Rng::seed_from_u64(1),
        );
        let values: std::collections::BTreeSet<i64> = sets.iter().map(|p| p["n"]).collect();
        assert_eq!(values, [1, 2, 3].into(), "{sets:?}");
        // another seed, other sizes
        let again = residue_sizes(
            &s,
            &[("VEC".to_string(), 4)].into(),
            &sizes,
            &bounds,
            16,
            &limits(),
            Reach::Tune,
            &mut ChaCha8Rng::seed_from_u64(2),
        );
        assert_ne!(sets, again);
    }

    /// Constraints that need multiples of 64: the residues are those of n / 64.
    #[test]
    fn residues_are_of_the_step_the_constraints_allow() {
        let s = spec(
            r#"code = "__kernel void k(const int n, __global float* y) {}", params(WG = [64]), reference(WG = 64),
               require(n % 64 == 0), global = n, local = WG, buffers(y = n), check(y), workloads(w(n = 65536))"#,
        );
        let sizes: Sizes = [("n".to_string(), 65536)].into();
        let bounds: BTreeMap<String, (i64, i64)> = [("n".to_string(), (24576, 131072))].into();
        let m = residue_modulus(&s);
        assert_eq!(m, 64);
        let sets = residue_sizes(
            &s,
            &s.reference,
            &sizes,
            &bounds,
            m,
            &limits(),
            Reach::Tune,
            &mut ChaCha8Rng::seed_from_u64(3),
        );
        let mut residues: Vec<i64> = sets.iter().map(|p| (p["n"] / 64) % 64).collect();
        residues.sort();
        residues.dedup();
        assert_eq!(residues.len(), 64, "{sets:?}");
        assert!(sets.iter().all(|p| p["n"] % 64 == 0));
    }

    /// Two sizes: the corners of their box, where one is far larger than the other.
    #[test]
    fn corners_of_the_box() {
        let s = spec(
            r#"code = "__kernel void k(const int rows, const int cols, __global float* y) { y[0] = P; }", params(P = [0, 1]), reference(P = 0),
               global = (cols, rows), buffers(y = rows * cols), check(y), workloads(w(rows = 256, cols = 256))"#,
        );
        let sizes: Sizes = [("rows".to_string(), 256), ("cols".to_string(), 256)].into();
        let bounds: BTreeMap<String, (i64, i64)> = [
            ("rows".to_string(), (97, 513)),
            ("cols".to_string(), (97, 513)),
        ]
        .into();
        let corners = corner_sizes(
            &s,
            &s.reference,
            &sizes,
            &bounds,
            &limits(),
            &[],
            Reach::Tune,
            &mut ChaCha8Rng::seed_from_u64(0),
        );
        assert_eq!(corners.len(), 4, "{corners:?}");
        assert!(
            corners.iter().any(|c| c["rows"] == 513 && c["cols"] == 97),
            "{corners:?}"
        );
        assert!(
            corners.iter().any(|c| c["rows"] == 97 && c["cols"] == 513),
            "{corners:?}"
        );
        // a constraint that forbids the corner: moved toward the tuned sizes until it holds
        let tall = spec(
            r#"code = "__kernel void k(const int rows, const int cols, __global float* y) { y[0] = P; }", params(P = [0, 1]), reference(P = 0),
               require(rows <= 3 * cols), global = (cols, rows), buffers(y = rows * cols), check(y), workloads(w(rows = 256, cols = 256))"#,
        );
        let corners = corner_sizes(
            &tall,
            &tall.reference,
            &sizes,
            &bounds,
            &limits(),
            &[],
            Reach::Tune,
            &mut ChaCha8Rng::seed_from_u64(0),
        );
        assert!(
            corners.iter().all(|c| c["rows"] <= 3 * c["cols"]),
            "{corners:?}"
        );
        assert_eq!(corners.len(), 4, "{corners:?}");
    }
}

#[cfg(test)]
mod axis_tests {
    use super::*;

    #[test]
    fn each_size_is_also_probed_alone() {
        let spec = crate::test_spec::spec(
            r#"code = "__kernel void k(const int rows, const int cols, __global float* y) {}",
            params(WG = [16, 32]), reference(WG = 16), require(cols % WG == 0),
            global = (cols, rows), local = (WG, 1), buffers(y = rows * cols), check(y), workloads(w(rows = 256, cols = 256))"#,
        );
        let limits = Limits {
            max_work_group_size: 1024,
            max_alloc_bytes: 1 << 30,
            global_mem_bytes: 4 << 30,
            ..Limits::default()
        };
        let sizes: Sizes = [("rows".to_string(), 256), ("cols".to_string(), 256)].into();
        let probes = axis_probe_sizes(&spec, &spec.reference, &sizes, &limits);
        assert_eq!(probes.len(), 4, "{probes:?}");
        for p in &probes {
            assert_ne!(p["rows"], p["cols"], "shapes that are not square: {p:?}");
            assert!(
                p["rows"] == 256 || p["cols"] == 256,
                "one size at a time: {p:?}"
            );
        }
        // one size: nothing to vary alone
        let single: Sizes = [("n".to_string(), 64)].into();
        assert!(axis_probe_sizes(&spec, &spec.reference, &single, &limits).is_empty());
    }
}
