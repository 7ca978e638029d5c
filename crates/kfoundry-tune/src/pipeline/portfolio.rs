//! Stage 4c, portfolio: for a kernel with `ranges(...)`, a few variants that serve the whole
//! range, one per bucket of it, each proven over its whole bucket.
//!
//! Each anchor of the range was tuned as a workload of its own (stages 3 to 4b). Here every
//! winner (and the reference) is measured at every anchor; the anchors, in order along the
//! split size, are cut into at most [`MAX_BUCKETS`] contiguous buckets, each given the one
//! candidate that keeps the most of the per-anchor best speed over it (the geometric mean of
//! best/time); a bucket is added only where it keeps 1% more. The choice is then proven over
//! the bucket's box (the stretch of the split size between the neighbouring buckets' cuts, the
//! whole range of every other size) by the proof `check --verify` makes of a claimed box:
//! every corner as it is, residues anywhere in it, integer scalars over their range, edge
//! values, prefills. A choice that fails is struck and the buckets chosen again. Every anchor
//! of a bucket then records the bucket's variant, its box as what it was proven at: dispatch
//! finds exactly one bucket's variant at any size of the range.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use kfoundry_rt::model::ranges::{self, SizeRange, MAX_BUCKETS};
use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes, Workload};
use kfoundry_rt::model::variant::{Variant, PROOF_VERSION};
use kfoundry_search::Evaluation;

use super::plan::Plan;
pub use crate::events::{Bucket, Portfolio};
use crate::prove::{prove, Claimed, NotProven, Scope};
use kfoundry_bench::case::Case;
use kfoundry_bench::supervisor::Supervised;
use kfoundry_bench::{median, Judge, Measurement};

/// Measurements of each candidate at each anchor.
const REPEATS: usize = 3;
/// A bucket more must keep this much more of the per-anchor best (geometric mean).
const GAIN_PER_BUCKET: f64 = 0.01;
/// Proofs tried before the portfolio gives up (and the anchors keep their own winners).
const MAX_PROOFS: usize = 8;

/// A bucket whose candidate passed its proof: anchors `first..=last`, the candidate's index,
/// the split size's stretch, what it was proven at.
struct Proved {
    first: usize,
    last: usize,
    candidate: usize,
    span: Option<(i64, i64)>,
    proven: crate::prove::Proven,
}

/// The candidates of a portfolio: the distinct parameter sets among `variants` (template
/// variants only: a generated source serves the anchor it was tuned at), then the reference.
fn candidates(spec: &KernelSpec, variants: &[Variant]) -> Vec<Params> {
    let mut out: Vec<Params> = Vec::new();
    for v in variants.iter().filter(|v| v.source.is_none()) {
        if v.params != spec.reference && !out.contains(&v.params) {
            out.push(v.params.clone());
        }
    }
    out.push(spec.reference.clone());
    out
}

