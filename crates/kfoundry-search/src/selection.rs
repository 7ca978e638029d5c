//! Adaptive operator selection: which way of proposing the next configuration each step uses,
//! chosen by what each has paid so far in this run, and a check of the screening model
//! against what the evaluations then show.
//!
//! - [`Arm`]s: screened mutation (the surrogate picks the most promising of many mutated
//!   children), plain mutation (one child, unscreened), model-guided global sampling (the
//!   surrogate picks among random unvisited configurations) and space-filling random sampling
//!   (of several random unvisited configurations, the one that pairs the most values of two
//!   parameters in a way not evaluated yet — [`Selection::novelty`] — and the fewest pairs
//!   seen only in failures — [`Selection::avoid`]; no model, so nothing a model gets wrong
//!   can mislead it). The initial samples are drawn the same way ([`Selection::novel_start`]).
//! - Credit: a child that enters the best [`Selection::top`] share of everything evaluated so
//!   far (the new best always does) earns its arm 1, anything else 0. Each arm's estimate is
//!   its credit per pull, both discounted by [`Selection::learning_rate`] per step and shrunk
//!   towards the rate a random pick would earn.
//! - Choice: adaptive pursuit (Thierens, 2005): the probabilities move towards the arm of the
//!   highest estimate by [`Selection::pursuit`] per step, every arm keeping at least
//!   [`Selection::p_min`], so an arm that stopped paying is still tried and can earn its share
//!   back.
//! - Stalls: when the best has not improved for [`Selection::patience`] of the evaluations so
//!   far (at least [`Selection::trust_window`]), [`Selection::explore`] of the choice is spread
//!   evenly over the arms, whatever they earned: a model that keeps finding children just
//!   short of the best in one basin earns credit without moving the search.
//! - Trust in the model: before each evaluation the surrogate's prediction is recorded; the
//!   rank correlation of predictions and outcomes over the last [`Selection::trust_window`]
//!   evaluations (whatever arm made them) is the model's trust. Below
//!   [`Selection::trust_min`] the model-based arms are not used; they come back as soon as the
//!   evaluations made without them show that the model ranks well again.
//!
//! Everything here is a deterministic function of the history (the choice itself draws from
//! the engine's one generator), so checkpoints replay it exactly.

use serde::{Deserialize, Serialize};

/// A way of proposing the next configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Arm {
    /// Many mutated children of archive elites; the surrogate's favourite is evaluated.
    Screened,
    /// One mutated child, unscreened.
    Mutation,
    /// Many random unvisited configurations; the surrogate's favourite is evaluated.
    Global,
    /// One random unvisited configuration.
    Random,
}

impl Arm {
    pub const ALL: [Arm; 4] = [Arm::Screened, Arm::Mutation, Arm::Global, Arm::Random];

    /// Whether the arm relies on the surrogate.
    pub fn uses_model(self) -> bool {
        matches!(self, Arm::Screened | Arm::Global)
    }

    fn index(self) -> usize {
        match self {
            Arm::Screened => 0,
            Arm::Mutation => 1,
            Arm::Global => 2,
            Arm::Random => 3,
        }
    }
}

