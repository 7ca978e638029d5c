//! [`LlmConfig`]: where the language model is and how much of it a tune may use.
//!
//! Settings come in layers, each overriding the one before:
//!
//! 1. the user's own file, `llm.toml` in `$KFOUNDRY_CONFIG_DIR`, else `$XDG_CONFIG_HOME/kfoundry`,
//!    else `~/.config/kfoundry` (`user_config_path`);
//! 2. a project's table, only when the user asks for it (`tune --llm-from-project`): the
//!    workspace's `[workspace.metadata.kfoundry.llm]`, or the one a bundle carries. A cloned
//!    workspace or a bundle from elsewhere is not the user's: by default its table is not
//!    read (a note says so), since it could point the tune, and the user's key, at any server;
//! 3. a file the user names on the command line (`tune --llm-config FILE`);
//! 4. the environment:
//!
//! | variable | overrides |
//! | --- | --- |
//! | `KFOUNDRY_LLM_URL` | `base_url` |
//! | `KFOUNDRY_LLM_MODEL` | `model` |
//! | the one named by `api_key_env` (default `KFOUNDRY_LLM_API_KEY`), else `OPENAI_API_KEY` | the API key |
//!
//! The API key comes from the environment only: a key written in any file is refused (it
//! would end up in version control), the key is never serialized, and `Debug` prints it as
//! `<redacted>`. Which variable holds it (`api_key_env`) only the user's own layers may say (a
//! project's table that names one is refused: it could make the tune send any secret of the
//! environment). A key is sent only over `https://`, or plain `http://` to a loopback address
//! ([`LlmConfig::check_transport`]). With no layer and no `KFOUNDRY_LLM_URL`,
//! [`LlmConfig::resolve`] returns `None` and kfoundry stays fully offline.

use std::collections::BTreeMap;
use std::fmt;

use kfoundry_tooling::toml_text::Place;
use serde::Serialize;
use serde_json::Value;

/// The environment variable read for the API key unless `api_key_env` names another.
pub(crate) const DEFAULT_KEY_ENV: &str = "KFOUNDRY_LLM_API_KEY";
/// Read for the API key when the configured variable is unset.
pub(crate) const FALLBACK_KEY_ENV: &str = "OPENAI_API_KEY";
/// Overrides `base_url`.
pub(crate) const URL_ENV: &str = "KFOUNDRY_LLM_URL";
/// Overrides `model`.
pub(crate) const MODEL_ENV: &str = "KFOUNDRY_LLM_MODEL";
/// Where a project's table lives, for messages.
pub(crate) const TABLE: &str = "[workspace.metadata.kfoundry.llm]";
/// The user's own configuration file, in the directory [`user_config_path`] finds.
pub(crate) const USER_FILE: &str = "llm.toml";
/// Overrides the directory of the user's configuration (tests, unusual setups).
pub(crate) const CONFIG_DIR_ENV: &str = "KFOUNDRY_CONFIG_DIR";

/// The user's own configuration file: `llm.toml` in `$KFOUNDRY_CONFIG_DIR`, else
/// `$XDG_CONFIG_HOME/kfoundry`, else `~/.config/kfoundry` (`None` without a home).
pub(crate) fn user_config_path(env: impl Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    let dir = match (env(CONFIG_DIR_ENV), env("XDG_CONFIG_HOME"), env("HOME")) {
        (Some(d), _, _) => std::path::PathBuf::from(d),
        (None, Some(x), _) => std::path::Path::new(&x).join("kfoundry"),
        (None, None, Some(h)) => std::path::Path::new(&h).join(".config").join("kfoundry"),
        (None, None, None) => return None,
    };
    Some(dir.join(USER_FILE))
}

/// Where a layer of settings came from: who wrote it decides what it may set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The user's own file (`user_config_path`).
    User(String),
    /// A file named on the command line (`--llm-config`).
    CommandLine(String),
    /// A project's table the user asked for (`--llm-from-project`): the workspace's manifest, or
    /// a bundle. It may not name the key's variable.
    Project(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::User(p) | Origin::CommandLine(p) => f.write_str(p),
            Origin::Project(what) => write!(f, "{TABLE} of {what}"),
        }
    }
}

