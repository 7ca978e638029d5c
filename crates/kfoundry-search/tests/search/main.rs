//! The search engine's integration tests, as one test binary: the engine on a synthetic
//! landscape, and checkpoints that anyone could have edited.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed test says where

/// Checkpoints read back: refused when tampered with, resumed when whole.
mod checkpoints;
/// Reaching the optimum, budgets, determinism, resume, selection.
mod engine;
mod landscape;
