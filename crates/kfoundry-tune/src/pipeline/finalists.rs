//! Stage 4, from a finished search to the variant that is shipped: the fastest candidates
//! ([`select`]), in order, are re-measured alternately with the reference
//! ([`super::remeasure`]), and one faster there is proven at other sizes ([`crate::prove`]);
//! the first that passes both wins. (Re-measuring first spares the proof of a finalist that
//! would lose anyway; the bench is sealed before either, so both see what the source compiles
//! to.) A finalist that fails anywhere is dropped with its reason and the next one is tried;
//! only a reference that fails makes the kernel's tune fail. When the search was cut short and
//! the lockfile already holds a complete result, the new winner must also beat that one on
//! re-measure.

use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes, Workload};
use kfoundry_search::Record;

use super::remeasure::{beats_existing, measure_reference, remeasure};
pub use crate::events::Unshipped;
use crate::prove::{prove, NotProven, Scope};
use crate::text::fmt_ns;
use kfoundry_bench::case::Case;
use kfoundry_bench::{params_of, ErrorStats, Judge};

/// Finalists re-measured and proven, fastest first, until one wins.
pub(crate) const FINALISTS: usize = 3;

/// A candidate for the win: parameters, and the generated source when it is a source-level
/// variant.
pub(crate) type Finalist = (Params, Option<String>);

/// The result of the stage.
#[derive(Debug, Clone)]
pub struct Decision {
    pub params: Params,
    pub source: Option<String>,
    /// Every size set the winner was verified at (the workload's first).
    pub proven: Vec<Sizes>,
    /// The values of integer scalars it was verified with (smallest, largest).
    pub scalars: std::collections::BTreeMap<String, [i64; 2]>,
    /// Proof cases run, and skipped because the reference could not be trusted there.
    pub proof_cases: (usize, usize),
    /// The seed the proofs drew from.
    pub proof_seed: u64,
    /// Medians of the alternating re-measures, seconds.
    pub best_s: f64,
    pub reference_s: f64,
    pub errors: Option<ErrorStats>,
    pub rejections: Vec<Unshipped>,
    /// Why the reference (or an earlier complete entry) is shipped rather than a finalist.
    pub note: Option<String>,
    /// The lockfile's complete earlier entry stays: the interrupted search did not beat it.
    pub kept_existing: bool,
    /// Wall seconds spent proving finalists (the rest of the decision is re-measuring).
    pub proof_seconds: f64,
    /// Where the winner does not run (its constraints refuse part of its region, or below its
    /// floor): the variant proven to serve there ([`super::general`]).
    pub general: Option<General>,
    /// Below what the winner gives way to the reference ([`super::floor`]).
    pub floor: Option<Sizes>,
}

