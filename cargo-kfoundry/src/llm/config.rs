//! [`LlmConfig`]: where the language model is and how much of it a tune may use.
//!
//! Read from the `[workspace.metadata.kfoundry.llm]` table of the workspace manifest (given
//! as the `serde_json::Value` that `cargo metadata` reports), then overridden by environment
//! variables:
//!
//! | variable | overrides |
//! | --- | --- |
//! | `KFOUNDRY_LLM_URL` | `base_url` |
//! | `KFOUNDRY_LLM_MODEL` | `model` |
//! | the one named by `api_key_env` (default `KFOUNDRY_LLM_API_KEY`), else `OPENAI_API_KEY` | the API key |
//!
//! The API key comes from the environment only: a key written in the manifest is refused
//! (it would end up in version control), the key is never serialized, and `Debug` prints it
//! as `<redacted>`. With neither the table nor `KFOUNDRY_LLM_URL`, [`LlmConfig::resolve`]
//! returns `None` and kfoundry stays fully offline.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// The environment variable read for the API key unless `api_key_env` names another.
pub const DEFAULT_KEY_ENV: &str = "KFOUNDRY_LLM_API_KEY";
/// Read for the API key when the configured variable is unset.
pub const FALLBACK_KEY_ENV: &str = "OPENAI_API_KEY";
/// Overrides `base_url`.
pub const URL_ENV: &str = "KFOUNDRY_LLM_URL";
/// Overrides `model`.
pub const MODEL_ENV: &str = "KFOUNDRY_LLM_MODEL";
/// Where the table lives, for error messages.
pub const TABLE: &str = "[workspace.metadata.kfoundry.llm]";

/// An API key. Its `Debug` and `Display` print `<redacted>`; it cannot be serialized; the only
/// way to the text is [`ApiKey::expose`], used when the `Authorization` header is built.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// The key itself: for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The language-model settings of a tune. `Serialize` (for reports and the tuner state)
/// leaves the key out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlmConfig {
    /// The OpenAI-compatible API root, without a trailing slash, e.g. `http://127.0.0.1:8000/v1`;
    /// requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    pub model: String,
    /// Sent as `Authorization: Bearer …` when present (local servers often need none).
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
    /// The environment variable the key was looked up in (named in "key refused" errors).
    pub api_key_env: String,
    /// Per HTTP request.
    pub timeout_secs: u64,
    /// Further attempts after a 429, a 5xx or a timeout.
    pub max_retries: u32,
    /// HTTP requests per tune (every attempt counts, retries included).
    pub max_requests: u32,
    /// Tokens (prompt + completion, as the server reports them) per tune.
    pub max_tokens: u64,
    /// Sent as `max_tokens` of each request (capped by what is left of `max_tokens`).
    pub max_completion_tokens: u64,
    pub temperature: f64,
    /// One language-model mutation per this many evaluations.
    pub every: u32,
    /// One meta-prompt request per this many language-model samples.
    pub meta_every: u32,
    /// The most prompt variants kept.
    pub population: usize,
}

