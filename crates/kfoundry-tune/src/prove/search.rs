//! The proof's counterexample search: once a finalist has passed the planned cases
//! ([`super::prove`]), a budgeted evolutionary search over what a real call can differ in
//! looks for an input on which it and the reference disagree, and a case that fails is shrunk
//! to a small reproducer before it is reported.
//!
//! A case is a genome ([`Case`]): its sizes (anywhere in the box the proof covers), the class
//! of its input values (declared, edge values, shifted far from zero, at either end of the
//! format's range, one repeated value, sorted), the integer scalars that are not sizes (over
//! their whole range), what the outputs held before, whether it runs in place, and the seed
//! of its inputs. The search keeps the cases on which the candidate came closest to the
//! reference's tolerance (the largest relative error norm: an unstable formulation shows a
//! growing error before it shows a wrong one) and mutates them, one or two genes at a time.
//! It steers, it does not enumerate: what it cannot rule out is an input it was never led to.

use std::collections::BTreeMap;

use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes};
use rand::seq::SliceRandom as _;
use rand::Rng as _;
use rand_chacha::ChaCha8Rng;

use kfoundry_bench::case::{Case, Values};

use kfoundry_bench::Limits;

/// How many cases the search runs after the planned ones passed (each one a reference run and
/// a candidate run at sizes no larger than the box).
pub(crate) const SEARCH_CASES: usize = 8;
/// How many cases a failing case's shrinking may run.
pub(crate) const SHRINK_CASES: usize = 8;
/// How many of the closest cases the search keeps as parents.
const KEPT: usize = 4;

/// How one case ended, as the search sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The candidate matched; its relative error norm against the reference.
    Passed(f64),
    /// The candidate was refused there, and why.
    Failed(String),
    /// The case proves nothing (the reference cannot be trusted there).
    Skipped,
}

/// What the search may vary, for one finalist.
pub struct Space<'a> {
    pub spec: &'a KernelSpec,
    pub params: &'a Params,
    /// The tuned sizes (whose buffers stay allocated while the proof runs).
    pub tuned: &'a Sizes,
    /// Each size's smallest and largest value in the proof.
    pub bounds: &'a BTreeMap<String, (i64, i64)>,
    pub limits: &'a Limits,
    /// The input classes the annotation allows (its `edges`).
    pub values: Vec<Values>,
    /// Each integer scalar's range (the scalars that are not sizes).
    pub scalars: BTreeMap<String, (i64, i64)>,
    pub in_place: bool,
    /// How far from the tuned sizes a case may go (a tune's proof: at most what a corner
    /// costs; a claimed box: anywhere in it).
    pub reach: super::sizes::Reach,
}

