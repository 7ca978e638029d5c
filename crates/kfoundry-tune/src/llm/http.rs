//! The blocking HTTP client of an OpenAI-compatible chat-completions API (reqwest with
//! rustls): the [`Chat`] implementation behind the language-model operator. Compiled with
//! the cargo feature `llm` (on by default); see [`super::chat`] for what it promises.

use std::time::Duration;

use serde_json::{json, Value};

use super::chat::{Chat, ChatError, Message, Reply, Spent, TokenUsage};
use super::config::{is_loopback, ApiKey, LlmConfig};

/// The blocking HTTP client.
pub struct Client {
    http: reqwest::blocking::Client,
    url: String,
    model: String,
    key: Option<ApiKey>,
    key_env: String,
    timeout: Duration,
    temperature: f64,
    max_retries: u32,
    max_requests: u32,
    max_tokens: u64,
    max_completion_tokens: u64,
    backoff_base: Duration,
    backoff_max: Duration,
    spent: Spent,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("key", &self.key)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("spent", &self.spent)
            .finish_non_exhaustive()
    }
}

/// Longest server text quoted in an error.
const EXCERPT_CHARS: usize = 300;
/// Longest response body read: a chat completion of the largest `max_completion_tokens` is a
/// few megabytes; a server that sends more is refused before it fills the memory.
pub const MAX_BODY_BYTES: u64 = 16 << 20;
/// Longest `Retry-After` honoured.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);

impl Client {
    pub fn new(config: &LlmConfig) -> Result<Client, ChatError> {
        let url = config.endpoint();
        config.check_transport().map_err(|e| ChatError::Setup {
            url: url.clone(),
            detail: e.to_string(),
        })?;
        // Redirects are not followed: an OpenAI-compatible API answers where it is asked, and a
        // redirect could take the request (and its key) to another host or to plain http.
        let mut builder = reqwest::blocking::Client::builder()
            .timeout(None::<Duration>)
            .redirect(reqwest::redirect::Policy::none());
        if is_loopback(&config.base_url) {
            // A local server is never behind the environment's proxy.
            builder = builder.no_proxy();
        }
        let http = builder.build().map_err(|e| ChatError::Setup {
            url: url.clone(),
            detail: e.to_string(),
        })?;
        Ok(Client {
            http,
            url,
            model: config.model.clone(),
            key: config.api_key.clone(),
            key_env: config.api_key_env.clone(),
            timeout: Duration::from_secs(config.timeout_secs),
            temperature: config.temperature,
            max_retries: config.max_retries,
            max_requests: config.max_requests,
            max_tokens: config.max_tokens,
            max_completion_tokens: config.max_completion_tokens,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(30),
            spent: Spent::default(),
        })
    }

