//! Gradient-informed steering.
//!
//! Every parent → child move is recorded with the cell of the parent, the direction it took
//! along each descriptor dimension (sign of the change of the descriptor's continuous value)
//! and the change of fitness. Per cell `c` and dimension `d`:
//!
//! - **∂F**: decay-weighted mean of `sign(move along d) × Δfitness`, divided by the mean
//!   |Δfitness| of all moves so far (scale-free) and clamped to [-1, 1];
//! - **∂R**: success rate of moves up along `d` minus that of moves down, relative to their
//!   sum (rates Laplace-smoothed: one success in two pseudo-moves each way; a failed build or
//!   a wrong result is an unsuccessful move), in [-1, 1];
//! - **∂E**: pull toward empty and below-median cells: `attraction(c + e_d) −
//!   attraction(c − e_d)` with attraction 1 for an empty cell, 0.5 for a cell whose elite is
//!   below the archive's median, 0 otherwise (and 0 outside the descriptor range);
//! - **g** = `wF ∂F + wR ∂R + wE ∂E` (0.4 / 0.4 / 0.2 by default), in [-1, 1].
//!
//! A cell has few moves of its own, so its ∂F and ∂R are shrunk toward the same statistics
//! pooled over all cells (`prior` pseudo-moves of the pooled estimate). Statistics decay:
//! each new move from a cell multiplies that cell's earlier weights by `decay`, each new move
//! anywhere multiplies the pooled weights by `decay`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::archive::{Archive, Cell};

/// One recorded parent → child move.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Move {
    /// History index of the parent and of the child.
    pub parent: usize,
    pub child: usize,
    pub parent_cell: Cell,
    /// Per descriptor dimension: -1, 0 or +1.
    pub dirs: Vec<i8>,
    /// Parameters whose value changed: (parameter, index change).
    pub changes: Vec<(usize, i32)>,
    /// Child fitness minus parent fitness; `None` when the child failed.
    pub delta: Option<f64>,
}

/// The weights of the three terms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    pub fitness: f64,
    pub success: f64,
    pub empty: f64,
}

impl Default for Weights {
    /// KernelFoundry's 0.4 / 0.4 / 0.2.
    fn default() -> Self {
        Weights {
            fitness: 0.4,
            success: 0.4,
            empty: 0.2,
        }
    }
}

/// Decay-weighted sums for one (cell or pool, dimension).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Acc {
    f_num: f64,
    f_den: f64,
    up_succ: f64,
    up_n: f64,
    down_succ: f64,
    down_n: f64,
}

impl Acc {
    fn scale(&mut self, k: f64) {
        self.f_num *= k;
        self.f_den *= k;
        self.up_succ *= k;
        self.up_n *= k;
        self.down_succ *= k;
        self.down_n *= k;
    }

    fn add(&mut self, dir: i8, delta: Option<f64>) {
        let success = matches!(delta, Some(x) if x > 0.0);
        if let Some(x) = delta {
            self.f_num += f64::from(dir) * x;
            self.f_den += 1.0;
        }
        let s = if success { 1.0 } else { 0.0 };
        if dir > 0 {
            self.up_n += 1.0;
            self.up_succ += s;
        } else {
            self.down_n += 1.0;
            self.down_succ += s;
        }
    }
}

/// The components of the gradient of one cell along one dimension.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Gradient {
    pub df: f64,
    pub dr: f64,
    pub de: f64,
    /// The weighted combination.
    pub g: f64,
}

/// The move history and the statistics derived from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradientModel {
    dims: usize,
    decay: f64,
    prior: f64,
    weights: Weights,
    moves: Vec<Move>,
    pooled: Vec<Acc>,
    #[serde(with = "crate::archive::pairs")]
    cells: HashMap<Cell, Vec<Acc>>,
    abs_delta_sum: f64,
    abs_delta_n: f64,
}

impl GradientModel {
    /// An empty model over `dims` descriptor dimensions.
    pub fn new(dims: usize, weights: Weights, decay: f64, prior: f64) -> GradientModel {
        GradientModel {
            dims,
            decay: decay.clamp(0.0, 1.0),
            prior: prior.max(0.0),
            weights,
            moves: Vec::new(),
            pooled: vec![Acc::default(); dims],
            cells: HashMap::new(),
            abs_delta_sum: 0.0,
            abs_delta_n: 0.0,
        }
    }

