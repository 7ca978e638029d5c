//! Stage 4, the general variant: the second entry of a workload, for the parts of the region
//! its winner does not serve. A winner whose constraints refuse part of the region it was
//! proven over (a vector width that must divide `n`, a tile that must divide `m`) runs only
//! where they hold; a winner with a [`super::floor`] gives way below it, where a tile chosen
//! for the workload wastes most of its work. Without a second entry the reference would run
//! there. Here the search's candidates that run wherever the reference does are ranked by
//! where they will serve (below the winner's floor: their time at the walk's first point under
//! it, measured now against the reference; else their time at the workload), and the first
//! that is faster than the reference on re-measure is proven over the same region with the
//! same proof as the winner. It is recorded beside the winner as the workload's general
//! variant; dispatch runs it only where the winner does not run. A workload holds at most one
//! on each device (two variants in all), so a lockfile stays small and the rule stays one a
//! user can read in `explain()`.
//!
//! Whether the winner refuses part of the region is decided on a fixed sample of it (its
//! corners and `SAMPLES` sets drawn log-uniformly with a fixed seed, those where the
//! reference runs): the same for every tune of the same annotation on the same device.

use std::collections::BTreeMap;

use kfoundry_rt::model::spec::{fmt_assignments, KernelSpec, Params, Sizes, Workload};
use kfoundry_search::Record;
use rand::SeedableRng as _;
use rand_chacha::ChaCha8Rng;

use super::finalists::{try_finalist, General, Tried};
use crate::prove::sizes;
use crate::text::fmt_ns;
use kfoundry_bench::{check_launchable, params_of, Judge, Limits};
use kfoundry_search::Evaluation;

/// Size sets drawn across the region (beside its corners) to tell where the winner runs.
pub(crate) const SAMPLES: usize = 256;
/// Candidates that run everywhere tried, fastest first, before the reference is left there.
const CANDIDATES: usize = 2;
/// Candidates that run everywhere timed below the winner's floor (the fastest at the workload).
const BELOW_CANDIDATES: usize = 4;

/// What the stage found: the general variant, if one was needed and proven, and what to tell
/// the user (where the winner cannot run and what serves there).
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub general: Option<General>,
    pub note: Option<String>,
    /// Wall seconds spent proving candidates.
    pub proof_seconds: f64,
}

/// The fixed sample of `region` (each size's smallest and largest value) where the reference
/// runs: its corners (at most 256 of them), then [`SAMPLES`] sets drawn log-uniformly.
pub(crate) fn region_sample(
    spec: &KernelSpec,
    region: &BTreeMap<String, (i64, i64)>,
    limits: &Limits,
) -> Vec<Sizes> {
    let names: Vec<&String> = region.keys().collect();
    let corners = 1usize << names.len().min(8);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut out: Vec<Sizes> = (0..corners)
        .map(|bits| {
            names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let (lo, hi) = region[*name];
                    ((*name).clone(), if bits >> i & 1 == 1 { hi } else { lo })
                })
                .collect()
        })
        .collect();
    for _ in 0..SAMPLES {
        out.push(
            region
                .iter()
                .map(|(name, &(lo, hi))| {
                    (name.clone(), sizes::log_uniform(lo.max(1), hi, &mut rng))
                })
                .collect(),
        );
    }
    out.retain(|s| check_launchable(spec, limits, &spec.reference, s).is_ok());
    out
}

/// The configurations of `history` that ran successfully, with their times.
pub fn ran(spec: &KernelSpec, history: &[Record]) -> Vec<(f64, Params)> {
    history
        .iter()
        .filter_map(|r| Some((r.outcome.time()?, params_of(spec, &r.config))))
        .collect()
}

/// The share of `sample` where `params` cannot run.
fn refused(spec: &KernelSpec, limits: &Limits, params: &Params, sample: &[Sizes]) -> f64 {
    if sample.is_empty() {
        return 0.0;
    }
    let n = sample
        .iter()
        .filter(|s| check_launchable(spec, limits, params, s).is_err())
        .count();
    n as f64 / sample.len() as f64
}