/// One layer: a table of settings and where it came from.
pub struct Layer<'a> {
    pub table: &'a Value,
    pub origin: Origin,
    /// Where each key of a file's table is (its line and column, named in a mistake about
    /// it); empty for a table that is not a file of its own.
    pub places: BTreeMap<String, Place>,
}

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
    /// The endpoint came from a project's table, so no key is sent to it (a key found in the
    /// environment is withheld, and the plan says so).
    #[serde(skip)]
    pub key_withheld: bool,
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
            key_withheld: false,
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

    /// Reads the settings from `layers` (in order, each overriding the one before) and `env`
    /// (a variable lookup, so that tests need not touch the process environment). `None`:
    /// nothing configured, or a layer says `enabled = false`.
    pub fn resolve(
        layers: &[Layer],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<LlmConfig>, ConfigError> {
        let env_url = env(URL_ENV);
        let tables: Vec<(&serde_json::Map<String, Value>, &Layer)> = layers
            .iter()
            .filter_map(|l| match l.table {
                Value::Null => None,
                Value::Object(map) => Some(Ok((map, l))),
                other => Some(Err(ConfigError::NotATable {
                    origin: l.origin.to_string(),
                    found: kind_of(other).to_string(),
                })),
            })
            .collect::<Result<_, _>>()?;
        if tables.is_empty() && env_url.is_none() {
            return Ok(None);
        }
        let mut config = LlmConfig::new(String::new(), String::new());
        let mut url_from_project = false;
        for (map, layer) in tables {
            let origin = &layer.origin;
            for (key, value) in map {
                let at = |e: ConfigError| e.at(origin, layer.places.get(key));
                match key.as_str() {
                    "enabled" => {
                        if !value
                            .as_bool()
                            .ok_or_else(|| at(wrong(key, "true or false", value)))?
                        {
                            return Ok(None);
                        }
                    }
                    "base_url" | "url" => {
                        config.base_url = string(key, value).map_err(at)?;
                        url_from_project = matches!(origin, Origin::Project(_));
                    }
                    "model" => config.model = string(key, value).map_err(at)?,
                    "api_key_env" if matches!(origin, Origin::Project(_)) => {
                        return Err(ConfigError::KeyVariableFromProject {
                            origin: origin.to_string(),
                        });
                    }
                    "api_key_env" => config.api_key_env = string(key, value).map_err(at)?,
                    "timeout_secs" => config.timeout_secs = positive(key, value).map_err(at)?,
                    "max_retries" => {
                        config.max_retries =
                            narrow(key, unsigned(key, value).map_err(at)?).map_err(at)?
                    }
                    "max_requests" => {
                        config.max_requests =
                            narrow(key, positive(key, value).map_err(at)?).map_err(at)?
                    }
                    "max_tokens" => config.max_tokens = positive(key, value).map_err(at)?,
                    "max_completion_tokens" => {
                        config.max_completion_tokens = positive(key, value).map_err(at)?
                    }
                    "temperature" => {
                        let t = value
                            .as_f64()
                            .ok_or_else(|| at(wrong(key, "a number", value)))?;
                        if !(0.0..=2.0).contains(&t) {
                            return Err(at(ConfigError::OutOfRange {
                                key: key.clone(),
                                allowed: "0 to 2".into(),
                                value: t.to_string(),
                            }));
                        }
                        config.temperature = t;
                    }
                    "every" => {
                        config.every = narrow(key, positive(key, value).map_err(at)?).map_err(at)?
                    }
                    "meta_every" => {
                        config.meta_every =
                            narrow(key, positive(key, value).map_err(at)?).map_err(at)?
                    }
                    "population" => {
                        config.population =
                            narrow(key, positive(key, value).map_err(at)?).map_err(at)?
                    }
                    "api_key" | "key" | "token" => {
                        return Err(at(ConfigError::KeyInFile {
                            key: key.clone(),
                            env: config.api_key_env.clone(),
                        }));
                    }
                    _ => return Err(at(ConfigError::UnknownKey { key: key.clone() })),
                }
            }
        }
        if let Some(url) = env_url {
            config.base_url = url;
            url_from_project = false;
        }
        if let Some(model) = env(MODEL_ENV) {
            config.model = model;
        }
        config.base_url = config.base_url.trim().trim_end_matches('/').to_string();
        if config.base_url.is_empty() {
            return Err(ConfigError::Missing {
                what: "base_url",
                env: URL_ENV,
            });
        }
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://"))
            || host_of(&config.base_url).is_none()
        {
            return Err(ConfigError::BadUrl {
                url: config.base_url,
            });
        }
        if config.model.trim().is_empty() {
            return Err(ConfigError::Missing {
                what: "model",
                env: MODEL_ENV,
            });
        }
        config.api_key = env(&config.api_key_env)
            .or_else(|| env(FALLBACK_KEY_ENV))
            .map(ApiKey);
        // An endpoint only a project named gets no key: the project could name any server.
        if url_from_project && config.api_key.is_some() {
            config.api_key = None;
            config.key_withheld = true;
        }
        config.check_transport()?;
        Ok(Some(config))
    }

    /// A key travels only encrypted, or to this machine: `https://`, or `http://` to a
    /// loopback address (`localhost`, `127.0.0.0/8`, `::1`).
    pub fn check_transport(&self) -> Result<(), ConfigError> {
        if self.api_key.is_some()
            && self.base_url.starts_with("http://")
            && !is_loopback(&self.base_url)
        {
            return Err(ConfigError::KeyOverPlainHttp {
                host: host_of(&self.base_url).unwrap_or_default(),
                env: self.api_key_env.clone(),
            });
        }
        Ok(())
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }
}

