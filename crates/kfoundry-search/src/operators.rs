//! Mutation operators and the weighted choices the samplers use. Configurations are value
//! indices; `sizes[p]` is the number of values of parameter `p`.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::space::Indices;

/// How a configuration was produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operator {
    /// The caller's reference configuration.
    Reference,
    /// A configuration the caller knows to be good elsewhere (a warm start: the best of
    /// another workload, device, source version or kernel of the same template), evaluated
    /// right after the reference.
    WarmStart,
    /// Uniformly random valid configuration (initial samples, or when mutation found nothing new).
    Random,
    /// One or a few parameters moved by one or a few steps.
    Neighbour,
    /// One or two parameters set to a random value.
    Reset,
    /// Uniform crossover of two elites.
    Crossover,
}

/// Picks an index with probability proportional to its weight (non-finite or negative
/// weights count as 0); uniformly when all weights are 0. `None` only for an empty slice.
pub(crate) fn weighted_index<R: Rng>(weights: &[f64], rng: &mut R) -> Option<usize> {
    if weights.is_empty() {
        return None;
    }
    let w = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
    let total: f64 = weights.iter().map(|&x| w(x)).sum();
    if total <= 0.0 {
        return Some(rng.gen_range(0..weights.len()));
    }
    let mut r = rng.gen::<f64>() * total;
    for (i, &x) in weights.iter().enumerate() {
        r -= w(x);
        if r < 0.0 {
            return Some(i);
        }
    }
    // rounding: the last index with positive weight
    weights.iter().rposition(|&x| w(x) > 0.0)
}

/// Picks up to `count` distinct indices, each draw proportional to the remaining weights.
pub(crate) fn weighted_distinct<R: Rng>(weights: &[f64], count: usize, rng: &mut R) -> Vec<usize> {
    let mut w = weights.to_vec();
    let mut out = Vec::new();
    while out.len() < count.min(weights.len()) {
        match weighted_index(&w, rng) {
            Some(i) if !out.contains(&i) => {
                out.push(i);
                w[i] = 0.0;
                if w.iter().all(|&x| !(x.is_finite() && x > 0.0)) {
                    // only zero weights left: fill uniformly from the rest
                    let rest: Vec<usize> =
                        (0..weights.len()).filter(|i| !out.contains(i)).collect();
                    if rest.is_empty() {
                        break;
                    }
                    for i in rest {
                        w[i] = 1.0;
                    }
                }
            }
            _ => break,
        }
    }
    out
}

/// Neighbour step: each `(parameter, p_up)` moves its index up with probability `p_up`
/// (down otherwise; the other way at a border) by 1, or with decreasing probability 2 or 3.
pub(crate) fn neighbour_step<R: Rng>(
    parent: &[u32],
    sizes: &[usize],
    moves: &[(usize, f64)],
    rng: &mut R,
) -> Indices {
    let mut child = parent.to_vec();
    for &(p, p_up) in moves {
        let n = sizes[p] as i64;
        if n < 2 {
            continue;
        }
        let r: f64 = rng.gen();
        let step = if r < 0.75 {
            1
        } else if r < 0.95 {
            2
        } else {
            3
        };
        let cur = i64::from(child[p]);
        let mut up = rng.gen::<f64>() < p_up;
        if up && cur == n - 1 {
            up = false;
        } else if !up && cur == 0 {
            up = true;
        }
        let next = if up { cur + step } else { cur - step };
        child[p] = next.clamp(0, n - 1) as u32;
    }
    child
}

/// Random reset: each listed parameter gets a uniformly drawn different value.
pub(crate) fn random_reset<R: Rng>(
    parent: &[u32],
    sizes: &[usize],
    params: &[usize],
    rng: &mut R,
) -> Indices {
    let mut child = parent.to_vec();
    for &p in params {
        let n = sizes[p] as u32;
        if n < 2 {
            continue;
        }
        let v = rng.gen_range(0..n - 1);
        child[p] = if v >= child[p] { v + 1 } else { v };
    }
    child
}

/// Uniform crossover: each parameter from `a` or `b` with equal probability.
pub(crate) fn uniform_crossover<R: Rng>(a: &[u32], b: &[u32], rng: &mut R) -> Indices {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| if rng.gen::<bool>() { x } else { y })
        .collect()
}

/// A uniformly random configuration.
pub(crate) fn random_config<R: Rng>(sizes: &[usize], rng: &mut R) -> Indices {
    sizes
        .iter()
        .map(|&n| rng.gen_range(0..n.max(1) as u32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn weighted_index_follows_weights() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut counts = [0usize; 3];
        for _ in 0..10_000 {
            counts[weighted_index(&[1.0, 0.0, 3.0], &mut rng).unwrap()] += 1;
        }
        assert_eq!(counts[1], 0);
        let ratio = counts[2] as f64 / counts[0] as f64;
        assert!((2.6..3.4).contains(&ratio), "{counts:?}");
        assert_eq!(weighted_index(&[], &mut rng), None);
        // all zero: uniform
        let i = weighted_index(&[0.0, f64::NAN], &mut rng).unwrap();
        assert!(i < 2);
    }

    #[test]
    fn weighted_distinct_is_distinct() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for _ in 0..100 {
            let v = weighted_distinct(&[1.0, 0.0, 5.0, 1.0], 3, &mut rng);
            assert_eq!(v.len(), 3);
            let mut s = v.clone();
            s.sort();
            s.dedup();
            assert_eq!(s.len(), 3);
        }
    }

    #[test]
    fn neighbour_step_respects_direction_and_borders() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let sizes = [10, 3];
        let mut ups = 0;
        for _ in 0..1000 {
            let c = neighbour_step(&[5, 0], &sizes, &[(0, 0.9), (1, 0.0)], &mut rng);
            assert!(c[0] != 5 && (2..=8).contains(&c[0]));
            // at the lower border a "down" move goes up
            assert!(c[1] >= 1);
            if c[0] > 5 {
                ups += 1;
            }
        }
        assert!((850..950).contains(&ups), "{ups}");
        // clamped at the top
        let c = neighbour_step(&[9, 2], &sizes, &[(0, 1.0)], &mut rng);
        assert!(c[0] < 9);
    }

    #[test]
    fn reset_changes_value_and_crossover_mixes() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for _ in 0..100 {
            let c = random_reset(&[1, 1], &[4, 1], &[0, 1], &mut rng);
            assert_ne!(c[0], 1);
            assert!(c[0] < 4);
            assert_eq!(c[1], 1, "a single-valued parameter cannot change");
        }
        let a = [0u32; 16];
        let b = [1u32; 16];
        let c = uniform_crossover(&a, &b, &mut rng);
        let ones = c.iter().filter(|&&x| x == 1).count();
        assert!(ones > 0 && ones < 16);
        let r = random_config(&[3, 1, 5], &mut rng);
        assert!(r[0] < 3 && r[1] == 0 && r[2] < 5);
    }
}
