//! The exit statuses of `cargo kfoundry`, for scripts and CI.

/// How a command ended. Errors that stop a command are [`Exit::Failure`] (or
/// [`Exit::Environment`]) and are printed by `main`; the others are decided by the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done.
    Success,
    /// 1: the command failed (bad input, an error it cannot recover from).
    Failure,
    /// 3: a tune finished, but some kernels or workloads failed; the others are recorded.
    PartlyFailed,
    /// 130: interrupted (Ctrl-C, SIGTERM); what was found is recorded, `--resume` continues.
    Interrupted,
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::PartlyFailed => 3,
            Exit::Interrupted => 130,
        }
    }
}
