//! The OpenCL boundary: every OpenCL call kfoundry makes is in this module, and none of them can
//! panic (each failure is an [`Error`]).
//!
//! - [`device`]: listing devices, their keys, descriptions and limits;
//! - [`launch`]: checking a launch against a kernel's specification, then enqueuing it;
//! - [`evolved`]: the dispatching kernel that generated code embeds (what a shipped binary uses);
//! - [`session`]: one device, context and profiling queue, for the tuner and benchmarks.
//!
//! [`Evolved`]: evolved::Evolved
//! [`Error`]: error::Error

pub mod device;
pub mod error;
pub mod evolved;
pub mod launch;
pub mod session;
