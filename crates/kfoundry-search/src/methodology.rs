//! Scoring a strategy on a brute-forced space, after Willemsen et al. (2024), as described
//! in `shared/spaces/README.md`:
//!
//! N valid times, f* the best, f̃ the median, D the times sorted worst first.
//! 1. Target for cutoff percentile p: `y_p = f* + (f̃ − f*)(1 − p)`.
//! 2. Random search without replacement after M evaluations: `B(M) = D[r(M)]`,
//!    `r(M) = min(N−1, round(M(N+1)/(M+1)))`.
//! 3. Budget: `M_p = ⌈i / (N+1−i)⌉` for the first i with `D[i] ≤ y_p`; in time, `M_p ×` the
//!    median cost of one evaluation. The axis runs from the budget of p = 0.5 to that of
//!    p = 0.96.
//! 4. A strategy's curve S (median over seeded runs of the best found so far) is standardised
//!    `P = (S − B) / (f* − B)` (0 = random search, 1 = the optimum); the score is the mean of
//!    P over the axis: every whole number of evaluations from `M_0.5` to `M_0.96` on the
//!    evaluation axis, [`TIME_POINTS`] evenly spaced points on the time axis.
//!
//! A run that ended before the end of the axis keeps its last best. A run that has found no
//! valid configuration yet counts as the worst time.

/// Points on the time axis.
pub const TIME_POINTS: usize = 200;

/// The cutoff percentile of the paper.
pub(crate) const CUTOFF: f64 = 0.96;

/// The random-search baseline of a space.
#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
    /// Valid times, worst first.
    pub desc: Vec<f64>,
    pub best: f64,
    pub median: f64,
    /// Median cost of one evaluation (same unit as the traces' costs).
    pub median_cost: f64,
}

/// One run: per evaluation in order, its time (`None` when it failed) and its cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    pub times: Vec<Option<f64>>,
    pub costs: Vec<f64>,
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

impl Baseline {
    /// From the valid times and the costs of every cached configuration (failed ones too).
    /// `None` when there is no valid time.
    pub fn new(times: &[f64], costs: &[f64]) -> Option<Baseline> {
        if times.is_empty() {
            return None;
        }
        let mut desc = times.to_vec();
        desc.sort_by(|a, b| b.total_cmp(a));
        let best = desc[desc.len() - 1];
        let med = median(&mut times.to_vec());
        let mut c = costs.to_vec();
        let median_cost = if c.is_empty() { 1.0 } else { median(&mut c) };
        Some(Baseline {
            desc,
            best,
            median: med,
            median_cost,
        })
    }

    pub fn n(&self) -> usize {
        self.desc.len()
    }

    /// `y_p`.
    pub fn target(&self, p: f64) -> f64 {
        self.best + (self.median - self.best) * (1.0 - p)
    }

    /// `B(M)` for a (possibly fractional) number of evaluations.
    pub fn random_best(&self, m: f64) -> f64 {
        let n = self.n() as f64;
        let r = (m * (n + 1.0) / (m + 1.0)).round().clamp(0.0, n - 1.0);
        self.desc[r as usize]
    }

    /// `M_p`: evaluations random search needs to reach `y_p`.
    pub fn budget_evals(&self, p: f64) -> usize {
        let y = self.target(p);
        let n = self.n();
        let i = self.desc.iter().position(|&x| x <= y).unwrap_or(n - 1);
        let m = (i as f64 / (n as f64 + 1.0 - i as f64)).ceil() as usize;
        m.max(1)
    }

    /// The evaluation axis `M_0.5 ..= M_0.96`.
    pub fn eval_axis(&self) -> (usize, usize) {
        let a = self.budget_evals(0.5);
        (a, self.budget_evals(CUTOFF).max(a))
    }

    /// The time axis (same unit as the costs).
    pub fn time_axis(&self) -> (f64, f64) {
        let (a, b) = self.eval_axis();
        (a as f64 * self.median_cost, b as f64 * self.median_cost)
    }
}

impl Trace {
    /// Best time among the first `m` evaluations.
    pub fn best_after_evals(&self, m: usize) -> Option<f64> {
        self.times
            .iter()
            .take(m)
            .flatten()
            .copied()
            .reduce(f64::min)
    }

    /// Best time among the evaluations finished within `t` (cumulative cost).
    pub fn best_after_cost(&self, t: f64) -> Option<f64> {
        let mut spent = 0.0;
        let mut best: Option<f64> = None;
        for (time, c) in self.times.iter().zip(&self.costs) {
            spent += c;
            if spent > t {
                break;
            }
            if let Some(x) = time {
                best = Some(best.map_or(*x, |b: f64| b.min(*x)));
            }
        }
        best
    }

