//! The engine behind `cargo kfoundry`: the binary (`main.rs`) parses the command line and
//! calls [`run`]; everything else is here, so that tools and tests use it as a library.
//!
//! - [`pipeline`]: `tune`, as stages: discover → plan → search → verify → re-measure →
//!   record → report.
//! - [`commands`]: the other commands (`list`, `devices`, `check`, `report`, `simulate`,
//!   `brute-force`, `bundle`, `merge`, `import`).
//! - [`evaluate`]: building, verifying and timing candidates on a device, in a supervised
//!   worker process; [`device`]: choosing the device and measuring its peaks.
//! - [`llm`]: the optional language model (its HTTP client behind the cargo feature `llm`).
//! - [`checkpoint`]: resumable searches; [`interrupt`]: Ctrl-C as "write what was found".
//! - [`error`]: the one error type and the exit statuses; [`messages`]: the typed,
//!   versioned JSON output; [`text`]: human-readable tables; [`cli`]: the command line.
//!
//! The search engine (`kfoundry-search`) and the tooling (`kfoundry-tooling`: annotations,
//! fingerprints, the lockfile file) are crates of their own; the OpenCL calls all go through
//! `kfoundry_rt::opencl`.

pub mod checkpoint;
pub mod cli;
pub mod commands;
pub mod device;
pub mod error;
pub mod evaluate;
pub mod filter;
pub mod interrupt;
pub mod llm;
pub mod messages;
pub mod pipeline;
pub mod text;

use cli::{Cli, Command};
pub use error::{Error, ErrorKind, Exit};

/// Runs a parsed command line: how it ended, or the error that stopped it.
pub fn run(cli: &Cli) -> Result<Exit, Error> {
    let done = |r: anyhow::Result<()>| r.map(|()| Exit::Success);
    let result = match &cli.command {
        Command::Tune(args) => pipeline::run(args),
        Command::List(args) => done(commands::list::run(args)),
        Command::Devices(args) => done(commands::devices::run(args)),
        Command::Check(args) => commands::check::run(args),
        Command::Report(args) => done(commands::report::run(args)),
        Command::Simulate(args) => done(commands::simulate::run(args)),
        Command::BruteForce(args) => commands::brute_force::run(args),
        Command::Bundle(args) => done(commands::bundle::run(args)),
        Command::Merge(args) => done(commands::merge::run(args)),
        Command::Import(args) => done(commands::import::run(args)),
        Command::Run(args) => done(commands::run::run(args)),
        Command::Worker => done(evaluate::worker::serve()),
    };
    result.map_err(Error::from)
}
