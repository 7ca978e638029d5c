//! `cargo kfoundry`: the command line over the `kfoundry-tune` engine. The binary
//! (`main.rs`) parses the command line and calls [`run`]; tests use this crate as a library.
//!
//! - [`cli`]: the command line (clap), and the engine's options from it.
//! - `commands`: the commands other than `tune` (`list`, `devices`, `check`, `report`,
//!   `simulate`, `brute-force`, `bundle`, `merge`, `import`, `run`).
//! - `fleet`: `tune` on several devices at once, one process of this program each.
//! - `reporter`: what `tune` shows (its events as text, a progress bar or JSON messages).
//!
//! The engine (`kfoundry-tune`: discover, plan, search, verify, record), the search
//! (`kfoundry-search`), the tooling (`kfoundry-tooling`: annotations, fingerprints, the
//! lockfile file) and the importer (`kfoundry-import`) are crates of their own; the OpenCL
//! calls all go through `kfoundry_rt::opencl`.

pub mod cli;
mod commands;
mod fleet;
mod reporter;

use cli::{Cli, Command};
pub use kfoundry_tune::{Error, ErrorKind, Exit};

/// Runs a parsed command line: how it ended, or the error that stopped it.
pub fn run(cli: &Cli) -> Result<Exit, Error> {
    let done = |r: anyhow::Result<()>| r.map(|()| Exit::Success);
    let result = match &cli.command {
        Command::Tune(args) => {
            let options = args.options();
            if fleet::is_fleet(&options) {
                fleet::run(&options)
            } else {
                kfoundry_tune::tune(&options, &reporter::TuneReporter::new(&options.ws))
            }
        }
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
        Command::Worker => done(kfoundry_bench::worker::serve()),
    };
    result.map_err(Error::from)
}