    /// Total cost.
    pub fn total_cost(&self) -> f64 {
        self.costs.iter().sum()
    }
}

/// Median over runs of the best found, a run with nothing found counting as the worst time.
fn median_best(b: &Baseline, traces: &[Trace], f: impl Fn(&Trace) -> Option<f64>) -> f64 {
    let mut v: Vec<f64> = traces.iter().map(|t| f(t).unwrap_or(b.desc[0])).collect();
    median(&mut v)
}

fn standardise(b: &Baseline, s: f64, m: f64) -> f64 {
    let rb = b.random_best(m);
    if (b.best - rb).abs() < f64::EPSILON * rb.abs().max(1.0) {
        return if s <= b.best { 1.0 } else { 0.0 };
    }
    (s - rb) / (b.best - rb)
}

/// Methodology score on the evaluation axis.
pub fn score_evals(b: &Baseline, traces: &[Trace]) -> f64 {
    if traces.is_empty() {
        return f64::NAN;
    }
    let ps = eval_axis_curve(b, traces);
    ps.iter().sum::<f64>() / ps.len() as f64
}

/// The standardised curve `P(M)` at every whole number of evaluations of the axis.
fn eval_axis_curve(b: &Baseline, traces: &[Trace]) -> Vec<f64> {
    let (lo, hi) = b.eval_axis();
    (lo..=hi)
        .map(|m| {
            standardise(
                b,
                median_best(b, traces, |t| t.best_after_evals(m)),
                m as f64,
            )
        })
        .collect()
}

/// The share of the evaluation axis's points (every whole number of evaluations from `M_0.5`
/// to `M_0.96`) where the median best-so-far is worse than random search's (`P(M) < 0`).
pub fn below_random_share(b: &Baseline, traces: &[Trace]) -> f64 {
    if traces.is_empty() {
        return f64::NAN;
    }
    let ps = eval_axis_curve(b, traces);
    ps.iter().filter(|&&p| p < 0.0).count() as f64 / ps.len() as f64
}

/// The standardised curve `P(M)` at the given evaluation counts.
pub fn curve_evals(b: &Baseline, traces: &[Trace], at: &[usize]) -> Vec<f64> {
    at.iter()
        .map(|&m| {
            standardise(
                b,
                median_best(b, traces, |t| t.best_after_evals(m)),
                m as f64,
            )
        })
        .collect()
}

/// Methodology score on the time axis.
pub fn score_time(b: &Baseline, traces: &[Trace]) -> f64 {
    if traces.is_empty() {
        return f64::NAN;
    }
    let (lo, hi) = b.time_axis();
    let ps: Vec<f64> = (0..TIME_POINTS)
        .map(|k| {
            let t = lo + (hi - lo) * k as f64 / (TIME_POINTS - 1) as f64;
            standardise(
                b,
                median_best(b, traces, |tr| tr.best_after_cost(t)),
                t / b.median_cost,
            )
        })
        .collect();
    ps.iter().sum::<f64>() / ps.len() as f64
}

/// Bootstrap distribution of [`score_evals`]: the score of `resamples` sets of runs drawn
/// with replacement from `traces` (seeded), sorted. Its spread says how much of a
/// difference between two strategies the number of seeds can resolve.
pub fn bootstrap_score_evals(
    b: &Baseline,
    traces: &[Trace],
    resamples: usize,
    seed: u64,
) -> Vec<f64> {
    use rand::{Rng, SeedableRng};
    if traces.is_empty() {
        return Vec::new();
    }
    let (lo, hi) = b.eval_axis();
    // best found per run and axis point, computed once
    let table: Vec<Vec<f64>> = traces
        .iter()
        .map(|t| {
            (lo..=hi)
                .map(|m| t.best_after_evals(m).unwrap_or(b.desc[0]))
                .collect()
        })
        .collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let n = traces.len();
    let mut out: Vec<f64> = (0..resamples)
        .map(|_| {
            let pick: Vec<usize> = (0..n).map(|_| rng.gen_range(0..n)).collect();
            let mut column = vec![0.0; n];
            let mut sum = 0.0;
            for (j, m) in (lo..=hi).enumerate() {
                for (c, &i) in column.iter_mut().zip(&pick) {
                    *c = table[i][j];
                }
                sum += standardise(b, median(&mut column), m as f64);
            }
            sum / (hi - lo + 1) as f64
        })
        .collect();
    out.sort_by(f64::total_cmp);
    out
}

/// The `q` quantile (0..=1) of a sorted sample (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = (q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i]
}

/// Share of pairs (one bootstrap score of each) in which `a` is above `b`: how sure the
/// resampling is that strategy `a` scores higher than strategy `b`.
pub fn share_above(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return f64::NAN;
    }
    let mut wins = 0usize;
    for x in a {
        // b is sorted: how many of b are below x
        wins += b.partition_point(|y| y < x);
    }
    wins as f64 / (a.len() * b.len()) as f64
}