    /// Replaces the per-request time limit (tests use sub-second ones).
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// Replaces the back-off schedule: `base`, doubling per retry, at most `max`.
    pub fn with_backoff(mut self, base: Duration, max: Duration) -> Client {
        self.backoff_base = base;
        self.backoff_max = max;
        self
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn check_budget(&self) -> Result<(), ChatError> {
        if self.spent.requests >= self.max_requests {
            return Err(ChatError::BudgetExhausted {
                what: "requests",
                used: u64::from(self.spent.requests),
                cap: u64::from(self.max_requests),
            });
        }
        if self.spent.tokens >= self.max_tokens {
            return Err(ChatError::BudgetExhausted {
                what: "tokens",
                used: self.spent.tokens,
                cap: self.max_tokens,
            });
        }
        Ok(())
    }

    fn body(&self, messages: &[Message]) -> Value {
        let left = self.max_tokens.saturating_sub(self.spent.tokens);
        json!({
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_completion_tokens.min(left).max(1),
            "stream": false,
        })
    }

    /// Quotes server text: cut short, the key masked.
    fn excerpt(&self, text: &str) -> String {
        let mut s: String = text.chars().take(EXCERPT_CHARS).collect();
        if text.chars().count() > EXCERPT_CHARS {
            s.push('…');
        }
        match &self.key {
            Some(key) if !key.expose().is_empty() => s.replace(key.expose(), "<redacted>"),
            _ => s,
        }
    }

    fn backoff(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .backoff_base
            .saturating_mul(1u32 << retry.min(16))
            .min(self.backoff_max);
        match retry_after {
            Some(ra) => exp.max(ra.min(RETRY_AFTER_MAX)),
            None => exp,
        }
    }

    /// One attempt: `Ok(Ok(reply))`, `Ok(Err(retryable))` to try again after the returned
    /// wait, or `Err(final)`.
    fn attempt(
        &mut self,
        body: &Value,
        attempts: u32,
    ) -> Result<Result<Reply, (ChatError, Option<Duration>)>, ChatError> {
        self.spent.requests = self.spent.requests.saturating_add(1);
        let mut request = self.http.post(&self.url).timeout(self.timeout).json(body);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key.expose());
        }
        let response = match request.send() {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Ok(Err((
                    ChatError::Timeout {
                        url: self.url.clone(),
                        secs: self.timeout.as_secs_f64(),
                        attempts,
                    },
                    None,
                )));
            }
            Err(e) => {
                return Err(ChatError::Connect {
                    url: self.url.clone(),
                    detail: error_chain(&e),
                })
            }
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let too_large = || ChatError::Malformed {
            url: self.url.clone(),
            expected: format!("a response body of at most {} MiB", MAX_BODY_BYTES >> 20),
            excerpt: "the server sent more; it was not read".into(),
        };
        if response
            .content_length()
            .is_some_and(|n| n > MAX_BODY_BYTES)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        let read = std::io::Read::read_to_end(
            &mut std::io::Read::take(response, MAX_BODY_BYTES + 1),
            &mut body,
        );
        let text = match read {
            Ok(_) if body.len() as u64 > MAX_BODY_BYTES => return Err(too_large()),
            Ok(_) => String::from_utf8_lossy(&body).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                return Ok(Err((
                    ChatError::Timeout {
                        url: self.url.clone(),
                        secs: self.timeout.as_secs_f64(),
                        attempts,
                    },
                    None,
                )));
            }
            Err(e) => {
                return Err(ChatError::Malformed {
                    url: self.url.clone(),
                    expected: "a complete response body".into(),
                    excerpt: error_chain(&e),
                });
            }
        };
        if (200..300).contains(&status) {
            return self.parse_success(&text).map(Ok);
        }
        let detail = self.excerpt(&error_message(&text));
        match status {
            300..=399 => Err(ChatError::Http {
                url: self.url.clone(),
                status,
                attempts,
                detail: "the server redirected the request; redirects are not followed (set base_url to where the API is)".into(),
            }),
            401 | 403 => Err(ChatError::KeyRefused { url: self.url.clone(), status, key_env: self.key_env.clone(), key_sent: self.key.is_some() }),
            _ if mentions_missing_model(&text) => Err(ChatError::UnknownModel { url: self.url.clone(), model: self.model.clone(), status, detail }),
            404 => Err(ChatError::NotFound { url: self.url.clone(), model: self.model.clone(), detail }),
            408 | 429 | 500..=599 => Ok(Err((ChatError::Http { url: self.url.clone(), status, attempts, detail }, retry_after))),
            _ => Err(ChatError::Http { url: self.url.clone(), status, attempts, detail }),
        }
    }

    fn parse_success(&mut self, text: &str) -> Result<Reply, ChatError> {
        let malformed = |expected: &str| ChatError::Malformed {
            url: self.url.clone(),
            expected: expected.to_string(),
            excerpt: self.excerpt(text),
        };
        let value: Value =
            serde_json::from_str(text).map_err(|_| malformed("a JSON object (chat completion)"))?;
        let choice = value
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| malformed("a non-empty `choices` array"))?;
        let content = choice
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("`choices[0].message.content` to be a string"))?
            .to_string();
        let usage = value.get("usage").filter(|u| u.is_object()).map(|u| {
            let field = |name: &str| u.get(name).and_then(Value::as_u64).unwrap_or(0);
            let (prompt, completion) = (field("prompt_tokens"), field("completion_tokens"));
            let total = match field("total_tokens") {
                0 => prompt.saturating_add(completion),
                t => t,
            };
            TokenUsage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: total,
            }
        });
        Ok(Reply { content, usage })
    }
}

impl Chat for Client {
    fn complete(&mut self, messages: &[Message]) -> Result<Reply, ChatError> {
        let body = self.body(messages);
        let mut attempts = 0u32;
        loop {
            self.check_budget()?;
            attempts += 1;
            match self.attempt(&body, attempts)? {
                Ok(reply) => {
                    let tokens = match reply.usage {
                        Some(u) if u.total_tokens > 0 => u.total_tokens,
                        _ => {
                            let chars: usize =
                                messages.iter().map(|m| m.content.len()).sum::<usize>()
                                    + reply.content.len();
                            (chars as u64).div_ceil(4)
                        }
                    };
                    self.spent.tokens = self.spent.tokens.saturating_add(tokens);
                    self.spent.completions = self.spent.completions.saturating_add(1);
                    return Ok(reply);
                }
                Err((error, retry_after)) => {
                    if attempts > self.max_retries {
                        return Err(error);
                    }
                    std::thread::sleep(self.backoff(attempts - 1, retry_after));
                }
            }
        }
    }

    fn spent(&self) -> Spent {
        self.spent
    }

    fn restore_spent(&mut self, spent: Spent) {
        self.spent = spent;
    }
}

