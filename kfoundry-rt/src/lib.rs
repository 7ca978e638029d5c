//! kfoundry's runtime: what a binary built with kfoundry needs.
//!
//! - [`model`]: OpenCL-free: the kernel specification, the expression language, the OpenCL C
//!   signature reader, device keys, tuned variants and the dispatch rules. The proc macro and
//!   the tuner use it too.
//! - with the `opencl` feature (default): [`opencl`], the one place where kfoundry calls
//!   OpenCL: device identity, the checked launcher that generated code calls, dispatch with its
//!   program cache, and the sessions the tuner evaluates candidates in.

pub mod model;

pub use model::device::{DeviceInfo, DeviceKey, DeviceTraits, KeyError};
pub use model::select::{Choice, Step};
pub use model::spec::KernelSpec;

#[cfg(feature = "opencl")]
pub mod opencl;

#[cfg(feature = "opencl")]
pub use ocl;
#[cfg(feature = "opencl")]
pub use opencl::{
    device::{default_device, device_info, device_key, list_devices, traits_from, traits_of},
    error::Error,
    evolved::{Configuration, Evolved},
    launch::{Arg, Scalar},
    session::Timing,
};
