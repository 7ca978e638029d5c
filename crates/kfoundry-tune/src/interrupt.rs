//! Ctrl-C and SIGTERM during a tune. The first one asks the tuner to stop after the current
//! evaluation, write what it found so far and keep its checkpoints (`--resume` continues);
//! should that take more than `GRACE` (an evaluation, a proof or a wait that does not end),
//! the process exits then, so that a second signal is never needed; a second one exits at
//! once. Either way the lockfile is only ever replaced atomically, so nothing is torn, and the
//! checkpoints are kept. Worker processes run in their own process group, so the terminal's
//! Ctrl-C does not kill the candidate being evaluated and wrongly mark it as failed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// How long after the first interrupt the process exits if it has not finished by then.
pub(crate) const GRACE: Duration = Duration::from_secs(30);

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
        eprintln!(
            "\ninterrupted: finishing the current evaluation, then writing what was found (exiting in {} s at most; Ctrl-C again to exit now)",
            GRACE.as_secs()
        );
        std::thread::spawn(|| {
            std::thread::sleep(GRACE);
            eprintln!(
                "still busy {} s after the interrupt: exiting now (checkpoints are kept; `--resume` continues)",
                GRACE.as_secs()
            );
            std::process::exit(130);
        });
    })
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