/// A mistake in a layer of settings or the environment; each names the key and where it is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("{origin}: the language model's settings must be a table, found {found}")]
    NotATable { origin: String, found: String },
    #[error("unknown key `{key}` (known: enabled, base_url, model, api_key_env, timeout_secs, max_retries, max_requests, max_tokens, max_completion_tokens, temperature, every, meta_every, population)")]
    UnknownKey { key: String },
    #[error("{key}: expected {expected}, found {found}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: String,
    },
    #[error("{key}: {value} is out of range ({allowed})")]
    OutOfRange {
        key: String,
        allowed: String,
        value: String,
    },
    #[error("{key}: the API key is never read from a file (it would be committed); set the environment variable {env} instead")]
    KeyInFile { key: String, env: String },
    #[error("{origin} names the variable the API key is read from (`api_key_env`): only your own configuration may (the file `llm.toml` in your kfoundry configuration directory, or `--llm-config FILE`), since a project's table could have the tune send any secret of your environment")]
    KeyVariableFromProject { origin: String },
    #[error("the language model is configured without `{what}`: set it in the configuration or the environment variable {env}")]
    Missing {
        what: &'static str,
        env: &'static str,
    },
    #[error("base_url (or {URL_ENV}): `{url}` is not an http:// or https:// URL with a host (e.g. http://127.0.0.1:8000/v1)")]
    BadUrl { url: String },
    #[error("the API key (from {env}) would travel unencrypted to `{host}` over plain http://: use https://, or a server on this machine (127.0.0.1, localhost, ::1); unset the key for a server that needs none")]
    KeyOverPlainHttp { host: String, env: String },
    #[error("{origin}: {source}")]
    In {
        origin: String,
        source: Box<ConfigError>,
    },
}

impl ConfigError {
    /// The error, said to be in `origin` (at `place` of its file, when known).
    fn at(self, origin: &Origin, place: Option<&Place>) -> ConfigError {
        ConfigError::In {
            origin: match place {
                Some(place) => format!("{origin}:{place}"),
                None => origin.to_string(),
            },
            source: Box::new(self),
        }
    }
}