/// The general variant of `winner` (tuned at `workload`, a configuration of the annotated
/// source: a generated source serves the workload it was tuned at; below `floor` when it has
/// one), among `ran`: the configurations the search ran successfully, with their times.
/// Nothing when the winner runs wherever the reference does and has no floor, or is the
/// reference. `Err` only when the reference fails on re-measure or the annotation is wrong (as
/// for the winner).
pub fn choose(
    judge: &mut dyn Judge,
    spec: &KernelSpec,
    workload: &Workload,
    winner: &Params,
    floor: Option<&Sizes>,
    mut ranked: Vec<(f64, Params)>,
    proof_seed: u64,
) -> Result<Outcome, String> {
    let mut outcome = Outcome::default();
    if *winner == spec.reference {
        return Ok(outcome);
    }
    let limits = judge.limits().clone();
    let region = sizes::default_region(spec, winner, &workload.sizes, &limits);
    let sample = region_sample(spec, &region, &limits);
    let share = refused(spec, &limits, winner, &sample);
    // Where the winner gives way to the reference: the walk's first point below its floor.
    let below = floor.and_then(|f| {
        super::floor::points(spec, winner, workload, &limits)
            .into_iter()
            .find(|p| kfoundry_rt::model::select::below_floor(f, p))
    });
    if share == 0.0 && below.is_none() {
        return Ok(outcome);
    }
    let serves = match (share > 0.0, &below) {
        (true, Some(_)) => format!(
            "the winner cannot run at {:.0}% of the region it was proven over (its constraints) and gives way below its floor",
            share * 100.0
        ),
        (true, None) => format!(
            "the winner cannot run at {:.0}% of the region it was proven over (its constraints)",
            share * 100.0
        ),
        (false, _) => "the winner is slower than the reference below its floor".to_string(),
    };
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut everywhere: Vec<Params> = Vec::new();
    for (_, params) in ranked {
        if params != *winner
            && params != spec.reference
            && !everywhere.contains(&params)
            && refused(spec, &limits, &params, &sample) == 0.0
        {
            everywhere.push(params);
        }
    }
    let mut why_none = "no configuration the search ran can run at every size of the region";
    if let Some(point) = &below {
        // Those faster than the reference below the floor first; where the winner also
        // refuses sizes, the others still serve there, after them.
        let (faster, others) = faster_at(judge, spec, everywhere, point);
        if faster.is_empty() && share == 0.0 {
            why_none = "none of the configurations that run everywhere beat the reference below the winner's floor";
        }
        everywhere = faster;
        if share > 0.0 {
            everywhere.extend(others);
        }
    }
    for params in everywhere.into_iter().take(CANDIDATES) {
        match try_finalist(
            judge,
            spec,
            workload,
            &params,
            None,
            proof_seed,
            &mut outcome.proof_seconds,
        )? {
            Tried::Failing(_) | Tried::Slower { .. } => {
                why_none =
                    "none of the configurations that run everywhere beat the reference on re-measure";
            }
            Tried::Refused { .. } => {
                why_none = "the configurations that run everywhere failed their proof";
            }
            Tried::Proven {
                best_s,
                reference_s,
                proven,
                ..
            } => {
                outcome.note = Some(format!(
                    "{serves}; the general variant ({}) serves there, {} against the reference's {} at the workload",
                    fmt_assignments(&params, ", "),
                    fmt_ns(best_s * 1e9),
                    fmt_ns(reference_s * 1e9)
                ));
                outcome.general = Some(General {
                    params,
                    proven: proven.sizes,
                    scalars: proven.scalars,
                    proof_cases: proven.cases,
                    best_s,
                    reference_s,
                    floor: None,
                });
                return Ok(outcome);
            }
        }
    }
    outcome.note = Some(format!(
        "{serves}, and {why_none}: the reference runs there"
    ));
    Ok(outcome)
}

