//! One time budget for the whole run (`--budget-total-secs`), for tuning a model's kernels
//! together: shared out among the run's searches as the run goes, each search getting the
//! time left times its share of the model's time among the searches still to come.
//!
//! The model's time is estimated before anything runs, from what each kernel declares
//! (`cost(bytes = ..., flops = ...)` at its workload's sizes and reference parameters): its
//! roofline floor on this device's measured peaks, plus `LAUNCH_SECONDS` for the launch
//! every kernel pays. A kernel without a declared cost weighs what the median kernel does;
//! without the device's peaks, searches share alike. The time the
//! stages after a search take (the worker's start, finalists, the proof, the re-measure,
//! recording) is not a search's to spend: the mean of it so far is set aside for each search
//! to come.

use std::collections::BTreeMap;
use std::time::Instant;

use kfoundry_rt::model::spec::{KernelSpec, Workload};

use crate::device::peaks::Peaks;

/// What a launch costs whatever the kernel does (a few microseconds on the devices measured):
/// a kernel whose floor is below it still takes about this long in the model.
pub(crate) const LAUNCH_SECONDS: f64 = 5e-6;

/// The part of a search's time its evaluations are taken to be before any search has
/// finished (after that, the mean time outside the search so far is set aside).
const FIRST_SEARCH_PART: f64 = 0.5;

/// The least a search is given, so that it measures its reference at least (a search stops
/// once its evaluations have cost its seconds).
pub(crate) const MIN_SECONDS: f64 = 1e-3;

/// The run's time budget and the searches still to share it.
pub(crate) struct RunBudget {
    total: f64,
    started: Instant,
    /// Weight of each search not started yet, by (kernel id, workload).
    weights: BTreeMap<(String, String), f64>,
    /// Seconds of finished searches spent outside their search budgets, and how many.
    overhead: f64,
    finished: usize,
    /// How many searches there were.
    searches: usize,
}

/// What [`RunBudget::next`] gives one search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Share {
    /// Seconds of evaluations the search may spend.
    pub seconds: f64,
    /// Its weight among the searches left, 0 to 1.
    pub fraction: f64,
    /// Seconds left of the run's budget when it starts.
    pub left: f64,
    /// Which search this is (from 1), and of how many.
    pub number: usize,
    pub of: usize,
}

impl RunBudget {
    /// A budget of `total` seconds from `started` (the run's start: planning, the peaks and
    /// the references' builds count) for the searches `jobs`, weighted by their estimated
    /// share of the model's time ([`weight`]).
    pub fn new(
        total: f64,
        started: Instant,
        jobs: impl IntoIterator<Item = ((String, String), f64)>,
    ) -> RunBudget {
        let weights: BTreeMap<_, _> = jobs
            .into_iter()
            .map(|(k, w)| (k, if w.is_finite() && w > 0.0 { w } else { 0.0 }))
            .collect();
        RunBudget {
            total,
            started,
            searches: weights.len(),
            weights,
            overhead: 0.0,
            finished: 0,
        }
    }

    /// The share of the search of `kernel` at `workload`, which starts now; it is no longer
    /// among those to come. A search the budget did not plan for gets an equal share.
    pub fn next(&mut self, kernel: &str, workload: &str) -> Share {
        let left = (self.total - self.started.elapsed().as_secs_f64()).max(0.0);
        let rest: f64 = self.weights.values().sum();
        let count = self.weights.len().max(1);
        let weight = self
            .weights
            .remove(&(kernel.to_string(), workload.to_string()));
        let fraction = match weight {
            Some(w) if rest > 0.0 => w / rest,
            _ => 1.0 / count as f64,
        };
        // Before any search has finished, half of each search's time is taken to be its own.
        let searching = if self.finished > 0 {
            (left - self.overhead / self.finished as f64 * count as f64).max(0.0)
        } else {
            left * FIRST_SEARCH_PART
        };
        Share {
            seconds: (searching * fraction).max(MIN_SECONDS),
            fraction,
            left,
            number: self.searches - self.weights.len(),
            of: self.searches,
        }
    }

    /// A search that took `wall` seconds in all, `searched` of them its evaluations.
    pub fn finished(&mut self, wall: f64, searched: f64) {
        self.overhead += (wall - searched).max(0.0);
        self.finished += 1;
    }
}

/// A search's weight: the estimated time its kernel takes in the model at `workload` (its
/// roofline floor at the reference parameters, plus a launch); `None` without the device's
/// peaks or a declared cost ([`fill`] then gives it one).
pub fn weight(peaks: Option<&Peaks>, spec: &KernelSpec, workload: &Workload) -> Option<f64> {
    peaks?
        .kernel_floor(spec, &spec.reference, &workload.sizes)
        .map(|f| f + LAUNCH_SECONDS)
}

/// The weights of `jobs`, those that could not be estimated given the median of those that
/// could (1 when none could: then searches share alike).
pub fn fill<K>(jobs: Vec<(K, Option<f64>)>) -> Vec<(K, f64)> {
    let mut known: Vec<f64> = jobs.iter().filter_map(|(_, w)| *w).collect();
    known.sort_by(f64::total_cmp);
    let median = known.get(known.len() / 2).copied().unwrap_or(1.0);
    jobs.into_iter()
        .map(|(k, w)| (k, w.unwrap_or(median)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(k: &str, w: f64) -> ((String, String), f64) {
        ((k.to_string(), "w".to_string()), w)
    }

    /// Each search gets the time left in proportion to its weight among those to come; the
    /// overhead seen so far is set aside for each search still to come.
    #[test]
    fn shares_follow_the_weights_of_the_searches_left() {
        let mut b = RunBudget::new(
            100.0,
            Instant::now(),
            [job("a", 3.0), job("b", 1.0), job("c", 0.0)],
        );
        let a = b.next("a", "w");
        assert!((a.fraction - 0.75).abs() < 1e-9, "{a:?}");
        // half of it, nothing having shown yet what the rest of a search takes
        assert!(a.seconds > 37.0 && a.seconds <= 37.5, "{a:?}");
        assert_eq!((a.number, a.of), (1, 3));
        // a took 10 s, 6 of them searching: 4 s set aside for each of the two to come
        b.finished(10.0, 6.0);
        let bb = b.next("b", "w");
        assert!((bb.fraction - 1.0).abs() < 1e-9, "{bb:?}");
        assert!(
            bb.seconds <= bb.left - 8.0 && bb.seconds > bb.left - 8.1,
            "{bb:?}"
        );
        // weight 0 among weights 0: nothing to share by, so alike
        let c = b.next("c", "w");
        assert!((c.fraction - 1.0).abs() < 1e-9, "{c:?}");
        assert_eq!((c.number, c.of), (3, 3));
    }

    /// A kernel without a cost model weighs what the median one does.
    #[test]
    fn unknown_weights_are_the_median() {
        let w = fill(vec![
            ("a", Some(1.0)),
            ("b", None),
            ("c", Some(3.0)),
            ("d", Some(2.0)),
        ]);
        assert_eq!(w, [("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 2.0)]);
        assert_eq!(fill(vec![("a", None)]), [("a", 1.0)]);
    }

    /// A run past its budget gives each search the least (it then measures its reference).
    #[test]
    fn a_spent_budget_gives_the_least() {
        let mut b = RunBudget::new(0.0, Instant::now(), [job("a", 1.0)]);
        assert_eq!(b.next("a", "w").seconds, MIN_SECONDS);
        // a search it did not plan for: an equal share of what is left
        assert_eq!(b.next("z", "w").fraction, 1.0);
    }
}
