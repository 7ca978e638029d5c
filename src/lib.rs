//! kfoundry: annotate OpenCL reference kernels with `#[kfoundry::evolve(...)]`, tune them with
//! `cargo kfoundry tune`, and ship binaries that dispatch to the variant tuned for the device
//! they run on (falling back to the reference).
//!
//! This facade re-exports the attribute macro and the runtime. See the README for a tutorial.

/// Declares a tunable OpenCL kernel on a unit struct; the key reference follows (the manual's
/// chapter `book/src/annotation.md`).
///
#[doc = include_str!("../book/src/annotation.md")]
pub use kfoundry_macros::evolve;
pub use kfoundry_rt::*;