impl LlmConfig {
    /// Settings with the defaults, for `base_url` and `model`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> LlmConfig {
        LlmConfig {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            model: model.into(),
            api_key: None,
            api_key_env: DEFAULT_KEY_ENV.to_string(),
            timeout_secs: 120,
            max_retries: 3,
            max_requests: 50,
            max_tokens: 400_000,
            max_completion_tokens: 4096,
            temperature: 0.7,
            every: 10,
            meta_every: 8,
            population: 8,
        }
    }

    /// Reads the settings from the workspace metadata (the whole `workspace.metadata` value of
    /// `cargo metadata`; the `kfoundry.llm` table is looked up inside) and the process
    /// environment.
    pub fn from_workspace_metadata(metadata: &Value) -> Result<Option<LlmConfig>, ConfigError> {
        let table = metadata.get("kfoundry").and_then(|k| k.get("llm"));
        LlmConfig::resolve(table, |name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// Reads the settings from the `llm` table (if any) and `env` (a variable lookup, so that
    /// tests need not touch the process environment). `None`: nothing configured, or the
    /// table says `enabled = false`.
    pub fn resolve(table: Option<&Value>, env: impl Fn(&str) -> Option<String>) -> Result<Option<LlmConfig>, ConfigError> {
        let table = match table {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(map),
            Some(other) => {
                return Err(ConfigError::NotATable { found: kind_of(other).to_string() });
            }
        };
        let env_url = env(URL_ENV);
        if table.is_none() && env_url.is_none() {
            return Ok(None);
        }
        let mut config = LlmConfig::new(String::new(), String::new());
        if let Some(map) = table {
            for (key, value) in map {
                match key.as_str() {
                    "enabled" => {
                        if !value.as_bool().ok_or_else(|| wrong(key, "true or false", value))? {
                            return Ok(None);
                        }
                    }
                    "base_url" | "url" => config.base_url = string(key, value)?,
                    "model" => config.model = string(key, value)?,
                    "api_key_env" => config.api_key_env = string(key, value)?,
                    "timeout_secs" => config.timeout_secs = positive(key, value)?,
                    "max_retries" => config.max_retries = narrow(key, unsigned(key, value)?)?,
                    "max_requests" => config.max_requests = narrow(key, positive(key, value)?)?,
                    "max_tokens" => config.max_tokens = positive(key, value)?,
                    "max_completion_tokens" => config.max_completion_tokens = positive(key, value)?,
                    "temperature" => {
                        let t = value.as_f64().ok_or_else(|| wrong(key, "a number", value))?;
                        if !(0.0..=2.0).contains(&t) {
                            return Err(ConfigError::OutOfRange { key: key.clone(), allowed: "0 to 2".into(), value: t.to_string() });
                        }
                        config.temperature = t;
                    }
                    "every" => config.every = narrow(key, positive(key, value)?)?,
                    "meta_every" => config.meta_every = narrow(key, positive(key, value)?)?,
                    "population" => config.population = narrow(key, positive(key, value)?)?,
                    "api_key" | "key" | "token" => {
                        return Err(ConfigError::KeyInFile { key: key.clone(), env: config.api_key_env.clone() });
                    }
                    _ => return Err(ConfigError::UnknownKey { key: key.clone() }),
                }
            }
        }
        if let Some(url) = env_url {
            config.base_url = url;
        }
        if let Some(model) = env(MODEL_ENV) {
            config.model = model;
        }
        config.base_url = config.base_url.trim().trim_end_matches('/').to_string();
        if config.base_url.is_empty() {
            return Err(ConfigError::Missing { what: "base_url", env: URL_ENV });
        }
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(ConfigError::BadUrl { url: config.base_url });
        }
        if config.model.trim().is_empty() {
            return Err(ConfigError::Missing { what: "model", env: MODEL_ENV });
        }
        config.api_key = env(&config.api_key_env).or_else(|| env(FALLBACK_KEY_ENV)).map(ApiKey);
        Ok(Some(config))
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }
}

