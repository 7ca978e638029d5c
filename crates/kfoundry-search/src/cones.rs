//! Failure cones: what the failed evaluations so far say about configurations not evaluated
//! yet.
//!
//! Kernels mostly fail for resources: a work-group larger than the compiled kernel allows,
//! more local memory or registers than the device has. Those grow with the parameters, so a
//! configuration at least as large as a failed one in every parameter (its *cone*) most
//! likely fails too. A failure whose cone holds a success does not fail for such a reason
//! (a divisibility rule, a bug at one value) and says nothing. The engine prefers candidates
//! outside every cone and never refuses one: when all candidates are inside, it evaluates
//! one, and a success there takes that cone back.
//!
//! "At least as large" compares the parameters' values, not their positions in the value
//! list, so a list that is not ascending is still read the right way.

use std::sync::Arc;

use crate::space::{Config, Indices, Space};

/// The descriptor under which an evaluation reports the largest work-group its compiled kernel
/// allows (OpenCL's `CL_KERNEL_WORK_GROUP_SIZE`).
pub const WORK_GROUP_LIMIT: &str = "work_group_limit";

/// A configuration's work-group size (items), as the caller that launches it computes it
/// (`None`: not known for that configuration).
#[derive(Clone)]
pub struct GroupSize(Arc<SizeFn>);

type SizeFn = dyn Fn(&Config) -> Option<u64> + Send + Sync;

impl GroupSize {
    pub fn new(f: impl Fn(&Config) -> Option<u64> + Send + Sync + 'static) -> GroupSize {
        GroupSize(Arc::new(f))
    }

    /// The work-group size of `config`, if known.
    pub fn of(&self, config: &Config) -> Option<u64> {
        (self.0)(config)
    }
}

impl std::fmt::Debug for GroupSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GroupSize(..)")
    }
}

/// Work-groups larger than a compiled kernel allows: the same kind of failure as a cone's,
/// known before any configuration fails. A driver reports the limit for every kernel it builds
/// (NVIDIA's OpenCL 256 for each of ours, below its devices' 1024), the reference's first of
/// all; a configuration whose work-group is larger most likely fails. A success at a larger
/// work-group raises the limit to it.
#[derive(Clone, Debug)]
struct GroupCap {
    size: GroupSize,
    limit: u64,
    /// Each parameter's values (a configuration's indices to the values the size reads).
    values: Vec<Vec<i64>>,
}

/// The failures whose cones hold no success yet, as ranks of their parameters' values.
#[derive(Clone, Debug, Default)]
pub struct FailureCones {
    apexes: Vec<Vec<u32>>,
    /// Each parameter's value index → its rank among the parameter's values, ascending.
    ranks: Vec<Vec<u32>>,
    /// Work-groups above the kernels' limit, when known.
    cap: Option<GroupCap>,
}

impl FailureCones {
    /// The cones of `evaluated` (each configuration with whether it succeeded).
    pub fn new<'a>(space: &Space, evaluated: impl Iterator<Item = (&'a Indices, bool)>) -> Self {
        let ranks: Vec<Vec<u32>> = space
            .params
            .iter()
            .map(|p| value_ranks(&p.values))
            .collect();
        let (mut ok, mut failed) = (Vec::new(), Vec::new());
        for (idx, success) in evaluated {
            let r = rank(&ranks, idx);
            if success {
                ok.push(r);
            } else {
                failed.push(r);
            }
        }
        let apexes = failed
            .into_iter()
            .filter(|f| !ok.iter().any(|s| at_least(s, f)))
            .collect();
        FailureCones {
            apexes,
            ranks,
            cap: None,
        }
    }

    /// These cones, and every configuration whose work-group (`size`) is larger than `limit`.
    pub fn with_group_limit(mut self, space: &Space, size: GroupSize, limit: u64) -> Self {
        let values = space.params.iter().map(|p| p.values.clone()).collect();
        self.cap = Some(GroupCap {
            size,
            limit,
            values,
        });
        self
    }

    /// Whether `c`'s work-group is larger than the limit ([`FailureCones::with_group_limit`]).
    pub fn over_group_limit(&self, c: &Indices) -> bool {
        self.cap.as_ref().is_some_and(|cap| {
            let config: Config = c
                .iter()
                .zip(&cap.values)
                .map(|(&i, v)| v[i as usize])
                .collect();
            cap.size.of(&config).is_some_and(|s| s > cap.limit)
        })
    }

    /// Whether `c` is in the cone of a failure (is at least as large in every parameter), or its
    /// work-group is over the limit.
    pub fn contain(&self, c: &Indices) -> bool {
        if self.over_group_limit(c) {
            return true;
        }
        if self.apexes.is_empty() {
            return false;
        }
        let r = rank(&self.ranks, c);
        self.apexes.iter().any(|f| at_least(&r, f))
    }

    /// How many failures have a cone with no success in it.
    pub fn len(&self) -> usize {
        self.apexes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.apexes.is_empty()
    }
}

/// `c` as the ranks of its values.
fn rank(ranks: &[Vec<u32>], c: &Indices) -> Vec<u32> {
    c.iter().zip(ranks).map(|(&i, r)| r[i as usize]).collect()
}

/// Each value's rank among `values`, ascending (values are distinct).
fn value_ranks(values: &[i64]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by_key(|&k| values[k]);
    let mut ranks = vec![0; values.len()];
    for (rank, k) in order.into_iter().enumerate() {
        ranks[k] = rank as u32;
    }
    ranks
}

/// Whether `a` is at least `b` in every parameter.
fn at_least(a: &[u32], b: &[u32]) -> bool {
    a.iter().zip(b).all(|(x, y)| x >= y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::Param;

    fn space() -> Space {
        Space::new(vec![
            Param {
                name: "BX".into(),
                values: vec![32, 64, 128, 256],
            },
            // not ascending: values are compared, not positions
            Param {
                name: "BY".into(),
                values: vec![8, 1, 2, 4],
            },
        ])
        .unwrap()
    }

    #[test]
    fn a_failure_covers_what_is_at_least_as_large() {
        let s = space();
        // BX = 128, BY = 4 failed
        let cones = FailureCones::new(&s, [(&vec![2, 3], false)].into_iter());
        assert!(cones.contain(&vec![2, 3]));
        assert!(cones.contain(&vec![3, 0])); // 256 x 8
        assert!(cones.contain(&vec![2, 0])); // 128 x 8
        assert!(!cones.contain(&vec![3, 2])); // 256 x 2: smaller BY
        assert!(!cones.contain(&vec![1, 0])); // 64 x 8: smaller BX
    }

    #[test]
    fn a_success_in_a_cone_takes_it_back() {
        let s = space();
        let failed = vec![1, 2]; // 64 x 2
        let ok = vec![3, 3]; // 256 x 4: in its cone, yet it ran
        let other = vec![3, 0]; // 256 x 8 failed, nothing above it ran
        let cones = FailureCones::new(
            &s,
            [(&failed, false), (&ok, true), (&other, false)].into_iter(),
        );
        assert_eq!(cones.len(), 1);
        assert!(!cones.contain(&vec![2, 2]));
        assert!(cones.contain(&vec![3, 0]));
        assert!(FailureCones::new(&s, [(&ok, true)].into_iter()).is_empty());
    }
}
