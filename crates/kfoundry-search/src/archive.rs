//! The MAP-Elites archive: one elite per cell of the binned descriptor space (or, for the
//! single-cell ablation, one cell holding the best `capacity` configurations).

use std::collections::HashMap;
use std::hash::Hash;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::space::Indices;

/// A cell's coordinates: one bin per descriptor dimension.
pub type Cell = Vec<u16>;

/// An archived configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Elite {
    /// Index of its evaluation in the history.
    pub eval: usize,
    pub indices: Indices,
    /// Fitness: `-ln(time)`, higher is better.
    pub fitness: f64,
    pub cell: Cell,
}

/// What happened to a configuration offered to the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// It filled an empty cell.
    NewCell,
    /// It replaced (or joined) a cell's elite(s).
    Improved,
    /// The cell already holds better ones.
    Rejected,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Slot {
    cell: Cell,
    /// Best first; at most `capacity` entries.
    elites: Vec<Elite>,
}

/// (De)serializes a hash map with non-string keys as a list of pairs sorted by key, so that
/// JSON can hold it and the output is deterministic.
pub(crate) mod pairs {
    use super::*;

    pub fn serialize<S: Serializer, K: Serialize + Ord, V: Serialize>(
        m: &HashMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut v: Vec<(&K, &V)> = m.iter().collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v.serialize(s)
    }

    pub fn deserialize<'de, D, K, V>(d: D) -> Result<HashMap<K, V>, D::Error>
    where
        D: Deserializer<'de>,
        K: Deserialize<'de> + Eq + Hash,
        V: Deserialize<'de>,
    {
        let v: Vec<(K, V)> = Vec::deserialize(d)?;
        Ok(v.into_iter().collect())
    }
}

/// The archive. Iteration order is insertion order, so that seeded runs are reproducible.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Archive {
    capacity: usize,
    slots: Vec<Slot>,
    /// Cell → position in `slots`.
    #[serde(with = "pairs")]
    index: HashMap<Cell, usize>,
    /// Median of the cells' best fitness, kept up to date by `insert`.
    median: Option<f64>,
}

impl Archive {
    /// An empty archive whose cells keep up to `capacity` elites (1 for MAP-Elites).
    pub fn new(capacity: usize) -> Archive {
        Archive {
            capacity: capacity.max(1),
            slots: Vec::new(),
            index: HashMap::new(),
            median: None,
        }
    }

    /// Offers a configuration; keeps it if its cell is empty or it beats the cell's worst
    /// kept elite. A configuration already in the cell is not added twice.
    pub fn insert(&mut self, elite: Elite) -> Insert {
        let r = self.insert_inner(elite);
        if r != Insert::Rejected {
            self.median = self.compute_median();
        }
        r
    }

    fn insert_inner(&mut self, elite: Elite) -> Insert {
        match self.index.get(&elite.cell) {
            None => {
                self.index.insert(elite.cell.clone(), self.slots.len());
                self.slots.push(Slot {
                    cell: elite.cell.clone(),
                    elites: vec![elite],
                });
                Insert::NewCell
            }
            Some(&i) => {
                let slot = &mut self.slots[i];
                if slot.elites.iter().any(|e| e.indices == elite.indices) {
                    return Insert::Rejected;
                }
                let full = slot.elites.len() >= self.capacity;
                let worst = slot
                    .elites
                    .last()
                    .map(|e| e.fitness)
                    .unwrap_or(f64::NEG_INFINITY);
                if full && elite.fitness <= worst {
                    return Insert::Rejected;
                }
                let pos = slot
                    .elites
                    .iter()
                    .position(|e| e.fitness < elite.fitness)
                    .unwrap_or(slot.elites.len());
                slot.elites.insert(pos, elite);
                slot.elites.truncate(self.capacity);
                Insert::Improved
            }
        }
    }

    /// Number of occupied cells.
    pub fn cells(&self) -> usize {
        self.slots.len()
    }

