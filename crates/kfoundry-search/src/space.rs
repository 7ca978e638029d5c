//! The search space: ordered parameters with their values, and the behavioural descriptors
//! that place a configuration in a cell of the MAP-Elites archive.

use serde::{Deserialize, Serialize};

/// A configuration: one value per parameter, in the order of [`Space::params`].
pub type Config = Vec<i64>;

/// The same configuration as indices into each parameter's value list (the engine's form).
pub type Indices = Vec<u32>;

/// One tunable parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    /// The allowed values, in the order that "neighbour" refers to (usually ascending).
    pub values: Vec<i64>,
}

/// How a descriptor dimension turns a configuration into a number.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DescriptorSource {
    /// `log2` of the product of the values of these parameters (indices into `params`) when
    /// all their values are positive (work-group size, work per item, vector width), else
    /// the sum of their value indices. Either way it never decreases when one of these
    /// parameters steps up, which is what lets the gradient steer the parameters.
    Params(Vec<usize>),
    /// A value measured when the variant is built and reported in
    /// [`crate::Evaluation::Ok::descriptors`] under this name (e.g. local memory bytes),
    /// binned on the given ascending edges: bin `i` holds `edges[i-1] <= v < edges[i]`.
    /// A configuration whose evaluation does not report it falls in bin 0.
    Measured { edges: Vec<f64> },
}

/// One dimension of the archive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Descriptor {
    pub name: String,
    pub source: DescriptorSource,
}

/// Parameters plus descriptors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Space {
    pub params: Vec<Param>,
    /// Archive dimensions. [`Space::new`] derives them from the parameters
    /// ([`Space::default_descriptors`]); a caller that knows better (an annotation naming
    /// its own descriptor expressions) replaces them.
    pub descriptors: Vec<Descriptor>,
}

/// Errors in the description of a space.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpaceError {
    #[error("the space has no parameters")]
    Empty,
    #[error("parameter `{0}` has no values")]
    NoValues(String),
    #[error("parameter `{0}` lists the value {1} twice")]
    DuplicateValue(String, i64),
    #[error("parameter `{0}` is declared twice")]
    DuplicateName(String),
    #[error("descriptor `{0}` refers to parameter #{1}, but the space has {2}")]
    BadDescriptorParam(String, usize, usize),
    #[error("configuration has {0} values, the space has {1} parameters")]
    WrongLength(usize, usize),
    #[error("value {1} is not allowed for parameter `{0}`")]
    UnknownValue(String, i64),
}

impl Space {
    /// A space with descriptors derived by [`Space::default_descriptors`].
    pub fn new(params: Vec<Param>) -> Result<Space, SpaceError> {
        let descriptors = Self::default_descriptors(&params);
        Self::with_descriptors(params, descriptors)
    }

    /// A space with the caller's descriptors (may be empty: one cell).
    pub fn with_descriptors(
        params: Vec<Param>,
        descriptors: Vec<Descriptor>,
    ) -> Result<Space, SpaceError> {
        if params.is_empty() {
            return Err(SpaceError::Empty);
        }
        for (i, p) in params.iter().enumerate() {
            if p.values.is_empty() {
                return Err(SpaceError::NoValues(p.name.clone()));
            }
            for (j, v) in p.values.iter().enumerate() {
                if p.values[..j].contains(v) {
                    return Err(SpaceError::DuplicateValue(p.name.clone(), *v));
                }
            }
            if params[..i].iter().any(|q| q.name == p.name) {
                return Err(SpaceError::DuplicateName(p.name.clone()));
            }
        }
        for d in &descriptors {
            if let DescriptorSource::Params(ps) = &d.source {
                if let Some(&bad) = ps.iter().find(|&&p| p >= params.len()) {
                    return Err(SpaceError::BadDescriptorParam(
                        d.name.clone(),
                        bad,
                        params.len(),
                    ));
                }
            }
        }
        Ok(Space {
            params,
            descriptors,
        })
    }

