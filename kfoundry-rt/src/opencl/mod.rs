//! The OpenCL side of the runtime: device identity, building and launching variants, and the
//! dispatching [`Evolved`] kernel that generated code embeds.

pub mod device;
pub mod error;
pub mod evolved;
pub mod launch;