/// Chooses and proves the portfolio of `spec` among this run's `variants` of it and rewrites
/// the anchors' variants to the buckets' choices. `Ok(None)` when the kernel has no ranges or
/// fewer than two of its anchors were tuned here.
pub fn choose(
    plan: &Plan,
    spec: &KernelSpec,
    variants: &mut [Variant],
) -> Result<Option<Portfolio>> {
    let split = ranges::split_size(&spec.ranges).cloned();
    let mut anchors: Vec<&Workload> = spec
        .workloads
        .iter()
        .filter(|w| ranges::is_anchor(w) && variants.iter().any(|v| v.workload == w.name))
        .collect();
    // In order along the split size (as generated; a bundle's order is not trusted): buckets
    // are stretches of neighbours.
    if let Some(s) = &split {
        anchors.sort_by_key(|w| w.sizes.get(&s.size).copied());
    }
    if anchors.len() < 2 {
        return Ok(None);
    }
    let candidates = candidates(spec, variants);
    let reference = candidates.len() - 1;
    // times[c][a]: the median of candidate c at anchor a (`None`: it failed or cannot run there)
    let settings = Measurement {
        repeats: plan.options.repeats,
        seed: plan.options.seed,
        build_jobs: plan.options.build_jobs,
        source_place: plan.source_place(spec),
        ..Measurement::default()
    };
    let start = |w: &Workload| {
        Supervised::start(
            spec,
            &w.sizes,
            plan.device.index,
            settings.clone(),
            plan.options.limits,
        )
    };
    let mut times = vec![vec![None; anchors.len()]; candidates.len()];
    // One worker at a time (each holds its anchor's buffers).
    for (a, w) in anchors.iter().enumerate() {
        let mut bench = start(w)?;
        for (c, params) in candidates.iter().enumerate() {
            times[c][a] = measure(&mut bench, params);
        }
    }
    // The reference must run at every anchor (it is where no candidate does).
    if times[reference].iter().any(Option::is_none) {
        return Ok(None);
    }
    let best = per_anchor_best(&times);
    // The worker of the anchor the last proof ran at, kept for the next one there.
    let mut proof_bench: Option<(usize, Supervised)> = None;
    let proof_seed = plan.options.proof_seed.unwrap_or_else(rand::random);
    let mut struck: BTreeSet<(usize, usize, usize)> = BTreeSet::new();
    for _ in 0..MAX_PROOFS {
        let plan_of = partition(&times, &struck);
        let mut proven_all = true;
        let mut out: Vec<Proved> = Vec::new();
        for &(first, last, c) in &plan_of {
            let span = split.as_ref().map(|s| span_of(s, &anchors, first, last));
            let bounds = ranges::bucket_bounds(
                &spec.ranges,
                split
                    .as_ref()
                    .zip(span)
                    .map(|(s, (lo, hi))| (s.size.as_str(), lo, hi)),
            );
            let proven = if c == reference {
                // The reference is what is proven against: nothing to prove.
                reference_box(spec, &anchors[first..=last], &bounds)
            } else {
                let home = (first + last) / 2;
                let scalars = variants
                    .iter()
                    .find(|v| v.params == candidates[c])
                    .map(|v| v.scalars.clone())
                    .unwrap_or_default();
                let scope = Scope {
                    sizes: &anchors[home].sizes,
                    claimed: Some(Claimed { bounds, scalars }),
                    seed: proof_seed,
                };
                let (_, bench) = match proof_bench.take() {
                    Some((at, bench)) if at == home => proof_bench.insert((at, bench)),
                    _ => proof_bench.insert((home, start(anchors[home])?)),
                };
                match prove_bucket(bench, spec, &candidates[c], &scope, &anchors[first..=last]) {
                    Ok(p) => p,
                    Err(NotProven::Annotation(why)) => {
                        anyhow::bail!("the annotation of `{}`: {why}", spec.id)
                    }
                    Err(NotProven::Failed { why, .. }) => {
                        plan.note(format!(
                            "note: `{}` portfolio: {} is not proven over its bucket ({why}); choosing again",
                            spec.id,
                            kfoundry_rt::model::spec::fmt_assignments(&candidates[c], ", ")
                        ));
                        struck.insert((first, last, c));
                        proven_all = false;
                        break;
                    }
                }
            };
            out.push(Proved {
                first,
                last,
                candidate: c,
                span,
                proven,
            });
        }
        if !proven_all {
            continue;
        }
        let mut buckets = Vec::new();
        let mut kept = Vec::new();
        for Proved {
            first,
            last,
            candidate: c,
            span,
            proven,
        } in out
        {
            for a in first..=last {
                let t = times[c][a].unwrap_or(f64::INFINITY);
                kept.push(best[a] / t);
                let Some(v) = variants
                    .iter_mut()
                    .find(|v| v.workload == anchors[a].name && !v.general)
                else {
                    continue;
                };
                v.params = candidates[c].clone();
                v.source = None;
                v.time_ns = (t * 1e9).round() as u64;
                v.reference_time_ns =
                    times[reference][a].map_or(v.reference_time_ns, |r| (r * 1e9).round() as u64);
                v.proven = proven.sizes.clone();
                if !v.proven.contains(&v.sizes) {
                    v.proven.push(v.sizes.clone());
                }
                v.scalars = proven.scalars.clone();
                v.proof = PROOF_VERSION;
                v.partial = false;
            }
            buckets.push(Bucket {
                span,
                params: candidates[c].clone(),
                anchors: anchors[first..=last]
                    .iter()
                    .map(|w| w.name.clone())
                    .collect(),
            });
        }
        let kept_geomean = (kept.iter().map(|k| k.ln()).sum::<f64>() / kept.len() as f64).exp();
        let kept_min = kept.iter().copied().fold(1.0, f64::min);
        return Ok(Some(Portfolio {
            split: split.map(|s| s.size),
            buckets,
            kept_geomean,
            kept_min,
        }));
    }
    plan.note(format!(
        "note: `{}`: no portfolio could be proven in {MAX_PROOFS} tries; each anchor keeps its own winner",
        spec.id
    ));
    Ok(None)
}