    /// Descriptors derived from the parameters alone, knowing nothing of the kernel:
    /// parameters whose names differ only in a trailing `_x`/`_y`/`_z` (the usual spelling
    /// of work-group and tile shapes) form one dimension, the log2 of their product (the
    /// work-group size, the work per item); every other parameter with more than one value
    /// is a dimension of its own. Parameters with a single value are left out.
    pub fn default_descriptors(params: &[Param]) -> Vec<Descriptor> {
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, p) in params.iter().enumerate() {
            if p.values.len() < 2 {
                continue;
            }
            let stem = ["_x", "_y", "_z", "_X", "_Y", "_Z"]
                .iter()
                .find_map(|s| p.name.strip_suffix(s))
                .map(str::to_string);
            match stem {
                Some(stem) => match groups.iter_mut().find(|(n, _)| *n == stem) {
                    Some((_, members)) => members.push(i),
                    None => groups.push((stem, vec![i])),
                },
                None => groups.push((p.name.clone(), vec![i])),
            }
        }
        groups
            .into_iter()
            .map(|(name, members)| Descriptor {
                name,
                source: DescriptorSource::Params(members),
            })
            .collect()
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// Never true for a space built by [`Space::new`].
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// Number of configurations (valid or not), saturating.
    pub fn size(&self) -> u128 {
        self.params
            .iter()
            .fold(1u128, |a, p| a.saturating_mul(p.values.len() as u128))
    }

    /// Values of a configuration given as indices. Indices out of range are clamped.
    pub fn values(&self, idx: &[u32]) -> Config {
        self.params
            .iter()
            .zip(idx)
            .map(|(p, &i)| p.values[(i as usize).min(p.values.len() - 1)])
            .collect()
    }

    /// Whether `idx` names a configuration of this space (one index per parameter, each in
    /// range).
    pub fn contains(&self, idx: &[u32]) -> bool {
        idx.len() == self.params.len()
            && self
                .params
                .iter()
                .zip(idx)
                .all(|(p, &i)| (i as usize) < p.values.len())
    }

    /// Indices of a configuration given as values.
    pub fn indices(&self, config: &[i64]) -> Result<Indices, SpaceError> {
        if config.len() != self.params.len() {
            return Err(SpaceError::WrongLength(config.len(), self.params.len()));
        }
        self.params
            .iter()
            .zip(config)
            .map(|(p, v)| {
                p.values
                    .iter()
                    .position(|x| x == v)
                    .map(|i| i as u32)
                    .ok_or_else(|| SpaceError::UnknownValue(p.name.clone(), *v))
            })
            .collect()
    }

    /// The continuous value of descriptor `d` for a configuration (indices); `None` for a
    /// measured descriptor.
    pub fn descriptor_value(&self, d: usize, idx: &[u32]) -> Option<f64> {
        match &self.descriptors[d].source {
            DescriptorSource::Params(ps) => Some(self.params_value(ps, idx)),
            DescriptorSource::Measured { .. } => None,
        }
    }

    fn params_value(&self, ps: &[usize], idx: &[u32]) -> f64 {
        let positive = ps
            .iter()
            .all(|&p| self.params[p].values.iter().all(|&v| v > 0));
        if positive {
            ps.iter()
                .map(|&p| (self.params[p].values[idx[p] as usize] as f64).log2())
                .sum()
        } else {
            ps.iter().map(|&p| idx[p] as f64).sum()
        }
    }

    /// Range (min, max) of a parameter descriptor over all value combinations.
    fn params_range(&self, ps: &[usize]) -> (f64, f64) {
        let lo: Vec<u32> = vec![0; self.params.len()];
        let hi: Vec<u32> = self
            .params
            .iter()
            .map(|p| p.values.len() as u32 - 1)
            .collect();
        let positive = ps
            .iter()
            .all(|&p| self.params[p].values.iter().all(|&v| v > 0));
        if positive {
            // log2 of a product is a sum: min and max per parameter.
            let mut a = 0.0;
            let mut b = 0.0;
            for &p in ps {
                let l = self.params[p].values.iter().map(|&v| (v as f64).log2());
                a += l.clone().fold(f64::INFINITY, f64::min);
                b += l.fold(f64::NEG_INFINITY, f64::max);
            }
            (a, b)
        } else {
            (self.params_value(ps, &lo), self.params_value(ps, &hi))
        }
    }

    /// Number of bins of descriptor `d` when parameter descriptors are cut in at most
    /// `max_bins` equal-width bins (fewer when the descriptor takes fewer distinct values).
    pub fn bins(&self, d: usize, max_bins: usize) -> usize {
        let max_bins = max_bins.max(1);
        match &self.descriptors[d].source {
            DescriptorSource::Params(ps) => {
                let distinct = if ps.len() == 1 {
                    self.params[ps[0]].values.len()
                } else {
                    usize::MAX
                };
                distinct.min(max_bins)
            }
            DescriptorSource::Measured { edges } => edges.len() + 1,
        }
    }

