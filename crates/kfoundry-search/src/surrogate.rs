//! The surrogate model that screens candidate children: which of several proposed
//! configurations is worth the next (costly) evaluation.
//!
//! Two parts, both fitted to the history (fitness = −ln time, higher is better):
//!
//! 1. **Additive main effects**: `f(x) ≈ μ + Σ_p e_p[x_p]`, one effect per parameter value,
//!    fitted by backfitting with a ridge pseudo-count (`RIDGE`) that shrinks rarely seen
//!    values toward 0. Kernel times are roughly multiplicative in their parameters, so their
//!    logarithm is roughly additive: this part generalises to combinations never seen. A value
//!    never evaluated gets the effect interpolated linearly between its nearest evaluated
//!    neighbours (the values are ordered), or the nearest one's at the ends.
//! 2. **Nearest-neighbour residuals**: what the additive part misses (interactions, failures)
//!    is predicted from the `k` nearest evaluated configurations' residuals, under a
//!    distance that weights each parameter by its **relevance**: the standard deviation of
//!    its fitted effect over the data, relative to the mean over parameters (floored, so that
//!    a parameter that matters only through interactions still counts). A pseudo-neighbour
//!    with residual 0 shrinks the correction when the neighbours are far.
//!
//! A failed configuration has no time: it enters the residuals as the worst fitness seen, so
//! candidates next to failures are predicted poor; it is left out of the additive fit.
//!
//! The model is rebuilt from the history whenever it is needed, so it holds no state of its
//! own that a checkpoint would have to carry.

use crate::space::Indices;

/// Ridge pseudo-count of the main effects.
pub(crate) const RIDGE: f64 = 1.0;
/// Backfitting sweeps.
pub(crate) const SWEEPS: usize = 3;
/// Relevance floor (fraction of the mean relevance).
pub(crate) const RELEVANCE_FLOOR: f64 = 0.2;
/// Weight of the zero-residual pseudo-neighbour (a neighbour at normalised distance `d`
/// weighs `1 / (d + NEAR)`).
pub(crate) const PRIOR_WEIGHT: f64 = 1.0;
/// Distance offset of neighbour weights.
pub(crate) const NEAR: f64 = 0.05;

/// A fitted surrogate.
#[derive(Clone, Debug, PartialEq)]
pub struct Surrogate {
    /// Values per parameter, minus one (at least 1): the distance normaliser.
    spans: Vec<f64>,
    mean: f64,
    /// Per parameter, per value index: the main effect.
    effects: Vec<Vec<f64>>,
    /// Per parameter: distance weight (mean 1 over parameters).
    weights: Vec<f64>,
    /// Evaluated configurations with their residual (fitness − additive prediction).
    points: Vec<(Indices, f64)>,
    k: usize,
    additive_only: bool,
    /// Neighbours predict the fitness itself (no additive part in the prediction; the
    /// additive fit only supplies the relevance weights).
    nearest_only: bool,
}

impl Surrogate {
    /// Fits the model. `sizes[p]` is the number of values of parameter `p`; `data` holds
    /// evaluated configurations with their fitness (`None`: failed). `k` neighbours correct
    /// the additive part. `None` when there is no successful evaluation.
    pub fn fit(sizes: &[usize], data: &[(&Indices, Option<f64>)], k: usize) -> Option<Surrogate> {
        Self::fit_with(sizes, data, k, false)
    }