    /// A model built from a move history (oldest first).
    pub fn from_moves(
        dims: usize,
        weights: Weights,
        decay: f64,
        prior: f64,
        moves: Vec<Move>,
    ) -> GradientModel {
        let mut m = GradientModel::new(dims, weights, decay, prior);
        for mv in moves {
            m.record(mv);
        }
        m
    }

    /// The recorded moves, oldest first.
    pub fn moves(&self) -> &[Move] {
        &self.moves
    }

    /// Records a move.
    pub fn record(&mut self, mv: Move) {
        if let Some(x) = mv.delta {
            self.abs_delta_sum += x.abs();
            self.abs_delta_n += 1.0;
        }
        for a in &mut self.pooled {
            a.scale(self.decay);
        }
        let dims = self.dims;
        let decay = self.decay;
        let cell = self
            .cells
            .entry(mv.parent_cell.clone())
            .or_insert_with(|| vec![Acc::default(); dims]);
        for a in cell.iter_mut() {
            a.scale(decay);
        }
        for (d, (c, p)) in cell.iter_mut().zip(self.pooled.iter_mut()).enumerate() {
            let dir = mv.dirs.get(d).copied().unwrap_or(0);
            if dir != 0 {
                c.add(dir, mv.delta);
                p.add(dir, mv.delta);
            }
        }
        self.moves.push(mv);
    }

    /// The gradient of `cell` along every dimension; `bins[d]` is the number of bins of
    /// dimension `d` (for ∂E at the borders).
    pub fn gradient(&self, cell: &[u16], archive: &Archive, bins: &[usize]) -> Vec<Gradient> {
        self.gradient_with_median(cell, archive, bins, archive.median_fitness())
    }

