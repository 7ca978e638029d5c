//! The command line's integration tests, as one test binary (one link, not fifteen): each
//! module runs `cargo-kfoundry` (the binary cargo built for this package) on the local OpenCL
//! device (PoCL in CI) and checks what it did. `cargo test -p cargo-kfoundry --test cli
//! <module>::` runs one module.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed test says where

mod cheats;
mod common;

/// What a real call can differ in from a proof's runs; edited lockfiles and bundles.
mod adversarial;
/// Deliberately bad candidates, each rejected with its reason.
mod bad_kernels;
/// `brute-force` into a Kernel Tuner cache file.
mod brute_force;
/// Exit statuses and the JSON messages (the snapshot).
mod contract;
/// Interrupts, kills and resumes.
mod crash_safety;
/// Mistakes and build errors named where they are; `check` of one package, and of the
/// committed lockfile.
mod diagnostics;
/// A tune that meets trouble says what and keeps what it can.
mod failures;
/// Several devices, partitions and workloads meant for one kind of device.
mod fleet;
/// Kernels written to cheat the verifier.
mod hostile;
/// `import`: the committed crates are what it writes.
mod import;
/// The language-model client against a scripted server.
#[cfg(feature = "llm")]
mod llm_client;
/// Source-level evolution end to end against a local server.
#[cfg(feature = "llm")]
mod llm_tune;
/// What a tune prints off a terminal.
mod output;
/// `ranges(...)`: anchors, portfolios, dispatch over a range.
mod ranges;
/// `report --cross`.
mod report_cross;
/// One tune serves every size a program calls: the default region, constant outputs, first
/// mistakes.
mod sizes;
/// The Slurm path on a one-node cluster.
mod slurm;
