//! The CLI's one error type, and the exit statuses that scripts and CI can rely on.
//!
//! | status | [`Exit`] | meaning |
//! |---|---|---|
//! | 0 | `Success` | done |
//! | 1 | `Failure` | the command failed: bad annotations, an unreadable lockfile, a reference that does not run... |
//! | 2 | `Usage` | the command line is wrong: an unknown flag, a `--device` or `--kernel` that matches nothing |
//! | 3 | `PartlyFailed` | a tune finished but some kernels or workloads failed; the others are recorded |
//! | 4 | `Drift` | `check --locked` found the lockfile out of date with the sources |
//! | 5 | `Environment` | the machine lacks what the command needs: no OpenCL platform or device |
//! | 6 | `Unverified` | `check --verify` found an entry that does not hold on a device present |
//! | 130 | `Interrupted` | Ctrl-C or SIGTERM; what was found is recorded, `--resume` continues |
//!
//! Code inside the crate returns `anyhow` errors with their context; a command marks a
//! usage or environment error with [`usage`] or [`environment`] (OpenCL's "no platform" is
//! recognised by itself), and [`Error::from`] classifies the chain once, at the boundary.

use std::fmt;

/// How a command ended, with its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success,
    Failure,
    Usage,
    PartlyFailed,
    Drift,
    Environment,
    Unverified,
    Interrupted,
}

impl Exit {
    /// The process exit status.
    pub fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::PartlyFailed => 3,
            Exit::Drift => 4,
            Exit::Environment => 5,
            Exit::Unverified => 6,
            Exit::Interrupted => 130,
        }
    }
}

/// What kind of error stopped a command; it decides the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The command line asks for something that does not exist or cannot be done.
    Usage,
    /// The machine lacks what the command needs (an OpenCL driver, a Unix platform).
    Environment,
    /// Anything else.
    Failure,
}

/// An error that stopped a command: the message with its context chain, and its kind.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    cause: anyhow::Error,
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The exit status of a command that ended with this error.
    pub fn exit(&self) -> Exit {
        match self.kind {
            ErrorKind::Usage => Exit::Usage,
            ErrorKind::Environment => Exit::Environment,
            ErrorKind::Failure => Exit::Failure,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.cause)
    }
}

impl std::error::Error for Error {}

impl From<anyhow::Error> for Error {
    fn from(cause: anyhow::Error) -> Error {
        let kind = if cause.chain().any(|e| e.is::<Usage>()) {
            ErrorKind::Usage
        } else if cause.chain().any(|e| {
            e.is::<Environment>()
                || matches!(e.downcast_ref(), Some(kfoundry_rt::Error::NoPlatform))
        }) {
            ErrorKind::Environment
        } else {
            ErrorKind::Failure
        };
        Error { kind, cause }
    }
}

/// Marks a usage error (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// Marks an environment error (exit status 5).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Environment(pub String);

/// A usage error with this message.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Usage(message.into()).into()
}

/// An environment error with this message.
pub fn environment(message: impl Into<String>) -> anyhow::Error {
    Environment(message.into()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    #[test]
    fn the_kind_is_found_anywhere_in_the_chain() {
        let plain: Error = anyhow::anyhow!("boom").into();
        assert_eq!((plain.kind(), plain.exit().code()), (ErrorKind::Failure, 1));
        let wrapped: Error = Err::<(), _>(usage("no device matches `--device x`"))
            .context("tuning")
            .unwrap_err()
            .into();
        assert_eq!(
            (wrapped.kind(), wrapped.exit().code()),
            (ErrorKind::Usage, 2)
        );
        assert_eq!(
            wrapped.to_string(),
            "tuning: no device matches `--device x`"
        );
        let no_opencl: Error = anyhow::Error::from(kfoundry_rt::Error::NoPlatform)
            .context("listing devices")
            .into();
        assert_eq!(
            (no_opencl.kind(), no_opencl.exit().code()),
            (ErrorKind::Environment, 5)
        );
        let codes: Vec<i32> = [
            Exit::Success,
            Exit::Failure,
            Exit::Usage,
            Exit::PartlyFailed,
            Exit::Drift,
            Exit::Environment,
            Exit::Interrupted,
        ]
        .iter()
        .map(|e| e.code())
        .collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5, 130]);
    }
}
