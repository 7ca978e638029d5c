//! The language model as the search engine's external operator: source-level evolution in
//! the same loop and on the same budget as the parameter search (optional: only with a
//! language model configured).
//!
//! Every `every` evaluations of the search, one turn, one mutation: a parent is taken from a
//! small MAP-Elites archive of source variants (cells = the optimisation levels recognised in
//! the source: memory, algorithm, parallelism), or the best parameter configuration of the
//! annotated source; the model is asked for a rewrite with the device's description, the
//! parent's time and roofline fraction, other elites as inspirations, steering hints and the
//! recent failures; the answer must keep the signature, then it is built and verified by the
//! same supervised worker as every candidate (fresh inputs, poisoned outputs, reference on the
//! same inputs). A rewrite that passes enters the archive; the fastest source variant competes
//! with the parameter search's finalists for the win.
//!
//! Steering hints are the archive's gradient along each level dimension: a higher level that
//! paid elsewhere in the archive (∂F > 0), a higher level never tried (∂E, an empty cell), or
//! one that did not pay so far.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use kfoundry_rt::model::spec::{KernelSpec, Params};
use kfoundry_search::{Evaluation, ExternalOperator, FailureKind, Progress, Record};
use kfoundry_tooling::generated::source_hash;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::mutator::Feedback;
use super::{
    source_levels, DeviceDescription, Inspiration, LlmConfig, MutationContext, Mutator,
    MutatorState,
};
use crate::messages::{LlmSummary, LlmTurn};
use kfoundry_bench::params_of;
use kfoundry_bench::supervisor::Supervised;

/// Evaluations of one proposal at most (its declared parameters' values).
const MAX_EVALS_PER_PROPOSAL: usize = 4;

/// A source variant that passed verification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceElite {
    pub source: String,
    pub hash: String,
    /// The defines it was measured with (the annotation's parameters, plus any it declared).
    pub params: Params,
    /// Seconds.
    pub time: f64,
    /// Memory, algorithm and parallelism levels (0–3).
    pub levels: [u8; 3],
}

/// The resumable part (the client is rebuilt from the configuration).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceState {
    pub mutator: MutatorState,
    pub elites: Vec<SourceElite>,
    pub evaluated: BTreeSet<String>,
    pub records: Vec<LlmTurn>,
    pub rng: ChaCha8Rng,
}

pub struct SourceSearch {
    mutator: Mutator,
    elites: BTreeMap<[u8; 3], SourceElite>,
    /// Hashes of every source evaluated (a repeated answer is not evaluated again).
    evaluated: BTreeSet<String>,
    pub records: Vec<LlmTurn>,
    rng: ChaCha8Rng,
}

/// What the tuner knows when it asks for a mutation.
struct Context<'a> {
    pub spec: &'a KernelSpec,
    pub device: DeviceDescription,
    pub reference_time: f64,
    /// The parameter search's best so far.
    pub best_params: Params,
    pub best_time: f64,
    /// Roofline floor in seconds at given defines, when the kernel declares a cost.
    pub floor: &'a dyn Fn(&Params) -> Option<f64>,
}

