//! The runtime's error type: every OpenCL failure is a value, never a panic.

use crate::model::spec::LaunchError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The embedded specification or lockfile variants could not be decoded (a kfoundry bug
    /// or a mismatched version of the macro and the runtime).
    #[error("kernel `{kernel}`: corrupt embedded data: {message}")]
    Embedded { kernel: String, message: String },
    /// The call's sizes are invalid for the kernel (even the reference cannot run).
    #[error("kernel `{kernel}`: {source}")]
    Sizes { kernel: String, source: LaunchError },
    /// A value given to the launcher does not fit the kernel argument's type.
    #[error("kernel `{kernel}`: argument `{arg}`: {message}")]
    Argument {
        kernel: String,
        arg: String,
        message: String,
    },
    /// A buffer given to the launcher is shorter than the annotation says the call needs.
    #[error("kernel `{kernel}`: buffer `{arg}` holds {given} element(s) of `{elem}`, the call needs at least {needed}{length}")]
    BufferTooSmall {
        kernel: String,
        arg: String,
        elem: &'static str,
        needed: usize,
        given: usize,
        length: String,
    },
    /// A buffer the kernel writes is, or overlaps, another buffer argument of the call (the
    /// annotation's `in_place(...)` allows exactly the same buffer for the pairs it names).
    #[error("kernel `{kernel}`: buffer `{written}` {how} `{other}`; the kernel writes `{written}`, and no variant was verified with them sharing memory: pass separate buffers{hint}")]
    Aliasing {
        kernel: String,
        written: String,
        other: String,
        how: &'static str,
        hint: String,
    },
    /// The OpenCL compiler rejected a variant.
    #[error("kernel `{kernel}`: build failed with options `{options}`:\n{log}")]
    Build {
        kernel: String,
        options: String,
        log: String,
    },
    /// No OpenCL platform (driver) is installed, or none has a device.
    #[error("no OpenCL device found: install an OpenCL driver (an ICD): on Debian or Ubuntu `apt-get install pocl-opencl-icd` for the CPU, or your GPU vendor's OpenCL driver; `clinfo -l` lists what the ICD loader sees")]
    NoPlatform,
    /// An OpenCL call failed with a status (`CL_OUT_OF_RESOURCES` is -5): kept as a number, so
    /// that a decision never reads the message.
    #[error("OpenCL: {message}")]
    Status { status: i32, message: String },
    /// Any other OpenCL error (one without a status: a wrapper's or kfoundry's own check).
    #[error("OpenCL: {0}")]
    OpenCl(String),
}

/// `CL_MEM_OBJECT_ALLOCATION_FAILURE`, `CL_OUT_OF_RESOURCES`, `CL_OUT_OF_HOST_MEMORY`.
const EXHAUSTED: [i32; 3] = [-4, -5, -6];

impl Error {
    /// A mistake of the caller (sizes, arguments, buffers): running another variant would not
    /// help, and nothing was run.
    pub fn is_callers(&self) -> bool {
        matches!(
            self,
            Error::Sizes { .. }
                | Error::Argument { .. }
                | Error::BufferTooSmall { .. }
                | Error::Aliasing { .. }
        )
    }
}

impl Error {
    /// The OpenCL status of the call that failed, when it returned one.
    pub fn status(&self) -> Option<i32> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The device (or host) ran out of memory or resources: a limit of the machine at that
    /// moment, not a fault of the kernel that was being set up.
    pub fn is_exhausted(&self) -> bool {
        self.status().is_some_and(|s| EXHAUSTED.contains(&s))
    }

    fn with_status(status: Option<ocl::enums::Status>, message: String) -> Self {
        match status {
            Some(status) => Error::Status {
                status: status as i32,
                message,
            },
            None => Error::OpenCl(message),
        }
    }
}

impl From<ocl::Error> for Error {
    fn from(e: ocl::Error) -> Self {
        Error::with_status(e.api_status(), one_line(&e.to_string()))
    }
}

impl From<ocl::OclCoreError> for Error {
    fn from(e: ocl::OclCoreError) -> Self {
        Error::with_status(e.api_status(), one_line(&e.to_string()))
    }
}

/// `ocl`'s API-status errors are a banner of several lines ("Error executing function:
/// clEnqueueNDRangeKernel(\"k\")", "Status error code: CL_OUT_OF_RESOURCES (-5)", a URL):
/// said in one line, `clEnqueueNDRangeKernel("k"): CL_OUT_OF_RESOURCES (-5)`. Any other
/// text is kept, its lines joined.
fn one_line(text: &str) -> String {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .map(str::trim)
    };
    match (
        field("Error executing function:"),
        field("Status error code:"),
    ) {
        (Some(function), Some(status)) => format!("{function}: {status}"),
        _ => text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ocl_banners_become_one_line() {
        let banner = "\n\n################################ OPENCL ERROR ############################### \n\nError executing function: clEnqueueNDRangeKernel(\"scale\")  \n\nStatus error code: CL_OUT_OF_RESOURCES (-5)  \n\nPlease visit the following url for more information: \n\nhttps://www.khronos.org/registry/cl/sdk/1.2/docs/man/xhtml/clEnqueueNDRangeKernel.html#errors  \n\n############################################################################# \n";
        assert_eq!(
            super::one_line(banner),
            "clEnqueueNDRangeKernel(\"scale\"): CL_OUT_OF_RESOURCES (-5)"
        );
        assert_eq!(super::one_line("plain\n  text "), "plain text");
    }
}

#[cfg(test)]
mod status_tests {
    use super::*;

    #[test]
    fn an_opencl_failure_keeps_its_status() {
        let session = crate::opencl::session::Session::on_device(0).expect("an OpenCL device");
        // Larger than any device allocates at once: CL_INVALID_BUFFER_SIZE (-61).
        let Err(e) = session.alloc(1 << 62) else {
            panic!("a buffer of 2^62 bytes was allocated");
        };
        assert_eq!(e.status(), Some(-61), "{e}");
        assert!(!e.is_exhausted());
        let exhausted = Error::Status {
            status: -4,
            message: "CL_MEM_OBJECT_ALLOCATION_FAILURE".into(),
        };
        assert!(exhausted.is_exhausted());
        assert!(!Error::OpenCl("CL_OUT_OF_RESOURCES".into()).is_exhausted());
    }
}
