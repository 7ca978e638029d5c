//! The engine: islands of MAP-Elites archives, parent sampling, gradient-steered mutation,
//! budgets. [`SearchState`] is the whole state (serde-serializable, for checkpoints);
//! [`SearchState::step`] evaluates one configuration, [`SearchState::run`] loops.
//! [`SearchState::step_with`] also gives turns to an [`ExternalOperator`] (the language
//! model's source rewrites), in the same loop and on the same budget.

use std::collections::{HashMap, HashSet, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::archive::{Archive, Cell, Elite};
use crate::cones::{FailureCones, GroupSize, WORK_GROUP_LIMIT};
use crate::eval::{Evaluation, Evaluator, FailureKind};
use crate::gradient::{Gradient, GradientModel, Move, Weights};
use crate::operators::{self, Operator};
use crate::selection::{rank_correlation, Arm, ArmStats, Selection};
use crate::space::{Config, Indices, Space, SpaceError};
use crate::surrogate::Surrogate;

/// How parents are sampled: probabilities of the three modes (normalised when used).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// Fitness-weighted elites (rank-based, steeper for larger archives).
    pub exploit: f64,
    /// Weak cells (below the median) or cells next to empty ones.
    pub explore: f64,
    /// Any elite, uniformly.
    pub random: f64,
}

/// Probabilities of the mutation operators (normalised when used).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Operators {
    pub neighbour: f64,
    pub reset: f64,
    pub crossover: f64,
}

/// Engine settings. The defaults are fixed for every space: nothing here is tuned per kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Seed of the one random generator (ChaCha8).
    pub seed: u64,
    /// Stop after this many evaluations (failed ones included). Default 500.
    pub max_evals: Option<usize>,
    /// Stop once the evaluations' costs add up to this many seconds. Default none.
    pub max_seconds: Option<f64>,
    /// Stop after this many evaluations without a better best. Default none.
    pub stagnation: Option<usize>,
    /// Number of islands (separate archives). Default 2.
    pub islands: usize,
    /// Every this many evaluations each island sends its best to the next (ring). Default 10.
    pub migration_interval: usize,
    /// Random configurations evaluated before evolution starts (after the reference), spread
    /// over the islands; space-filling when the selection is adaptive
    /// ([`Selection::novel_start`]). Default 8.
    pub initial_samples: usize,
    /// At most this many bins per parameter descriptor. Default 4.
    pub max_bins: usize,
    pub sampling: Sampling,
    pub operators: Operators,
    /// Weights of ∂F, ∂R, ∂E. Default 0.4 / 0.4 / 0.2.
    pub weights: Weights,
    /// Per-move decay of the gradient statistics. Default 0.95.
    pub decay: f64,
    /// Pseudo-moves of the pooled estimate that shrink a cell's own. Default 3.
    pub prior: f64,
    /// Gradient-informed steering of parent choice and mutation direction. Default off: it
    /// showed no effect on data it was not chosen on (the manual's tuner chapter, `book/src/tuner.md`, "Search"); when off, parents are
    /// sampled and mutations directed without the gradient (moves are still recorded).
    pub gradient_steering: bool,
    /// Ablation switch: when true, the archive is a single cell keeping the best
    /// `population` configurations per island: a plain elitist GA.
    pub single_cell: bool,
    /// Size of the single cell's population. Default 16.
    pub population: usize,
    /// Candidate children produced per step; the one the screening model predicts fastest
    /// is evaluated (1 = no screening). Default 32.
    pub screening: usize,
    /// The model that screens the candidates. Default [`ScreenModel::Relevance`].
    #[serde(default = "ScreenModel::legacy")]
    pub screen_model: ScreenModel,
    /// How each step's way of proposing is chosen ([`crate::selection`]). Default adaptive.
    #[serde(default = "Selection::legacy")]
    pub selection: Selection,
    /// Configurations proposed together: each of a batch is proposed before the results of
    /// the others in it are known, so that the evaluator can prepare (build) them at once
    /// ([`crate::Evaluator::prepare`]); they are then evaluated one by one, in order. 1
    /// (the default): propose one, evaluate it, then propose the next.
    #[serde(default = "one")]
    pub batch: usize,
    /// Levels of speculation (0, the default: none). Before each evaluation (of a batch of
    /// one), the engine guesses a few outcomes of it (the surrogate's prediction, a failure,
    /// a new best, a slow one), works out what it would propose next after each, follows the
    /// likeliest guess this many levels deep, and offers every configuration found to the
    /// evaluator ([`crate::Evaluator::prepare`]), which may build them on idle cores. The
    /// search itself is unchanged: it proposes what it would have proposed without
    /// speculation, from the real outcomes; a wrong guess costs only a build nobody waits for.
    #[serde(default)]
    pub speculate: usize,
}

fn one() -> usize {
    1
}

/// The largest [`Settings::batch`].
pub(crate) const MAX_BATCH: usize = 64;
/// The largest [`Settings::speculate`].
pub const MAX_SPECULATE: usize = 8;

/// The surrogate model of candidate screening.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScreenModel {
    /// Distance-weighted mean fitness of the 3 nearest evaluated configurations (all
    /// parameters weigh the same). The model of earlier versions.
    Nearest,
    /// Additive main effects plus relevance-weighted nearest-neighbour residuals
    /// ([`crate::surrogate::Surrogate`]).
    Additive,
    /// Distance-weighted mean fitness of the 3 nearest evaluated configurations under a
    /// distance that weights each parameter by its learned relevance.
    Relevance,
}

impl ScreenModel {
    /// What a checkpoint written before this setting existed used.
    fn legacy() -> ScreenModel {
        ScreenModel::Nearest
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            seed: 0,
            max_evals: Some(500),
            max_seconds: None,
            stagnation: None,
            islands: 2,
            migration_interval: 10,
            initial_samples: 8,
            max_bins: 4,
            sampling: Sampling {
                exploit: 0.6,
                explore: 0.25,
                random: 0.15,
            },
            operators: Operators {
                neighbour: 0.6,
                reset: 0.15,
                crossover: 0.25,
            },
            weights: Weights::default(),
            decay: 0.95,
            prior: 3.0,
            gradient_steering: false,
            single_cell: false,
            population: 16,
            screening: 32,
            screen_model: ScreenModel::Relevance,
            selection: Selection::default(),
            batch: 1,
            speculate: 0,
        }
    }
}

impl Settings {
    /// The engine's defaults before adaptive selection (issue 13), exactly: every step screens
    /// mutated children, gradient steering on, 12 initial samples. The baseline the benchmarks
    /// compare the defaults with.
    pub fn before_adaptive_selection() -> Settings {
        Settings {
            selection: Selection::legacy(),
            gradient_steering: true,
            initial_samples: 12,
            ..Settings::default()
        }
    }

