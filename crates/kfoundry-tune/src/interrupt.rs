//! Ctrl-C and SIGTERM during a tune. The first one asks the tuner to stop after the current
//! evaluation, write what it found so far and keep its checkpoints (`--resume` continues);
//! a second one exits at once (the lockfile is only ever replaced atomically, so nothing is
//! torn). Worker processes run in their own process group, so the terminal's Ctrl-C does not
//! kill the candidate being evaluated and wrongly mark it as failed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// The outcome of installing the handler: a process has one, so a program that runs several
/// tunes (the library's users) installs it with the first and keeps it.
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// Installs the handler (once per process; later calls report how the first went).
pub fn install() -> anyhow::Result<()> {
    INSTALLED
        .get_or_init(|| set_handler().map_err(|e| format!("{e}")))
        .clone()
        .map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))
}

fn set_handler() -> Result<(), ctrlc::Error> {
    ctrlc::set_handler(|| {
        if REQUESTED.swap(true, Ordering::SeqCst) {
            eprintln!(
                "\ninterrupted again: exiting now (checkpoints are kept; `--resume` continues)"
            );
            std::process::exit(130);
        }
        eprintln!("\ninterrupted: finishing the current evaluation, then writing what was found (Ctrl-C again to exit now)");
    })
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
