//! Ctrl-C and SIGTERM during a tune. The first one asks the tuner to stop after the current
//! evaluation, write what it found so far and keep its checkpoints (`--resume` continues);
//! a second one exits at once (the lockfile is only ever replaced atomically, so nothing is
//! torn). Worker processes run in their own process group, so the terminal's Ctrl-C does not
//! kill the candidate being evaluated and wrongly mark it as failed.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Installs the handler (once per process).
pub fn install() -> anyhow::Result<()> {
    ctrlc::set_handler(|| {
        if REQUESTED.swap(true, Ordering::SeqCst) {
            eprintln!("\ninterrupted again: exiting now (checkpoints are kept; `--resume` continues)");
            std::process::exit(130);
        }
        eprintln!("\ninterrupted: finishing the current evaluation, then writing what was found (Ctrl-C again to exit now)");
    })
    .map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