    /// Whether every setting is in range (settings come from checkpoints and `--set`, which
    /// anyone can write); the error says which.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_ISLANDS).contains(&self.islands) {
            return Err(format!(
                "{} islands (1 to {MAX_ISLANDS} allowed)",
                self.islands
            ));
        }
        if self.max_bins == 0
            || self.max_bins > u16::MAX as usize
            || self.population == 0
            || self.population > MAX_POPULATION
            || self.screening > MAX_SCREENING
        {
            return Err("settings out of range (max_bins, population or screening)".into());
        }
        let finite = [
            self.decay,
            self.prior,
            self.sampling.exploit,
            self.sampling.explore,
            self.sampling.random,
            self.operators.neighbour,
            self.operators.reset,
            self.operators.crossover,
            self.weights.fitness,
            self.weights.success,
            self.weights.empty,
        ];
        if finite.iter().any(|x| !x.is_finite() || *x < 0.0)
            || self.max_seconds.is_some_and(|x| !x.is_finite())
        {
            return Err("settings with negative or non-finite weights".into());
        }
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(format!("batch {} (1 to {MAX_BATCH} allowed)", self.batch));
        }
        if self.speculate > MAX_SPECULATE {
            return Err(format!(
                "speculate {} (0 to {MAX_SPECULATE} allowed)",
                self.speculate
            ));
        }
        self.selection.check()
    }

    /// Sets one setting from text, `KEY=VALUE`: a field name (dotted for the nested ones,
    /// e.g. `sampling.explore`) and a JSON value or a bare word (`screen_model=Nearest`).
    /// For `simulate --set` and `tune --set`; [`Settings::check`] says whether the result
    /// is in range.
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let (key, value) = assignment
            .split_once('=')
            .ok_or_else(|| format!("`{assignment}`: expected KEY=VALUE"))?;
        let value: serde_json::Value = serde_json::from_str(value.trim())
            .unwrap_or_else(|_| serde_json::Value::String(value.trim().to_string()));
        let mut all = serde_json::to_value(&*self).map_err(|e| e.to_string())?;
        let mut slot = &mut all;
        for part in key.trim().split('.') {
            slot = slot
                .as_object_mut()
                .and_then(|o| o.get_mut(part))
                .ok_or_else(|| format!("`{key}`: no such setting"))?;
        }
        *slot = value;
        *self = serde_json::from_value(all).map_err(|e| format!("`{assignment}`: {e}"))?;
        Ok(())
    }
}

/// One evaluation in the history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub config: Config,
    pub outcome: Evaluation,
    /// History index of the (first) parent, if any.
    pub parent: Option<usize>,
    /// Second parent of a crossover.
    pub other_parent: Option<usize>,
    pub operator: Operator,
    pub island: usize,
    /// Archive cell (meaningful for successful evaluations).
    pub cell: Cell,
    /// Seconds charged so far, this evaluation included.
    pub elapsed: f64,
    /// The way it was proposed, when the selection is adaptive (none for the reference and
    /// the initial random samples).
    #[serde(default)]
    pub arm: Option<Arm>,
    /// The surrogate's predicted fitness (−ln time) before it was evaluated, when there was
    /// a model.
    #[serde(default)]
    pub predicted: Option<f64>,
    /// How many evaluations the history had when it was proposed, when that was fewer than
    /// when it was evaluated (it was proposed in a batch, [`Settings::batch`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_at: Option<usize>,
}

/// Why the search stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stop {
    MaxEvals,
    MaxSeconds,
    Stagnation,
    /// Every valid configuration has been evaluated (or none can be found).
    Exhausted,
    /// The observer asked to stop (Ctrl-C).
    Interrupted,
}

/// What [`SearchState::step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stepped {
    /// Evaluated one configuration: its history index.
    Evaluated(usize),
    /// The external operator took a turn (see [`SearchState::step_with`]).
    External,
    /// Did nothing: the search is over.
    Done(Stop),
}

/// An operator whose candidates lie outside the parameter space, such as a language model's
/// source rewrites. [`SearchState::step_with`] offers it a turn before each step; a turn
/// counts as one evaluation of the budget and its cost in seconds is charged to the time
/// budget, so the search has one loop and one budget. `E` is the evaluator the search runs
/// with, which the operator uses to verify and time its own candidates.
pub trait ExternalOperator<E: ?Sized> {
    /// Whether it wants a turn now. `exhausted`: the parameter space has nothing left to
    /// propose (the rest of the budget is the operator's, if it wants it).
    fn wants_turn(&self, progress: &Progress, exhausted: bool) -> bool;
    /// Takes one turn; returns the seconds it cost.
    fn turn(&mut self, evaluator: &mut E, progress: &Progress) -> f64;
}

/// Progress, as shown to an observer after each evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress<'a> {
    /// Configurations evaluated (the history's length).
    pub evaluations: usize,
    /// Turns an external operator took: with `evaluations`, what the evaluation budget counts.
    pub external_turns: usize,
    pub failures: usize,
    /// Seconds charged so far (real or simulated).
    pub elapsed: f64,
    /// Best configuration and time so far.
    pub best: Option<(&'a Config, f64)>,
    /// The evaluation just done.
    pub last: Option<&'a Record>,
    /// Every evaluation so far.
    pub history: &'a [Record],
    pub settings: &'a Settings,
}

/// An archived configuration in the result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultElite {
    pub config: Config,
    pub time: f64,
    pub cell: Cell,
}

/// The outcome of a search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// Best configuration and its time (seconds); `None` if nothing succeeded.
    pub best: Option<(Config, f64)>,
    /// History index of the best.
    pub best_eval: Option<usize>,
    /// The elites of the union of the islands' archives, fastest first.
    pub elites: Vec<ResultElite>,
    pub history: Vec<Record>,
    pub evaluations: usize,
    pub failures: usize,
    pub elapsed: f64,
    pub stop: Option<Stop>,
}

/// Errors when starting a search.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SearchError {
    #[error("reference configuration: {0}")]
    Reference(SpaceError),
    #[error("settings: {0}")]
    Settings(String),
}

/// The whole state of a search. Serialize it to checkpoint, deserialize to resume
/// (the evaluator and the validity predicate are passed to each [`SearchState::step`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SearchState {
    space: Space,
    settings: Settings,
    rng: ChaCha8Rng,
    islands: Vec<Archive>,
    model: GradientModel,
    history: Vec<Record>,
    /// Every configuration evaluated → history index.
    #[serde(with = "crate::archive::pairs")]
    visited: HashMap<Indices, usize>,
    reference: Option<Indices>,
    reference_done: bool,
    best: Option<usize>,
    last_improvement: usize,
    failures: usize,
    elapsed: f64,
    next_island: usize,
    stop: Option<Stop>,
    /// Bins per descriptor (cached).
    bins: Vec<usize>,
    /// Descriptor of each parameter (cached).
    param_desc: Vec<Option<usize>>,
    /// Parameters with more than one value.
    free: Vec<usize>,
    /// The adaptive selection's running state (derived from the history).
    #[serde(default)]
    arms: ArmStats,
    /// Turns of the external operator, and the seconds they cost (outside the history).
    #[serde(default)]
    external_turns: usize,
    #[serde(default)]
    external_cost: f64,
    /// Per history index: mutations of it that produced an evaluated or invalid child (a
    /// parent whose neighbourhood is used up is sampled less).
    dead_ends: Vec<u32>,
    /// Proposed and not evaluated yet (the rest of a batch), in order.
    #[serde(default)]
    pending: VecDeque<Pending>,
    /// Warm starts not proposed yet ([`SearchState::warm_start`]), in order.
    #[serde(default)]
    warm: VecDeque<Indices>,
    /// Each configuration's work-group size, when the caller gave it
    /// ([`SearchState::set_group_size`]; not checkpointed: given again on resuming).
    #[serde(skip)]
    group_size: Option<GroupSize>,
    /// Every valid configuration of the space in enumeration order, once a random draw had to
    /// enumerate the space ([`SearchState::random_unvisited`]); shared by the copies that
    /// speculation makes. A cache of `valid`, which is one function for the whole search: not
    /// checkpointed (built again when needed).
    #[serde(skip)]
    valid_configs: Option<std::sync::Arc<ValidConfigs>>,
}

/// Every valid configuration of a space: in enumeration order, and as a set for lookups.
#[derive(Debug, Default)]
struct ValidConfigs {
    ordered: Vec<Indices>,
    set: HashSet<Indices>,
}

/// Parent-sampling weights of one island (see `SearchState::parent_weights`).
struct ParentWeights {
    elites: Vec<Elite>,
    /// Gradient of each elite's cell.
    grads: Vec<Vec<Gradient>>,
    exploit: Vec<f64>,
    explore: Vec<f64>,
}

fn fitness(time: f64) -> f64 {
    -time.ln()
}