impl SourceSearch {
    pub fn new(config: &LlmConfig, seed: u64) -> anyhow::Result<SourceSearch> {
        let mutator = Mutator::from_config(config, seed)
            .map_err(|e| anyhow::anyhow!("language model: {e}"))?;
        Ok(SourceSearch {
            mutator,
            elites: BTreeMap::new(),
            evaluated: BTreeSet::new(),
            records: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5EED),
        })
    }

    pub fn resume(config: &LlmConfig, state: SourceState) -> anyhow::Result<SourceSearch> {
        let client = super::connect(config).map_err(|e| anyhow::anyhow!("language model: {e}"))?;
        Ok(SourceSearch {
            mutator: Mutator::resume(client, state.mutator, config)
                .map_err(|e| anyhow::anyhow!("checkpoint: {e}"))?,
            elites: state.elites.into_iter().map(|e| (e.levels, e)).collect(),
            evaluated: state.evaluated,
            records: state.records,
            rng: state.rng,
        })
    }

    pub fn state(&self) -> SourceState {
        SourceState {
            mutator: self.mutator.state(),
            elites: self.elites.values().cloned().collect(),
            evaluated: self.evaluated.clone(),
            records: self.records.clone(),
            rng: self.rng.clone(),
        }
    }

    /// Whether a mutation is due after `evaluations` evaluations of the parameter search.
    pub fn wants(&self, evaluations: usize) -> bool {
        evaluations > 0 && self.mutator.wants(evaluations as u64)
    }

    pub fn mutator(&self) -> &Mutator {
        &self.mutator
    }

    /// Requests and tokens spent so far.
    pub fn spent(&self) -> super::Spent {
        self.mutator.spent()
    }

    /// What the model did, for the tune's result.
    pub fn summary(&self) -> LlmSummary {
        let spent = self.spent();
        LlmSummary {
            requests: u64::from(spent.requests),
            tokens: spent.tokens,
            mutations: self.records.len(),
            accepted: self
                .records
                .iter()
                .filter(|r| r.outcome == "accepted")
                .count(),
            elites: self.elites.len(),
            meta_requests: self.mutator.counters().meta_requests,
            prompt_variants: self.mutator.population().variants().len(),
            disabled: self.mutator.disabled().map(str::to_string),
        }
    }

    /// The source elites, fastest first.
    pub fn elites(&self) -> Vec<&SourceElite> {
        let mut v: Vec<&SourceElite> = self.elites.values().collect();
        v.sort_by(|a, b| a.time.total_cmp(&b.time));
        v
    }

    /// One mutation: choose a parent, ask the model, verify the answer, archive it if it
    /// passes. Returns what happened.
    fn turn(&mut self, bench: &mut Supervised, cx: &Context) -> LlmTurn {
        let record = self.mutate(bench, cx);
        self.records.push(record.clone());
        record
    }

    fn mutate(&mut self, bench: &mut Supervised, cx: &Context) -> LlmTurn {
        let spec = cx.spec;
        let (parent_source, parent_params, parent_time) = self.parent(cx);
        let levels = source_levels(&parent_source).indices();
        let ctx = MutationContext {
            kernel: spec.signature.name.clone(),
            reference_source: spec.source.clone(),
            parent_source: parent_source.clone(),
            parent_params: parent_params.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            geometry: Some(geometry(spec)),
            device: cx.device.clone(),
            time: Some(parent_time),
            reference_time: Some(cx.reference_time),
            roofline_fraction: (cx.floor)(&parent_params).map(|f| f / parent_time),
            inspirations: self
                .elites()
                .into_iter()
                .filter(|e| e.source != parent_source)
                .take(2)
                .map(|e| Inspiration {
                    source: e.source.clone(),
                    params: e.params.iter().map(|(k, v)| (k.clone(), *v)).collect(),
                    time: e.time,
                })
                .collect(),
            hints: self.hints(levels, parent_time),
        };
        let proposal = match self.mutator.propose(&ctx) {
            Ok(p) => p,
            Err(r) => {
                return LlmTurn {
                    prompt_variant: r.prompt_variant,
                    hash: None,
                    outcome: "rejected".into(),
                    detail: r.reason,
                    time: None,
                }
            }
        };
        let hash = source_hash(&proposal.source);
        if !self.evaluated.insert(hash.clone()) {
            return LlmTurn {
                prompt_variant: Some(proposal.prompt_variant),
                hash: Some(hash),
                outcome: "rejected".into(),
                detail: "the same source was evaluated before".into(),
                time: None,
            };
        }
        // The parent's defines, and the values of any parameter the rewrite declares.
        let mut candidates = vec![parent_params.clone()];
        for d in &proposal.declared_params {
            candidates = candidates
                .iter()
                .flat_map(|p| {
                    d.values.iter().map(move |v| {
                        let mut p = p.clone();
                        p.insert(d.name.clone(), *v);
                        p
                    })
                })
                .take(MAX_EVALS_PER_PROPOSAL)
                .collect();
        }
        let mut best: Option<(Params, f64)> = None;
        let mut first_failure: Option<(FailureKind, String)> = None;
        for params in candidates {
            match bench.evaluate_source(&params, &proposal.source) {
                Evaluation::Ok { time, .. } => {
                    if best.as_ref().is_none_or(|(_, t)| time < *t) {
                        best = Some((params, time));
                    }
                }
                Evaluation::Failed { kind, reason, .. } => {
                    if first_failure.is_none() {
                        let detail = match (kind, bench.build_failures.last()) {
                            (FailureKind::Build, Some((p, log))) if *p == params => log.clone(),
                            _ => reason,
                        };
                        first_failure = Some((kind, detail));
                    }
                }
            }
        }
        let variant = proposal.prompt_variant;
        let (feedback, record) = match (best, first_failure) {
            (Some((params, time)), _) => {
                let levels = proposal.levels.indices();
                let elite = SourceElite {
                    source: proposal.source.clone(),
                    hash: hash.clone(),
                    params,
                    time,
                    levels,
                };
                if self.elites.get(&levels).is_none_or(|e| time < e.time) {
                    self.elites.insert(levels, elite);
                }
                (
                    Feedback::Accepted {
                        score: cx.reference_time / time,
                    },
                    LlmTurn {
                        prompt_variant: Some(variant),
                        hash: Some(hash),
                        outcome: "accepted".into(),
                        detail: format!("levels {levels:?}"),
                        time: Some(time),
                    },
                )
            }
            (None, Some((kind, detail))) => {
                let (feedback, label) = match kind {
                    FailureKind::Build => (
                        Feedback::BuildFailed {
                            log: detail.clone(),
                        },
                        "build",
                    ),
                    FailureKind::Wrong => (
                        Feedback::Wrong {
                            summary: detail.clone(),
                        },
                        "wrong",
                    ),
                    _ => (
                        Feedback::Failed {
                            summary: format!("{kind:?}: {detail}"),
                        },
                        "failed",
                    ),
                };
                (
                    feedback,
                    LlmTurn {
                        prompt_variant: Some(variant),
                        hash: Some(hash),
                        outcome: label.into(),
                        detail,
                        time: None,
                    },
                )
            }
            (None, None) => (
                Feedback::Failed {
                    summary: "nothing was evaluated".into(),
                },
                LlmTurn {
                    prompt_variant: Some(variant),
                    hash: Some(hash),
                    outcome: "failed".into(),
                    detail: "nothing was evaluated".into(),
                    time: None,
                },
            ),
        };
        // A meta-request may run here; its outcome shows in the population, not in this record.
        let _ = self.mutator.report(variant, feedback);
        record
    }

    /// The fastest elite (source variant or the parameter search's best) with probability
    /// 0.6, else one at random: exploitation and exploration.
    fn parent(&mut self, cx: &Context) -> (String, Params, f64) {
        let mut pool: Vec<(String, Params, f64)> =
            vec![(cx.spec.source.clone(), cx.best_params.clone(), cx.best_time)];
        pool.extend(
            self.elites
                .values()
                .map(|e| (e.source.clone(), e.params.clone(), e.time)),
        );
        pool.sort_by(|a, b| a.2.total_cmp(&b.2));
        let i = if self.rng.gen_bool(0.6) {
            0
        } else {
            self.rng.gen_range(0..pool.len())
        };
        pool.swap_remove(i)
    }

    /// Steering hints along the three level dimensions from the parent's cell.
    fn hints(&self, levels: [u8; 3], parent_time: f64) -> Vec<String> {
        let mut out = Vec::new();
        for (d, names) in LEVEL_NAMES.iter().enumerate() {
            let here = levels[d] as usize;
            let Some(next) = names.get(here + 1) else {
                continue;
            };
            let higher: Vec<&SourceElite> = self
                .elites
                .values()
                .filter(|e| e.levels[d] as usize > here)
                .collect();
            if higher.iter().any(|e| e.time < parent_time) {
                out.push(format!("{}: going further ({next}) paid off in another variant; push in that direction", DIMENSIONS[d]));
            } else if higher.is_empty() {
                out.push(format!("{}: not tried yet: {next}", DIMENSIONS[d]));
            } else {
                out.push(format!(
                    "{}: {next} has not paid off so far; only if you see why it would here",
                    DIMENSIONS[d]
                ));
            }
        }
        out
    }
}

