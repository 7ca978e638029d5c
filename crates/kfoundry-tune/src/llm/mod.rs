//! Optional source-level evolution through an OpenAI-compatible language model, with
//! meta-prompt evolution. Without a configured model nothing here runs and kfoundry stays
//! offline; without the cargo feature `llm` (on by default) the HTTP client is not compiled
//! at all and a configured model is refused with a clear error.
//!
//! - [`config`]: [`LlmConfig`] from `[workspace.metadata.kfoundry.llm]` and the environment
//!   (the API key from the environment only, never serialized or printed).
//! - [`chat`]: the [`Chat`] trait, its messages and errors; [`http`]: the blocking
//!   chat-completions client (time limits, retries with back-off, request/token caps).
//! - [`prompt`]: the mutation prompt built from a [`MutationContext`].
//! - [`failures`]: the bounded, deduplicated [`FailureHistory`](failures::FailureHistory) shown in prompts.
//! - [`parse`]: answers (whole kernel or SEARCH/REPLACE edits) to a checked source; the
//!   optimisation levels of a source for the archive's descriptors.
//! - [`meta`]: the population of prompt variants and meta-requests that rewrite them.
//! - [`mutator`]: proposes rewrites and learns from their outcomes ([`Mutator::propose`] / [`Mutator::report`]).
//! - [`operator`]: the search engine's external operator built on the mutator: the archive of
//!   verified source variants and one turn per mutation.

pub mod chat;
pub mod config;
pub mod failures;
#[cfg(feature = "llm")]
pub mod http;
pub mod meta;
pub mod mutator;
pub mod operator;
pub mod parse;
pub mod prompt;

pub use chat::{Chat, ChatError, Spent};
pub use config::LlmConfig;
pub use mutator::{Mutator, MutatorState, Proposal};
pub use parse::source_levels;
pub use prompt::{DeviceDescription, Inspiration, MutationContext};

/// The chat client for `config`: the HTTP client, or, in a build without the `llm` feature,
/// an error that says so.
pub fn connect(config: &LlmConfig) -> Result<Box<dyn Chat>, ChatError> {
    #[cfg(feature = "llm")]
    {
        Ok(Box::new(http::Client::new(config)?))
    }
    #[cfg(not(feature = "llm"))]
    {
        Err(ChatError::Setup {
            url: config.endpoint(),
            detail: "this cargo-kfoundry was built without the `llm` feature; reinstall it with default features to use a language model, or pass --no-llm".into(),
        })
    }
}
