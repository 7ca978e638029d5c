//! The OpenCL-free model shared by the macro, the tuner and the runtime:
//! specification → (tuning) → lockfile → selection.

#[cfg(feature = "parse")]
pub mod annotation;
pub mod device;
pub mod embed;
pub mod expr;
pub mod files;
pub mod generated;
pub mod lockfile;
pub mod select;
pub mod signature;
pub mod spec;
