//! `tune --partition K/N`: a deterministic share of the (kernel, workload) jobs, so that N
//! runners (a CI matrix, a Slurm job array, the identical GPUs of one machine) together tune
//! every job exactly once.
//!
//! Every runner computes the same assignment from the same inputs: the jobs, sorted by kernel
//! id and workload, each with an estimated cost (`estimated_cost`), are dealt out
//! longest-first, each to the share with the least estimated cost so far (the lowest share on
//! a tie). The shares are balanced by cost, not by count: a 4096³ GEMM weighs more than a
//! small saxpy. All runners of one split must see the same kernels and workloads: the same
//! sources (or bundle), the same `--kernel`/`--workload` filters and the same kind of device
//! (workloads meant for another kind, `on = ...`, are left out before the split).

use std::fmt;
use std::str::FromStr;

use kfoundry_rt::model::spec::{ArgRole, KernelSpec, Workload};

pub use crate::options::Partition;

/// The most shares a split may have.
pub(crate) const MAX_SHARES: usize = 10_000;

impl FromStr for Partition {
    type Err = String;
    fn from_str(text: &str) -> Result<Partition, String> {
        let bad =
            || format!("`{text}`: a partition is K/N with 1 <= K <= N <= {MAX_SHARES}, e.g. 2/4");
        let (k, n) = text.trim().split_once('/').ok_or_else(bad)?;
        let (k, n): (usize, usize) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if k == 0 || k > n || n > MAX_SHARES {
            return Err(bad());
        }
        Ok(Partition { k, n })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// One job: a kernel at a workload, with its estimated cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub kernel: String,
    pub workload: String,
    pub cost: f64,
}

/// Seconds a nominal evaluation spends building its candidate.
const BUILD_S: f64 = 0.3;
/// Launches a nominal evaluation makes (reference and candidate, timing, verification).
const LAUNCHES: f64 = 10.0;
/// A nominal device: bytes per second and FLOP per second.
const NOMINAL_BYTES_PER_S: f64 = 1e11;
const NOMINAL_FLOPS: f64 = 1e12;

/// The estimated seconds of one evaluation of `spec` at `workload` on a nominal device: a
/// build, plus launches that move the caller's buffers (their lengths at the workload) and do
/// the annotation's `cost(flops = ...)`. Coarse, but it orders a 4096³ GEMM above a 4096-element
/// saxpy; the budget (evaluations or seconds) is the same for every job, so only the ratios
/// matter.
pub(crate) fn estimated_cost(spec: &KernelSpec, workload: &Workload) -> f64 {
    let bytes: f64 = spec
        .args_with_roles()
        .filter(|(_, role)| *role == ArgRole::CallerBuffer)
        .filter_map(|(arg, _)| {
            let elem = match arg {
                kfoundry_rt::model::signature::KernelArg::Buffer { elem, .. } => elem.size(),
                _ => return None,
            };
            Some(
                spec.buffer_len(arg.name(), &spec.reference, &workload.sizes)
                    .ok()? as f64
                    * elem as f64,
            )
        })
        .sum();
    let env = spec.env(&spec.reference, &workload.sizes);
    let flops = spec
        .cost
        .as_ref()
        .and_then(|c| c.flops.as_ref())
        .and_then(|e| e.eval(&env).ok())
        .unwrap_or(0)
        .max(0) as f64;
    BUILD_S + LAUNCHES * (bytes / NOMINAL_BYTES_PER_S + flops / NOMINAL_FLOPS)
}

/// The jobs of share `p`: `jobs` dealt out longest-first to the share with the least cost so
/// far. The result is in the jobs' sorted order.
pub fn share(jobs: &[Job], p: Partition) -> Vec<Job> {
    let mut sorted: Vec<&Job> = jobs.iter().collect();
    sorted.sort_by(|a, b| (&a.kernel, &a.workload).cmp(&(&b.kernel, &b.workload)));
    let mut order: Vec<usize> = (0..sorted.len()).collect();
    // Longest first; the sorted position breaks ties, so every runner deals the same way.
    order.sort_by(|&a, &b| sorted[b].cost.total_cmp(&sorted[a].cost).then(a.cmp(&b)));
    let mut load = vec![0.0f64; p.n];
    let mut mine = vec![false; sorted.len()];
    for i in order {
        let least = (0..p.n)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        load[least] += sorted[i].cost.max(0.0);
        mine[i] = least + 1 == p.k;
    }
    sorted
        .into_iter()
        .zip(mine)
        .filter(|(_, m)| *m)
        .map(|(j, _)| j.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(costs: &[f64]) -> Vec<Job> {
        costs
            .iter()
            .enumerate()
            .map(|(i, c)| Job {
                kernel: format!("k{i:02}"),
                workload: "w".into(),
                cost: *c,
            })
            .collect()
    }

    #[test]
    fn parses_and_refuses() {
        assert_eq!("2/4".parse::<Partition>(), Ok(Partition { k: 2, n: 4 }));
        assert_eq!(" 1 / 1 ".parse::<Partition>(), Ok(Partition { k: 1, n: 1 }));
        for bad in ["0/4", "5/4", "4", "a/b", "1/0", "1/100000", "-1/2", ""] {
            assert!(bad.parse::<Partition>().is_err(), "{bad}");
        }
    }

    #[test]
    fn shares_cover_every_job_exactly_once_and_balance_cost() {
        let all = jobs(&[100.0, 1.0, 1.0, 1.0, 50.0, 49.0, 3.0, 2.0, 30.0, 20.0, 0.5]);
        for n in 1..=6 {
            let shares: Vec<Vec<Job>> = (1..=n).map(|k| share(&all, Partition { k, n })).collect();
            let mut seen: Vec<String> = shares.iter().flatten().map(|j| j.kernel.clone()).collect();
            seen.sort();
            assert_eq!(
                seen,
                all.iter().map(|j| j.kernel.clone()).collect::<Vec<_>>(),
                "n = {n}: every job once"
            );
            // Longest-first greedy: no share exceeds the ideal by more than the largest job.
            let total: f64 = all.iter().map(|j| j.cost).sum();
            for s in &shares {
                let load: f64 = s.iter().map(|j| j.cost).sum();
                assert!(load <= total / n as f64 + 100.0, "n = {n}: {load}");
            }
        }
        // By cost, not count: the share with the 100 takes many small jobs, the other few large
        // ones, and their costs end within one small job of each other.
        let (one, two) = (
            share(&all, Partition { k: 1, n: 2 }),
            share(&all, Partition { k: 2, n: 2 }),
        );
        let load = |s: &[Job]| s.iter().map(|j| j.cost).sum::<f64>();
        assert!(
            one.iter().any(|j| j.cost == 100.0) && one.len() > two.len(),
            "{one:?} {two:?}"
        );
        assert!(
            (load(&one) - load(&two)).abs() <= 1.0,
            "{} vs {}",
            load(&one),
            load(&two)
        );
    }

    #[test]
    fn the_assignment_does_not_depend_on_the_order_jobs_are_listed() {
        let all = jobs(&[5.0, 5.0, 5.0, 3.0, 3.0, 8.0]);
        let mut reversed = all.clone();
        reversed.reverse();
        for k in 1..=3 {
            assert_eq!(
                share(&all, Partition { k, n: 3 }),
                share(&reversed, Partition { k, n: 3 })
            );
        }
    }
}