    /// [`Surrogate::fit`]; with `nearest_only` the prediction is the relevance-weighted
    /// nearest neighbours' mean fitness (failures as the worst fitness seen), the additive
    /// part serving only to learn the relevance.
    pub fn fit_with(
        sizes: &[usize],
        data: &[(&Indices, Option<f64>)],
        k: usize,
        nearest_only: bool,
    ) -> Option<Surrogate> {
        let ok: Vec<(&Indices, f64)> = data
            .iter()
            .filter_map(|(x, f)| f.map(|f| (*x, f)))
            .collect();
        if ok.is_empty() {
            return None;
        }
        let np = sizes.len();
        let n = ok.len() as f64;
        let mean = ok.iter().map(|(_, f)| f).sum::<f64>() / n;
        let mut effects: Vec<Vec<f64>> = sizes.iter().map(|&s| vec![0.0; s.max(1)]).collect();
        let mut seen: Vec<Vec<f64>> = sizes.iter().map(|&s| vec![0.0; s.max(1)]).collect();
        for (x, _) in &ok {
            for p in 0..np {
                seen[p][x[p] as usize] += 1.0;
            }
        }
        // additive prediction per point, kept up to date while backfitting
        let mut fit = vec![0.0; ok.len()];
        for _ in 0..SWEEPS {
            for p in 0..np {
                let mut sums = vec![0.0; effects[p].len()];
                for (i, (x, f)) in ok.iter().enumerate() {
                    let v = x[p] as usize;
                    sums[v] += f - mean - (fit[i] - effects[p][v]);
                }
                let mut new: Vec<f64> = sums
                    .iter()
                    .zip(&seen[p])
                    .map(|(s, c)| if *c > 0.0 { s / (c + RIDGE) } else { 0.0 })
                    .collect();
                // centre over the data
                let centre = new.iter().zip(&seen[p]).map(|(e, c)| e * c).sum::<f64>() / n;
                for (e, c) in new.iter_mut().zip(&seen[p]) {
                    if *c > 0.0 {
                        *e -= centre;
                    }
                }
                for (i, (x, _)) in ok.iter().enumerate() {
                    let v = x[p] as usize;
                    fit[i] += new[v] - effects[p][v];
                }
                effects[p] = new;
            }
        }
        // relevance: spread of each parameter's effect over the data
        let sd: Vec<f64> = (0..np)
            .map(|p| {
                (effects[p]
                    .iter()
                    .zip(&seen[p])
                    .map(|(e, c)| c * e * e)
                    .sum::<f64>()
                    / n)
                    .sqrt()
            })
            .collect();
        let mean_sd = sd.iter().sum::<f64>() / np.max(1) as f64;
        let weights: Vec<f64> = if mean_sd > 0.0 {
            let w: Vec<f64> = sd
                .iter()
                .map(|s| (s / mean_sd).max(RELEVANCE_FLOOR))
                .collect();
            let m = w.iter().sum::<f64>() / np as f64;
            w.iter().map(|x| x / m).collect()
        } else {
            vec![1.0; np]
        };
        // values never evaluated: interpolate between evaluated neighbours
        for p in 0..np {
            let known: Vec<usize> = (0..effects[p].len())
                .filter(|&v| seen[p][v] > 0.0)
                .collect();
            if known.is_empty() {
                continue;
            }
            for v in 0..effects[p].len() {
                if seen[p][v] > 0.0 {
                    continue;
                }
                let lo = known.iter().rev().find(|&&u| u < v).copied();
                let hi = known.iter().find(|&&u| u > v).copied();
                effects[p][v] = match (lo, hi) {
                    (Some(a), Some(b)) => {
                        let t = (v - a) as f64 / (b - a) as f64;
                        effects[p][a] * (1.0 - t) + effects[p][b] * t
                    }
                    (Some(a), None) => effects[p][a],
                    (None, Some(b)) => effects[p][b],
                    (None, None) => 0.0,
                };
            }
        }
        Some(Self::assemble(
            sizes,
            data,
            k,
            mean,
            effects,
            weights,
            nearest_only,
        ))
    }

    /// The plain nearest-neighbour model: the distance-weighted mean fitness of the `k`
    /// nearest evaluated configurations, every parameter weighing the same (distance: sum of
    /// |index difference| / (values − 1)); failures count as the worst fitness seen. `None`
    /// when there is no successful evaluation.
    pub fn nearest(
        sizes: &[usize],
        data: &[(&Indices, Option<f64>)],
        k: usize,
    ) -> Option<Surrogate> {
        if data.iter().all(|(_, f)| f.is_none()) {
            return None;
        }
        let effects = sizes.iter().map(|&s| vec![0.0; s.max(1)]).collect();
        Some(Self::assemble(
            sizes,
            data,
            k,
            0.0,
            effects,
            vec![1.0; sizes.len()],
            true,
        ))
    }

    /// The model from its fitted parts and the data (residuals, or fitness for the
    /// nearest-only models).
    fn assemble(
        sizes: &[usize],
        data: &[(&Indices, Option<f64>)],
        k: usize,
        mean: f64,
        effects: Vec<Vec<f64>>,
        weights: Vec<f64>,
        nearest_only: bool,
    ) -> Surrogate {
        let mut s = Surrogate {
            spans: sizes.iter().map(|&s| (s.max(2) - 1) as f64).collect(),
            mean,
            effects,
            weights,
            points: Vec::with_capacity(data.len()),
            k,
            additive_only: k == 0,
            nearest_only,
        };
        let worst = data
            .iter()
            .filter_map(|(_, f)| *f)
            .fold(f64::INFINITY, f64::min);
        for (x, f) in data {
            let a = s.additive(x);
            let r = match f {
                Some(f) if nearest_only => *f,
                None if nearest_only => worst,
                Some(f) => f - a,
                // a failure: as bad as the worst seen, never predicted better than that
                None => (worst - a).min(0.0),
            };
            s.points.push(((*x).clone(), r));
        }
        s
    }

