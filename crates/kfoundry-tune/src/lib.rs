//! kfoundry's tuning engine, the library behind `cargo kfoundry` (whose crate keeps the
//! command line, its reporters, the other commands and the exit statuses): [`tune`] takes
//! [`TuneOptions`], runs the stages of a tune and sends what happens, as typed
//! [`TuneEvent`]s, to a [`Reporter`] ([`events`]).
//!
//! - [`pipeline`]: `tune`, as stages: discover → plan → search → verify → re-measure →
//!   record → report; [`prove`]: the prover (the cases a finalist or a lockfile entry is
//!   proven in, the counterexample search).
//! - the bench (the crate [`kfoundry_bench`]): building, verifying and timing candidates on a
//!   device, in a supervised worker process; [`device`]: choosing the device and measuring
//!   its peaks.
//! - [`llm`]: the optional language model (its HTTP client behind the cargo feature `llm`).
//! - [`tuning_db`]: what earlier tunes found, shared across projects (warm starts);
//!   [`checkpoint`]: resumable searches; [`interrupt`]: Ctrl-C as "write what was found".
//! - [`error`]: the one error type and the exit statuses; [`messages`]: the typed,
//!   versioned JSON output (the `kfoundry-messages` crate); [`text`]: human-readable tables; [`filter`]: kernel patterns.
//!
//! A program that calls [`tune`] must answer [`WORKER_COMMAND`] as its first argument by
//! calling [`kfoundry_bench::worker::serve`]: candidates run in a child process of the current
//! executable, so that a crash or a hang costs a candidate, not the tune.

pub mod checkpoint;
pub mod device;
pub mod error;
pub mod events;
pub mod filter;
pub mod interrupt;
pub mod llm;
pub mod options;
pub mod pipeline;
pub mod prove;
#[cfg(test)]
mod test_spec;
pub mod text;
pub mod tuning_db;

/// The JSON messages, a crate of their own (for the tools that read them).
pub use kfoundry_messages as messages;

pub use error::{Error, ErrorKind, Exit};
pub use events::{Reporter, TuneEvent};
pub use kfoundry_bench::supervisor::WORKER_COMMAND;
pub use options::{MessageFormat, TuneOptions, WorkspaceOptions};

/// Tunes what `options` select on one device (at most one selector in `options.device`),
/// telling `reporter` what happens; how it ended.
pub fn tune(options: &TuneOptions, reporter: &dyn Reporter) -> anyhow::Result<Exit> {
    pipeline::run(options, reporter)
}