/// The fastest distinct successful candidates (configurations of the annotated source from
/// the search's history, and source-level variants with their defines), at most
/// `FINALISTS`, then the reference.
pub fn select(
    spec: &KernelSpec,
    history: &[Record],
    sources: Vec<(f64, Params, Option<String>)>,
) -> Vec<Finalist> {
    let mut ok: Vec<(f64, Params, Option<String>)> = history
        .iter()
        .filter_map(|r| {
            r.outcome
                .time()
                .map(|t| (t, params_of(spec, &r.config), None))
        })
        .collect();
    ok.extend(sources);
    ok.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<Finalist> = Vec::new();
    for (_, p, s) in ok {
        if out.len() >= FINALISTS {
            break;
        }
        let c = (p, s);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out.push((spec.reference.clone(), None));
    out
}

/// Proves and re-measures `finalists` (fastest first; the reference among them is skipped) and
/// picks the winner. `existing`: the complete result already in the lockfile for this kernel,
/// device and workload, which the winner must beat on re-measure in this run to replace it (a
/// re-tune on a busy machine, or an interrupted one, never replaces a better entry).
/// `proof_seed` seeds the proof's draws. `Err` when the reference itself fails on re-measure,
/// or is out of bounds on the inputs its annotation declares (no variant can be proven
/// against it).
pub fn decide(
    judge: &mut dyn Judge,
    spec: &KernelSpec,
    workload: &Workload,
    finalists: &[Finalist],
    existing: Option<&Finalist>,
    proof_seed: u64,
    mut rejected: impl FnMut(&Unshipped),
) -> Result<Decision, String> {
    let mut rejections = Vec::new();
    let mut reject = |params: &Params,
                      stage: &'static str,
                      reason: String,
                      counterexample: Option<Box<Case>>,
                      rejections: &mut Vec<Unshipped>| {
        let r = Unshipped {
            params: params.clone(),
            stage,
            reason,
            counterexample,
        };
        rejected(&r);
        rejections.push(r);
    };
    let mut slower = None;
    let mut winner = None;
    let mut proof_seconds = 0.0;
    // From here on nothing comes from the program cache: the re-measure times, and the proof
    // checks, what the source compiles to.
    judge.seal();
    for (params, source) in finalists {
        if *params == spec.reference && source.is_none() {
            continue;
        }
        match try_finalist(
            judge,
            spec,
            workload,
            params,
            source.as_deref(),
            proof_seed,
            &mut proof_seconds,
        )? {
            Tried::Failing(why) => reject(params, "remeasure", why, None, &mut rejections),
            Tried::Slower {
                best_s,
                reference_s,
            } => {
                if slower.is_none() {
                    slower = Some((
                        format!(
                            "no finalist was faster than the reference on re-measure (the fastest: {} against {})",
                            fmt_ns(best_s * 1e9),
                            fmt_ns(reference_s * 1e9)
                        ),
                        reference_s,
                    ));
                }
            }
            Tried::Refused {
                why,
                counterexample,
            } => reject(params, "probe", why, counterexample, &mut rejections),
            Tried::Proven {
                best_s,
                reference_s,
                errors,
                proven,
            } => {
                winner = Some(Decision {
                    params: params.clone(),
                    source: source.clone(),
                    proof_cases: (proven.cases, proven.skipped),
                    proof_seed,
                    scalars: proven.scalars,
                    proven: proven.sizes,
                    best_s,
                    reference_s,
                    errors,
                    rejections: Vec::new(),
                    note: None,
                    kept_existing: false,
                    proof_seconds: 0.0,
                    general: None,
                    floor: None,
                });
                break;
            }
        }
    }
    let mut decision = match winner {
        Some(d) => d,
        None => {
            // The reference's time the note names, where a finalist was re-measured against
            // it: one number for the reference in the note, the table and the lockfile.
            let (reference_s, errors) = match &slower {
                Some((_, reference_s)) => (*reference_s, Some(ErrorStats::default())),
                None => measure_reference(judge, spec)?,
            };
            Decision {
                params: spec.reference.clone(),
                source: None,
                proven: reference_region(spec, &workload.sizes, judge.limits()),
                scalars: Default::default(),
                proof_cases: (0, 0),
                proof_seed,
                best_s: reference_s,
                reference_s,
                errors,
                rejections: Vec::new(),
                note: Some(slower.map(|(note, _)| note).unwrap_or_else(|| {
                    if rejections.is_empty() {
                        "no candidate was faster than the reference in the search".to_string()
                    } else {
                        "every faster finalist was rejected".to_string()
                    }
                })),
                kept_existing: false,
                proof_seconds: 0.0,
                general: None,
                floor: None,
            }
        }
    };
    if let Some((old_params, old_source)) = existing {
        let same = *old_params == decision.params && *old_source == decision.source;
        if !same
            && !beats_existing(
                judge,
                &decision.params,
                decision.source.as_deref(),
                (old_params, old_source.as_deref()),
            )
        {
            decision.kept_existing = true;
            decision.note = Some(
                "this tune's winner did not beat the complete result already in the lockfile, measured against it in this run; that result is kept"
                    .into(),
            );
        }
    }
    decision.rejections = rejections;
    decision.proof_seconds = proof_seconds;
    Ok(decision)
}

/// A workload's general variant, proven ([`super::general`] chooses it; it is part of the
/// [`Decision`], so it is defined here, where the decision is).
#[derive(Debug, Clone, PartialEq)]
pub struct General {
    pub params: Params,
    /// Every size set it was proven at (the workload's first).
    pub proven: Vec<Sizes>,
    /// The values of integer scalars it was proven with (smallest, largest).
    pub scalars: std::collections::BTreeMap<String, [i64; 2]>,
    pub proof_cases: usize,
    /// Medians of the alternating re-measure at the workload, seconds.
    pub best_s: f64,
    pub reference_s: f64,
    /// Below what it gives way to the reference ([`super::floor`]).
    pub floor: Option<Sizes>,
}

/// What trying one finalist came to ([`try_finalist`]).
pub enum Tried {
    /// It failed on re-measure: why.
    Failing(String),
    /// It was no faster than the reference on re-measure (medians, seconds).
    Slower { best_s: f64, reference_s: f64 },
    /// It was faster, and its proof refused it.
    Refused {
        why: String,
        counterexample: Option<Box<Case>>,
    },
    /// It was faster, and proven over its default region.
    Proven {
        best_s: f64,
        reference_s: f64,
        errors: Option<ErrorStats>,
        proven: crate::prove::Proven,
    },
}

/// Re-measures `params` (of `source` when given) alternately with the reference and, when
/// it is faster, proves it over the tune's default region around `workload` with `proof_seed`
/// (the proof's wall seconds added to `proof_seconds`): the step every finalist takes, a
/// winner's and a general variant's alike. `Err` when the reference fails on re-measure, or
/// is out of bounds on the inputs its annotation declares (no variant can be proven against
/// it: the kernel's error, not a candidate's).
pub fn try_finalist(
    judge: &mut dyn Judge,
    spec: &KernelSpec,
    workload: &Workload,
    params: &Params,
    source: Option<&str>,
    proof_seed: u64,
    proof_seconds: &mut f64,
) -> Result<Tried, String> {
    let (best_s, reference_s, errors) = match remeasure(judge, spec, params, source)? {
        Err(why) => return Ok(Tried::Failing(why)),
        Ok((best_s, reference_s, _)) if best_s >= reference_s => {
            return Ok(Tried::Slower {
                best_s,
                reference_s,
            })
        }
        Ok(faster) => faster,
    };
    let scope = Scope {
        sizes: &workload.sizes,
        claimed: None,
        seed: proof_seed,
    };
    let proving = std::time::Instant::now();
    let proof = prove(judge, spec, params, source, &scope);
    *proof_seconds += proving.elapsed().as_secs_f64();
    match proof {
        Ok(proven) => Ok(Tried::Proven {
            best_s,
            reference_s,
            errors,
            proven,
        }),
        Err(NotProven::Failed {
            why,
            counterexample,
        }) => Ok(Tried::Refused {
            why,
            counterexample,
        }),
        Err(NotProven::Annotation(why)) => Err(format!("the annotation of `{}`: {why}", spec.id)),
    }
}

/// What an entry that keeps the reference records: the workload and the corners of the
/// default region a winner would have been proven over, each moved to where the reference can
/// run (every recorded set must be one the entry's parameters run at; more than four sizes: a
/// fixed sample of the corners, so that the same region is recorded every time). The reference
/// needs no proof, and a call anywhere in that region then finds this entry, the best found
/// there, not a variant tuned at some other workload.
fn reference_region(
    spec: &KernelSpec,
    sizes: &Sizes,
    limits: &kfoundry_bench::Limits,
) -> Vec<Sizes> {
    use rand::SeedableRng as _;
    let region = crate::prove::sizes::default_region(spec, &spec.reference, sizes, limits);
    let mut fixed = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let corners = crate::prove::sizes::corner_sizes(
        spec,
        &spec.reference,
        sizes,
        &region,
        limits,
        &[],
        crate::prove::sizes::Reach::Tune,
        &mut fixed,
    );
    let mut out = vec![sizes.clone()];
    for corner in corners {
        if spec.geometry(&spec.reference, &corner, None).is_ok() && !out.contains(&corner) {
            out.push(corner);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfoundry_bench::case::Case;
    use kfoundry_bench::{Limits, Rejection, Verdict};
    use kfoundry_search::{Evaluation, FailureKind};
    use std::collections::BTreeMap;

    /// A scripted judge: each configuration's time, or the failures it meets.
    struct Script {
        times: BTreeMap<i64, f64>,
        /// Evaluations after which the configuration fails (counted per configuration).
        fail_after: BTreeMap<i64, usize>,
        wrong_at_larger: Vec<i64>,
        /// Wrong when verified again at the workload's sizes (on fresh inputs).
        wrong_at_workload: Vec<i64>,
        counts: BTreeMap<i64, usize>,
        limits: Limits,
        /// Whether the decision sealed the judge before it evaluated or verified anything.
        sealed: bool,
        /// Cases verified, per configuration.
        verified: BTreeMap<i64, usize>,
    }

    impl Judge for Script {
        fn evaluate(&mut self, params: &Params, _: Option<&str>) -> Evaluation {
            assert!(self.sealed, "evaluated before the judge was sealed");
            let k = params["K"];
            let n = self.counts.entry(k).or_default();
            *n += 1;
            if self.fail_after.get(&k).is_some_and(|after| *n > *after) {
                return Evaluation::failed(FailureKind::Wrong, "flaky", 0.0);
            }
            Evaluation::ok(self.times[&k], 0.0)
        }
        fn verify(
            &mut self,
            params: &Params,
            case: &Case,
            _: Option<&str>,
        ) -> Result<Verdict, kfoundry_bench::Untrusted> {
            assert!(self.sealed, "verified before the judge was sealed");
            *self.verified.entry(params["K"]).or_default() += 1;
            let sizes = &case.sizes;
            if self.wrong_at_larger.contains(&params["K"]) && sizes["n"] > 4096 {
                return Ok(Err(Rejection::Wrong("differs".into())));
            }
            if self.wrong_at_workload.contains(&params["K"]) && sizes["n"] == 4096 {
                return Ok(Err(Rejection::Wrong("differs on fresh inputs".into())));
            }
            Ok(Ok(ErrorStats::default()))
        }
        fn last_errors(&self) -> Option<ErrorStats> {
            Some(ErrorStats::default())
        }
        fn limits(&self) -> &Limits {
            &self.limits
        }
        fn seal(&mut self) {
            self.sealed = true;
        }
    }

    fn spec() -> KernelSpec {
        crate::test_spec::spec(
            r#"code = "__kernel void k(const int n, __global float* y) { y[0] = K; }", params(K = [0, 1, 2, 3]), reference(K = 0),
            global = n, buffers(y = n), check(y), workloads(w(n = 4096))"#,
        )
    }

    /// An entry that keeps the reference records sets the reference runs at, and only those
    /// (a lockfile whose reference entry named a corner its constraints refuse was refused
    /// when a program loaded it: MobileNetV3-small on an H100, `cin % 96 == 0` at cin = 136),
    /// the same ones every time.
    #[test]
    fn a_kept_reference_records_only_sets_it_runs_at() {
        let spec = crate::test_spec::spec(
            r#"code = "__kernel void k(const int n, const int m, const int c, __global float* y) { y[0] = K; }", params(K = [0, 1]), reference(K = 0),
            require(c % 96 == 0, n % 3 == 0), global = n * m * c, buffers(y = n * m * c), check(y), workloads(w(n = 33, m = 7, c = 960))"#,
        );
        let sizes = spec.workloads[0].sizes.clone();
        let limits = Limits {
            global_mem_bytes: 64 << 20,
            ..crate::test_spec::roomy_limits()
        };
        let recorded = reference_region(&spec, &sizes, &limits);
        assert!(recorded.len() > 2, "{recorded:?}");
        let v = kfoundry_rt::model::variant::Variant {
            device: "8086|cpu|1|3.0".into(),
            workload: "w".into(),
            sizes: sizes.clone(),
            params: spec.reference.clone(),
            time_ns: 1,
            reference_time_ns: 1,
            evaluations: 1,
            failures: 0,
            source: None,
            proven: recorded.clone(),
            scalars: Default::default(),
            proof: 0,
            partial: false,
            general: false,
            floor: None,
            device_info: None,
        };
        kfoundry_rt::model::variant::check_variant(&spec, &v, &[]).unwrap();
        assert_eq!(recorded, reference_region(&spec, &sizes, &limits));
    }

    fn k(v: i64) -> Finalist {
        ([("K".to_string(), v)].into(), None)
    }

    fn script(times: &[(i64, f64)]) -> Script {
        Script {
            times: times.iter().copied().collect(),
            fail_after: BTreeMap::new(),
            wrong_at_larger: vec![],
            wrong_at_workload: vec![],
            counts: BTreeMap::new(),
            sealed: false,
            verified: BTreeMap::new(),
            limits: Limits {
                max_work_group_size: 1024,
                max_alloc_bytes: 1 << 30,
                global_mem_bytes: 1 << 32,
                ..Limits::default()
            },
        }
    }

    #[test]
    fn a_flaky_finalist_is_dropped_and_the_next_one_wins() {
        let spec = spec();
        let w = spec.workloads[0].clone();
        let mut judge = script(&[(0, 4.0), (1, 1.0), (2, 2.0), (3, 3.0)]);
        judge.fail_after.insert(1, 1); // K=1 fails from its second evaluation on
        judge.wrong_at_larger.push(2); // K=2 is wrong above the tuned size
        let mut heard = Vec::new();
        let d = decide(
            &mut judge,
            &spec,
            &w,
            &[k(1), k(2), k(3), k(0)],
            None,
            7,
            |r| heard.push(r.clone()),
        )
        .unwrap();
        assert_eq!(d.params["K"], 3, "{d:?}");
        assert_eq!(d.rejections.len(), 2);
        assert_eq!(
            (d.rejections[0].params["K"], d.rejections[0].stage),
            (1, "remeasure")
        );
        assert_eq!(
            (d.rejections[1].params["K"], d.rejections[1].stage),
            (2, "probe")
        );
        assert_eq!(heard, d.rejections);
        assert!(
            d.proven.len() > 1 && d.proven[0] == w.sizes,
            "{:?}",
            d.proven
        );
        assert!(d.proven.iter().any(|s| s["n"] > 4096) && d.proven.iter().any(|s| s["n"] < 4096));
        assert_eq!((d.best_s, d.reference_s), (3.0, 4.0));
        // K=1 failed on re-measure: it was never proven.
        assert_eq!(judge.verified.get(&1), None);
    }

    /// The search checked candidates on input sets they shared; a finalist is checked again on
    /// fresh inputs at the workload's sizes before anything else.
    #[test]
    fn a_finalist_wrong_on_fresh_inputs_at_the_workload_is_dropped() {
        let spec = spec();
        let w = spec.workloads[0].clone();
        let mut judge = script(&[(0, 4.0), (1, 1.0), (2, 2.0)]);
        judge.wrong_at_workload.push(1);
        let d = decide(&mut judge, &spec, &w, &[k(1), k(2), k(0)], None, 7, |_| {}).unwrap();
        assert_eq!(d.params["K"], 2, "{d:?}");
        assert_eq!(
            (d.rejections[0].params["K"], d.rejections[0].stage),
            (1, "probe")
        );
        assert!(
            d.rejections[0].reason.contains("4096") && d.rejections[0].reason.contains("fresh"),
            "{:?}",
            d.rejections[0]
        );
    }

    /// A finalist slower than the reference on re-measure is not proven (its proof would buy
    /// nothing), and the reference ships.
    #[test]
    fn the_reference_ships_when_nothing_beats_it_and_says_why() {
        let spec = spec();
        let w = spec.workloads[0].clone();
        let mut judge = script(&[(0, 1.0), (1, 2.0), (2, 3.0)]);
        let d = decide(&mut judge, &spec, &w, &[k(1), k(2), k(0)], None, 7, |_| {}).unwrap();
        assert_eq!(d.params, spec.reference);
        assert!(judge.verified.is_empty(), "{:?}", judge.verified);
        assert_eq!(d.proof_seconds, 0.0);
        assert!(
            d.note
                .as_deref()
                .is_some_and(|n| n.contains("faster than the reference on re-measure")),
            "{:?}",
            d.note
        );
    }

    /// A finalist far slower than the reference after one round of the re-measure is not
    /// measured twice more (each round times the reference again); one near it is.
    #[test]
    fn a_clearly_slower_finalist_takes_one_round_of_the_remeasure() {
        let spec = spec();
        let w = spec.workloads[0].clone();
        let mut judge = script(&[(0, 1.0), (1, 2.0), (2, 1.1)]);
        decide(&mut judge, &spec, &w, &[k(1), k(2), k(0)], None, 7, |_| {}).unwrap();
        assert_eq!(judge.counts[&1], 1, "{:?}", judge.counts);
        assert_eq!(judge.counts[&2], 3, "{:?}", judge.counts);
        assert_eq!(judge.counts[&0], 4, "{:?}", judge.counts);
    }

    #[test]
    fn a_failing_reference_fails_the_tune() {
        let spec = spec();
        let w = spec.workloads[0].clone();
        let mut judge = script(&[(0, 1.0), (1, 0.5)]);
        judge.fail_after.insert(0, 0);
        let e = decide(&mut judge, &spec, &w, &[k(1)], None, 7, |_| {}).unwrap_err();
        assert!(e.contains("the reference failed on re-measure"), "{e}");
    }

    #[test]
    fn an_interrupted_search_keeps_a_faster_complete_entry() {
        let spec = spec();
        let w = spec.workloads[0].clone();
        let mut judge = script(&[(0, 4.0), (1, 2.0), (2, 1.0)]);
        let d = decide(&mut judge, &spec, &w, &[k(1)], Some(&k(2)), 7, |_| {}).unwrap();
        assert!(d.kept_existing, "{d:?}");
        let mut judge = script(&[(0, 4.0), (1, 2.0), (2, 3.0)]);
        let d = decide(&mut judge, &spec, &w, &[k(1)], Some(&k(2)), 7, |_| {}).unwrap();
        assert!(!d.kept_existing && d.params["K"] == 1, "{d:?}");
    }
}