/// Rejection-sampling attempts before enumerating the space for a random configuration.
const RANDOM_TRIES: usize = 2000;
/// Spaces up to this size are enumerated when rejection sampling finds nothing.
const ENUMERATE_LIMIT: u128 = 4_000_000;
/// Neighbours consulted by the screening models (for [`ScreenModel::Additive`], those whose
/// residuals correct the additive part).
const SURROGATE_K: usize = 3;
/// Weight factor of a parent per mutation of it that produced nothing new.
const DEAD_END_DECAY: f64 = 0.8;
/// Attempts at producing a new valid child by mutation before drawing a random one.
const MUTATION_TRIES: usize = 40;
/// Most warm starts a search takes ([`SearchState::warm_start`]).
pub const MAX_WARM_STARTS: usize = 8;
/// Largest settings a checkpoint may carry (far above anything useful).
const MAX_ISLANDS: usize = 256;
const MAX_POPULATION: usize = 1 << 16;
const MAX_SCREENING: usize = 1 << 12;

impl SearchState {
    /// A new search. `reference`, if given, is evaluated first (when valid), so the result
    /// is never worse than it.
    pub fn new(
        space: Space,
        settings: Settings,
        reference: Option<&Config>,
    ) -> Result<SearchState, SearchError> {
        settings.check().map_err(SearchError::Settings)?;
        let reference = match reference {
            Some(c) => Some(space.indices(c).map_err(SearchError::Reference)?),
            None => None,
        };
        let dims = if settings.single_cell {
            0
        } else {
            space.descriptors.len()
        };
        let capacity = if settings.single_cell {
            settings.population.max(2)
        } else {
            1
        };
        let bins: Vec<usize> = (0..space.descriptors.len())
            .map(|d| space.bins(d, settings.max_bins))
            .collect();
        let param_desc = if settings.single_cell {
            vec![None; space.len()]
        } else {
            space.param_descriptor()
        };
        let free = (0..space.len())
            .filter(|&p| space.params[p].values.len() > 1)
            .collect();
        // In single-cell mode the gradient still runs, per parameter over one cell: keep one
        // dimension per parameter so steering is comparable.
        let model_dims = if settings.single_cell {
            space.len()
        } else {
            dims
        };
        Ok(SearchState {
            rng: ChaCha8Rng::seed_from_u64(settings.seed),
            islands: (0..settings.islands)
                .map(|_| Archive::new(capacity))
                .collect(),
            model: GradientModel::new(model_dims, settings.weights, settings.decay, settings.prior),
            history: Vec::new(),
            visited: HashMap::new(),
            reference,
            reference_done: false,
            best: None,
            last_improvement: 0,
            failures: 0,
            elapsed: 0.0,
            next_island: 0,
            stop: None,
            bins,
            param_desc,
            free,
            arms: ArmStats::new(&settings.selection),
            external_turns: 0,
            external_cost: 0.0,
            dead_ends: Vec::new(),
            pending: VecDeque::new(),
            warm: VecDeque::new(),
            group_size: None,
            valid_configs: None,
            space,
            settings,
        })
    }

    /// How large each configuration's work-group is (what the caller launches it with). With
    /// it, and the limit evaluations report (the descriptor [`WORK_GROUP_LIMIT`], the
    /// reference's first), configurations with a larger work-group come last wherever the
    /// engine chooses, the initial samples included ([`Selection::group_limit`]).
    pub fn set_group_size(&mut self, size: Option<GroupSize>) {
        self.group_size = size;
    }

    /// The work-group limit so far: the smallest any successful evaluation reported, raised
    /// to the largest work-group that succeeded. Without a report, and with
    /// [`Selection::learn_group_limit`], one below the smallest work-group that failed to
    /// build or run above every one that succeeded. `None` without a size, a limit, or when
    /// [`Selection::group_limit`] is off.
    fn group_limit(&self) -> Option<(GroupSize, u64)> {
        let selection = &self.settings.selection;
        let size = self.group_size.clone().filter(|_| selection.group_limit)?;
        let mut reported: Option<u64> = None;
        let mut largest_ok = 0u64;
        for r in &self.history {
            if let Evaluation::Ok { descriptors, .. } = &r.outcome {
                if let Some((_, v)) = descriptors.iter().find(|(n, _)| n == WORK_GROUP_LIMIT) {
                    if v.is_finite() && *v >= 1.0 {
                        reported = Some(reported.map_or(*v as u64, |l| l.min(*v as u64)));
                    }
                }
                if r.outcome.time().is_some() {
                    largest_ok = largest_ok.max(size.of(&r.config).unwrap_or(0));
                }
            }
        }
        let limit = match reported {
            Some(l) => l,
            None if selection.learn_group_limit => {
                // Failures of resources only: a wrong output or a timeout says nothing of the
                // work-group.
                let smallest_failed = self
                    .history
                    .iter()
                    .filter(|r| {
                        matches!(
                            r.outcome,
                            Evaluation::Failed {
                                kind: FailureKind::Build
                                    | FailureKind::Runtime
                                    | FailureKind::Invalid,
                                ..
                            }
                        )
                    })
                    .filter_map(|r| size.of(&r.config))
                    .filter(|&s| s > largest_ok)
                    .min()?;
                smallest_failed - 1
            }
            None => return None,
        };
        Some((size, limit.max(largest_ok)))
    }

    /// Only the work-group limit's part of the cones ([`SearchState::group_limit`]).
    fn group_cap(&self) -> Option<FailureCones> {
        self.group_limit()
            .map(|(size, l)| FailureCones::default().with_group_limit(&self.space, size, l))
    }

    /// Warm starts: configurations known to be good elsewhere (the best of another workload,
    /// device or source version of the kernel, or of a kernel of the same template), best
    /// first, to be evaluated right after the reference and before the initial samples. Those
    /// not in the space, repeated, or the reference are left out, and at most
    /// [`MAX_WARM_STARTS`] are kept; only a search that has evaluated nothing takes them.
    /// Returns how many were kept. They seed every island's archive, as the reference does;
    /// the initial samples that follow are drawn as always. A warm start that looks good but
    /// lies in the wrong basin can cost more than its evaluation: the search exploits the
    /// region it starts in (BENCHMARKS.md, "Warm starts").
    pub fn warm_start(&mut self, configs: &[Config]) -> usize {
        if !self.history.is_empty() || !self.pending.is_empty() {
            return 0;
        }
        for c in configs {
            if self.warm.len() >= MAX_WARM_STARTS {
                break;
            }
            let Ok(idx) = self.space.indices(c) else {
                continue;
            };
            if self.reference.as_ref() != Some(&idx) && !self.warm.contains(&idx) {
                self.warm.push_back(idx);
            }
        }
        self.warm.len()
    }