    /// The additive part's prediction.
    pub fn additive(&self, x: &[u32]) -> f64 {
        self.mean
            + self
                .effects
                .iter()
                .zip(x)
                .map(|(e, &v)| e.get(v as usize).copied().unwrap_or(0.0))
                .sum::<f64>()
    }

    fn nearest_mean(&self, x: &[u32]) -> f64 {
        let mut near: Vec<(f64, f64)> = self
            .points
            .iter()
            .map(|(p, f)| (self.distance(p, x), *f))
            .collect();
        let k = self.k.clamp(1, near.len());
        near.select_nth_unstable_by(k - 1, |a, b| a.0.total_cmp(&b.0));
        let (mut num, mut den) = (0.0, 0.0);
        for &(d, f) in &near[..k] {
            let w = 1.0 / (d + 1e-3);
            num += w * f;
            den += w;
        }
        num / den
    }

    /// Relevance-weighted distance between two configurations.
    pub fn distance(&self, a: &[u32], b: &[u32]) -> f64 {
        a.iter()
            .zip(b)
            .zip(self.spans.iter().zip(&self.weights))
            .map(|((&x, &y), (s, w))| w * (f64::from(x) - f64::from(y)).abs() / s)
            .sum()
    }

    /// Predicted fitness of a configuration.
    pub fn predict(&self, x: &[u32]) -> f64 {
        if self.nearest_only {
            return self.nearest_mean(x);
        }
        let a = self.additive(x);
        if self.additive_only || self.points.is_empty() {
            return a;
        }
        let mut near: Vec<(f64, f64)> = self
            .points
            .iter()
            .map(|(p, r)| (self.distance(p, x), *r))
            .collect();
        let k = self.k.min(near.len());
        near.select_nth_unstable_by(k - 1, |a, b| a.0.total_cmp(&b.0));
        let (mut num, mut den) = (0.0, PRIOR_WEIGHT);
        for &(d, r) in &near[..k] {
            let w = 1.0 / (d + NEAR);
            num += w * r;
            den += w;
        }
        a + num / den
    }

    /// Per-parameter relevance (distance weights, mean 1).
    pub fn relevance(&self) -> &[f64] {
        &self.weights
    }