/// The language model's turns in the search of one kernel at one workload: the engine's
/// external operator over [`SourceSearch`].
pub struct LanguageModel<'a> {
    pub search: &'a mut SourceSearch,
    pub spec: &'a KernelSpec,
    pub device: DeviceDescription,
    /// Roofline floor in seconds at given defines, when the kernel declares a cost.
    pub floor: &'a dyn Fn(&Params) -> Option<f64>,
}

impl ExternalOperator<Supervised> for LanguageModel<'_> {
    /// A turn is due every `every` evaluations (any time once the parameter space is
    /// exhausted), while the model is usable and once the reference and a best are measured
    /// (the prompt quotes both).
    fn wants_turn(&self, progress: &Progress, exhausted: bool) -> bool {
        self.search.mutator.disabled().is_none()
            && progress.best.is_some()
            && reference_time(self.spec, progress.history).is_some()
            && (exhausted
                || self
                    .search
                    .wants(progress.evaluations + progress.external_turns))
    }

    fn turn(&mut self, bench: &mut Supervised, progress: &Progress) -> f64 {
        let started = Instant::now();
        let (Some((best, best_time)), Some(reference_time)) =
            (progress.best, reference_time(self.spec, progress.history))
        else {
            return 0.0;
        };
        let cx = Context {
            spec: self.spec,
            device: self.device.clone(),
            reference_time,
            best_params: params_of(self.spec, best),
            best_time,
            floor: self.floor,
        };
        self.search.turn(bench, &cx);
        started.elapsed().as_secs_f64()
    }
}

