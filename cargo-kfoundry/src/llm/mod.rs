//! Optional source-level evolution through an OpenAI-compatible language model, with
//! meta-prompt evolution (issue 6). Without a configured model nothing here runs and
//! kfoundry stays offline.
//!
//! - [`config`]: [`LlmConfig`] from `[workspace.metadata.kfoundry.llm]` and the environment
//!   (the API key from the environment only, never serialized or printed).
//! - [`client`]: the blocking chat-completions [`Client`] (time limits, retries with back-off,
//!   request/token caps, clear errors) and the [`Chat`] trait it implements.
//! - [`prompt`]: the mutation prompt built from a [`MutationContext`].
//! - [`failures`]: the bounded, deduplicated [`FailureHistory`] shown in prompts.
//! - [`parse`]: answers (whole kernel or SEARCH/REPLACE edits) to a checked source; the
//!   optimisation levels of a source for the archive's descriptors.
//! - [`meta`]: the population of prompt variants and meta-requests that rewrite them.
//! - [`mutator`]: the operator the tuner calls ([`Mutator::propose`] / [`Mutator::report`]).
//!
//! Paths inside this module are relative (`super::`), so that an integration test can
//! compile it with `#[path = "../src/llm/mod.rs"] mod llm;` (cargo-kfoundry has no library
//! target).

pub mod client;
pub mod config;
pub mod failures;
pub mod meta;
pub mod mutator;
pub mod parse;
pub mod prompt;

// What the tuner uses; the rest is reached through the submodules.
pub use client::{Client, Spent};
pub use config::LlmConfig;
pub use mutator::{Mutator, MutatorState, Outcome};
pub use parse::source_levels;
pub use prompt::{DeviceDescription, Inspiration, MutationContext};
