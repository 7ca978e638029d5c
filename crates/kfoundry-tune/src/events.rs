//! What a tune tells its caller while it runs: typed [`TuneEvent`]s sent to a [`Reporter`], as
//! nextest's runner sends its events to its reporters. The engine decides nothing about how
//! they are shown: the command line's reporters (`cargo-kfoundry`'s `reporter` module) turn
//! them into a progress bar, lines of text or JSON messages, and choose which to show (`-q`,
//! `-v`); a program that embeds the engine may collect them instead.

use std::collections::BTreeSet;
use std::path::Path;

use kfoundry_rt::model::ranges;
use kfoundry_rt::model::spec::{KernelSpec, Params};
use kfoundry_search::Record;

use crate::device::Selected;
use crate::llm::LlmConfig;
use crate::messages::{LlmTurn, TuneResult};
use crate::options::Partition;
use kfoundry_bench::case::Case;

/// One search: a kernel at one of its workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Search<'a> {
    pub kernel: &'a str,
    pub workload: &'a str,
}

impl std::fmt::Display for Search<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} @ {}", self.kernel, self.workload)
    }
}

/// A tune that failed (the run goes on with the others).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Where the kernel is annotated (`file:line`) or, from a bundle, its id.
    pub location: String,
    pub kernel: String,
    /// The workloads that were not tuned because of it.
    pub workloads: Vec<String>,
    /// The kernel's reference itself does not build: every workload failed before any search.
    pub reference: bool,
    pub error: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.reference, self.workloads.as_slice()) {
            (false, [one]) => write!(
                f,
                "{}: tuning `{}` at workload `{one}`: {}",
                self.location, self.kernel, self.error
            ),
            _ => write!(f, "{}: `{}`: {}", self.location, self.kernel, self.error),
        }
    }
}

/// Something that happened during a tune, in the order it happened.
#[derive(Debug)]
pub enum TuneEvent<'a> {
    /// The plan is made: how many kernels are tuned, on which device.
    Planned {
        kernels: usize,
        device: &'a Selected,
    },
    /// With `--partition`: this runner's share of the jobs and of their estimated cost.
    Partitioned {
        partition: &'a [Partition],
        jobs: usize,
        of: usize,
        cost_share: f64,
    },
    /// The language model this run asks.
    LanguageModel { config: &'a LlmConfig },
    /// Something worth knowing that changes nothing (a search resumed, a workload skipped on
    /// this device, stale variants dropped, a lock waited for, a checkpoint not usable).
    Note { text: String },
    /// Something went wrong that the run survives (no roofline figures, a history not saved).
    Warning { text: String },
    /// A search begins with `budget` evaluations, `done` of them already spent (a resumed one).
    SearchStarted {
        search: Search<'a>,
        budget: u64,
        done: u64,
    },
    /// One configuration was evaluated (already checkpointed: it is never evaluated again).
    /// `done`: evaluations and language-model turns so far; `best`: the best time so far,
    /// seconds; `failures`: failed evaluations so far.
    Evaluated {
        search: Search<'a>,
        params: Params,
        record: &'a Record,
        done: u64,
        best: Option<f64>,
        failures: usize,
    },
    /// The language model is being asked for a mutation.
    Asking { search: Search<'a> },
    /// The language model took a turn (one mutation), `done` as for [`TuneEvent::Evaluated`].
    LanguageModelTurn {
        search: Search<'a>,
        turn: &'a LlmTurn,
        done: u64,
    },
    /// The best so far is within `target` (a fraction) of the roofline: the search stops.
    RooflineReached { search: Search<'a>, target: f64 },
    /// The search is over (its finalists are verified next).
    SearchFinished { search: Search<'a> },
    /// A finalist was not shipped, and why.
    Rejected {
        search: Search<'a>,
        unshipped: &'a Unshipped,
    },
    /// One kernel at one workload is done.
    Tuned { result: &'a TuneResult },
    /// One kernel at one or more workloads failed.
    Failed { failure: &'a Failure },
    /// The portfolio of a kernel with `ranges(...)`.
    Portfolio {
        spec: &'a KernelSpec,
        portfolio: &'a Portfolio,
    },
    /// The end of the run: the results recorded into `lockfile`, the failures, whether it was
    /// interrupted (its checkpoints, in `checkpoints`, continue it with `--resume`).
    Finished {
        lockfile: &'a Path,
        checkpoints: &'a Path,
        results: &'a [TuneResult],
        failed: &'a [Failure],
        interrupted: bool,
    },
}

/// Where a tune's events go.
pub trait Reporter: Sync {
    fn report(&self, event: TuneEvent<'_>);
}

/// A reporter that shows nothing.
pub struct Silent;

impl Reporter for Silent {
    fn report(&self, _: TuneEvent<'_>) {}
}

/// A finalist that was not shipped, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Unshipped {
    pub params: Params,
    /// `probe` (wrong or failing on fresh inputs or at another size) or `remeasure` (failed
    /// when measured again).
    pub stage: &'static str,
    pub reason: String,
    /// The smallest input the proof found it wrong on, when the proof refused it.
    pub counterexample: Option<Box<Case>>,
}

/// One bucket as chosen and proven.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    /// The split size's stretch (`None` when nothing is split: one bucket for the whole range).
    pub span: Option<(i64, i64)>,
    pub params: Params,
    /// The anchors in it.
    pub anchors: Vec<String>,
}

/// The portfolio of one kernel: its buckets, and what fraction of the per-anchor best speed it
/// keeps (geometric mean and worst anchor).
#[derive(Debug, Clone, PartialEq)]
pub struct Portfolio {
    pub split: Option<String>,
    pub buckets: Vec<Bucket>,
    pub kept_geomean: f64,
    pub kept_min: f64,
}

impl Portfolio {
    /// The portfolio as the JSON message `portfolio`.
    pub fn message(&self, spec: &KernelSpec) -> crate::messages::Message {
        let p = self;
        crate::messages::Message::Portfolio {
            kernel: spec.id.clone(),
            ranges: ranges::display(&spec.ranges),
            buckets: p
                .buckets
                .iter()
                .map(|b| crate::messages::PortfolioBucket {
                    size: p.split.clone(),
                    lo: b.span.map(|s| s.0),
                    hi: b.span.map(|s| s.1),
                    params: b.params.clone(),
                    anchors: b.anchors.clone(),
                })
                .collect(),
            kept_geomean: p.kept_geomean,
            kept_min: p.kept_min,
        }
    }

    /// The portfolio in one line per bucket, for the run's notes.
    pub fn describe(&self, spec: &KernelSpec) -> String {
        let p = self;
        let mut s = format!(
            "`{}`: {} variant(s) for {} bucket(s) of {}, keeping {:.0}% of the best speed at each anchor (geometric mean; worst anchor {:.0}%)",
            spec.id,
            p.buckets.iter().map(|b| &b.params).collect::<BTreeSet<_>>().len(),
            p.buckets.len(),
            ranges::display(&spec.ranges),
            100.0 * p.kept_geomean,
            100.0 * p.kept_min
        );
        for b in &p.buckets {
            let span = match (&p.split, b.span) {
                (Some(name), Some((lo, hi))) => format!("{name} {lo}..={hi}"),
                _ => "the whole range".into(),
            };
            let reference = if b.params == spec.reference {
                " (the reference)"
            } else {
                ""
            };
            s.push_str(&format!(
                "\n  {span}: {}{reference}",
                kfoundry_rt::model::spec::fmt_assignments(&b.params, ", ")
            ));
        }
        s
    }
}
