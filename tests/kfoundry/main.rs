//! The `kfoundry` crate's integration tests, as one test binary: what a user's program gets
//! from the macro and the runtime, on the local OpenCL device (PoCL in CI).
//! `cargo test -p kfoundry --test kfoundry <module>::` runs one module.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed test says where

mod common;

/// The manual (`book/`) and the README: the summary lists every chapter, every link resolves.
mod book;
/// Dispatch: exact device, same device with another driver, family, nearest, reference.
mod dispatch;
/// The whole chain: tune the examples, lock, embed, dispatch.
mod end_to_end;
/// A crate built against kfoundry always embeds what its lockfile says.
mod lockfile_tracking;
/// Compile-time errors of `#[kfoundry::evolve(...)]`, pinned by trybuild.
mod ui;