impl Space<'_> {
    fn runnable(&self, sizes: &Sizes) -> bool {
        sizes.iter().all(|(name, v)| {
            self.bounds
                .get(name)
                .is_none_or(|(lo, hi)| (*lo..=*hi).contains(v))
        }) && super::sizes::runnable(
            self.spec,
            self.params,
            self.tuned,
            sizes,
            self.limits,
            self.reach,
        )
    }

    /// `case` with one gene changed (a size, the values, a scalar, the prefill, in place, or
    /// only the seed), or `None` when the change it drew cannot run.
    fn mutate(&self, case: &Case, rng: &mut ChaCha8Rng) -> Option<Case> {
        let mut next = case.clone();
        next.seed = rng.gen::<u64>() | 1;
        match rng.gen_range(0..6) {
            0 | 1 => {
                let names: Vec<&String> = self
                    .bounds
                    .iter()
                    .filter(|(_, (lo, hi))| lo < hi)
                    .map(|(name, _)| name)
                    .collect();
                let name = *names.choose(rng)?;
                let (lo, hi) = self.bounds[name];
                let v = next.sizes.get(name).copied()?;
                // Saturating: a claimed box (`check --verify` of an edited lockfile) may reach
                // the ends of i64.
                let moved = match rng.gen_range(0..7) {
                    0 => v.saturating_add(1),
                    1 => v.saturating_sub(1),
                    2 => v.saturating_mul(2),
                    3 => v / 2,
                    4 => lo,
                    5 => hi,
                    _ => super::sizes::log_uniform(lo.max(1), hi.max(1), rng),
                };
                next.sizes.insert(name.clone(), moved.clamp(lo.max(1), hi));
            }
            2 => next.values = *self.values.choose(rng)?,
            3 => {
                let scalars: Vec<(&String, &(i64, i64))> = self.scalars.iter().collect();
                let (name, (lo, hi)) = *scalars.choose(rng)?;
                let v = next.scalars.get(name).copied().unwrap_or(*lo);
                let moved = match rng.gen_range(0..5) {
                    0 => v.saturating_add(1),
                    1 => v.saturating_sub(1),
                    2 => *lo,
                    3 => *hi,
                    _ => rng.gen_range(*lo..=*hi),
                };
                next.scalars.insert(name.clone(), moved.clamp(*lo, *hi));
            }
            4 => next.prefill = next.prefill.nth(1),
            _ => next.in_place = self.in_place && !next.in_place,
        }
        // Whatever changed, the case must be one the proof may run: a parent may be a planned
        // case the search could not reach itself (the region's far corner), and values drawn
        // on the host cost far more per element than the device's draws (on an H100 such
        // cases at a KernelBench product's corner took 30-80 s each, most of its proof).
        (self.runnable(&next.sizes)
            && (!next.values.host_only()
                || super::sizes::host_drawable(self.spec, self.params, &next.sizes, self.limits)))
        .then_some(next)
    }

    /// Smaller versions of `case`, the most reduced first: every size at its smallest, each size
    /// halfway to its smallest, halved or one less, the declared values.
    fn smaller(&self, case: &Case) -> Vec<Case> {
        let mut out = Vec::new();
        let mut all = case.clone();
        for (name, (lo, _)) in self.bounds {
            all.sizes.insert(name.clone(), (*lo).max(1));
        }
        out.push(all);
        for (name, (lo, _)) in self.bounds {
            let v = case.sizes.get(name).copied().unwrap_or(*lo);
            let lo = (*lo).max(1);
            let halfway = lo.saturating_add(v.saturating_sub(lo) / 2);
            for smaller in [halfway, v / 2, v.saturating_sub(1)] {
                if smaller >= lo && smaller < v {
                    let mut c = case.clone();
                    c.sizes.insert(name.clone(), smaller);
                    out.push(c);
                }
            }
        }
        if case.values != Values::Declared {
            out.push(Case {
                values: Values::Declared,
                ..case.clone()
            });
        }
        out.retain(|c| c != case && self.runnable(&c.sizes));
        out
    }
}

/// Runs up to `budget` mutated cases, starting from `seeds` (cases that passed, each with its
/// relative error norm); the first that fails, as (case, why).
pub fn search(
    space: &Space,
    seeds: Vec<(Case, f64)>,
    budget: usize,
    rng: &mut ChaCha8Rng,
    try_case: &mut dyn FnMut(&Case) -> Outcome,
) -> Option<(Case, String)> {
    let mut kept = seeds;
    let closest_first = |kept: &mut Vec<(Case, f64)>| {
        kept.sort_by(|a, b| b.1.total_cmp(&a.1));
        kept.truncate(KEPT);
    };
    closest_first(&mut kept);
    let mut tries = 0;
    let mut ran = 0;
    while ran < budget && tries < budget * 8 && !kept.is_empty() {
        tries += 1;
        let parent = kept[rng.gen_range(0..kept.len())].0.clone();
        let Some(mut child) = space.mutate(&parent, rng) else {
            continue;
        };
        // Now and then a second gene at once.
        if rng.gen_bool(0.3) {
            if let Some(c) = space.mutate(&child, rng) {
                child = c;
            }
        }
        ran += 1;
        match try_case(&child) {
            Outcome::Passed(error) => {
                kept.push((child, if error.is_nan() { 0.0 } else { error }));
                closest_first(&mut kept);
            }
            Outcome::Failed(why) => return Some((child, why)),
            Outcome::Skipped => {}
        }
    }
    None
}