    /// The fitted main effect of value index `v` of parameter `p`.
    pub fn effect(&self, p: usize, v: usize) -> f64 {
        self.effects[p][v]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// All configurations of a grid.
    fn grid(sizes: &[usize]) -> Vec<Indices> {
        let mut out = vec![vec![]];
        for &s in sizes {
            out = out
                .into_iter()
                .flat_map(|c: Vec<u32>| (0..s as u32).map(move |v| [c.clone(), vec![v]].concat()))
                .collect();
        }
        out
    }

    #[test]
    fn additive_part_recovers_separable_effects_and_ranks_unseen_combinations() {
        // fitness = 2·x0 − 0.5·x1 + 0·x2 (x2 irrelevant)
        let sizes = [4, 3, 5];
        let f = |x: &Indices| 2.0 * f64::from(x[0]) - 0.5 * f64::from(x[1]);
        let all = grid(&sizes);
        // train on a sparse subset that never shows the best combination (3, 0, _)
        let train: Vec<&Indices> = all
            .iter()
            .filter(|x| (x[0] + x[1] + x[2]) % 3 == 0 && !(x[0] == 3 && x[1] == 0))
            .collect();
        let data: Vec<(&Indices, Option<f64>)> = train.iter().map(|x| (*x, Some(f(x)))).collect();
        let s = Surrogate::fit(&sizes, &data, 3).unwrap();
        // effects in the true order, their differences near the truth (6 and 1) but shrunk
        // by the ridge pseudo-count (about 5 points per value of x0)
        assert!((0..3).all(|v| s.effect(0, v) < s.effect(0, v + 1)));
        let d0 = s.effect(0, 3) - s.effect(0, 0);
        assert!((4.0..=6.0).contains(&d0), "{d0}");
        let d1 = s.effect(1, 0) - s.effect(1, 2);
        assert!((0.5..=1.0).contains(&d1), "{d1}");
        // relevance: x0 > x1 > x2 (floored)
        let r = s.relevance();
        assert!(r[0] > r[1] && r[1] > r[2], "{r:?}");
        // the unseen best combination is predicted best
        let best = all
            .iter()
            .max_by(|a, b| s.predict(a).total_cmp(&s.predict(b)))
            .unwrap();
        assert_eq!(&best[..2], &[3, 0]);
    }

    #[test]
    fn relevance_weighted_neighbours_ignore_an_irrelevant_parameter() {
        // fitness depends on x0 only; x1 (many values) is noise-free but irrelevant
        let sizes = [3, 8];
        let all = grid(&sizes);
        let data: Vec<(&Indices, Option<f64>)> = all
            .iter()
            .filter(|x| x[1] % 2 == 0)
            .map(|x| (x, Some(f64::from(x[0]))))
            .collect();
        let s = Surrogate::fit_with(&sizes, &data, 3, true).unwrap();
        let r = s.relevance();
        assert!(r[0] > 5.0 * r[1], "{r:?}");
        // an unseen x1 value: the neighbours that share x0 are the nearest, so the prediction is exact
        for v in 0..3u32 {
            assert!(
                (s.predict(&[v, 3]) - f64::from(v)).abs() < 1e-9,
                "{}",
                s.predict(&[v, 3])
            );
        }
        // without relevance (equal weights) configurations with another x0 one step away in
        // x1 would count as much as those sharing x0 two steps away in x1
        assert!(s.distance(&[0, 3], &[0, 5]) < s.distance(&[0, 3], &[1, 3]));
    }

    #[test]
    fn the_plain_nearest_model_weighs_every_parameter_the_same() {
        // fitness = x0 only, but the plain model does not learn that: a point two steps away
        // in x1 is as far as one two steps away in x0
        let sizes = [5, 5];
        let pts: Vec<Indices> = vec![vec![0, 0], vec![2, 0], vec![0, 2], vec![4, 4]];
        let mut data: Vec<(&Indices, Option<f64>)> = pts[..3]
            .iter()
            .map(|x| (x, Some(f64::from(x[0]))))
            .collect();
        data.push((&pts[3], None));
        let s = Surrogate::nearest(&sizes, &data, 1).unwrap();
        assert_eq!(s.relevance(), &[1.0, 1.0]);
        assert_eq!(s.distance(&[0, 0], &[2, 0]), s.distance(&[0, 0], &[0, 2]));
        // the nearest evaluated configuration's fitness; a failure counts as the worst (0)
        assert_eq!(s.predict(&[2, 1]), 2.0);
        assert_eq!(s.predict(&[4, 3]), 0.0);
        assert!(
            Surrogate::nearest(&sizes, &data[3..], 1).is_none(),
            "no success, no model"
        );
    }

    #[test]
    fn unseen_values_are_interpolated() {
        // parameter 0 has 5 values; only 0, 2 and 4 evaluated; fitness = x0
        let sizes = [5];
        let pts: Vec<Indices> = vec![vec![0], vec![2], vec![4]];
        let data: Vec<(&Indices, Option<f64>)> =
            pts.iter().map(|x| (x, Some(f64::from(x[0])))).collect();
        let s = Surrogate::fit(&sizes, &data, 0).unwrap();
        let e = |v| s.effect(0, v);
        assert!(e(0) < e(1) && e(1) < e(2) && e(2) < e(3) && e(3) < e(4));
        assert!((e(1) - 0.5 * (e(0) + e(2))).abs() < 1e-12);
    }

    #[test]
    fn residuals_capture_interactions_and_failures() {
        // an interaction: (1, 1) is much better than the additive model says, and (0, 0) failed
        let sizes = [2, 2, 2];
        let pts: Vec<Indices> = vec![
            vec![0, 1, 0],
            vec![1, 0, 0],
            vec![1, 1, 0],
            vec![0, 0, 0],
            vec![0, 1, 1],
            vec![1, 0, 1],
        ];
        let fit = [0.0, 0.0, 3.0];
        let mut data: Vec<(&Indices, Option<f64>)> = pts[..3]
            .iter()
            .zip(fit)
            .map(|(x, f)| (x, Some(f)))
            .collect();
        data.push((&pts[3], None));
        data.push((&pts[4], Some(0.0)));
        data.push((&pts[5], Some(0.0)));
        let s = Surrogate::fit(&sizes, &data, 3).unwrap();
        let add = Surrogate::fit(&sizes, &data, 0).unwrap();
        // the residual correction lifts (1, 1, 1) above its additive prediction
        assert!(s.predict(&[1, 1, 1]) > add.predict(&[1, 1, 1]));
        // next to the failure is predicted worse than next to successes
        assert!(s.predict(&[0, 0, 1]) < s.predict(&[1, 1, 1]));
        assert!(s.predict(&[0, 0, 1]) <= add.predict(&[0, 0, 1]));
        // no success at all: no model
        let failed: Vec<(&Indices, Option<f64>)> = vec![(&pts[0], None)];
        assert!(Surrogate::fit(&sizes, &failed, 3).is_none());
    }
}