/// The reference's measured time in the search history.
fn reference_time(spec: &KernelSpec, history: &[Record]) -> Option<f64> {
    history
        .iter()
        .find(|r| params_of(spec, &r.config) == spec.reference)
        .and_then(|r| r.outcome.time())
}

const DIMENSIONS: [&str; 3] = ["memory", "algorithm", "parallelism"];
const LEVEL_NAMES: [[&str; 4]; 3] = [
    [
        "scalar loads",
        "vector loads (vloadN/floatN) and coalesced accesses",
        "local-memory tiling with barriers",
        "register blocking or prefetching",
    ],
    [
        "separate passes",
        "fusing the stages into one kernel",
        "a single pass with work-group collectives or atomics",
        "a loop over tiles",
    ],
    [
        "independent work-items",
        "work-group cooperation (barriers, work_group_reduce)",
        "sub-group functions",
        "work-group and sub-group cooperation together",
    ],
];

/// The launch geometry as the annotation states it.
fn geometry(spec: &KernelSpec) -> String {
    let list = |v: &[kfoundry_rt::model::expr::Expr]| {
        v.iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match &spec.local {
        Some(l) => format!("global = ({}), local = ({})", list(&spec.global), list(l)),
        None => format!(
            "global = ({}), local chosen by the driver",
            list(&spec.global)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elite(levels: [u8; 3], time: f64) -> SourceElite {
        SourceElite {
            source: format!("{levels:?}"),
            hash: String::new(),
            params: Params::new(),
            time,
            levels,
        }
    }

    fn search() -> SourceSearch {
        let cfg = LlmConfig::new("http://127.0.0.1:9", "m");
        SourceSearch::new(&cfg, 1).expect("search")
    }

    #[test]
    fn hints_follow_the_archive() {
        let mut s = search();
        // Nothing archived: every dimension is unexplored.
        let h = s.hints([0, 0, 0], 1.0);
        assert_eq!(h.len(), 3);
        assert!(h.iter().all(|h| h.contains("not tried yet")), "{h:?}");
        // A faster variant with local-memory tiling: memory is worth pushing.
        s.elites.insert([2, 0, 0], elite([2, 0, 0], 0.5));
        // A slower one with sub-groups: parallelism did not pay.
        s.elites.insert([0, 0, 2], elite([0, 0, 2], 2.0));
        let h = s.hints([0, 0, 0], 1.0);
        assert!(h[0].starts_with("memory: going further"), "{h:?}");
        assert!(h[1].contains("not tried yet"), "{h:?}");
        assert!(h[2].contains("has not paid off"), "{h:?}");
        // At the top level of a dimension there is nothing further to suggest.
        assert_eq!(s.hints([3, 0, 0], 1.0).len(), 2);
    }

    #[test]
    fn state_round_trips() {
        let mut s = search();
        s.elites.insert([1, 0, 0], elite([1, 0, 0], 0.5));
        s.evaluated.insert("abc".into());
        let json = serde_json::to_string(&s.state()).expect("serialize");
        let back: SourceState = serde_json::from_str(&json).expect("deserialize");
        let r =
            SourceSearch::resume(&LlmConfig::new("http://127.0.0.1:9", "m"), back).expect("resume");
        assert_eq!(r.elites().len(), 1);
        assert!(r.evaluated.contains("abc"));
    }
}