/// Median over runs of `best / best found after m evaluations` (0 for a run with nothing).
pub fn median_fraction(b: &Baseline, traces: &[Trace], m: usize) -> f64 {
    let mut v: Vec<f64> = traces
        .iter()
        .map(|t| t.best_after_evals(m).map_or(0.0, |x| b.best / x))
        .collect();
    median(&mut v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Baseline {
        // times 1..=100 (best 1, median 50.5), cost 1 each
        let t: Vec<f64> = (1..=100).map(f64::from).collect();
        Baseline::new(&t, &vec![1.0; 100]).unwrap()
    }

    #[test]
    fn baseline_numbers() {
        let b = base();
        assert_eq!(b.best, 1.0);
        assert_eq!(b.median, 50.5);
        assert!((b.target(0.96) - (1.0 + 49.5 * 0.04)).abs() < 1e-12);
        // y = 2.98: D worst first, D[98] = 2 is the first <= 2.98 -> M = ceil(98 / 3) = 33
        assert_eq!(b.budget_evals(0.96), 33);
        // y = 25.75: D[75] = 25 -> ceil(75/26) = 3
        assert_eq!(b.budget_evals(0.5), 3);
        // B(1) = D[round(101/2)] = D[51] (rounded half away from zero) = 49
        assert_eq!(b.random_best(1.0), 49.0);
        assert_eq!(b.random_best(1e9), 1.0);
    }

    #[test]
    fn scores_of_perfect_random_and_empty_runs() {
        let b = base();
        let perfect = Trace {
            times: vec![Some(1.0); 40],
            costs: vec![1.0; 40],
        };
        assert!((score_evals(&b, std::slice::from_ref(&perfect)) - 1.0).abs() < 1e-12);
        assert!((score_time(&b, std::slice::from_ref(&perfect)) - 1.0).abs() < 1e-12);
        assert_eq!(median_fraction(&b, &[perfect], 10), 1.0);
        let nothing = Trace {
            times: vec![None; 40],
            costs: vec![1.0; 40],
        };
        assert!(score_evals(&b, std::slice::from_ref(&nothing)) < 0.0);
        assert_eq!(median_fraction(&b, &[nothing], 10), 0.0);
        // a run that follows the random-search expectation exactly scores 0
        let (lo, hi) = b.eval_axis();
        let exact = Trace {
            times: (1..=hi).map(|m| Some(b.random_best(m as f64))).collect(),
            costs: vec![1.0; hi],
        };
        let s = score_evals(&b, &[exact]);
        assert!(s.abs() < 1e-12, "{s} over {lo}..{hi}");
    }

    #[test]
    fn bootstrap_brackets_the_score_and_orders_strategies() {
        let b = base();
        // runs that find time 1 + (seed % 7) at once: the median run finds ~4
        let runs = |offset: f64| -> Vec<Trace> {
            (0..30)
                .map(|s| Trace {
                    times: vec![Some(1.0 + offset + (s % 7) as f64); 40],
                    costs: vec![1.0; 40],
                })
                .collect()
        };
        let good = runs(0.0);
        let worse = runs(3.0);
        let score = score_evals(&b, &good);
        let boot = bootstrap_score_evals(&b, &good, 200, 1);
        assert_eq!(boot.len(), 200);
        assert!(boot.windows(2).all(|w| w[0] <= w[1]));
        assert!(
            quantile(&boot, 0.05) <= score && score <= quantile(&boot, 0.95),
            "{score} {boot:?}"
        );
        let boot_worse = bootstrap_score_evals(&b, &worse, 200, 2);
        assert!(share_above(&boot, &boot_worse) > 0.95);
        assert!(share_above(&boot_worse, &boot) < 0.05);
        // identical runs: the resamples never differ
        let same = vec![good[0].clone(); 10];
        let flat = bootstrap_score_evals(&b, &same, 50, 3);
        assert_eq!(quantile(&flat, 0.0), quantile(&flat, 1.0));
    }

    #[test]
    fn trace_queries() {
        let t = Trace {
            times: vec![Some(5.0), None, Some(3.0), Some(4.0)],
            costs: vec![1.0, 2.0, 1.0, 1.0],
        };
        assert_eq!(t.best_after_evals(1), Some(5.0));
        assert_eq!(t.best_after_evals(3), Some(3.0));
        assert_eq!(t.best_after_evals(0), None);
        assert_eq!(t.best_after_cost(3.0), Some(5.0));
        assert_eq!(t.best_after_cost(4.0), Some(3.0));
        assert_eq!(t.total_cost(), 5.0);
    }
}
