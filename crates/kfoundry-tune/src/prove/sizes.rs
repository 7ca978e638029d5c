//! The sizes a finalist is proven at before it may win. A kernel that is right only at the
//! tuned sizes (a hard-coded length, a tile that silently assumes one shape, a work-group that
//! relies on another's local memory, which breaks once more work-groups run at once) is caught
//! here, and dispatch later uses the winner only within the box of sizes it was proven at.
//!
//! The box: the one a lockfile entry or a portfolio's bucket claims, or a tune's
//! `default_region` (each size from the smallest value the reference accepts up to
//! `REGION_REACH` times its largest workload value, within what the device holds): the same
//! for every tune of the same annotation on the same device. In it, size sets that each satisfy
//! the constraints for the candidate and the reference and fit the device:
//! - `corner_sizes`: the corners of the box (every combination of each size's smallest and
//!   largest value), so that a variant wrong at extreme aspect ratios (rows far above columns)
//!   or at the smallest sizes is caught inside the box it would run in;
//! - `residue_sizes`: sizes drawn across the box (seeded, and the seed drawn afresh for each
//!   proof, so nobody can predict them) such that every size takes every residue modulo
//!   `residue_modulus` (at least 16) of its step: a partial last vector, tile or unrolled
//!   iteration that is right for one remainder and wrong for another is met.
//!
//! Sets above the tuned sizes must fit the device's memory next to the tuned workload's
//! buffers, which stay allocated while the proof runs (on the H200, probes of the 6.4 GB
//! softmax at twice its size failed to allocate and rejected every finalist).

use std::collections::BTreeMap;

use kfoundry_rt::model::spec::{ArgRole, KernelSpec, Params, Sizes};
use rand::seq::SliceRandom as _;
use rand::Rng as _;
use rand_chacha::ChaCha8Rng;

use kfoundry_bench::{check_launchable, Limits, FRONT_GUARD_BYTES, GUARD_ELEMS};

/// Rounding steps tried, smallest first: 1, 2, 4, ..., 2^20.
const MAX_STEP_LOG2: u32 = 20;
/// Share of the device's global memory a probe's buffers may take (the reference's and the
/// candidate's copies, with their guard zones).
const MEMORY_SHARE: f64 = 0.8;

/// How far the default region reaches above a size's largest workload value (a multiple).
pub(crate) const REGION_REACH: i64 = 2;