/// The host of an `http(s)://` URL, lower-cased; `None` when it has none or carries a user
/// name (`http://127.0.0.1@evil.example/`, which is not the host it seems).
pub(crate) fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.contains('@') || authority.is_empty() {
        return None;
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Whether the URL's host is this machine: `localhost`, an IPv4 address in 127.0.0.0/8, or
/// `::1` (`127.0.0.1.example.com` is not).
pub(crate) fn is_loopback(url: &str) -> bool {
    match host_of(url) {
        Some(h) if h == "localhost" => true,
        Some(h) => h
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
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
    ConfigError::WrongType {
        key: key.to_string(),
        expected,
        found: kind_of(value).to_string(),
    }
}

fn string(key: &str, value: &Value) -> Result<String, ConfigError> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| wrong(key, "a string", value))
}

fn unsigned(key: &str, value: &Value) -> Result<u64, ConfigError> {
    value
        .as_u64()
        .ok_or_else(|| wrong(key, "a non-negative integer", value))
}

fn positive(key: &str, value: &Value) -> Result<u64, ConfigError> {
    match unsigned(key, value)? {
        0 => Err(ConfigError::OutOfRange {
            key: key.to_string(),
            allowed: "at least 1".into(),
            value: "0".into(),
        }),
        n => Ok(n),
    }
}

