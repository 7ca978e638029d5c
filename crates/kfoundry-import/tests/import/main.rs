//! The importer's integration tests, as one test binary: graphs imported and their kernels run
//! on the default OpenCL device (PoCL in CI) against tract-onnx.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed test says where

mod common;

/// Models that cannot be imported get an error naming the node and what is missing.
mod errors;
/// The committed fixtures, imported and run.
mod fixtures;
/// Every supported operator, alone and in fused chains.
mod operators;