/// The error's message with its causes ("error sending request: … : Connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// The `error.message` of an OpenAI-style error body, else the body.
fn error_message(body: &str) -> String {
    let value: Option<Value> = serde_json::from_str(body).ok();
    let message = value.as_ref().and_then(|v| {
        let e = v.get("error")?;
        e.get("message")
            .and_then(Value::as_str)
            .or_else(|| e.as_str())
            .map(str::to_string)
    });
    message.unwrap_or_else(|| body.trim().to_string())
}

/// Whether an error body says the model does not exist (OpenAI, vLLM: "The model `x` does
/// not exist"; Ollama: "model \"x\" not found"; `code: model_not_found`).
fn mentions_missing_model(body: &str) -> bool {
    let lower = body.to_lowercase();
    lower.contains("model_not_found")
        || (lower.contains("model")
            && (lower.contains("does not exist")
                || lower.contains("not found")
                || lower.contains("unknown model")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(key: Option<&str>) -> Client {
        let mut c = LlmConfig::new("http://127.0.0.1:9/v1", "m");
        c.api_key = key.map(ApiKey::new);
        Client::new(&c).unwrap()
    }

    #[test]
    fn loopback_detection() {
        assert!(is_loopback("http://127.0.0.1:8000/v1"));
        assert!(is_loopback("http://localhost/v1"));
        assert!(is_loopback("http://[::1]:8080/v1"));
        assert!(!is_loopback("https://api.openai.com/v1"));
    }

    #[test]
    fn missing_model_bodies() {
        assert!(mentions_missing_model(
            r#"{"error":{"message":"The model `x` does not exist.","code":404}}"#
        ));
        assert!(mentions_missing_model(
            r#"{"error":"model \"x\" not found, try pulling it first"}"#
        ));
        assert!(mentions_missing_model(
            r#"{"error":{"code":"model_not_found"}}"#
        ));
        assert!(!mentions_missing_model("Not Found"));
        assert_eq!(error_message(r#"{"error":{"message":"bad"}}"#), "bad");
        assert_eq!(error_message(r#"{"error":"worse"}"#), "worse");
        assert_eq!(error_message(" plain "), "plain");
    }

    #[test]
    fn backoff_doubles_capped_and_honours_retry_after() {
        let c = client(None).with_backoff(Duration::from_millis(100), Duration::from_millis(500));
        assert_eq!(c.backoff(0, None), Duration::from_millis(100));
        assert_eq!(c.backoff(1, None), Duration::from_millis(200));
        assert_eq!(c.backoff(5, None), Duration::from_millis(500));
        assert_eq!(
            c.backoff(0, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            c.backoff(0, Some(Duration::from_secs(600))),
            RETRY_AFTER_MAX
        );
    }

    #[test]
    fn request_body_and_caps() {
        let mut c = client(None);
        let body = c.body(&[Message::system("s"), Message::user("u")]);
        assert_eq!(body["model"], "m");
        assert_eq!(body["messages"][1]["role"], "user");
        assert_eq!(body["max_tokens"], 4096);
        c.spent.tokens = c.max_tokens - 10;
        assert_eq!(c.body(&[])["max_tokens"], 10);
        c.spent.tokens = c.max_tokens;
        assert!(matches!(
            c.complete(&[]),
            Err(ChatError::BudgetExhausted { what: "tokens", .. })
        ));
        c.spent = Spent {
            requests: c.max_requests,
            ..Spent::default()
        };
        let err = c.complete(&[]).unwrap_err();
        assert!(matches!(
            err,
            ChatError::BudgetExhausted {
                what: "requests",
                ..
            }
        ));
        assert!(err.is_permanent());
    }

    #[test]
    fn success_parsing() {
        let mut c = client(None);
        let ok = r#"{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        let reply = c.parse_success(ok).unwrap();
        assert_eq!(reply.content, "hi");
        assert_eq!(reply.usage.map(|u| u.total_tokens), Some(7));
        for (body, expected) in [
            ("not json", "a JSON object"),
            (r#"{"choices":[]}"#, "non-empty `choices`"),
            (
                r#"{"choices":[{"message":{"content":null}}]}"#,
                "choices[0].message.content",
            ),
        ] {
            let err = c.parse_success(body).unwrap_err().to_string();
            assert!(
                err.contains(expected) && err.contains("127.0.0.1:9"),
                "{err}"
            );
        }
    }

    #[test]
    fn debug_and_excerpts_hide_the_key() {
        let c = client(Some("sk-hidden-123"));
        assert!(!format!("{c:?}").contains("sk-hidden-123"));
        assert_eq!(c.excerpt("echo sk-hidden-123 back"), "echo <redacted> back");
        assert!(c.excerpt(&"x".repeat(1000)).chars().count() <= EXCERPT_CHARS + 1);
    }
}
