//! The [`Chat`] trait the search drives, its messages, replies, spending and errors. The
//! HTTP client that implements it is in [`super::http`] (cargo feature `llm`).
//!
//! The HTTP client posts `{"model", "messages", "temperature", "max_tokens"}` to
//! `{base_url}/chat/completions` (the endpoint served by OpenAI, vLLM, llama.cpp's server
//! and Ollama) with `Authorization: Bearer <key>` when a key is configured, and reads
//! `choices[0].message.content` and `usage`.
//!
//! - Each HTTP attempt has a time limit; 429, 5xx and timeouts are retried up to
//!   `max_retries` times with exponential back-off (doubling from 1 s, at most 30 s), or the
//!   server's `Retry-After` (seconds, at most 60 s) when it is longer.
//! - Every attempt counts as a request against `max_requests`; tokens are counted from
//!   `usage.total_tokens` (or prompt + completion; estimated as characters / 4 when the
//!   server reports none) against `max_tokens`. Once either cap is reached every call fails
//!   with [`ChatError::BudgetExhausted`] without touching the network.
//! - Errors say what happened and where: the URL for connection failures, the key's
//!   environment variable (never the key) for 401/403, the model for unknown-model answers,
//!   what was expected for malformed bodies. Server texts quoted in errors are cut short and
//!   have the key masked.

use serde::{Deserialize, Serialize};

/// Who speaks a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Message {
        Message {
            role: Role::System,
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: content.into(),
        }
    }
}

/// Token counts of one completion, as the server reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

/// A completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub content: String,
    /// `None` when the server sent no `usage`.
    pub usage: Option<TokenUsage>,
}

/// What a tune has spent so far (part of the resumable state, so that caps hold across a
/// resume).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spent {
    /// HTTP attempts, retries included.
    pub requests: u32,
    pub tokens: u64,
    /// Completions received.
    pub completions: u32,
}

/// Something that answers chat requests: the HTTP client (`http::Client`, feature `llm`), or a test double.
pub trait Chat {
    fn complete(&mut self, messages: &[Message]) -> Result<Reply, ChatError>;
    /// What has been spent so far.
    fn spent(&self) -> Spent {
        Spent::default()
    }
    /// Restores the spending of a resumed tune.
    fn restore_spent(&mut self, _spent: Spent) {}
}

/// Why a chat request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChatError {
    #[error("cannot reach the language model at {url}: {detail} (check base_url / KFOUNDRY_LLM_URL and that the server is running)")]
    Connect { url: String, detail: String },
    #[error(
        "the language model at {url} did not answer within {secs:.1} s ({attempts} attempt(s))"
    )]
    Timeout {
        url: String,
        secs: f64,
        attempts: u32,
    },
    #[error("the language model at {url} refused the API key (HTTP {status}); check the key in the environment variable {key_env}{}", if *.key_sent { "" } else { " (no key was set)" })]
    KeyRefused {
        url: String,
        status: u16,
        key_env: String,
        key_sent: bool,
    },
    #[error(
        "the language model at {url} does not know the model `{model}` (HTTP {status}): {detail}"
    )]
    UnknownModel {
        url: String,
        model: String,
        status: u16,
        detail: String,
    },
    #[error("HTTP 404 from {url}: either the model `{model}` is unknown there or there is no chat-completions API at this URL (base_url usually ends in /v1): {detail}")]
    NotFound {
        url: String,
        model: String,
        detail: String,
    },
    #[error(
        "the language model at {url} answered HTTP {status} ({attempts} attempt(s)): {detail}"
    )]
    Http {
        url: String,
        status: u16,
        attempts: u32,
        detail: String,
    },
    #[error("malformed answer from {url}: expected {expected}; got: {excerpt}")]
    Malformed {
        url: String,
        expected: String,
        excerpt: String,
    },
    #[error("language-model budget exhausted: {used} of {cap} {what} per tune used")]
    BudgetExhausted {
        what: &'static str,
        used: u64,
        cap: u64,
    },
    #[error("cannot set up the HTTP client for {url}: {detail}")]
    Setup { url: String, detail: String },
}

impl ChatError {
    /// Whether asking again later in the same tune is pointless (wrong URL, refused key,
    /// unknown model, budget spent): the mutator then stops using the model.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            ChatError::Connect { .. }
                | ChatError::KeyRefused { .. }
                | ChatError::UnknownModel { .. }
                | ChatError::NotFound { .. }
                | ChatError::BudgetExhausted { .. }
                | ChatError::Setup { .. }
        )
    }
}