/// Settings of the selection. The defaults are fixed for every space.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// Off: every step screens mutated children (the engine of earlier versions).
    pub adaptive: bool,
    /// Least probability of each arm.
    pub p_min: f64,
    /// Discount of past credit and pulls per step (recency weighting).
    pub learning_rate: f64,
    /// Step of the probabilities towards the best arm.
    pub pursuit: f64,
    /// A child earns credit when it enters this best share of all evaluations so far.
    pub top: f64,
    /// Evaluations whose predictions decide the model's trust.
    pub trust_window: usize,
    /// Below this rank correlation the model-based arms are not used.
    pub trust_min: f64,
    /// The screened arm's probability at the start (the others share the rest).
    pub start: f64,
    /// The search is stalled when its best has not improved for this share of the evaluations
    /// so far (and at least [`Selection::trust_window`] of them).
    pub patience: f64,
    /// The random arm draws this many random configurations and evaluates the one that pairs
    /// the most parameter values in a way not yet evaluated (1: plain random sampling).
    pub novelty: usize,
    /// How much each pair of values seen only in failed evaluations counts against a random
    /// configuration (a new pair counts 1 for it).
    pub avoid: f64,
    /// The initial samples are drawn the same way.
    pub novel_start: bool,
    /// Candidates at least as large in every parameter as a failed configuration (and with no
    /// success that is) come last wherever the engine chooses among several
    /// ([`crate::cones`]). Off in checkpoints written before it existed.
    #[serde(default)]
    pub cones: bool,
    /// Candidates whose work-group is larger than the compiled kernels allow (the limit the
    /// evaluations report, given each configuration's work-group size:
    /// [`crate::SearchState::set_group_size`]) come last wherever the engine chooses among
    /// several, the initial samples included. Off in checkpoints written before it existed.
    #[serde(default)]
    pub group_limit: bool,
    /// Where no evaluation reports the limit (a Kernel Tuner file, a kernel that reports
    /// none), it is learned from failures instead: the smallest work-group that failed to
    /// build or run above every work-group that succeeded, and larger ones, come last (a
    /// success there lifts it). Off in checkpoints written before it existed.
    #[serde(default)]
    pub learn_group_limit: bool,
    /// While stalled, this share of the choice is spread evenly over the allowed arms.
    pub explore: f64,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            adaptive: true,
            p_min: 0.1,
            learning_rate: 0.03,
            pursuit: 0.15,
            top: 0.05,
            trust_window: 24,
            trust_min: 0.1,
            start: 0.7,
            patience: 0.1,
            explore: 1.0,
            novelty: 16,
            novel_start: true,
            avoid: 1.0,
            cones: true,
            group_limit: true,
            learn_group_limit: true,
        }
    }
}

impl Selection {
    /// Whether a search whose best was found after `since_best` of its `evaluations` is stalled.
    pub fn stalled(&self, evaluations: usize, since_best: usize) -> bool {
        since_best
            >= self
                .trust_window
                .max((self.patience * evaluations as f64).ceil() as usize)
    }

    /// What a checkpoint written before this setting existed used.
    pub fn legacy() -> Selection {
        Selection {
            adaptive: false,
            cones: false,
            ..Selection::default()
        }
    }

    /// Whether the settings are usable (a checkpoint is a file anyone could edit); the error
    /// names the first setting out of range.
    pub fn check(&self) -> Result<(), String> {
        let unit = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        let rules = [
            (
                "p_min",
                unit(self.p_min) && self.p_min * Arm::ALL.len() as f64 <= 1.0,
            ),
            ("learning_rate", unit(self.learning_rate)),
            ("pursuit", unit(self.pursuit)),
            ("top", unit(self.top)),
            ("start", unit(self.start)),
            ("explore", unit(self.explore)),
            (
                "patience",
                self.patience.is_finite() && self.patience >= 0.0,
            ),
            (
                "trust_min",
                self.trust_min.is_finite() && (-1.0..=1.0).contains(&self.trust_min),
            ),
            ("trust_window", self.trust_window <= 1 << 16),
            ("novelty", self.novelty <= 1 << 10),
            ("avoid", self.avoid.is_finite() && self.avoid >= 0.0),
        ];
        match rules.iter().find(|(_, ok)| !ok) {
            Some((name, _)) => Err(format!("selection.{name} out of range")),
            None => Ok(()),
        }
    }
}

/// Pseudo-pulls of the prior in an arm's estimate.
const PRIOR_PULLS: f64 = 2.0;

/// The running state: each arm's discounted credit and pulls, and its probability.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ArmStats {
    pub credit: [f64; 4],
    pub pulls: [f64; 4],
    pub probability: [f64; 4],
}

impl Default for ArmStats {
    fn default() -> Self {
        ArmStats::new(&Selection::default())
    }
}

impl ArmStats {
    /// Screening first: the model is given the benefit of the doubt (one credit in two pulls)
    /// until the evaluations show it wrong, and its probability starts at the pursuit's target
    /// for the best arm.
    pub fn new(s: &Selection) -> ArmStats {
        let start = s.start.clamp(0.0, 1.0);
        let rest = (1.0 - start) / 3.0;
        ArmStats {
            credit: [1.0, 0.0, 0.0, 0.0],
            pulls: [2.0, 0.0, 0.0, 0.0],
            probability: [start, rest, rest, rest],
        }
    }

    /// An arm's estimated credit per pull: its discounted credit over its discounted pulls,
    /// shrunk towards the rate at which a random pick would earn credit ([`Selection::top`]).
    pub fn estimate(&self, s: &Selection, arm: Arm) -> f64 {
        let i = arm.index();
        (self.credit[i] + s.top * PRIOR_PULLS) / (self.pulls[i] + PRIOR_PULLS)
    }