    /// The bin of descriptor `d` for a configuration; `measured` are the values reported
    /// by its evaluation.
    pub fn bin(&self, d: usize, idx: &[u32], measured: &[(String, f64)], max_bins: usize) -> u16 {
        let desc = &self.descriptors[d];
        match &desc.source {
            DescriptorSource::Params(ps) => {
                let n = self.bins(d, max_bins);
                if ps.len() == 1 && self.params[ps[0]].values.len() <= max_bins.max(1) {
                    return idx[ps[0]] as u16;
                }
                let (lo, hi) = self.params_range(ps);
                let v = self.params_value(ps, idx);
                if hi <= lo {
                    return 0;
                }
                let b = ((v - lo) / (hi - lo) * n as f64).floor() as i64;
                b.clamp(0, n as i64 - 1) as u16
            }
            DescriptorSource::Measured { edges } => {
                let v = measured
                    .iter()
                    .find(|(n, _)| *n == desc.name)
                    .map(|(_, v)| *v);
                match v {
                    Some(v) => edges.iter().take_while(|&&e| e <= v).count() as u16,
                    None => 0,
                }
            }
        }
    }

    /// Which descriptor (if any) each parameter belongs to; the first one that names it.
    pub fn param_descriptor(&self) -> Vec<Option<usize>> {
        let mut out = vec![None; self.params.len()];
        for (d, desc) in self.descriptors.iter().enumerate() {
            if let DescriptorSource::Params(ps) = &desc.source {
                for &p in ps {
                    if out[p].is_none() {
                        out[p] = Some(d);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, v: &[i64]) -> Param {
        Param {
            name: name.into(),
            values: v.to_vec(),
        }
    }

    #[test]
    fn default_descriptors_group_xyz_and_skip_fixed() {
        let s = Space::new(vec![
            p("block_size_x", &[16, 32, 64]),
            p("block_size_y", &[1, 2, 4, 8]),
            p("tile_size_x", &[1, 2]),
            p("use_shmem", &[0, 1]),
            p("filter", &[15]),
        ])
        .unwrap();
        let names: Vec<_> = s.descriptors.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["block_size", "tile_size", "use_shmem"]);
        assert_eq!(
            s.descriptors[0].source,
            DescriptorSource::Params(vec![0, 1])
        );
        // block volume 16..512 -> log2 4..9, 4 bins
        assert_eq!(s.bins(0, 4), 4);
        assert_eq!(s.bin(0, &[0, 0, 0, 0, 0], &[], 4), 0);
        assert_eq!(s.bin(0, &[2, 3, 0, 0, 0], &[], 4), 3);
        assert_eq!(s.bin(2, &[0, 0, 0, 1, 0], &[], 4), 1);
        assert_eq!(
            s.param_descriptor(),
            vec![Some(0), Some(0), Some(1), Some(2), None]
        );
    }

    #[test]
    fn rejects_bad_spaces() {
        assert_eq!(Space::new(vec![]), Err(SpaceError::Empty));
        assert_eq!(
            Space::new(vec![p("a", &[])]),
            Err(SpaceError::NoValues("a".into()))
        );
        assert_eq!(
            Space::new(vec![p("a", &[1, 1])]),
            Err(SpaceError::DuplicateValue("a".into(), 1))
        );
        assert_eq!(
            Space::new(vec![p("a", &[1]), p("a", &[2])]),
            Err(SpaceError::DuplicateName("a".into()))
        );
    }

    #[test]
    fn measured_bins_and_round_trip() {
        let s = Space::with_descriptors(
            vec![p("a", &[1, 2, 3])],
            vec![Descriptor {
                name: "lmem".into(),
                source: DescriptorSource::Measured {
                    edges: vec![1.0, 1024.0],
                },
            }],
        )
        .unwrap();
        assert_eq!(s.bin(0, &[0], &[], 4), 0);
        assert_eq!(s.bin(0, &[0], &[("lmem".into(), 0.0)], 4), 0);
        assert_eq!(s.bin(0, &[0], &[("lmem".into(), 512.0)], 4), 1);
        assert_eq!(s.bin(0, &[0], &[("lmem".into(), 4096.0)], 4), 2);
        assert_eq!(s.indices(&[3]).unwrap(), vec![2]);
        assert_eq!(s.values(&[2]), vec![3]);
        assert!(s.indices(&[4]).is_err());
    }
}