/// A smaller case that still fails, tried within `budget` cases (greedily: the first smaller
/// version that fails replaces it), and why it fails; `case` itself when none does.
pub(crate) fn shrink(
    space: &Space,
    case: Case,
    why: String,
    budget: usize,
    try_case: &mut dyn FnMut(&Case) -> Outcome,
) -> (Case, String) {
    let (mut case, mut why) = (case, why);
    let mut left = budget;
    'shrink: while left > 0 {
        for smaller in space.smaller(&case) {
            if left == 0 {
                break 'shrink;
            }
            left -= 1;
            if let Outcome::Failed(w) = try_case(&smaller) {
                (case, why) = (smaller, w);
                continue 'shrink;
            }
        }
        break;
    }
    (case, why)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng as _;

    use super::*;

    fn spec() -> KernelSpec {
        let src = "__kernel void k(const int n, const int k, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)] * k; }";
        crate::test_spec::spec(&format!(
            "code = {src:?}, params(V = [1, 4]), reference(V = 1), global = n / V, buffers(x = n, y = n), inputs(k = uniform(1, 100)), check(y), workloads(w(n = 4096))"
        ))
    }

    fn with<T>(f: impl FnOnce(&Space) -> T) -> T {
        let spec = spec();
        let tuned: Sizes = [("n".to_string(), 4096)].into();
        let bounds = [("n".to_string(), (1536, 8192))].into();
        let limits = crate::test_spec::roomy_limits();
        let space = Space {
            spec: &spec,
            params: &spec.reference,
            tuned: &tuned,
            bounds: &bounds,
            limits: &limits,
            values: vec![Values::Declared, Values::Offset { negative: true }],
            scalars: [("k".to_string(), (1, 100))].into(),
            in_place: false,
            reach: crate::prove::sizes::Reach::Claimed,
        };
        f(&space)
    }

    fn seed_case() -> Case {
        let mut case = Case::at([("n".to_string(), 4096)].into());
        case.scalars.insert("k".to_string(), 50);
        case
    }

    /// A candidate that grows wrong toward one corner of what a call can differ in (large
    /// `n`, large `k`, values far below zero) is led there by its growing error, and fails.
    #[test]
    fn the_search_follows_a_growing_error_to_a_counterexample() {
        with(|space| {
            let closeness = |c: &Case| {
                let n = c.sizes["n"] as f64 / 8192.0;
                let k = c.scalars.get("k").copied().unwrap_or(1) as f64 / 100.0;
                let far = if matches!(c.values, Values::Offset { .. }) {
                    1.0
                } else {
                    0.5
                };
                n * k * far
            };
            let mut runs = 0;
            let mut try_case = |c: &Case| {
                runs += 1;
                if closeness(c) > 0.9 {
                    Outcome::Failed(format!("wrong at {c}"))
                } else {
                    Outcome::Passed(closeness(c) * 1e-6)
                }
            };
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let seeds = vec![(seed_case(), closeness(&seed_case()) * 1e-6)];
            let found = search(space, seeds, 200, &mut rng, &mut try_case);
            let (case, why) = found.expect("a counterexample within 200 cases");
            assert!(closeness(&case) > 0.9 && why.starts_with("wrong"), "{case}");
            assert!(runs <= 200);
        });
    }

    /// A claimed box at the ends of i64 (an edited lockfile under `check --verify`): mutating
    /// and shrinking a case there never overflows.
    #[test]
    fn mutations_at_the_ends_of_i64_saturate() {
        let spec = spec();
        let tuned: Sizes = [("n".to_string(), i64::MAX)].into();
        let bounds = [("n".to_string(), (1, i64::MAX))].into();
        let limits = Limits::default();
        let space = Space {
            spec: &spec,
            params: &spec.reference,
            tuned: &tuned,
            bounds: &bounds,
            limits: &limits,
            values: vec![Values::Declared],
            scalars: [("k".to_string(), (i64::MIN, i64::MAX))].into(),
            in_place: false,
            reach: crate::prove::sizes::Reach::Claimed,
        };
        let mut case = Case::at(tuned.clone());
        case.scalars.insert("k".to_string(), i64::MAX);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..200 {
            let _ = space.mutate(&case, &mut rng);
        }
        case.scalars.insert("k".to_string(), i64::MIN);
        for _ in 0..200 {
            let _ = space.mutate(&case, &mut rng);
        }
        let _ = space.smaller(&case);
    }

    /// A tune's search starting from cases it could not reach itself (the region's far
    /// corner, far above the work bound) runs none of them again, and draws values on the host
    /// only for cases of at most `HOST_DRAW_BYTES` (64 MiB): on an H100, such cases at a
    /// matrix product's corner took 30-80 s each.
    #[test]
    fn the_search_keeps_to_what_a_tune_may_run() {
        let spec = spec();
        let tuned: Sizes = [("n".to_string(), 1 << 22)].into();
        let bounds = [("n".to_string(), (1, 1 << 26))].into();
        let limits = crate::test_spec::roomy_limits();
        let space = Space {
            spec: &spec,
            params: &spec.reference,
            tuned: &tuned,
            bounds: &bounds,
            limits: &limits,
            values: vec![
                Values::Declared,
                Values::Offset { negative: true },
                Values::Sorted,
            ],
            scalars: [("k".to_string(), (1, 100))].into(),
            in_place: false,
            reach: crate::prove::sizes::Reach::Tune,
        };
        // 2^24 elements in two buffers: 128 MiB, four times the workload's work
        let mut corner = Case::at([("n".to_string(), 1 << 24)].into());
        corner.scalars.insert("k".to_string(), 50);
        let mut ran = Vec::new();
        let mut try_case = |c: &Case| {
            ran.push(c.clone());
            Outcome::Passed(1.0)
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        search(&space, vec![(corner, 1.0)], 64, &mut rng, &mut try_case);
        assert!(!ran.is_empty());
        for c in &ran {
            assert!(c.sizes["n"] <= 2 << 22, "over the work bound: {c}");
            // two float buffers with their guard zones
            let bytes = 2 * (c.sizes["n"] as u128 + 16384) * 4 + 2 * 65536;
            assert!(
                !c.values.host_only() || bytes <= 64 << 20,
                "values drawn on the host at {c}"
            );
        }
        assert!(ran.iter().any(|c| c.values.host_only()), "{ran:?}");
    }

    #[test]
    fn a_budget_of_nothing_runs_nothing() {
        with(|space| {
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let mut try_case = |_: &Case| -> Outcome { panic!("no case may run") };
            assert!(search(space, vec![(seed_case(), 0.0)], 0, &mut rng, &mut try_case).is_none());
        });
    }

    /// A case that fails for every `n` of at least 1600 shrinks to the smallest such `n` it
    /// can reach within its budget, and keeps failing.
    #[test]
    fn a_failing_case_shrinks_and_still_fails() {
        with(|space| {
            let mut try_case = |c: &Case| {
                if c.sizes["n"] >= 1600 {
                    Outcome::Failed(format!("wrong at n = {}", c.sizes["n"]))
                } else {
                    Outcome::Passed(0.0)
                }
            };
            let big = Case {
                values: Values::Offset { negative: true },
                ..seed_case()
            };
            let (small, why) = shrink(space, big, "wrong".into(), 64, &mut try_case);
            assert!(
                small.sizes["n"] >= 1600 && small.sizes["n"] < 1700,
                "{small}"
            );
            assert_eq!(
                small.values,
                Values::Declared,
                "the declared values fail too"
            );
            assert_eq!(why, format!("wrong at n = {}", small.sizes["n"]));
        });
    }
}