/// The region a tune proves its winner over, and records, when the annotation claims none:
/// each size from the smallest value the reference accepts (the other sizes at the tuned
/// ones; 1 when nothing is required) up to [`REGION_REACH`] times the largest value the
/// kernel's workloads give it (at least the tuned value). Where the region's largest corner
/// (every size at its top) would not fit the device next to the tuned workload, or would take
/// more than [`CORNER_COST`] times its buffers, every top is lowered toward the tuned value
/// until it does: what the device holds decides, and the same annotation on the same device
/// always gets the same region (nothing here is drawn).
pub(crate) fn default_region(
    spec: &KernelSpec,
    params: &Params,
    sizes: &Sizes,
    limits: &Limits,
) -> BTreeMap<String, (i64, i64)> {
    let mut largest = sizes.clone();
    for w in &spec.workloads {
        for (name, &v) in &w.sizes {
            if let Some(top) = largest.get_mut(name) {
                *top = (*top).max(v);
            }
        }
    }
    let mut region = BTreeMap::new();
    for (name, &tuned) in sizes {
        let at = |v: i64| {
            let mut set = sizes.clone();
            set.insert(name.clone(), v);
            set
        };
        let accepted = |v: i64| {
            let set = at(v);
            check_launchable(spec, limits, &spec.reference, &set).is_ok()
                && footprint(spec, &spec.reference, &set, limits).is_some()
        };
        // every value up to 256, then halvings of the tuned value: the smallest accepted
        let lo = (1..=tuned.min(256))
            .chain((0..63).rev().map(|k| tuned >> k).filter(|&v| v > 256))
            .find(|&v| accepted(v))
            .unwrap_or(tuned)
            .min(tuned);
        let hi = largest[name].saturating_mul(REGION_REACH).max(tuned);
        region.insert(name.clone(), (lo, hi));
    }
    let held = footprint(spec, params, sizes, limits);
    let affordable = |region: &BTreeMap<String, (i64, i64)>| {
        let top: Sizes = region.iter().map(|(k, &(_, hi))| (k.clone(), hi)).collect();
        [params, &spec.reference].iter().all(|p| {
            let (Some(total), Some(held)) = (footprint(spec, p, &top, limits), held) else {
                return false;
            };
            total as f64 <= CORNER_COST * held as f64
                && (limits.global_mem_bytes == 0
                    || (2 * (total + held)) as f64 <= MEMORY_SHARE * limits.global_mem_bytes as f64)
        })
    };
    for _ in 0..32 {
        if affordable(&region) {
            return region;
        }
        for (name, (_, hi)) in region.iter_mut() {
            let tuned = sizes[name];
            *hi = tuned + (*hi - tuned) * 3 / 4;
        }
    }
    for (name, (_, hi)) in region.iter_mut() {
        *hi = sizes[name];
    }
    region
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
pub(crate) fn residue_modulus(spec: &KernelSpec) -> i64 {
    let largest = spec
        .params
        .iter()
        .flat_map(|p| p.values.iter().map(|v| v.unsigned_abs()))
        .max()
        .unwrap_or(1);
    (largest.next_power_of_two().clamp(16, 64)) as i64
}

/// A case a tune's proof draws above the workload (a residue set, a case of the
/// counterexample search) does at most this many times the workload's [`work`]: the
/// reference's run is most of a case's cost when the reference is slow (a KernelBench matrix
/// product's naive reference, 150 ms at its workload on an H100), and the region's far end is
/// proven by its corners.
const WORK_COST: f64 = 2.0;

/// One residue set in this many lies above the tuned sizes in a tune's proof (the others
/// below, where they cost little: a remainder does not depend on the magnitude).
const ABOVE_EVERY: usize = 4;

/// Most corners tried (2^4: every corner of up to four sizes; a sample beyond).
const MAX_CORNERS: usize = 16;
/// A corner may take at most this many times the workload's buffers (else it moves toward the
/// tuned sizes until it does): with five sizes at twice their tuned value, a corner is 32
/// times the work, and a proof of sixteen such would take longer than the search.
const CORNER_COST: f64 = 4.0;

/// How far the drawn cases of a proof reach into the box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// A tune's proof: corners within `CORNER_COST` times the workload's buffers (the scaled
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
pub(crate) fn corner_sizes(
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

/// `fit_near` for a set a tune may try beside its workload at `tuned`: `target`, or the
/// nearest set where `params` and the reference run and fit the device.
pub fn near(
    spec: &KernelSpec,
    params: &Params,
    tuned: &Sizes,
    target: &Sizes,
    limits: &Limits,
) -> Option<Sizes> {
    fit_near(
        spec,
        params,
        target,
        footprint(spec, params, tuned, limits),
        limits,
    )
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
/// most sets and above the tuned one for one set in [`ABOVE_EVERY`] (log-uniformly: what a
/// remainder does not depend on the magnitude; a set above costs at most [`CORNER_COST`] times
/// the workload's buffers and [`WORK_COST`] times its work: [`targets`]), anywhere in a
/// claimed box, at
/// the smallest power-of-two step at which candidate and reference can run. A residue that
/// no step makes valid keeps the size drawn without it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn residue_sizes(
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
            let (lo, hi) = range_of(bounds, sizes, name);
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
        let targets = targets(sizes, bounds, reach, above, rng);
        for name in sizes.keys() {
            let (lo, hi) = range_of(bounds, sizes, name);
            let residue = residues[name];
            let target = targets[name];
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
    for (index, residues) in by_set.iter().enumerate() {
        // One of a tune's sets in `ABOVE_EVERY` lies above the tuned sizes (a later pass of a
        // persistent kernel, a second tile, exists only above them), the others below; one
        // above that would cost too much is drawn below instead.
        let above = reach == Reach::Tune && index % ABOVE_EVERY == 1;
        let mut set = set_of(residues, above);
        if !affordable(spec, params, sizes, &set, limits) {
            set = set_of(residues, false);
        }
        if ok(&set) && !out.contains(&set) {
            out.push(set);
        }
    }
    out
}

/// Where each size of a residue set is drawn before it is moved to its residue: in a tune,
/// below the tuned value (from the range's smallest), or (`above`) above it, with the set's
/// work at most three quarters of [`WORK_COST`] times the workload's (each size's excess drawn
/// log-uniformly, then all of them shrunk by one factor where their product is over that);
/// anywhere in a claimed box.
fn targets(
    sizes: &Sizes,
    bounds: &BTreeMap<String, (i64, i64)>,
    reach: Reach,
    above: bool,
    rng: &mut ChaCha8Rng,
) -> BTreeMap<String, i64> {
    let range = |name: &String| {
        let (lo, hi) = range_of(bounds, sizes, name);
        let tuned = sizes[name].clamp(lo, hi.max(lo));
        (lo.max(1), hi.max(1), tuned.max(1))
    };
    if reach == Reach::Claimed || !above {
        return sizes
            .keys()
            .map(|name| {
                let (lo, hi, tuned) = range(name);
                let (bottom, top) = if reach == Reach::Claimed {
                    (lo, hi)
                } else {
                    (lo, tuned)
                };
                (name.clone(), log_uniform(bottom, top, rng))
            })
            .collect();
    }
    // the natural logarithm of each size's excess over its tuned value
    let excess: BTreeMap<&String, f64> = sizes
        .keys()
        .map(|name| {
            let (_, hi, tuned) = range(name);
            let top = (hi.max(tuned) as f64 / tuned as f64).ln();
            (name, rng.gen_range(0.0..=top))
        })
        .collect();
    // three quarters of the bound, so that moving each size to its residue keeps the set
    // within it
    let budget = (0.75 * WORK_COST).ln();
    let total: f64 = excess.values().sum();
    let shrink = if total > budget { budget / total } else { 1.0 };
    excess
        .into_iter()
        .map(|(name, e)| {
            let (_, hi, tuned) = range(name);
            let v = (tuned as f64 * (e * shrink).exp()).round() as i64;
            (name.clone(), v.clamp(tuned, hi.max(tuned)))
        })
        .collect()
}

/// Size `name`'s smallest and largest value in `bounds`, or its value in `sizes` alone.
fn range_of(bounds: &BTreeMap<String, (i64, i64)>, sizes: &Sizes, name: &str) -> (i64, i64) {
    bounds
        .get(name)
        .copied()
        .unwrap_or((sizes[name], sizes[name]))
}

/// A size set's work, as the reference's cost is reckoned here: the product of its sizes (a
/// reference loops over every one of them: a matrix product's m·n·k, a convolution's batch,
/// channels and pixels).
fn work(sizes: &Sizes) -> f64 {
    sizes.values().map(|&v| v.max(1) as f64).product()
}

/// Whether `sizes` costs what a tune's proof may spend on a set it draws (a residue set, a case
/// of the counterexample search): at most `CORNER_COST` times the buffers of the workload at
/// `tuned` and [`WORK_COST`] times its [`work`].
fn affordable(
    spec: &KernelSpec,
    params: &Params,
    tuned: &Sizes,
    sizes: &Sizes,
    limits: &Limits,
) -> bool {
    work(sizes) <= WORK_COST * work(tuned)
        && match (
            footprint(spec, params, sizes, limits),
            footprint(spec, params, tuned, limits),
        ) {
            (Some(c), Some(h)) if h > 0 => c as f64 <= CORNER_COST * h as f64,
            _ => true,
        }
}

/// Whether both `params` and the reference can run at `sizes` (constraints, launch geometry)
/// and their buffers fit the device next to those of the workload at `tuned` and (with
/// [`Reach::Tune`]) take at most `CORNER_COST` times its buffers and `WORK_COST` (2) times its
/// work: where a proof may try a size set it did not plan (the region's far corner, which
/// costs more, is a planned case).
pub fn runnable(
    spec: &KernelSpec,
    params: &Params,
    tuned: &Sizes,
    sizes: &Sizes,
    limits: &Limits,
    reach: Reach,
) -> bool {
    let held = footprint(spec, params, tuned, limits);
    (reach == Reach::Claimed || affordable(spec, params, tuned, sizes, limits))
        && fits(spec, params, sizes, held, limits)
        && fits(spec, &spec.reference, sizes, held, limits)
}

/// The most bytes of buffers a proof case with values drawn on the host
/// ([`Values::host_only`](kfoundry_bench::case::Values::host_only): far from the declared ones,
/// constant, sorted) may take, guard zones included: such a draw, the reference's two extra
/// runs on inputs moved by one unit and the comparisons are made on the host.
const HOST_DRAW_BYTES: u128 = 64 << 20;

/// Whether a case at `sizes` may have its values drawn on the host ([`HOST_DRAW_BYTES`]).
pub(crate) fn host_drawable(
    spec: &KernelSpec,
    params: &Params,
    sizes: &Sizes,
    limits: &Limits,
) -> bool {
    footprint(spec, params, sizes, limits).is_some_and(|b| b <= HOST_DRAW_BYTES)
}

/// A value drawn log-uniformly in `lo..=hi`.
pub(crate) fn log_uniform(lo: i64, hi: i64, rng: &mut ChaCha8Rng) -> i64 {
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

    fn roomy() -> Limits {
        crate::test_spec::roomy_limits()
    }

    /// Without constraints the region runs from 1 to twice the largest workload value, and the
    /// same inputs always give the same region.
    #[test]
    fn the_default_region_reaches_from_one_to_twice_the_largest_workload() {
        let mut spec = spec("");
        let sizes: Sizes = [("n".to_string(), 4096)].into();
        // local = WG (16): n / V must be a multiple of 16 for the reference
        let region = default_region(&spec, &spec.reference, &sizes, &roomy());
        assert_eq!(region["n"], (16, 8192));
        // another workload, larger: its value sets the top of every workload's region
        let mut larger = spec.workloads[0].clone();
        larger.sizes.insert("n".into(), 10_000);
        spec.workloads.push(larger);
        let region = default_region(&spec, &spec.reference, &sizes, &roomy());
        assert_eq!(region["n"], (16, 20_000));
        assert_eq!(
            region,
            default_region(&spec, &spec.reference, &sizes, &roomy())
        );
    }

    /// The bottom is the smallest value the reference accepts: a constraint on the sizes moves
    /// it up to the first multiple it allows.
    #[test]
    fn the_default_region_starts_where_the_reference_can_run() {
        let spec = spec("require(n % 256 == 0),");
        let sizes: Sizes = [("n".to_string(), 4096)].into();
        let region = default_region(&spec, &spec.reference, &sizes, &roomy());
        assert_eq!(region["n"].0, 256);
    }

    /// Where the region's top would not fit the device next to the workload (or would cost more
    /// than [`CORNER_COST`] times its buffers), it is lowered toward the tuned value.
    #[test]
    fn the_default_regions_top_fits_the_device() {
        let spec = spec("");
        let sizes: Sizes = [("n".to_string(), 1 << 20)].into();
        // 2 buffers of 4 MiB (+ guards), twice over, next to the workload's: 2x does not fit
        // 80% of 48 MiB
        let tight = Limits {
            global_mem_bytes: 48 << 20,
            ..roomy()
        };
        let (lo, hi) = default_region(&spec, &spec.reference, &sizes, &tight)["n"];
        assert_eq!(lo, 16);
        assert!(hi > 1 << 20 && hi < 2 << 20, "{hi}");
        let top: Sizes = [("n".to_string(), hi)].into();
        let held = footprint(&spec, &spec.reference, &sizes, &tight);
        assert!(fits(&spec, &spec.reference, &top, held, &tight));
        // nothing above the workload fits: the region ends at the tuned value
        let none = Limits {
            global_mem_bytes: 18 << 20,
            ..roomy()
        };
        assert_eq!(
            default_region(&spec, &spec.reference, &sizes, &none)["n"],
            (16, 1 << 20)
        );
    }

    #[test]
    fn scaled_values_round_to_odd_multiples_without_overflow() {
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

    /// A matrix product's residue sets: some above the tuned sizes in every size, none of
    /// them doing more than `WORK_COST` times the workload's work (its reference's runs are
    /// most of a proof's cost); the others below. A claimed box's sets go anywhere in it.
    #[test]
    fn sets_above_the_workload_are_bounded_in_work() {
        let s = spec(
            r#"code = "__kernel void k(const int m, const int n, const int k, __global float* c) { c[0] = T; }", params(T = [1, 4]), reference(T = 1),
               global = (n, m), buffers(c = m * n), check(c), workloads(w(m = 1024, n = 1024, k = 1024))"#,
        );
        let sizes: Sizes = [("m", 1024), ("n", 1024), ("k", 1024)]
            .map(|(k, v)| (k.to_string(), v))
            .into();
        let bounds: BTreeMap<String, (i64, i64)> =
            sizes.keys().map(|k| (k.clone(), (1, 2048))).collect();
        let workload = work(&sizes);
        for seed in 0..8 {
            let sets = residue_sizes(
                &s,
                &s.reference,
                &sizes,
                &bounds,
                16,
                &limits(),
                Reach::Tune,
                &mut ChaCha8Rng::seed_from_u64(seed),
            );
            let above: Vec<&Sizes> = sets
                .iter()
                .filter(|set| set.iter().all(|(k, v)| *v >= sizes[k]))
                .collect();
            assert!(above.len() >= 3, "seed {seed}: {sets:?}");
            assert!(
                sets.iter().all(|set| work(set) <= WORK_COST * workload),
                "seed {seed}: {sets:?}"
            );
            assert!(
                above
                    .iter()
                    .any(|set| set.iter().any(|(k, v)| *v > sizes[k])),
                "seed {seed}: {above:?}"
            );
        }
        let claimed = residue_sizes(
            &s,
            &s.reference,
            &sizes,
            &bounds,
            16,
            &limits(),
            Reach::Claimed,
            &mut ChaCha8Rng::seed_from_u64(0),
        );
        // drawn log-uniformly over 1..=2048 without a bound on the work
        assert!(
            claimed
                .iter()
                .any(|set| set.iter().any(|(k, v)| *v > sizes[k] * 5 / 4)),
            "{claimed:?}"
        );
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