    /// Checks a deserialized state (a checkpoint, which anyone could have edited) so that
    /// continuing it can neither panic nor diverge from what its history says: the settings
    /// and space must be sound, every record must name configurations of the space and
    /// earlier parents, and replaying the history through the engine must reproduce every
    /// structure derived from it (archives, gradient model, visited set, best, counts).
    pub fn validated(self) -> Result<SearchState, String> {
        self.settings.check()?;
        let space =
            Space::with_descriptors(self.space.params.clone(), self.space.descriptors.clone())
                .map_err(|e| format!("space: {e}"))?;
        let reference = match &self.reference {
            Some(idx) if !space.contains(idx) => {
                return Err("the reference is not a configuration of the space".into())
            }
            Some(idx) => Some(space.values(idx)),
            None => None,
        };
        let mut replay = SearchState::new(space, self.settings.clone(), reference.as_ref())
            .map_err(|e| e.to_string())?;
        for (i, r) in self.history.iter().enumerate() {
            let child = replay
                .space
                .indices(&r.config)
                .map_err(|e| format!("evaluation {i}: {e}"))?;
            if r.parent.is_some_and(|p| p >= i)
                || r.other_parent.is_some_and(|p| p >= i)
                || r.island >= replay.islands.len()
            {
                return Err(format!(
                    "evaluation {i} names a later parent or an island that does not exist"
                ));
            }
            if !r.outcome.cost().is_finite() || r.predicted.is_some_and(|p| !p.is_finite()) {
                return Err(format!(
                    "evaluation {i} has a non-finite cost or prediction"
                ));
            }
            if r.proposed_at.is_some_and(|at| at >= i) {
                return Err(format!(
                    "evaluation {i} says it was proposed after it was evaluated"
                ));
            }
            let proposal = Proposal {
                child,
                operator: r.operator,
                parent: r.parent,
                other: r.other_parent,
                arm: r.arm,
                predicted: r.predicted,
            };
            replay.record(
                Pending {
                    proposal,
                    island: r.island,
                    proposed_at: r.proposed_at.unwrap_or(i),
                },
                r.config.clone(),
                r.outcome.clone(),
            );
        }
        let consistent = replay.history == self.history
            && replay.islands == self.islands
            && replay.model == self.model
            && replay.visited == self.visited
            && replay.best == self.best
            && replay.last_improvement == self.last_improvement
            && replay.failures == self.failures
            && replay.elapsed.to_bits() == self.elapsed.to_bits()
            && replay.bins == self.bins
            && replay.param_desc == self.param_desc
            && replay.free == self.free
            && replay.arms == self.arms
            && self.dead_ends.len() == self.history.len();
        if !consistent {
            return Err(
                "its archives, gradient model or counts are not what its history gives".into(),
            );
        }
        // the predictions that decide the model's trust from here on are the model's
        let window = self.settings.selection.trust_window;
        let recent = self
            .history
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, r)| r.predicted.is_some())
            .take(window);
        for (i, r) in recent {
            let model = self.surrogate_of(r.proposed_at.unwrap_or(i));
            let idx = self
                .space
                .indices(&r.config)
                .map_err(|e| format!("evaluation {i}: {e}"))?;
            if model.map(|m| m.predict(&idx).to_bits()) != r.predicted.map(f64::to_bits) {
                return Err(format!(
                    "evaluation {i} has a prediction its history does not give"
                ));
            }
        }
        if !self.external_cost.is_finite() || self.external_cost < 0.0 {
            return Err("the external operator's cost is negative or not finite".into());
        }
        // what was proposed and not evaluated: new configurations of the space, each once,
        // with the model's prediction at the time
        let n = self.history.len();
        for (k, p) in self.pending.iter().enumerate() {
            let c = &p.proposal.child;
            let fresh = self.space.contains(c)
                && !self.visited.contains_key(c)
                && !self.pending.iter().take(k).any(|q| q.proposal.child == *c);
            let linked = p.island < replay.islands.len()
                && p.proposed_at <= n
                && p.proposal.parent.map_or(true, |x| x < n)
                && p.proposal.other.map_or(true, |x| x < n);
            let predicted = self
                .surrogate_of(p.proposed_at)
                .map(|m| m.predict(c).to_bits())
                == p.proposal.predicted.map(f64::to_bits)
                || p.proposal.predicted.is_none();
            if !fresh || !linked || !predicted || self.pending.len() > self.settings.batch {
                return Err(format!(
                    "proposal {k} not yet evaluated is not one the search could have made"
                ));
            }
        }
        Ok(SearchState {
            rng: self.rng,
            external_turns: self.external_turns,
            external_cost: self.external_cost,
            reference_done: self.reference_done,
            next_island: self.next_island % replay.islands.len(),
            stop: self.stop,
            dead_ends: self.dead_ends,
            pending: self.pending,
            warm: self
                .warm
                .into_iter()
                .filter(|w| replay.space.contains(w))
                .take(MAX_WARM_STARTS)
                .collect(),
            ..replay
        })
    }

    pub fn space(&self) -> &Space {
        &self.space
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Changes the budgets (e.g. to extend a resumed search) and clears a budget stop.
    /// Sets [`Settings::speculate`] (levels, at most [`MAX_SPECULATE`]): what the search
    /// proposes does not depend on it, so a resumed search may speculate differently.
    pub fn set_speculate(&mut self, levels: usize) {
        self.settings.speculate = levels.min(MAX_SPECULATE);
    }

    pub fn set_budgets(
        &mut self,
        max_evals: Option<usize>,
        max_seconds: Option<f64>,
        stagnation: Option<usize>,
    ) {
        self.settings.max_evals = max_evals;
        self.settings.max_seconds = max_seconds;
        self.settings.stagnation = stagnation;
        if matches!(
            self.stop,
            Some(Stop::MaxEvals | Stop::MaxSeconds | Stop::Stagnation | Stop::Interrupted)
        ) {
            self.stop = None;
        }
    }

    pub fn history(&self) -> &[Record] {
        &self.history
    }

    /// The island archives.
    pub fn archives(&self) -> &[Archive] {
        &self.islands
    }

    /// The recorded parent → child moves.
    pub fn moves(&self) -> &[Move] {
        self.model.moves()
    }

    /// Whether a configuration has been evaluated (its history index).
    pub fn evaluated(&self, config: &Config) -> Option<usize> {
        self.space
            .indices(config)
            .ok()
            .and_then(|i| self.visited.get(&i).copied())
    }

    pub fn progress(&self) -> Progress<'_> {
        Progress {
            evaluations: self.history.len(),
            external_turns: self.external_turns,
            failures: self.failures,
            elapsed: self.elapsed + self.external_cost,
            best: self.best.and_then(|b| {
                let r = &self.history[b];
                r.outcome.time().map(|t| (&r.config, t))
            }),
            last: self.history.last(),
            history: &self.history,
            settings: &self.settings,
        }
    }

    /// Why the search is over, if it is.
    pub fn stopped(&self) -> Option<Stop> {
        self.stop.or_else(|| self.budget_stop())
    }

    fn budget_stop(&self) -> Option<Stop> {
        let n = self.history.len();
        if self
            .settings
            .max_evals
            .is_some_and(|m| n.saturating_add(self.external_turns) >= m)
        {
            return Some(Stop::MaxEvals);
        }
        if self
            .settings
            .max_seconds
            .is_some_and(|s| self.elapsed + self.external_cost >= s)
        {
            return Some(Stop::MaxSeconds);
        }
        if self
            .settings
            .stagnation
            .is_some_and(|s| n >= self.last_improvement.saturating_add(s) && n > 0)
        {
            return Some(Stop::Stagnation);
        }
        None
    }

    /// Proposes, evaluates and records one configuration; never the same one twice, never
    /// one that `valid` rejects. `valid` must answer the same at every step of a search (the
    /// engine may keep its answers).
    pub fn step(
        &mut self,
        evaluator: &mut dyn Evaluator,
        valid: &dyn Fn(&Config) -> bool,
    ) -> Stepped {
        self.step_with(evaluator, valid, None)
    }

    /// [`SearchState::step`], offering `external` a turn first: when it wants one, it takes
    /// the step instead of the parameter search ([`Stepped::External`]). Once the parameter
    /// space is exhausted, the operator may go on taking turns until the budget is spent.
    pub fn step_with<E: Evaluator + ?Sized>(
        &mut self,
        evaluator: &mut E,
        valid: &dyn Fn(&Config) -> bool,
        mut external: Option<&mut dyn ExternalOperator<E>>,
    ) -> Stepped {
        let exhausted = self.stop == Some(Stop::Exhausted);
        if let Some(s) = self.budget_stop().or(self.stop.filter(|_| !exhausted)) {
            return Stepped::Done(s);
        }
        if let Some(op) = external.as_deref_mut() {
            let progress = self.progress();
            if op.wants_turn(&progress, exhausted) {
                let cost = op.turn(evaluator, &progress);
                self.external_turns = self.external_turns.saturating_add(1);
                self.external_cost += if cost.is_finite() && cost > 0.0 {
                    cost
                } else {
                    0.0
                };
                return Stepped::External;
            }
        }
        if exhausted {
            return Stepped::Done(Stop::Exhausted);
        }
        if self.pending.is_empty() {
            self.propose_batch(evaluator, valid);
        }
        let Some(next) = self.pending.pop_front() else {
            self.stop = Some(Stop::Exhausted);
            // The external operator may want the rest of the budget.
            return match external {
                Some(op) => self.step_with(evaluator, valid, Some(op)),
                None => Stepped::Done(Stop::Exhausted),
            };
        };
        let config = self.space.values(&next.proposal.child);
        if self.settings.speculate > 0 && self.pending.is_empty() {
            let guessed = self.speculation(&next, &config, valid);
            if !guessed.is_empty() {
                evaluator.prepare(&guessed);
            }
        }
        let outcome = evaluator.evaluate(&config);
        Stepped::Evaluated(self.record(next, config, outcome))
    }

    /// What the engine may propose after `next` (`config`, about to be evaluated), likeliest
    /// first ([`Settings::speculate`]): for each guess of its outcome ([`SearchState::guesses`])
    /// the proposal that would follow, on a copy of the state; then the same from the
    /// likeliest guess's proposal, [`Settings::speculate`] levels deep. Every configuration is
    /// new and valid, and none is `config`.
    fn speculation(
        &self,
        next: &Pending,
        config: &Config,
        valid: &dyn Fn(&Config) -> bool,
    ) -> Vec<Config> {
        let mut found: Vec<Indices> = Vec::new();
        let mut level = Some((self.clone(), next.clone(), config.clone()));
        for _ in 0..self.settings.speculate {
            let Some((state, pending, values)) = level.take() else {
                break;
            };
            for (g, outcome) in state.guesses(&pending).into_iter().enumerate() {
                let mut s = state.clone();
                s.record(pending.clone(), values.clone(), outcome);
                if s.budget_stop().is_some() {
                    break;
                }
                let island = s.next_island % s.islands.len();
                let Some(proposal) = s.propose(island, valid) else {
                    continue;
                };
                s.next_island = (s.next_island + 1) % s.islands.len();
                let child = proposal.child.clone();
                if child != next.proposal.child && !found.contains(&child) {
                    found.push(child.clone());
                }
                if g == 0 {
                    let proposed_at = s.history.len();
                    let values = s.space.values(&child);
                    level = Some((
                        s,
                        Pending {
                            proposal,
                            island,
                            proposed_at,
                        },
                        values,
                    ));
                }
            }
        }
        found.iter().map(|c| self.space.values(c)).collect()
    }

    /// Outcomes `pending` may have, likeliest first, for [`SearchState::speculation`]: the
    /// time the surrogate predicts (when there is a model), a failure, a new best and a
    /// result slower than any so far.
    fn guesses(&self, pending: &Pending) -> Vec<Evaluation> {
        let times: Vec<f64> = self
            .history
            .iter()
            .filter_map(|r| r.outcome.time())
            .collect();
        let (Some(best), Some(worst)) = (
            times.iter().copied().reduce(f64::min),
            times.iter().copied().reduce(f64::max),
        ) else {
            // nothing has run yet: the first success or another failure
            return vec![
                Evaluation::ok(1.0, 0.0),
                Evaluation::failed(FailureKind::Runtime, "a guess", 0.0),
            ];
        };
        let predicted = pending
            .proposal
            .predicted
            .or_else(|| self.surrogate().map(|m| m.predict(&pending.proposal.child)))
            .map(|f| (-f).exp())
            .filter(|t| t.is_finite() && *t > 0.0);
        let mut guesses: Vec<Evaluation> = predicted
            .into_iter()
            .map(|t| Evaluation::ok(t, 0.0))
            .collect();
        guesses.push(Evaluation::failed(FailureKind::Runtime, "a guess", 0.0));
        guesses.push(Evaluation::ok(best * 0.8, 0.0));
        guesses.push(Evaluation::ok(worst * 1.5, 0.0));
        guesses
    }

    /// Proposes the next [`Settings::batch`] configurations (fewer when the evaluation budget
    /// or the space has fewer left), each for the next island in turn, and tells the evaluator
    /// what is coming when there are several.
    fn propose_batch<E: Evaluator + ?Sized>(
        &mut self,
        evaluator: &mut E,
        valid: &dyn Fn(&Config) -> bool,
    ) {
        let n = self.history.len();
        let left = self.settings.max_evals.map_or(usize::MAX, |m| {
            m.saturating_sub(n.saturating_add(self.external_turns))
        });
        for _ in 0..self.settings.batch.max(1).min(left.max(1)) {
            let island = self.next_island % self.islands.len();
            let Some(proposal) = self.propose(island, valid) else {
                break;
            };
            self.next_island = (self.next_island + 1) % self.islands.len();
            self.pending.push_back(Pending {
                proposal,
                island,
                proposed_at: n,
            });
        }
        if self.pending.len() > 1 {
            let upcoming: Vec<Config> = self
                .pending
                .iter()
                .map(|p| self.space.values(&p.proposal.child))
                .collect();
            evaluator.prepare(&upcoming);
        }
    }

    /// Runs until a budget is spent, the space is exhausted or `observer` returns false
    /// (it is called after every evaluation).
    pub fn run(
        &mut self,
        evaluator: &mut dyn Evaluator,
        valid: &dyn Fn(&Config) -> bool,
        observer: &mut dyn FnMut(&Progress) -> bool,
    ) -> SearchResult {
        while let Stepped::Evaluated(_) = self.step(evaluator, valid) {
            if !observer(&self.progress()) {
                self.stop = Some(Stop::Interrupted);
                break;
            }
        }
        self.result()
    }

    /// The result so far.
    pub fn result(&self) -> SearchResult {
        let mut all = Archive::new(if self.settings.single_cell {
            self.settings.population.max(2)
        } else {
            1
        });
        for a in &self.islands {
            for e in a.elites() {
                all.insert(e.clone());
            }
        }
        let mut elites: Vec<ResultElite> = all
            .elites()
            .map(|e| ResultElite {
                config: self.space.values(&e.indices),
                time: (-e.fitness).exp(),
                cell: e.cell.clone(),
            })
            .collect();
        elites.sort_by(|a, b| a.time.total_cmp(&b.time));
        SearchResult {
            best: self.best.and_then(|b| {
                let r = &self.history[b];
                r.outcome.time().map(|t| (r.config.clone(), t))
            }),
            best_eval: self.best,
            elites,
            history: self.history.clone(),
            evaluations: self.history.len(),
            failures: self.failures,
            elapsed: self.elapsed + self.external_cost,
            stop: self.stopped(),
        }
    }

    // ----------------------------------------------------------------------------------

    fn cell_of(&self, idx: &[u32], eval: &Evaluation) -> Cell {
        if self.settings.single_cell {
            return Vec::new();
        }
        (0..self.space.descriptors.len())
            .map(|d| {
                self.space
                    .bin(d, idx, eval.measured(), self.settings.max_bins)
            })
            .collect()
    }

    /// Sign of the change of each model dimension between two configurations.
    fn dirs(&self, from: &[u32], to: &[u32]) -> Vec<i8> {
        let sgn = |x: f64| {
            if x > 1e-12 {
                1
            } else if x < -1e-12 {
                -1
            } else {
                0
            }
        };
        if self.settings.single_cell {
            return from
                .iter()
                .zip(to)
                .map(|(&a, &b)| sgn(f64::from(b) - f64::from(a)))
                .collect();
        }
        (0..self.space.descriptors.len())
            .map(|d| {
                match (
                    self.space.descriptor_value(d, from),
                    self.space.descriptor_value(d, to),
                ) {
                    (Some(a), Some(b)) => sgn(b - a),
                    _ => 0,
                }
            })
            .collect()
    }

    /// The model dimension that steers parameter `p`.
    fn dim_of(&self, p: usize) -> Option<usize> {
        if self.settings.single_cell {
            Some(p)
        } else {
            self.param_desc[p]
        }
    }

    fn record(&mut self, pending: Pending, config: Config, outcome: Evaluation) -> usize {
        let Pending {
            proposal,
            island,
            proposed_at,
        } = pending;
        let Proposal {
            child,
            operator,
            parent,
            other: other_parent,
            arm,
            predicted,
        } = proposal;
        let n = self.history.len();
        let proposed_at = (proposed_at < n).then_some(proposed_at);
        if let Some(arm) = arm {
            let reward = self.reward(outcome.time());
            self.arms.credit(&self.settings.selection, arm, reward);
        }
        self.elapsed += outcome.cost();
        let cell = self.cell_of(&child, &outcome);
        let time = outcome.time();
        if time.is_none() {
            self.failures += 1;
        }
        self.visited.insert(child.clone(), n);
        // the move from the parent
        if let Some(p) = parent {
            let pr = &self.history[p];
            if let Some(pt) = pr.outcome.time() {
                let from = self.space.indices(&pr.config).unwrap_or_default();
                if from.len() == child.len() {
                    let dirs = self.dirs(&from, &child);
                    let changes = from
                        .iter()
                        .zip(&child)
                        .enumerate()
                        .filter(|(_, (a, b))| a != b)
                        .map(|(i, (&a, &b))| (i, b as i32 - a as i32))
                        .collect();
                    let mv = Move {
                        parent: p,
                        child: n,
                        parent_cell: pr.cell.clone(),
                        dirs,
                        changes,
                        delta: time.map(|t| fitness(t) - fitness(pt)),
                    };
                    self.model.record(mv);
                }
            }
        }
        if let Some(t) = time {
            let elite = Elite {
                eval: n,
                indices: child.clone(),
                fitness: fitness(t),
                cell: cell.clone(),
            };
            if matches!(operator, Operator::Reference | Operator::WarmStart) {
                for a in &mut self.islands {
                    a.insert(elite.clone());
                }
            } else {
                self.islands[island].insert(elite);
            }
            let better = match self.best.and_then(|b| self.history[b].outcome.time()) {
                Some(bt) => t < bt,
                None => true,
            };
            if better {
                self.best = Some(n);
                self.last_improvement = n + 1;
            }
        }
        self.history.push(Record {
            config,
            outcome,
            parent,
            other_parent,
            operator,
            island,
            cell,
            elapsed: self.elapsed,
            arm,
            predicted,
            proposed_at,
        });
        self.dead_ends.push(0);
        // ring migration of each island's best
        let k = self.islands.len();
        let every = self.settings.migration_interval;
        if k > 1 && every > 0 && self.history.len() % every == 0 {
            let bests: Vec<Option<Elite>> =
                self.islands.iter().map(|a| a.best().cloned()).collect();
            for (i, b) in bests.into_iter().enumerate() {
                if let Some(b) = b {
                    self.islands[(i + 1) % k].insert(b);
                }
            }
        }
        n
    }

    /// Whether `idx` is neither evaluated nor pending.
    fn is_new(&self, idx: &[u32]) -> bool {
        !self.visited.contains_key(idx) && !self.pending.iter().any(|p| *p.proposal.child == *idx)
    }

    /// Whether `idx` is new ([`SearchState::is_new`]) and valid (looked up in the space's
    /// enumeration once there is one: the same answer, as `valid` is one function for the
    /// search).
    fn is_new_and_valid(&self, idx: &[u32], valid: &dyn Fn(&Config) -> bool) -> bool {
        self.is_new(idx)
            && match &self.valid_configs {
                Some(all) => all.set.contains(idx),
                None => valid(&self.space.values(idx)),
            }
    }

    /// A uniformly random valid configuration not evaluated yet: one whose work-group is
    /// within the limit ([`SearchState::group_limit`]) while there is one.
    fn random_unvisited(&mut self, valid: &dyn Fn(&Config) -> bool) -> Option<Indices> {
        let sizes: Vec<usize> = self.space.params.iter().map(|p| p.values.len()).collect();
        let cap = self.group_cap();
        let over = |c: &Indices| cap.as_ref().is_some_and(|k| k.over_group_limit(c));
        let mut over_limit = None;
        for _ in 0..RANDOM_TRIES {
            let c = operators::random_config(&sizes, &mut self.rng);
            if self.is_new_and_valid(&c, valid) {
                if !over(&c) {
                    return Some(c);
                }
                over_limit.get_or_insert(c);
            }
        }
        if self.space.size() > ENUMERATE_LIMIT {
            return over_limit;
        }
        // Pick uniformly among the valid configurations not evaluated yet (the space
        // enumerated once, then kept: a proposal is then a walk over the valid ones only).
        let all = match &self.valid_configs {
            Some(all) => all.clone(),
            None => {
                let ordered = self.enumerate_valid(&sizes, valid);
                let set = ordered.iter().cloned().collect();
                let all = std::sync::Arc::new(ValidConfigs { ordered, set });
                self.valid_configs = Some(all.clone());
                all
            }
        };
        let mut pool: Vec<Indices> = all
            .ordered
            .iter()
            .filter(|c| self.is_new(c))
            .cloned()
            .collect();
        if pool.iter().any(|c| !over(c)) {
            pool.retain(|c| !over(c));
        }
        if pool.is_empty() {
            return None;
        }
        let j = self.rng.gen_range(0..pool.len());
        Some(pool.swap_remove(j))
    }

    /// Every configuration of the space that `valid` accepts, in odometer order (the first
    /// parameter's index turning fastest).
    fn enumerate_valid(&self, sizes: &[usize], valid: &dyn Fn(&Config) -> bool) -> Vec<Indices> {
        let mut cur = vec![0u32; sizes.len()];
        let mut all = Vec::new();
        loop {
            if valid(&self.space.values(&cur)) {
                all.push(cur.clone());
            }
            let mut i = 0;
            loop {
                if i == sizes.len() {
                    return all;
                }
                cur[i] += 1;
                if (cur[i] as usize) < sizes[i] {
                    break;
                }
                cur[i] = 0;
                i += 1;
            }
        }
    }

    /// The next configuration to evaluate and how it came about.
    fn propose(&mut self, island: usize, valid: &dyn Fn(&Config) -> bool) -> Option<Proposal> {
        if !self.reference_done {
            self.reference_done = true;
            if let Some(r) = self.reference.clone() {
                if self.is_new_and_valid(&r, valid) {
                    return Some(Proposal::new(r, Operator::Reference, None, None));
                }
            }
        }
        while let Some(w) = self.warm.pop_front() {
            if self.is_new_and_valid(&w, valid) {
                return Some(Proposal::new(w, Operator::WarmStart, None, None));
            }
        }
        let evolved = self
            .history
            .iter()
            .filter(|r| !matches!(r.operator, Operator::Reference | Operator::WarmStart))
            .count();
        if self.settings.selection.adaptive
            && self.settings.selection.novel_start
            && evolved < self.settings.initial_samples
        {
            return self.sampled(valid, self.settings.selection.novelty.max(1), None);
        }
        if evolved < self.settings.initial_samples || self.islands[island].is_empty() {
            return self
                .random_unvisited(valid)
                .map(|c| Proposal::new(c, Operator::Random, None, None));
        }
        if !self.settings.selection.adaptive {
            let model = if self.settings.screening > 1 {
                self.surrogate()
            } else {
                None
            };
            return self.mutated(
                island,
                valid,
                self.settings.screening.max(1),
                model.as_ref(),
            );
        }
        let model = self.surrogate();
        let stalled = self.settings.selection.stalled(
            self.history.len(),
            self.history.len() - self.last_improvement,
        );
        let weights = self.arms.weights(
            &self.settings.selection,
            model.is_some() && self.model_trusted(),
            stalled,
        );
        let arm =
            operators::weighted_index(&weights, &mut self.rng).map_or(Arm::Random, |i| Arm::ALL[i]);
        let screen = model.as_ref().filter(|_| arm.uses_model());
        let want = self.settings.screening.max(1);
        let proposal = match arm {
            Arm::Screened => self.mutated(island, valid, want, screen),
            Arm::Mutation => self.mutated(island, valid, 1, None),
            Arm::Global => self.sampled(valid, want, screen),
            Arm::Random => self.sampled(valid, self.settings.selection.novelty.max(1), None),
        };
        // every evaluation's prediction is kept, whatever made it: the model's trust
        proposal.map(|p| {
            let predicted = model.as_ref().map(|m| m.predict(&p.child));
            Proposal {
                arm: Some(arm),
                predicted,
                ..p
            }
        })
    }

    /// A mutated child of an elite of `island`: the surrogate's favourite of `want` distinct
    /// new valid children (the first without a model), or a random configuration when no
    /// mutation gives a new one.
    fn mutated(
        &mut self,
        island: usize,
        valid: &dyn Fn(&Config) -> bool,
        want: usize,
        model: Option<&Surrogate>,
    ) -> Option<Proposal> {
        let weights = self.parent_weights(island);
        let mut candidates: Vec<(Indices, Operator, usize, Option<usize>)> = Vec::new();
        for attempt in 0..MUTATION_TRIES * want {
            if let Some((child, op, p, o)) = self.mutate(island, attempt / want, &weights) {
                if self.is_new_and_valid(&child, valid) && !candidates.iter().any(|c| c.0 == child)
                {
                    candidates.push((child, op, p, o));
                    if candidates.len() >= want {
                        break;
                    }
                } else if let Some(d) = self.dead_ends.get_mut(p) {
                    *d = d.saturating_add(1);
                }
            }
        }
        if candidates.is_empty() {
            return self
                .random_unvisited(valid)
                .map(|c| Proposal::new(c, Operator::Random, None, None));
        }
        let pick = match candidates.len() {
            1 => 0,
            _ => favourite(
                model,
                &self.failure_cones(),
                candidates.iter().map(|c| &c.0),
            ),
        };
        let (child, op, p, o) = candidates.swap_remove(pick);
        Some(Proposal::new(child, op, Some(p), o))
    }

    /// The surrogate's favourite of `want` distinct random unvisited valid configurations (the
    /// first without a model).
    fn sampled(
        &mut self,
        valid: &dyn Fn(&Config) -> bool,
        want: usize,
        model: Option<&Surrogate>,
    ) -> Option<Proposal> {
        let mut candidates: Vec<Indices> = Vec::new();
        for _ in 0..want.saturating_mul(3) {
            let Some(c) = self.random_unvisited(valid) else {
                break;
            };
            if !candidates.contains(&c) {
                candidates.push(c);
                if candidates.len() >= want {
                    break;
                }
            }
        }
        let pick = match model {
            Some(_) if candidates.len() > 1 => {
                favourite(model, &self.failure_cones(), candidates.iter())
            }
            None if candidates.len() > 1 => self.most_novel(&candidates),
            _ => 0,
        };
        (pick < candidates.len())
            .then(|| Proposal::new(candidates.swap_remove(pick), Operator::Random, None, None))
    }

    /// The cones of the failures so far ([`crate::cones`]); none when
    /// [`Selection::cones`] is off.
    fn failure_cones(&self) -> FailureCones {
        let cones = if self.settings.selection.cones {
            FailureCones::new(
                &self.space,
                self.visited
                    .iter()
                    .map(|(idx, &h)| (idx, self.history[h].outcome.time().is_some())),
            )
        } else {
            FailureCones::default()
        };
        match self.group_limit() {
            Some((size, l)) => cones.with_group_limit(&self.space, size, l),
            None => cones,
        }
    }

    /// The index of the candidate that pairs the most values of two parameters in a way no
    /// evaluation has yet, less [`Selection::avoid`] for each pair of values seen only in
    /// failed evaluations (the first on a tie): where a model cannot see an interaction, this
    /// covers them faster than drawing at random, and stays away from what failed. Candidates
    /// in a failure's cone come last ([`Selection::cones`]).
    fn most_novel(&self, candidates: &[Indices]) -> usize {
        let cones = self.failure_cones();
        let (mut ok, mut failed) = (HashSet::new(), HashSet::new());
        for (idx, &h) in &self.visited {
            let seen = if self.history[h].outcome.time().is_some() {
                &mut ok
            } else {
                &mut failed
            };
            seen.extend(pairs(idx));
        }
        let avoid = self.settings.selection.avoid;
        let score = |c: &Indices| {
            pairs(c).fold(0.0, |s, p| match (ok.contains(&p), failed.contains(&p)) {
                (false, false) => s + 1.0,
                (false, true) => s - avoid,
                _ => s,
            }) - outside_first(&cones, c)
        };
        first_max(candidates.iter().map(score))
    }

    /// Whether the surrogate ranks recent evaluations well enough to be used: the rank
    /// correlation of its predictions and the outcomes over the selection's trust window (no
    /// verdict yet counts as trusted).
    fn model_trusted(&self) -> bool {
        let s = &self.settings.selection;
        let pairs: Vec<(f64, f64)> = self
            .history
            .iter()
            .rev()
            .filter_map(|r| Some((r.predicted?, fitness(r.outcome.time()?))))
            .take(s.trust_window)
            .collect();
        match rank_correlation(&pairs) {
            Some(c) => c >= s.trust_min,
            None => true, // no verdict yet
        }
    }

    /// The credit of a child with time `time`: 1 when it enters the selection's best share of
    /// every success so far, else 0.
    fn reward(&self, time: Option<f64>) -> f64 {
        let Some(t) = time else { return 0.0 };
        let successes = self
            .history
            .iter()
            .filter(|r| r.outcome.time().is_some())
            .count()
            + 1;
        let places = ((self.settings.selection.top * successes as f64).ceil() as usize).max(1);
        let better = self
            .history
            .iter()
            .filter(|r| r.outcome.time().is_some_and(|u| u < t))
            .count();
        if better < places {
            1.0
        } else {
            0.0
        }
    }

    /// The surrogate model fitted to the history (`None` before the first success).
    pub fn surrogate(&self) -> Option<Surrogate> {
        self.surrogate_of(self.history.len())
    }

    /// The surrogate model fitted to the first `evaluations` of the history.
    fn surrogate_of(&self, evaluations: usize) -> Option<Surrogate> {
        let sizes: Vec<usize> = self.space.params.iter().map(|p| p.values.len()).collect();
        // in history order: the hash map's order is not reproducible
        let mut known: Vec<(usize, &Indices)> = self
            .visited
            .iter()
            .filter(|&(_, &h)| h < evaluations)
            .map(|(idx, &h)| (h, idx))
            .collect();
        known.sort_by_key(|k| k.0);
        let data: Vec<(&Indices, Option<f64>)> = known
            .iter()
            .map(|&(h, idx)| (idx, self.history[h].outcome.time().map(fitness)))
            .collect();
        match self.settings.screen_model {
            ScreenModel::Nearest => Surrogate::nearest(&sizes, &data, SURROGATE_K),
            ScreenModel::Additive => Surrogate::fit_with(&sizes, &data, SURROGATE_K, false),
            ScreenModel::Relevance => Surrogate::fit_with(&sizes, &data, SURROGATE_K, true),
        }
    }

    /// Parent-sampling weights of an island's elites for the three modes (exploitation,
    /// exploration, random), computed once per step.
    fn parent_weights(&self, island: usize) -> ParentWeights {
        let steer = self.settings.gradient_steering;
        let archive = &self.islands[island];
        let elites: Vec<Elite> = archive.elites().cloned().collect();
        let n = elites.len();
        let median = archive.median_fitness();
        // rank-based exploitation: weight e^(-rank / tau), tau grows slowly with the archive
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| elites[b].fitness.total_cmp(&elites[a].fitness));
        let tau = 1.0 + (n as f64).sqrt() / 2.0;
        let mut exploit = vec![0.0; n];
        for (rank, &i) in order.iter().enumerate() {
            let dead = self.dead_ends.get(elites[i].eval).copied().unwrap_or(0);
            exploit[i] = (-(rank as f64) / tau).exp() * DEAD_END_DECAY.powi(dead.min(64) as i32);
        }
        let mut explore = vec![0.0; n];
        let mut grads = Vec::with_capacity(n);
        for (i, e) in elites.iter().enumerate() {
            let g = self
                .model
                .gradient_with_median(&e.cell, archive, &self.bins, median);
            if steer {
                // cells whose gradient knows where to go are better parents
                exploit[i] *= 1.0 + g.iter().map(|x| x.g.abs()).fold(0.0, f64::max);
            }
            let empty_pull = g.iter().map(|x| x.de.abs()).fold(0.0, f64::max);
            let weak = e.fitness < median;
            let border = empty_pull >= 0.5;
            explore[i] = if !(weak || border) {
                0.0
            } else if steer {
                1.0 + empty_pull
            } else {
                1.0
            };
            grads.push(g);
        }
        ParentWeights {
            elites,
            grads,
            exploit,
            explore,
        }
    }

    /// Samples a parent: exploitation, exploration or random, mixed by `settings.sampling`.
    fn sample_parent(&mut self, w: &ParentWeights) -> Option<usize> {
        if w.elites.is_empty() {
            return None;
        }
        let s = self.settings.sampling;
        let mode = operators::weighted_index(&[s.exploit, s.explore, s.random], &mut self.rng)
            .unwrap_or(0);
        let i = match mode {
            0 => operators::weighted_index(&w.exploit, &mut self.rng),
            1 => operators::weighted_index(&w.explore, &mut self.rng),
            _ => Some(self.rng.gen_range(0..w.elites.len())),
        }?;
        Some(i)
    }

    /// One mutation attempt; later attempts change more parameters.
    fn mutate(
        &mut self,
        island: usize,
        attempt: usize,
        w: &ParentWeights,
    ) -> Option<(Indices, Operator, usize, Option<usize>)> {
        let pi = self.sample_parent(w)?;
        let parent = &w.elites[pi];
        let sizes: Vec<usize> = self.space.params.iter().map(|p| p.values.len()).collect();
        if self.free.is_empty() {
            return None;
        }
        let o = self.settings.operators;
        let can_cross = self.islands[island].len() > 1;
        // each operator with its weight, picked by name (never by position in a list)
        let choices = [
            (Operator::Neighbour, o.neighbour),
            (Operator::Reset, o.reset),
            (
                Operator::Crossover,
                if can_cross { o.crossover } else { 0.0 },
            ),
        ];
        let weights: Vec<f64> = choices.iter().map(|c| c.1).collect();
        let op = operators::weighted_index(&weights, &mut self.rng)
            .map_or(Operator::Neighbour, |i| choices[i].0);
        let steer = self.settings.gradient_steering;
        // g along the dimension that steers each parameter (0 without steering)
        let gp: Vec<f64> = if steer {
            let grad = &w.grads[pi];
            (0..self.space.len())
                .map(|p| {
                    self.dim_of(p)
                        .and_then(|d| grad.get(d))
                        .map(|x| x.g)
                        .unwrap_or(0.0)
                })
                .collect()
        } else {
            vec![0.0; self.space.len()]
        };
        // how many parameters: mostly 1, more on later attempts
        let extra = attempt / 10;
        let r: f64 = self.rng.gen();
        let count = (if r < 0.7 {
            1
        } else if r < 0.92 {
            2
        } else {
            3
        }) + extra;
        let pw: Vec<f64> = self.free.iter().map(|&p| 1.0 + gp[p].abs()).collect();
        let chosen: Vec<usize> = operators::weighted_distinct(&pw, count, &mut self.rng)
            .into_iter()
            .map(|i| self.free[i])
            .collect();
        let neighbour_moves: Vec<(usize, f64)> = chosen
            .iter()
            .map(|&p| {
                (
                    p,
                    if steer {
                        (0.5 + 0.5 * gp[p]).clamp(0.1, 0.9)
                    } else {
                        0.5
                    },
                )
            })
            .collect();
        match op {
            Operator::Reset => {
                let c = operators::random_reset(
                    &parent.indices,
                    &sizes,
                    &chosen[..chosen.len().min(2)],
                    &mut self.rng,
                );
                Some((c, op, parent.eval, None))
            }
            Operator::Crossover => {
                let other = &w.elites[self.sample_parent(w)?];
                let mut c =
                    operators::uniform_crossover(&parent.indices, &other.indices, &mut self.rng);
                if c == parent.indices || c == other.indices {
                    c = operators::neighbour_step(&c, &sizes, &neighbour_moves, &mut self.rng);
                }
                Some((c, op, parent.eval, Some(other.eval)))
            }
            _ => {
                let c = operators::neighbour_step(
                    &parent.indices,
                    &sizes,
                    &neighbour_moves,
                    &mut self.rng,
                );
                Some((c, Operator::Neighbour, parent.eval, None))
            }
        }
    }
}