    /// [`GradientModel::gradient`] with the archive's median fitness already computed.
    pub fn gradient_with_median(
        &self,
        cell: &[u16],
        archive: &Archive,
        bins: &[usize],
        median: f64,
    ) -> Vec<Gradient> {
        let scale = if self.abs_delta_n > 0.0 && self.abs_delta_sum > 0.0 {
            self.abs_delta_sum / self.abs_delta_n
        } else {
            1.0
        };
        let own = self.cells.get(cell);
        (0..self.dims)
            .map(|d| {
                let p = self.pooled[d];
                let c = own.map(|v| v[d]).unwrap_or_default();
                let k = self.prior;
                // ∂F: shrink the cell's mean toward the pooled mean.
                let pooled_f = if p.f_den > 0.0 {
                    p.f_num / p.f_den
                } else {
                    0.0
                };
                let df_raw = (c.f_num + k * pooled_f) / (c.f_den + k).max(f64::MIN_POSITIVE);
                let df = if c.f_den + k > 0.0 {
                    (df_raw / scale).clamp(-1.0, 1.0)
                } else {
                    0.0
                };
                // ∂R: smoothed success rates up and down.
                let pu = (p.up_succ + 1.0) / (p.up_n + 2.0);
                let pd = (p.down_succ + 1.0) / (p.down_n + 2.0);
                let su = (c.up_succ + k * pu + 1.0) / (c.up_n + k + 2.0);
                let sd = (c.down_succ + k * pd + 1.0) / (c.down_n + k + 2.0);
                let dr = (su - sd) / (su + sd);
                // ∂E: attraction of the neighbouring cells.
                let de = if d < cell.len() && !archive.is_empty() {
                    let nb = bins.get(d).copied().unwrap_or(1);
                    let b = cell[d];
                    let up = if (b as usize) + 1 < nb {
                        let mut n = cell.to_vec();
                        n[d] = b + 1;
                        archive.attraction(&n, median)
                    } else {
                        0.0
                    };
                    let down = if b > 0 {
                        let mut n = cell.to_vec();
                        n[d] = b - 1;
                        archive.attraction(&n, median)
                    } else {
                        0.0
                    };
                    up - down
                } else {
                    0.0
                };
                let w = self.weights;
                let g = (w.fitness * df + w.success * dr + w.empty * de).clamp(-1.0, 1.0);
                Gradient { df, dr, de, g }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::Elite;

    fn mv(cell: &[u16], dirs: &[i8], delta: Option<f64>) -> Move {
        Move {
            parent: 0,
            child: 1,
            parent_cell: cell.to_vec(),
            dirs: dirs.to_vec(),
            changes: vec![],
            delta,
        }
    }

    fn archive_with(cells: &[(&[u16], f64)]) -> Archive {
        let mut a = Archive::new(1);
        for (i, (c, f)) in cells.iter().enumerate() {
            a.insert(Elite {
                eval: i,
                indices: vec![i as u32],
                fitness: *f,
                cell: c.to_vec(),
            });
        }
        a
    }

    #[test]
    fn fitness_and_success_point_up_when_up_moves_improve() {
        // dimension 0: up improves, down worsens; dimension 1: never moved.
        let moves = vec![
            mv(&[1, 1], &[1, 0], Some(0.2)),
            mv(&[1, 1], &[1, 0], Some(0.1)),
            mv(&[1, 1], &[-1, 0], Some(-0.3)),
            mv(&[1, 1], &[-1, 0], None),
        ];
        let m = GradientModel::from_moves(2, Weights::default(), 1.0, 0.0, moves);
        let a = archive_with(&[
            (&[0, 1], -1.0),
            (&[1, 1], -0.5),
            (&[2, 1], -0.4),
            (&[1, 0], -0.1),
            (&[1, 2], -0.2),
        ]);
        let g = m.gradient(&[1, 1], &a, &[3, 3]);
        // ∂F = mean(+0.2, +0.1, +0.3) / mean|Δ| (0.2) = 1.0
        assert!((g[0].df - 1.0).abs() < 1e-9, "{:?}", g[0]);
        // up: 2/2 successes -> (2+1)/(2+2) = .75; down 0/2 -> 1/4 = .25; (.75-.25)/(1.0) = .5
        assert!((g[0].dr - 0.5).abs() < 1e-9, "{:?}", g[0]);
        // neighbours along d0: up [2,1] is above median (0), down [0,1] below median (0.5)
        let median = a.median_fitness();
        assert_eq!(median, -0.4);
        assert!((g[0].de - (0.0 - 0.5)).abs() < 1e-9);
        assert!((g[0].g - (0.4 * 1.0 + 0.4 * 0.5 + 0.2 * -0.5)).abs() < 1e-9);
        // d1 never moved: ∂F = 0, ∂R = 0
        assert_eq!(g[1].df, 0.0);
        assert_eq!(g[1].dr, 0.0);
    }

    #[test]
    fn empty_cells_pull() {
        let m = GradientModel::new(1, Weights::default(), 1.0, 2.0);
        let a = archive_with(&[(&[0], -1.0), (&[1], -0.5)]);
        // from cell 1: up neighbour (2) empty -> 1, down neighbour (0) below median -> 0.5
        let g = m.gradient(&[1], &a, &[3]);
        assert!((g[0].de - 0.5).abs() < 1e-9);
        // at the top border there is nothing above
        let g = m.gradient(&[2], &a, &[3]);
        assert!((g[0].de - 0.0).abs() < 1e-9);
    }

    #[test]
    fn cells_borrow_from_the_pool_and_decay() {
        // moves from cell [0] say "up is good"; cell [5] has none of its own
        let moves: Vec<Move> = (0..6).map(|_| mv(&[0], &[1], Some(0.1))).collect();
        let m = GradientModel::from_moves(1, Weights::default(), 1.0, 3.0, moves.clone());
        let a = Archive::new(1);
        let g = m.gradient(&[5], &a, &[8]);
        assert!(g[0].df > 0.99 && g[0].dr > 0.0, "{:?}", g[0]);
        // with strong decay, a recent contrary move dominates
        let mut moves2 = moves;
        moves2.push(mv(&[0], &[1], Some(-0.5)));
        let m = GradientModel::from_moves(1, Weights::default(), 0.1, 0.0, moves2);
        let g = m.gradient(&[0], &a, &[8]);
        assert!(g[0].df < 0.0, "{:?}", g[0]);
    }

    #[test]
    fn serde_round_trip() {
        let m = GradientModel::from_moves(
            1,
            Weights::default(),
            0.9,
            3.0,
            vec![mv(&[0], &[1], Some(0.1))],
        );
        let j = serde_json::to_string(&m).unwrap();
        let n: GradientModel = serde_json::from_str(&j).unwrap();
        assert_eq!(m, n);
    }
}