/// The fastest time measured at each anchor (`times[c][a]`: candidates by anchors).
fn per_anchor_best(times: &[Vec<Option<f64>>]) -> Vec<f64> {
    let anchors = times.first().map_or(0, Vec::len);
    (0..anchors)
        .map(|a| {
            times
                .iter()
                .filter_map(|t| t[a])
                .fold(f64::INFINITY, f64::min)
        })
        .collect()
}

/// The median of [`REPEATS`] evaluations (`None` when one fails).
fn measure(bench: &mut dyn Judge, params: &Params) -> Option<f64> {
    let mut t = Vec::new();
    for _ in 0..REPEATS {
        match bench.evaluate(params, None) {
            Evaluation::Ok { time, .. } => t.push(time),
            Evaluation::Failed { .. } => return None,
        }
    }
    Some(median(&mut t))
}

/// The bucket's stretch of the split size: from the cut below its first anchor (the range's
/// low end for the first bucket) to the cut above its last (the high end for the last).
fn span_of(split: &SizeRange, anchors: &[&Workload], first: usize, last: usize) -> (i64, i64) {
    let at = |a: usize| anchors[a].sizes[&split.size];
    let lo = if first == 0 {
        split.lo
    } else {
        ranges::boundary(at(first - 1), at(first)) + 1
    };
    let hi = if last + 1 == anchors.len() {
        split.hi
    } else {
        ranges::boundary(at(last), at(last + 1))
    };
    (lo, hi)
}

/// The proof of a candidate over a bucket: the claimed box around the bucket's middle anchor,
/// then each other anchor of the bucket once on fresh inputs.
fn prove_bucket(
    judge: &mut dyn Judge,
    spec: &KernelSpec,
    params: &Params,
    scope: &Scope,
    anchors: &[&Workload],
) -> Result<crate::prove::Proven, NotProven> {
    let mut proven = prove(judge, spec, params, None, scope)?;
    for w in anchors {
        if proven.sizes.contains(&w.sizes) {
            continue;
        }
        match judge.verify(params, &Case::at(w.sizes.clone()), None) {
            Ok(Ok(_)) => proven.sizes.push(w.sizes.clone()),
            Ok(Err(rejection)) => {
                return Err(NotProven::Failed {
                    why: format!(
                        "{:?} at {}: {}",
                        rejection.kind(),
                        kfoundry_rt::model::spec::fmt_assignments(&w.sizes, ", "),
                        rejection.why()
                    ),
                    counterexample: None,
                })
            }
            Err(u) if u.annotation_fault => return Err(NotProven::Annotation(u.message)),
            Err(_) => {}
        }
    }
    Ok(proven)
}

/// What a bucket served by the reference records: its box's corners and its anchors (the
/// reference needs no proof, and dispatch runs it wherever no variant was proven anyway).
fn reference_box(
    spec: &KernelSpec,
    anchors: &[&Workload],
    bounds: &BTreeMap<String, (i64, i64)>,
) -> crate::prove::Proven {
    let mut sizes: Vec<Sizes> = anchors.iter().map(|w| w.sizes.clone()).collect();
    for corner in [false, true] {
        let set: Sizes = bounds
            .iter()
            .map(|(k, &(lo, hi))| (k.clone(), if corner { hi } else { lo }))
            .collect();
        if spec.geometry(&spec.reference, &set, None).is_ok() && !sizes.contains(&set) {
            sizes.push(set);
        }
    }
    crate::prove::Proven {
        sizes,
        ..Default::default()
    }
}

