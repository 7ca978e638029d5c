//! `cargo kfoundry`: tune annotated OpenCL kernels on the local device and write Kfoundry.lock.
//!
//! The flow: [`discover`] (cargo metadata + syn + the shared annotation parser) → [`tune`]
//! (the search engine `kfoundry_search` over an [`evaluate::Bench`] on the chosen device) →
//! [`record`] into `Kfoundry.lock` (the shared model's lockfile, merged under an advisory lock
//! and replaced atomically). [`checkpoint`] keeps each search resumable; [`interrupt`] turns
//! Ctrl-C into "write what was found".

// No panics outside tests: every failure is an error that says what and where.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod checkpoint;
mod cli;
mod commands;
mod devices;
mod discover;
mod evaluate;
mod exit;
mod finalists;
mod interrupt;
// A few of its methods serve only its tests (tests/llm_client.rs compiles it on its own).
#[allow(dead_code)]
mod llm;
mod peaks;
mod record;
mod report;
mod source_search;
mod tune;

use cli::Command;

fn main() {
    let cli = cli::parse();
    let done = |r: anyhow::Result<()>| r.map(|()| exit::Exit::Success);
    let result = match &cli.command {
        Command::Tune(args) => tune::run(args),
        Command::List(args) => done(commands::list::run(args)),
        Command::Devices(args) => done(devices::run(args)),
        Command::Check(args) => done(commands::check::run(args)),
        Command::Report(args) => done(commands::report::run(args)),
        Command::Simulate(args) => done(commands::simulate::run(args)),
        Command::BruteForce(args) => done(commands::brute_force::run(args)),
        Command::Bundle(args) => done(discover::write_bundle(args)),
        Command::Worker => done(evaluate::worker::serve()),
    };
    let exit = match result {
        Ok(exit) => exit,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::Exit::Failure
        }
    };
    if exit != exit::Exit::Success {
        std::process::exit(exit.code());
    }
}
