//! `cargo kfoundry`: tune annotated OpenCL kernels on the local device and write Kfoundry.lock.
//!
//! The flow: [`discover`] (cargo metadata + syn + the shared annotation parser) → [`tune`]
//! (the search engine `kfoundry_search` over an [`evaluate::Bench`] on the chosen device) →
//! `Kfoundry.lock` (the shared model's lockfile, written atomically).

mod cli;
mod commands;
mod devices;
mod discover;
mod evaluate;
// Not wired into the tuner yet: the lead integrates it (issue 6).
#[allow(dead_code)]
pub mod llm;
mod report;
mod tune;

use cli::Command;

fn main() {
    let cli = cli::parse();
    let result = match &cli.command {
        Command::Tune(args) => tune::run(args),
        Command::List(args) => commands::list::run(args),
        Command::Devices(args) => devices::run(args),
        Command::Check(args) => commands::check::run(args),
        Command::Simulate(args) => commands::simulate::run(args),
        Command::Bundle(args) => discover::write_bundle(args),
        Command::Worker => evaluate::worker::serve(),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