    /// Number of elites (equals `cells()` for MAP-Elites).
    pub fn len(&self) -> usize {
        self.slots.iter().map(|s| s.elites.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// All elites, cell by cell in insertion order, best first within a cell.
    pub fn elites(&self) -> impl Iterator<Item = &Elite> {
        self.slots.iter().flat_map(|s| s.elites.iter())
    }

    /// The best elite of a cell.
    pub fn get(&self, cell: &[u16]) -> Option<&Elite> {
        self.index
            .get(cell)
            .and_then(|&i| self.slots[i].elites.first())
    }

    /// The best elite overall.
    pub fn best(&self) -> Option<&Elite> {
        self.elites().fold(None, |b: Option<&Elite>, e| match b {
            Some(b) if b.fitness >= e.fitness => Some(b),
            _ => Some(e),
        })
    }

    /// Median of the cells' best fitness (NaN when empty).
    pub fn median_fitness(&self) -> f64 {
        self.median.unwrap_or(f64::NAN)
    }

    fn compute_median(&self) -> Option<f64> {
        let mut f: Vec<f64> = self
            .slots
            .iter()
            .filter_map(|s| s.elites.first().map(|e| e.fitness))
            .collect();
        if f.is_empty() {
            return None;
        }
        f.sort_by(f64::total_cmp);
        let n = f.len();
        Some(if n % 2 == 1 {
            f[n / 2]
        } else {
            0.5 * (f[n / 2 - 1] + f[n / 2])
        })
    }

    /// How much a cell pulls the search (the ∂E term): 1 when empty, 0.5 when its elite is
    /// below the archive's median, 0 otherwise.
    pub fn attraction(&self, cell: &[u16], median: f64) -> f64 {
        match self.get(cell) {
            None => 1.0,
            Some(e) if e.fitness < median => 0.5,
            Some(_) => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(eval: usize, idx: &[u32], fitness: f64, cell: &[u16]) -> Elite {
        Elite {
            eval,
            indices: idx.to_vec(),
            fitness,
            cell: cell.to_vec(),
        }
    }

    #[test]
    fn one_elite_per_cell_keeps_the_best() {
        let mut a = Archive::new(1);
        assert_eq!(a.insert(e(0, &[0], -1.0, &[0, 0])), Insert::NewCell);
        assert_eq!(a.insert(e(1, &[1], -2.0, &[0, 0])), Insert::Rejected);
        assert_eq!(a.insert(e(2, &[2], -0.5, &[0, 0])), Insert::Improved);
        assert_eq!(a.insert(e(3, &[3], -3.0, &[1, 0])), Insert::NewCell);
        assert_eq!(a.cells(), 2);
        assert_eq!(a.len(), 2);
        assert_eq!(a.get(&[0, 0]).map(|x| x.eval), Some(2));
        assert_eq!(a.best().map(|x| x.eval), Some(2));
        assert_eq!(a.median_fitness(), -1.75);
        assert_eq!(a.attraction(&[0, 1], a.median_fitness()), 1.0);
        assert_eq!(a.attraction(&[1, 0], a.median_fitness()), 0.5);
        assert_eq!(a.attraction(&[0, 0], a.median_fitness()), 0.0);
    }

    #[test]
    fn single_cell_keeps_a_population() {
        let mut a = Archive::new(3);
        for (i, f) in [-5.0, -1.0, -3.0, -4.0, -2.0].iter().enumerate() {
            a.insert(e(i, &[i as u32], *f, &[]));
        }
        let kept: Vec<usize> = a.elites().map(|x| x.eval).collect();
        assert_eq!(kept, [1, 4, 2]);
        // the same configuration is not kept twice
        assert_eq!(a.insert(e(9, &[1], -1.0, &[])), Insert::Rejected);
    }

    #[test]
    fn serde_round_trip() {
        let mut a = Archive::new(1);
        a.insert(e(0, &[0, 1], -1.0, &[2, 3]));
        let j = serde_json::to_string(&a).unwrap();
        let b: Archive = serde_json::from_str(&j).unwrap();
        assert_eq!(a, b);
    }
}
