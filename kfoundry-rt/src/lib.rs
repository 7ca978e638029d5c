//! kfoundry's runtime and shared model.
//!
//! - [`model`]: OpenCL-free: the kernel specification, the expression language, the OpenCL C
//!   signature reader, the lockfile, device keys and the dispatch rules. The proc macro and the
//!   tuner use it too.
//! - with the `opencl` feature (default): device identity from OpenCL, the per-context program
//!   cache and the launcher that generated code calls.

// No panics outside tests: every failure is an error that says what and where.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod model;

pub use model::device::{DeviceInfo, DeviceKey};
pub use model::select::{Choice, Step};
pub use model::spec::KernelSpec;

#[cfg(feature = "opencl")]
pub mod opencl;

#[cfg(feature = "opencl")]
pub use ocl;
#[cfg(feature = "opencl")]
pub use opencl::{
    device::{default_device, device_info, device_key, list_devices},
    error::Error,
    evolved::Evolved,
    launch::{Arg, Scalar},
};