fn narrow<T: TryFrom<u64>>(key: &str, n: u64) -> Result<T, ConfigError> {
    T::try_from(n).map_err(|_| ConfigError::OutOfRange {
        key: key.to_string(),
        allowed: "a smaller number".into(),
        value: n.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn user(table: &Value) -> Vec<Layer<'_>> {
        vec![Layer {
            table,
            origin: Origin::User("~/.config/kfoundry/llm.toml".into()),
            places: BTreeMap::new(),
        }]
    }

    fn project(table: &Value) -> Vec<Layer<'_>> {
        vec![Layer {
            table,
            origin: Origin::Project("the workspace's Cargo.toml".into()),
            places: BTreeMap::new(),
        }]
    }

    #[test]
    fn nothing_configured_is_offline() {
        assert_eq!(LlmConfig::resolve(&[], env(&[])).unwrap(), None);
        assert_eq!(
            LlmConfig::resolve(&user(&Value::Null), env(&[("OPENAI_API_KEY", "k")])).unwrap(),
            None
        );
        let off = json!({"enabled": false, "base_url": "http://x/v1", "model": "m"});
        assert_eq!(LlmConfig::resolve(&user(&off), env(&[])).unwrap(), None);
    }

    #[test]
    fn layers_then_env_override() {
        let table = json!({
            "base_url": "http://127.0.0.1:8000/v1/", "model": "qwen", "timeout_secs": 30,
            "max_retries": 0, "max_requests": 5, "max_tokens": 1000, "temperature": 0.2,
            "every": 4, "meta_every": 3, "population": 5
        });
        let c = LlmConfig::resolve(&user(&table), env(&[]))
            .unwrap()
            .unwrap();
        assert_eq!(c.base_url, "http://127.0.0.1:8000/v1");
        assert_eq!(c.endpoint(), "http://127.0.0.1:8000/v1/chat/completions");
        assert_eq!(
            (
                c.model.as_str(),
                c.timeout_secs,
                c.max_retries,
                c.max_requests
            ),
            ("qwen", 30, 0, 5)
        );
        assert_eq!(
            (c.max_tokens, c.every, c.meta_every, c.population),
            (1000, 4, 3, 5)
        );
        assert_eq!(c.temperature, 0.2);
        assert_eq!(c.api_key, None);
        let e = env(&[(URL_ENV, "https://api.example/v1"), (MODEL_ENV, "big")]);
        let c = LlmConfig::resolve(&user(&table), e).unwrap().unwrap();
        assert_eq!(
            (c.base_url.as_str(), c.model.as_str()),
            ("https://api.example/v1", "big")
        );
        // a later layer overrides an earlier one, key by key
        let file = json!({"model": "other"});
        let layers = [
            Layer {
                table: &table,
                origin: Origin::User("u".into()),
                places: BTreeMap::new(),
            },
            Layer {
                table: &file,
                origin: Origin::CommandLine("f".into()),
                places: BTreeMap::new(),
            },
        ];
        let c = LlmConfig::resolve(&layers, env(&[])).unwrap().unwrap();
        assert_eq!((c.model.as_str(), c.max_requests), ("other", 5));
    }

    #[test]
    fn env_alone_configures() {
        let c = LlmConfig::resolve(&[], env(&[(URL_ENV, "http://h:1/v1"), (MODEL_ENV, "m")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.max_requests, LlmConfig::new("", "").max_requests);
        let err = LlmConfig::resolve(&[], env(&[(URL_ENV, "http://h:1/v1")])).unwrap_err();
        assert!(err.to_string().contains("KFOUNDRY_LLM_MODEL"), "{err}");
    }

    #[test]
    fn key_from_env_only_with_fallback() {
        let table = json!({"base_url": "https://h/v1", "model": "m"});
        let c = LlmConfig::resolve(&user(&table), env(&[(FALLBACK_KEY_ENV, "sk-fallback")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.api_key.as_ref().map(ApiKey::expose), Some("sk-fallback"));
        let both = env(&[
            (FALLBACK_KEY_ENV, "sk-fallback"),
            (DEFAULT_KEY_ENV, "sk-main"),
        ]);
        let c = LlmConfig::resolve(&user(&table), both).unwrap().unwrap();
        assert_eq!(c.api_key.as_ref().map(ApiKey::expose), Some("sk-main"));
        let named = json!({"base_url": "https://h/v1", "model": "m", "api_key_env": "MY_KEY"});
        let c = LlmConfig::resolve(
            &user(&named),
            env(&[("MY_KEY", "sk-mine"), (DEFAULT_KEY_ENV, "no")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.api_key.as_ref().map(ApiKey::expose), Some("sk-mine"));
        let in_file = json!({"base_url": "https://h/v1", "model": "m", "api_key": "sk-secret"});
        let err = LlmConfig::resolve(&user(&in_file), env(&[])).unwrap_err();
        assert!(
            matches!(err, ConfigError::In { ref source, .. } if matches!(**source, ConfigError::KeyInFile { .. })),
            "{err:?}"
        );
        assert!(!err.to_string().contains("sk-secret"));
    }

    /// A cloned workspace's or a bundle's table, even when the user asks for it, never chooses
    /// which secret of the environment is sent.
    #[test]
    fn a_project_never_names_the_key_variable() {
        let evil = json!({"base_url": "https://collector.example/v1", "model": "m", "api_key_env": "AWS_SECRET_ACCESS_KEY"});
        let err = LlmConfig::resolve(
            &project(&evil),
            env(&[("AWS_SECRET_ACCESS_KEY", "aws-secret")]),
        )
        .unwrap_err();
        assert!(
            matches!(err, ConfigError::KeyVariableFromProject { .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains(TABLE) && !err.to_string().contains("aws-secret"),
            "{err}"
        );
        // without it, the project's endpoint gets no key at all...
        let plain = json!({"base_url": "https://h.example/v1", "model": "m"});
        let c = LlmConfig::resolve(&project(&plain), env(&[(DEFAULT_KEY_ENV, "sk")]))
            .unwrap()
            .unwrap();
        assert!(c.api_key.is_none() && c.key_withheld, "{c:?}");
        // ...unless the user names the endpoint themselves (here in the environment)
        let c = LlmConfig::resolve(
            &project(&plain),
            env(&[(DEFAULT_KEY_ENV, "sk"), (URL_ENV, "https://h.example/v1")]),
        )
        .unwrap()
        .unwrap();
        assert!(c.api_key.is_some() && !c.key_withheld);
    }

    #[test]
    fn a_key_never_travels_over_plain_http_to_another_host() {
        let remote = json!({"base_url": "http://collector.example:8080/v1", "model": "m"});
        let err =
            LlmConfig::resolve(&user(&remote), env(&[(DEFAULT_KEY_ENV, "sk-1")])).unwrap_err();
        assert!(
            matches!(err, ConfigError::KeyOverPlainHttp { ref host, .. } if host == "collector.example"),
            "{err}"
        );
        assert!(!err.to_string().contains("sk-1"));
        // keyless: fine; loopback or https with a key: fine
        assert!(LlmConfig::resolve(&user(&remote), env(&[]))
            .unwrap()
            .is_some());
        for url in [
            "http://127.0.0.1:8000/v1",
            "http://localhost/v1",
            "http://[::1]:9/v1",
            "https://collector.example/v1",
        ] {
            let t = json!({"base_url": url, "model": "m"});
            assert!(
                LlmConfig::resolve(&user(&t), env(&[(DEFAULT_KEY_ENV, "sk")])).is_ok(),
                "{url}"
            );
        }
        // not loopback, whatever they look like
        for url in [
            "http://127.0.0.1.example.com/v1",
            "http://127.0.0.1@collector.example/v1",
            "http://0x7f000001/v1",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
        let t = json!({"base_url": "http://127.0.0.1@collector.example/v1", "model": "m"});
        assert!(matches!(
            LlmConfig::resolve(&user(&t), env(&[])),
            Err(ConfigError::BadUrl { .. })
        ));
    }

    #[test]
    fn key_never_printed_nor_serialized() {
        let table = json!({"base_url": "http://h/v1", "model": "m"});
        let mut c = LlmConfig::resolve(&user(&table), env(&[]))
            .unwrap()
            .unwrap();
        c.api_key = Some(ApiKey::new("sk-topsecret"));
        assert!(!format!("{c:?}").contains("sk-topsecret"));
        assert!(format!("{c:?}").contains("<redacted>"));
        let json = serde_json::to_string(&c).unwrap();
        assert!(
            !json.contains("sk-topsecret") && !json.contains("api_key\""),
            "{json}"
        );
    }

    #[test]
    fn mistakes_are_named_with_where_they_are() {
        let cases = [
            (
                json!({"base_url": "http://h/v1", "model": "m", "timeout": 3}),
                "unknown key `timeout`",
            ),
            (
                json!({"base_url": "http://h/v1", "model": "m", "every": 0}),
                "every: 0 is out of range",
            ),
            (
                json!({"base_url": "http://h/v1", "model": "m", "temperature": 3.5}),
                "temperature: 3.5",
            ),
            (
                json!({"base_url": "http://h/v1", "model": 7}),
                "model: expected a string, found a number",
            ),
            (json!([1]), "must be a table"),
        ];
        for (table, needle) in cases {
            let err = LlmConfig::resolve(&project(&table), env(&[]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err} lacks {needle}");
            assert!(err.contains("workspace.metadata.kfoundry.llm"), "{err}");
        }
        let err = LlmConfig::resolve(
            &user(&json!({"base_url": "127.0.0.1:8000/v1", "model": "m"})),
            env(&[]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("not an http:// or https:// URL"), "{err}");
        let err = LlmConfig::resolve(&user(&json!({"model": "m"})), env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("without `base_url`"), "{err}");
        // a file's mistake at its line and column
        let text = "base_url = \"http://h/v1\"\nmodel = \"m\"\n\nevery = 0\n";
        let table = serde_json::to_value(toml::from_str::<toml::Value>(text).unwrap()).unwrap();
        let layers = [Layer {
            table: &table,
            origin: Origin::CommandLine("conf/llm.toml".into()),
            places: kfoundry_tooling::toml_text::key_places(text),
        }];
        let err = LlmConfig::resolve(&layers, env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("conf/llm.toml:4:9: every: 0"), "{err}");
    }

    #[test]
    fn the_users_file_is_found_where_the_environment_says() {
        assert_eq!(
            user_config_path(env(&[(CONFIG_DIR_ENV, "/c")])),
            Some("/c/llm.toml".into())
        );
        assert_eq!(
            user_config_path(env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
            Some("/x/kfoundry/llm.toml".into())
        );
        assert_eq!(
            user_config_path(env(&[("HOME", "/h")])),
            Some("/h/.config/kfoundry/llm.toml".into())
        );
        assert_eq!(user_config_path(env(&[])), None);
    }
}