/// A mistake in the `llm` table or the environment; each names the key and the table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("{TABLE} must be a table, found {found}")]
    NotATable { found: String },
    #[error("{TABLE}: unknown key `{key}` (known: enabled, base_url, model, api_key_env, timeout_secs, max_retries, max_requests, max_tokens, max_completion_tokens, temperature, every, meta_every, population)")]
    UnknownKey { key: String },
    #[error("{TABLE}.{key}: expected {expected}, found {found}")]
    WrongType { key: String, expected: &'static str, found: String },
    #[error("{TABLE}.{key}: {value} is out of range ({allowed})")]
    OutOfRange { key: String, allowed: String, value: String },
    #[error("{TABLE}.{key}: the API key is never read from the manifest (it would be committed); set the environment variable {env} instead")]
    KeyInFile { key: String, env: String },
    #[error("the language model is configured without `{what}`: set {TABLE}.{what} or the environment variable {env}")]
    Missing { what: &'static str, env: &'static str },
    #[error("{TABLE}.base_url (or {URL_ENV}): `{url}` is not an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1)")]
    BadUrl { url: String },
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

fn wrong(key: &str, expected: &'static str, value: &Value) -> ConfigError {
    ConfigError::WrongType { key: key.to_string(), expected, found: kind_of(value).to_string() }
}

fn string(key: &str, value: &Value) -> Result<String, ConfigError> {
    value.as_str().map(str::to_string).ok_or_else(|| wrong(key, "a string", value))
}

fn unsigned(key: &str, value: &Value) -> Result<u64, ConfigError> {
    value.as_u64().ok_or_else(|| wrong(key, "a non-negative integer", value))
}

fn positive(key: &str, value: &Value) -> Result<u64, ConfigError> {
    match unsigned(key, value)? {
        0 => Err(ConfigError::OutOfRange { key: key.to_string(), allowed: "at least 1".into(), value: "0".into() }),
        n => Ok(n),
    }
}

fn narrow<T: TryFrom<u64>>(key: &str, n: u64) -> Result<T, ConfigError> {
    T::try_from(n).map_err(|_| ConfigError::OutOfRange { key: key.to_string(), allowed: "a smaller number".into(), value: n.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn nothing_configured_is_offline() {
        assert_eq!(LlmConfig::resolve(None, env(&[])).unwrap(), None);
        assert_eq!(LlmConfig::resolve(Some(&Value::Null), env(&[("OPENAI_API_KEY", "k")])).unwrap(), None);
        let off = json!({"enabled": false, "base_url": "http://x/v1", "model": "m"});
        assert_eq!(LlmConfig::resolve(Some(&off), env(&[])).unwrap(), None);
    }

    #[test]
    fn table_then_env_overrides() {
        let table = json!({
            "base_url": "http://127.0.0.1:8000/v1/", "model": "qwen", "timeout_secs": 30,
            "max_retries": 0, "max_requests": 5, "max_tokens": 1000, "temperature": 0.2,
            "every": 4, "meta_every": 3, "population": 5
        });
        let c = LlmConfig::resolve(Some(&table), env(&[])).unwrap().unwrap();
        assert_eq!(c.base_url, "http://127.0.0.1:8000/v1");
        assert_eq!(c.endpoint(), "http://127.0.0.1:8000/v1/chat/completions");
        assert_eq!((c.model.as_str(), c.timeout_secs, c.max_retries, c.max_requests), ("qwen", 30, 0, 5));
        assert_eq!((c.max_tokens, c.every, c.meta_every, c.population), (1000, 4, 3, 5));
        assert_eq!(c.temperature, 0.2);
        assert_eq!(c.api_key, None);
        let e = env(&[(URL_ENV, "https://api.example/v1"), (MODEL_ENV, "big")]);
        let c = LlmConfig::resolve(Some(&table), e).unwrap().unwrap();
        assert_eq!((c.base_url.as_str(), c.model.as_str()), ("https://api.example/v1", "big"));
    }

    #[test]
    fn env_alone_configures() {
        let c = LlmConfig::resolve(None, env(&[(URL_ENV, "http://h:1/v1"), (MODEL_ENV, "m")])).unwrap().unwrap();
        assert_eq!(c.max_requests, LlmConfig::new("", "").max_requests);
        let err = LlmConfig::resolve(None, env(&[(URL_ENV, "http://h:1/v1")])).unwrap_err();
        assert!(err.to_string().contains("KFOUNDRY_LLM_MODEL"), "{err}");
    }

    #[test]
    fn key_from_env_only_with_fallback() {
        let table = json!({"base_url": "http://h/v1", "model": "m"});
        let c = LlmConfig::resolve(Some(&table), env(&[(FALLBACK_KEY_ENV, "sk-fallback")])).unwrap().unwrap();
        assert_eq!(c.api_key.as_ref().map(ApiKey::expose), Some("sk-fallback"));
        let both = env(&[(FALLBACK_KEY_ENV, "sk-fallback"), (DEFAULT_KEY_ENV, "sk-main")]);
        let c = LlmConfig::resolve(Some(&table), both).unwrap().unwrap();
        assert_eq!(c.api_key.as_ref().map(ApiKey::expose), Some("sk-main"));
        let named = json!({"base_url": "http://h/v1", "model": "m", "api_key_env": "MY_KEY"});
        let c = LlmConfig::resolve(Some(&named), env(&[("MY_KEY", "sk-mine"), (DEFAULT_KEY_ENV, "no")])).unwrap().unwrap();
        assert_eq!(c.api_key.as_ref().map(ApiKey::expose), Some("sk-mine"));
        let in_file = json!({"base_url": "http://h/v1", "model": "m", "api_key": "sk-secret"});
        let err = LlmConfig::resolve(Some(&in_file), env(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::KeyInFile { .. }));
        assert!(!err.to_string().contains("sk-secret"));
    }

    #[test]
    fn key_never_printed_nor_serialized() {
        let table = json!({"base_url": "http://h/v1", "model": "m"});
        let c = LlmConfig::resolve(Some(&table), env(&[(DEFAULT_KEY_ENV, "sk-topsecret")])).unwrap().unwrap();
        assert!(!format!("{c:?}").contains("sk-topsecret"));
        assert!(format!("{c:?}").contains("<redacted>"));
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("sk-topsecret") && !json.contains("api_key\""), "{json}");
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            (json!({"base_url": "http://h/v1", "model": "m", "timeout": 3}), "unknown key `timeout`"),
            (json!({"base_url": "http://h/v1", "model": "m", "every": 0}), "every: 0 is out of range"),
            (json!({"base_url": "http://h/v1", "model": "m", "temperature": 3.5}), "temperature: 3.5"),
            (json!({"base_url": "http://h/v1", "model": 7}), "model: expected a string, found a number"),
            (json!({"base_url": "127.0.0.1:8000/v1", "model": "m"}), "not an http:// or https:// URL"),
            (json!({"model": "m"}), "without `base_url`"),
            (json!([1]), "must be a table"),
        ];
        for (table, needle) in cases {
            let err = LlmConfig::resolve(Some(&table), env(&[])).unwrap_err().to_string();
            assert!(err.contains(needle), "{err} lacks {needle}");
            assert!(err.contains("workspace.metadata.kfoundry.llm"), "{err}");
        }
    }

    #[test]
    fn from_workspace_metadata_finds_the_table() {
        let meta = json!({"kfoundry": {"other": 1}});
        // No llm table; the outcome then depends only on KFOUNDRY_LLM_URL in the environment.
        let expected_offline = std::env::var(URL_ENV).map_or(true, |v| v.is_empty());
        if expected_offline {
            assert_eq!(LlmConfig::from_workspace_metadata(&meta).unwrap(), None);
        }
    }
}