/// The buckets: contiguous stretches of anchors `(first, last, candidate)` covering them all,
/// at most [`MAX_BUCKETS`], maximizing the summed log of best/time (the geometric mean of the
/// fraction of the per-anchor best kept), with fewer buckets unless one more keeps
/// `GAIN_PER_BUCKET` more. A candidate struck from a stretch (its proof failed there) serves
/// no stretch that overlaps it.
pub fn partition(
    times: &[Vec<Option<f64>>],
    struck: &BTreeSet<(usize, usize, usize)>,
) -> Vec<(usize, usize, usize)> {
    let best = per_anchor_best(times);
    let anchors = best.len();
    // the best candidate for a stretch and its score
    let stretch = |first: usize, last: usize| -> Option<(usize, f64)> {
        (0..times.len())
            // a candidate not proven over a stretch serves no stretch that overlaps it
            .filter(|c| {
                !struck
                    .iter()
                    .any(|&(f, l, s)| s == *c && f <= last && first <= l)
            })
            .filter_map(|c| {
                let mut score = 0.0;
                for a in first..=last {
                    score += (best[a] / times[c][a]?).ln();
                }
                Some((c, score))
            })
            .max_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)))
    };
    // dp[k][j]: the best score of the first j anchors in k stretches, and how it was reached
    let mut dp: Vec<Vec<Option<(f64, usize, usize)>>> =
        vec![vec![None; anchors + 1]; MAX_BUCKETS + 1];
    dp[0][0] = Some((0.0, 0, usize::MAX));
    for k in 1..=MAX_BUCKETS {
        for j in 1..=anchors {
            for i in 0..j {
                let (Some((prev, _, _)), Some((c, s))) = (dp[k - 1][i], stretch(i, j - 1)) else {
                    continue;
                };
                if dp[k][j].is_none_or(|(best, _, _)| prev + s > best) {
                    dp[k][j] = Some((prev + s, i, c));
                }
            }
        }
    }
    let mut chosen: Option<usize> = None;
    for k in 1..=MAX_BUCKETS {
        let Some((score, _, _)) = dp[k][anchors] else {
            continue;
        };
        let better = match chosen.and_then(|c| dp[c][anchors]) {
            None => true,
            Some((s, _, _)) => ((score - s) / anchors as f64).exp() > 1.0 + GAIN_PER_BUCKET,
        };
        if better {
            chosen = Some(k);
        }
    }
    let Some(mut k) = chosen else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut j = anchors;
    while k > 0 {
        let Some((_, i, c)) = dp[k][j] else { break };
        out.push((i, j - 1, c));
        j = i;
        k -= 1;
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(rows: &[&[f64]]) -> Vec<Vec<Option<f64>>> {
        rows.iter()
            .map(|r| {
                r.iter()
                    .map(|&x| if x.is_nan() { None } else { Some(x) })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn one_candidate_best_everywhere_is_one_bucket() {
        let times = t(&[&[1.0, 2.0, 4.0], &[2.0, 4.0, 8.0]]);
        assert_eq!(partition(&times, &BTreeSet::new()), vec![(0, 2, 0)]);
    }

    #[test]
    fn a_crossover_makes_two_buckets() {
        // candidate 0 wins small, candidate 1 large, by far
        let times = t(&[
            &[1.0, 1.0, 10.0, 10.0],
            &[3.0, 3.0, 1.0, 1.0],
            &[5.0, 5.0, 5.0, 5.0],
        ]);
        assert_eq!(
            partition(&times, &BTreeSet::new()),
            vec![(0, 1, 0), (2, 3, 1)]
        );
    }

    #[test]
    fn a_small_gain_is_not_worth_a_bucket() {
        // candidate 1 is 0.5% faster at one anchor of four: not worth a second variant
        let times = t(&[&[1.0, 1.0, 1.0, 1.0], &[1.2, 1.2, 1.2, 0.995]]);
        assert_eq!(partition(&times, &BTreeSet::new()), vec![(0, 3, 0)]);
    }

    #[test]
    fn a_candidate_that_fails_somewhere_serves_only_where_it_runs() {
        let times = t(&[&[1.0, 1.0, f64::NAN], &[2.0, 2.0, 2.0]]);
        let p = partition(&times, &BTreeSet::new());
        assert_eq!(p, vec![(0, 1, 0), (2, 2, 1)]);
        // struck (its proof failed there): the other serves all
        let struck = [(0, 1, 0)].into_iter().collect();
        assert_eq!(partition(&times, &struck), vec![(0, 2, 1)]);
    }

    #[test]
    fn never_more_than_the_bound() {
        // every anchor has its own clear winner
        let n = 7;
        let times: Vec<Vec<Option<f64>>> = (0..n)
            .map(|c| {
                (0..n)
                    .map(|a| Some(if a == c { 1.0 } else { 3.0 }))
                    .collect()
            })
            .collect();
        let p = partition(&times, &BTreeSet::new());
        assert!(p.len() <= MAX_BUCKETS);
        assert_eq!(p.first().map(|b| b.0), Some(0));
        assert_eq!(p.last().map(|b| b.1), Some(n - 1));
        assert!(p.windows(2).all(|w| w[0].1 + 1 == w[1].0));
    }
}