/// What a step proposes: the child and how it came about.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Proposal {
    child: Indices,
    operator: Operator,
    parent: Option<usize>,
    other: Option<usize>,
    arm: Option<Arm>,
    predicted: Option<f64>,
}

/// A proposal waiting for its evaluation: for which island, and how many evaluations the
/// history had when it was made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Pending {
    proposal: Proposal,
    island: usize,
    proposed_at: usize,
}

impl Proposal {
    fn new(
        child: Indices,
        operator: Operator,
        parent: Option<usize>,
        other: Option<usize>,
    ) -> Proposal {
        Proposal {
            child,
            operator,
            parent,
            other,
            arm: None,
            predicted: None,
        }
    }
}

/// Every pair of two parameters' values in `c`, with the parameters' positions.
fn pairs(c: &Indices) -> impl Iterator<Item = (usize, usize, u32, u32)> + '_ {
    let d = c.len();
    (0..d).flat_map(move |i| (i + 1..d).map(move |j| (i, j, c[i], c[j])))
}

/// The index of the candidate the surrogate predicts fastest (without a model, the first),
/// those in a failure's cone last; the first on a tie.
fn favourite<'a>(
    model: Option<&Surrogate>,
    cones: &FailureCones,
    candidates: impl Iterator<Item = &'a Indices>,
) -> usize {
    first_max(candidates.map(|c| model.map_or(0.0, |m| m.predict(c)) - outside_first(cones, c)))
}

/// What a candidate in a failure's cone loses against every candidate outside: more than any
/// score the engine ranks by (a prediction, a count of pairs) can make up.
fn outside_first(cones: &FailureCones, c: &Indices) -> f64 {
    if cones.contain(c) {
        1e9
    } else {
        0.0
    }
}

/// The index of the first of the highest scores (0 when none is above −∞).
fn first_max(scores: impl Iterator<Item = f64>) -> usize {
    let mut best = (0, f64::NEG_INFINITY);
    for (i, v) in scores.enumerate() {
        if v > best.1 {
            best = (i, v);
        }
    }
    best.0
}

/// Runs a whole search: a convenience over [`SearchState`].
pub fn search(
    space: Space,
    settings: Settings,
    reference: Option<&Config>,
    evaluator: &mut dyn Evaluator,
    valid: &dyn Fn(&Config) -> bool,
) -> Result<SearchResult, SearchError> {
    let mut s = SearchState::new(space, settings, reference)?;
    Ok(s.run(evaluator, valid, &mut |_| true))
}