    /// Credits `arm` with `reward` (0 or 1), discounting the past by the learning rate, and
    /// moves the probabilities towards the arm of the best estimate.
    pub fn credit(&mut self, s: &Selection, arm: Arm, reward: f64) {
        let keep = 1.0 - s.learning_rate;
        for j in 0..4 {
            self.credit[j] *= keep;
            self.pulls[j] *= keep;
        }
        self.credit[arm.index()] += reward;
        self.pulls[arm.index()] += 1.0;
        let n = Arm::ALL.len() as f64;
        let p_max = 1.0 - (n - 1.0) * s.p_min;
        let best = Arm::ALL.iter().copied().fold(Arm::Screened, |b, a| {
            if self.estimate(s, a) > self.estimate(s, b) {
                a
            } else {
                b
            }
        });
        for a in Arm::ALL {
            let target = if a == best { p_max } else { s.p_min };
            self.probability[a.index()] += s.pursuit * (target - self.probability[a.index()]);
        }
    }

    /// The probabilities of the arms allowed now (`model`: whether the model-based arms are),
    /// spread towards even by [`Selection::explore`] while the search is `stalled`.
    pub fn weights(&self, s: &Selection, model: bool, stalled: bool) -> [f64; 4] {
        let mut w = self.probability;
        if stalled {
            let even = 1.0 / Arm::ALL.len() as f64;
            for x in &mut w {
                *x = (1.0 - s.explore) * *x + s.explore * even;
            }
        }
        if !model {
            for a in Arm::ALL {
                if a.uses_model() {
                    w[a.index()] = 0.0;
                }
            }
        }
        w
    }
}

/// Spearman's rank correlation of `pairs` (prediction, outcome); `None` for fewer than 4
/// pairs or when either side is constant.
pub fn rank_correlation(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 4 {
        return None;
    }
    let ranks = |key: &dyn Fn(&(f64, f64)) -> f64| -> Vec<f64> {
        let mut idx: Vec<usize> = (0..pairs.len()).collect();
        idx.sort_by(|&a, &b| key(&pairs[a]).total_cmp(&key(&pairs[b])));
        let mut r = vec![0.0; pairs.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && key(&pairs[idx[j + 1]]) == key(&pairs[idx[i]]) {
                j += 1;
            }
            // ties share their mean rank
            for &k in &idx[i..=j] {
                r[k] = (i + j) as f64 / 2.0;
            }
            i = j + 1;
        }
        r
    };
    let (a, b) = (ranks(&|p| p.0), ranks(&|p| p.1));
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(&b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    if va <= 0.0 || vb <= 0.0 {
        return None;
    }
    Some(cov / (va * vb).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine picks `Arm::ALL[i]` for the weight at `i` of [`ArmStats::weights`], which is
    /// indexed by [`Arm::index`]: the two orders are one.
    #[test]
    fn the_arms_weights_are_in_the_order_of_all() {
        for (i, arm) in Arm::ALL.into_iter().enumerate() {
            assert_eq!(arm.index(), i, "{arm:?}");
        }
    }

    #[test]
    fn rank_correlation_of_agreeing_opposite_and_constant_rankings() {
        let agree: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, (i * i) as f64)).collect();
        assert!((rank_correlation(&agree).unwrap() - 1.0).abs() < 1e-12);
        let opposite: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, -(i as f64))).collect();
        assert!((rank_correlation(&opposite).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(
            rank_correlation(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0), (1.0, 4.0)]),
            None
        );
        assert_eq!(rank_correlation(&[(1.0, 2.0)]), None);
    }

    #[test]
    fn pursuit_moves_towards_the_paying_arm_and_keeps_a_floor() {
        let s = Selection::default();
        let mut st = ArmStats::default();
        for _ in 0..200 {
            st.credit(&s, Arm::Random, 1.0);
            st.credit(&s, Arm::Screened, 0.0);
        }
        let w = st.weights(&s, true, false);
        assert!(w[Arm::Random.index()] > 0.65, "{w:?}");
        for a in [Arm::Screened, Arm::Mutation, Arm::Global] {
            assert!((w[a.index()] - s.p_min).abs() < 1e-6, "{w:?}");
        }
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        // without trust in the model its arms are out
        let w = st.weights(&s, false, false);
        assert_eq!(
            (w[Arm::Screened.index()], w[Arm::Global.index()]),
            (0.0, 0.0)
        );
    }
}
