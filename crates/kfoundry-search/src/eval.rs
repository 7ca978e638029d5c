//! What evaluating a configuration yields, and the trait that does it.

use serde::{Deserialize, Serialize};

use crate::space::Config;

/// Why an evaluation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FailureKind {
    /// The variant did not compile.
    Build,
    /// It crashed or the launch failed.
    Runtime,
    /// Its outputs did not match the reference.
    Wrong,
    /// It ran past the time limit.
    Timeout,
    /// It broke a limit only known after the build (e.g. the device's local memory).
    Invalid,
}

impl FailureKind {
    /// The kind in lower case, as messages and cache files name it.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Build => "build",
            FailureKind::Runtime => "runtime",
            FailureKind::Wrong => "wrong",
            FailureKind::Timeout => "timeout",
            FailureKind::Invalid => "invalid",
        }
    }
}

/// The outcome of one evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Evaluation {
    Ok {
        /// Kernel time in seconds (lower is better; must be finite and > 0).
        time: f64,
        /// Seconds the evaluation took (build + verification + benchmark), for time budgets.
        cost: f64,
        /// Descriptor values measured at build time, by descriptor name
        /// (see [`crate::DescriptorSource::Measured`]).
        descriptors: Vec<(String, f64)>,
    },
    Failed {
        reason: String,
        kind: FailureKind,
        /// Seconds the failed attempt took (it counts against time budgets).
        cost: f64,
    },
}

impl Evaluation {
    /// A successful evaluation without measured descriptors.
    pub fn ok(time: f64, cost: f64) -> Evaluation {
        Evaluation::Ok {
            time,
            cost,
            descriptors: Vec::new(),
        }
    }

    /// A failed evaluation.
    pub fn failed(kind: FailureKind, reason: impl Into<String>, cost: f64) -> Evaluation {
        Evaluation::Failed {
            reason: reason.into(),
            kind,
            cost,
        }
    }

    /// Kernel time if the evaluation succeeded with a usable (finite, positive) time.
    pub fn time(&self) -> Option<f64> {
        match self {
            Evaluation::Ok { time, .. } if time.is_finite() && *time > 0.0 => Some(*time),
            _ => None,
        }
    }

    /// Seconds charged to the time budget.
    pub fn cost(&self) -> f64 {
        let c = match self {
            Evaluation::Ok { cost, .. } | Evaluation::Failed { cost, .. } => *cost,
        };
        if c.is_finite() && c > 0.0 {
            c
        } else {
            0.0
        }
    }

    /// Measured descriptor values (empty for a failure).
    pub fn measured(&self) -> &[(String, f64)] {
        match self {
            Evaluation::Ok { descriptors, .. } => descriptors,
            Evaluation::Failed { .. } => &[],
        }
    }
}

/// Builds, verifies and times one configuration. The engine calls it at most once per
/// configuration, and only for configurations the validity predicate accepts.
pub trait Evaluator {
    fn evaluate(&mut self, config: &Config) -> Evaluation;

    /// The configurations the engine will ask for next, in order (a batch,
    /// [`crate::Settings::batch`]): an evaluator may start building them now. A hint only:
    /// each is still evaluated by its own call, and what it returns must not depend on this.
    fn prepare(&mut self, _upcoming: &[Config]) {}
}

impl<F: FnMut(&Config) -> Evaluation> Evaluator for F {
    fn evaluate(&mut self, config: &Config) -> Evaluation {
        self(config)
    }
}