/// `candidates` (fastest at the workload first) split by their time at `point`, where the
/// first [`BELOW_CANDIDATES`] are timed with the reference: those faster than the reference
/// there (fastest first), and the others in their order.
fn faster_at(
    judge: &mut dyn Judge,
    spec: &KernelSpec,
    candidates: Vec<Params>,
    point: &Sizes,
) -> (Vec<Params>, Vec<Params>) {
    let Evaluation::Ok {
        time: reference, ..
    } = judge.evaluate_at(&spec.reference, None, point)
    else {
        return (Vec::new(), candidates);
    };
    let mut faster: Vec<(f64, Params)> = Vec::new();
    let mut others = Vec::new();
    for (i, params) in candidates.into_iter().enumerate() {
        let time = if i < BELOW_CANDIDATES {
            judge
                .evaluate_at(&params, None, point)
                .time()
                .unwrap_or(f64::INFINITY)
        } else {
            f64::INFINITY
        };
        if time < reference {
            faster.push((time, params));
        } else {
            others.push(params);
        }
    }
    faster.sort_by(|a, b| a.0.total_cmp(&b.0));
    (faster.into_iter().map(|(_, p)| p).collect(), others)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfoundry_bench::case::Case;
    use kfoundry_bench::{ErrorStats, Rejection, Verdict};
    use kfoundry_search::Evaluation;

    /// Times by `VEC`; a configuration in `wrong` fails every proof case.
    struct Script {
        limits: Limits,
        wrong: Vec<i64>,
        proved: Vec<i64>,
        /// The `n` of every `evaluate_at`.
        timed_at: Vec<i64>,
        /// Nothing is faster than the reference below the workload.
        slow_below: bool,
    }

    impl Judge for Script {
        fn evaluate(&mut self, params: &Params, _: Option<&str>) -> Evaluation {
            Evaluation::ok(
                1.0 / (params["VEC"] as f64 + params["WG"] as f64 / 100.0),
                0.0,
            )
        }
        /// Below the workload: the reference takes 1.0; `WG = 2` with `VEC` at most 2 takes
        /// 0.4 (unless `slow_below`), every other configuration 2.0.
        fn evaluate_at(&mut self, params: &Params, _: Option<&str>, sizes: &Sizes) -> Evaluation {
            self.timed_at.push(sizes["n"]);
            let t = match (params["VEC"], params["WG"]) {
                (1, 1) => 1.0,
                (v, 2) if v <= 2 && !self.slow_below => 0.4,
                _ => 2.0,
            };
            Evaluation::ok(t, 0.0)
        }
        fn verify(
            &mut self,
            params: &Params,
            _: &Case,
            _: Option<&str>,
        ) -> Result<Verdict, kfoundry_bench::Untrusted> {
            self.proved.push(params["VEC"]);
            if self.wrong.contains(&params["VEC"]) {
                return Ok(Err(Rejection::Wrong("differs".into())));
            }
            Ok(Ok(ErrorStats::default()))
        }
        fn last_errors(&self) -> Option<ErrorStats> {
            Some(ErrorStats::default())
        }
        fn limits(&self) -> &Limits {
            &self.limits
        }
        fn seal(&mut self) {}
    }

    fn spec() -> KernelSpec {
        crate::test_spec::spec(
            r#"code = "__kernel void k(const int n, __global float* y) { y[0] = VEC * WG; }", params(VEC = [1, 2, 4, 8], WG = [1, 2]), reference(VEC = 1, WG = 1),
            require(n % VEC == 0), global = n / VEC, buffers(y = n), check(y), workloads(w(n = 4096))"#,
        )
    }

    fn history(configs: &[(i64, i64)]) -> Vec<(f64, Params)> {
        configs
            .iter()
            .map(|&(vec, wg)| {
                (
                    1.0 / (vec as f64 + wg as f64 / 100.0),
                    [("VEC".to_string(), vec), ("WG".to_string(), wg)].into(),
                )
            })
            .collect()
    }

    fn script() -> Script {
        Script {
            limits: crate::test_spec::roomy_limits(),
            wrong: vec![],
            proved: vec![],
            timed_at: vec![],
            slow_below: false,
        }
    }

    /// A winner that needs `n % 8 == 0` refuses most of the region: the fastest configuration
    /// that runs everywhere (VEC = 1, WG = 2) is proven and chosen; the same sample every time.
    #[test]
    fn a_winner_refusing_part_of_its_region_gets_a_general_variant() {
        let spec = spec();
        let w = spec.workloads[0].clone();
        let winner: Params = [("VEC".to_string(), 8), ("WG".to_string(), 1)].into();
        let h = history(&[(8, 1), (4, 2), (1, 2), (1, 1)]);
        let mut judge = script();
        let o = choose(&mut judge, &spec, &w, &winner, None, h.clone(), 7).unwrap();
        let g = o.general.expect("a general variant");
        assert_eq!((g.params["VEC"], g.params["WG"]), (1, 2));
        assert!(
            g.proven.len() > 1 && g.proven[0] == w.sizes,
            "{:?}",
            g.proven
        );
        assert!(g.best_s < g.reference_s);
        let note = o.note.unwrap();
        assert!(
            note.contains("the general variant (VEC=1, WG=2) serves there"),
            "{note}"
        );
        let limits = crate::test_spec::roomy_limits();
        let region = sizes::default_region(&spec, &winner, &w.sizes, &limits);
        assert_eq!(
            region_sample(&spec, &region, &limits),
            region_sample(&spec, &region, &limits)
        );
        assert!(
            refused(
                &spec,
                &limits,
                &winner,
                &region_sample(&spec, &region, &limits)
            ) > 0.5
        );
    }

    /// A winner that runs everywhere needs nothing; a general candidate that fails its proof is
    /// not recorded, and the note says the reference runs where the winner cannot.
    #[test]
    fn nothing_is_added_where_the_winner_runs_everywhere_or_nothing_is_proven() {
        let spec = spec();
        let w = spec.workloads[0].clone();
        let h = history(&[(8, 1), (1, 2), (1, 1)]);
        let everywhere: Params = [("VEC".to_string(), 1), ("WG".to_string(), 2)].into();
        let mut judge = script();
        let o = choose(&mut judge, &spec, &w, &everywhere, None, h.clone(), 7).unwrap();
        assert!(o.general.is_none() && o.note.is_none() && judge.proved.is_empty());
        let winner: Params = [("VEC".to_string(), 8), ("WG".to_string(), 1)].into();
        let mut judge = script();
        judge.wrong.push(1);
        let o = choose(&mut judge, &spec, &w, &winner, None, h.clone(), 7).unwrap();
        assert!(o.general.is_none());
        assert!(
            o.note.as_deref().is_some_and(
                |n| n.contains("failed their proof") && n.contains("the reference runs there")
            ),
            "{:?}",
            o.note
        );
    }

    /// A winner that runs everywhere but gives way to the reference below its floor: the
    /// general variant is the configuration fastest below the floor (timed there against the
    /// reference), not the one fastest at the workload; without a floor nothing is timed there.
    #[test]
    fn a_winner_with_a_floor_gets_the_general_variant_fastest_below_it() {
        let spec = crate::test_spec::spec(
            r#"code = "__kernel void k(const int n, __global float* y) { y[0] = VEC * WG; }", params(VEC = [1, 2, 4, 8], WG = [1, 2]), reference(VEC = 1, WG = 1),
            global = ceil_div(n, VEC), buffers(y = n), check(y), workloads(w(n = 4096))"#,
        );
        let w = spec.workloads[0].clone();
        let winner: Params = [("VEC".to_string(), 8), ("WG".to_string(), 1)].into();
        let h = history(&[(8, 1), (4, 2), (4, 1), (1, 2), (1, 1)]);
        let mut judge = script();
        let o = choose(&mut judge, &spec, &w, &winner, None, h.clone(), 7).unwrap();
        assert!(o.general.is_none() && judge.timed_at.is_empty(), "{o:?}");
        let mut judge = script();
        let floor = w.sizes.clone();
        let o = choose(&mut judge, &spec, &w, &winner, Some(&floor), h, 7).unwrap();
        let g = o.general.expect("a general variant");
        assert_eq!((g.params["VEC"], g.params["WG"]), (1, 2));
        assert!(
            judge.timed_at.iter().all(|&n| n == 1024),
            "{:?}",
            judge.timed_at
        );
        let note = o.note.unwrap();
        assert!(
            note.contains("slower than the reference below its floor")
                && note.contains("the general variant (VEC=1, WG=2) serves there"),
            "{note}"
        );
    }

    /// A winner that refuses part of its region and has a floor, where nothing that runs
    /// everywhere is faster than the reference below the floor: the general variant still
    /// serves the sizes the winner refuses, chosen by its time at the workload.
    #[test]
    fn a_refusing_winner_keeps_its_general_variant_when_nothing_is_faster_below_its_floor() {
        let spec = spec();
        let w = spec.workloads[0].clone();
        let winner: Params = [("VEC".to_string(), 8), ("WG".to_string(), 1)].into();
        let h = history(&[(8, 1), (4, 2), (1, 2), (1, 1)]);
        let mut judge = script();
        judge.slow_below = true;
        let floor = w.sizes.clone();
        let o = choose(&mut judge, &spec, &w, &winner, Some(&floor), h, 7).unwrap();
        let g = o.general.expect("a general variant");
        assert_eq!((g.params["VEC"], g.params["WG"]), (1, 2));
        assert!(!judge.timed_at.is_empty());
        let note = o.note.unwrap();
        assert!(
            note.contains("cannot run at") && note.contains("the general variant (VEC=1, WG=2)"),
            "{note}"
        );
    }
}
