//! The real language-model client (and the mutator over it) against the scripted
//! OpenAI-compatible server of `common/mock_llm.rs`, on 127.0.0.1.
//!
//! Needs the `llm` feature (the HTTP client).

use crate::common;

use std::time::{Duration, Instant};

use common::mock_llm::{MockLlm, MockResponse};
use kfoundry_tune::llm::chat::{Chat, ChatError, Message};
use kfoundry_tune::llm::config::{ApiKey, LlmConfig};
use kfoundry_tune::llm::http::Client;
use kfoundry_tune::llm::mutator::{Feedback, Mutator, RefusalKind};
use kfoundry_tune::llm::prompt::{DeviceDescription, MutationContext};

const KEY: &str = "sk-test-very-secret-123";

fn config(server: &MockLlm) -> LlmConfig {
    let mut c = LlmConfig::new(server.base_url(), "mock-model");
    c.api_key = Some(ApiKey::new(KEY));
    c.max_retries = 2;
    c.timeout_secs = 5;
    c
}

fn client(config: &LlmConfig) -> Client {
    Client::new(config)
        .unwrap()
        .with_backoff(Duration::from_millis(5), Duration::from_millis(20))
}

fn ask(c: &mut Client) -> Result<String, ChatError> {
    c.complete(&[Message::system("be brief"), Message::user("hello")])
        .map(|r| r.content)
}

#[test]
fn success_is_parsed_and_counted() {
    let server = MockLlm::start(vec![MockResponse::completion("hi there")]);
    let mut c = client(&config(&server));
    let reply = c
        .complete(&[Message::system("s"), Message::user("u")])
        .unwrap();
    assert_eq!(reply.content, "hi there");
    assert_eq!(reply.usage.map(|u| u.total_tokens), Some(30));
    assert_eq!(
        (c.spent().requests, c.spent().tokens, c.spent().completions),
        (1, 30, 1)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    let body = r.json();
    assert_eq!(body["model"], "mock-model");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["content"], "u");
    assert_eq!(body["max_tokens"], 4096);
}

#[test]
fn too_many_requests_then_success_is_retried() {
    let server = MockLlm::start(vec![
        MockResponse::error(429, "rate limited").header("Retry-After", "0"),
        MockResponse::error(503, "busy"),
        MockResponse::completion("ok"),
    ]);
    let mut c = client(&config(&server));
    assert_eq!(ask(&mut c).unwrap(), "ok");
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        c.spent().requests,
        3,
        "every attempt counts against the cap"
    );
}

#[test]
fn server_errors_until_retries_run_out() {
    let server = MockLlm::start(vec![MockResponse::error(500, "boom"); 5]);
    let mut c = client(&config(&server));
    let err = ask(&mut c).unwrap_err();
    assert!(
        matches!(
            err,
            ChatError::Http {
                status: 500,
                attempts: 3,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("boom") && err.to_string().contains(&server.base_url()),
        "{err}"
    );
    assert!(!err.is_permanent());
    assert_eq!(server.requests().len(), 3, "1 attempt + max_retries 2");
}

#[test]
fn slow_answers_time_out() {
    let delay = Duration::from_secs(20);
    let slow = MockResponse::completion("late").delayed(delay);
    let server = MockLlm::start(vec![slow.clone(), slow]);
    let mut cfg = config(&server);
    cfg.max_retries = 1;
    let mut c = client(&cfg).with_timeout(Duration::from_millis(300));
    let start = Instant::now();
    let err = ask(&mut c).unwrap_err();
    assert!(
        matches!(err, ChatError::Timeout { attempts: 2, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("did not answer within 0.3 s"),
        "{err}"
    );
    // Both attempts given up long before the server would have answered either.
    assert!(start.elapsed() < delay / 2, "{:?}", start.elapsed());
}

#[test]
fn malformed_json_says_what_was_expected() {
    let server = MockLlm::start(vec![
        MockResponse::status(200, "<html>proxy error</html>"),
        MockResponse::status(200, r#"{"choices":[{"message":{"role":"assistant"}}]}"#),
    ]);
    let mut c = client(&config(&server));
    let err = ask(&mut c).unwrap_err().to_string();
    assert!(
        err.contains("expected a JSON object") && err.contains("<html>proxy error</html>"),
        "{err}"
    );
    let err = ask(&mut c).unwrap_err().to_string();
    assert!(
        err.contains("`choices[0].message.content` to be a string"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 2, "not retried");
}

#[test]
fn refused_key_never_prints_it() {
    let server = MockLlm::start(vec![MockResponse::error(
        401,
        &format!("Incorrect API key provided: {KEY}"),
    )]);
    let mut c = client(&config(&server));
    let err = ask(&mut c).unwrap_err();
    assert!(matches!(err, ChatError::KeyRefused { status: 401, .. }));
    assert!(err.is_permanent());
    let text = format!("{err} {err:?}");
    assert!(
        text.contains("KFOUNDRY_LLM_API_KEY") && !text.contains(KEY),
        "{text}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn unknown_model_is_named() {
    let server = MockLlm::start(vec![
        MockResponse::error(404, "The model `mock-model` does not exist."),
        MockResponse::status(404, "Not Found"),
        MockResponse::status(
            400,
            r#"{"error":"model \"mock-model\" not found, try pulling it first"}"#,
        ),
    ]);
    let mut c = client(&config(&server));
    let err = ask(&mut c).unwrap_err();
    assert!(
        matches!(err, ChatError::UnknownModel { status: 404, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("does not know the model `mock-model`"),
        "{err}"
    );
    let err = ask(&mut c).unwrap_err();
    assert!(matches!(err, ChatError::NotFound { .. }), "{err:?}");
    assert!(
        err.to_string().contains("`mock-model`")
            && err.to_string().contains("/v1/chat/completions"),
        "{err}"
    );
    let err = ask(&mut c).unwrap_err();
    assert!(
        matches!(err, ChatError::UnknownModel { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 3, "none retried");
}

#[test]
fn connection_refused_names_the_url() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let cfg = LlmConfig::new(format!("http://127.0.0.1:{port}/v1"), "m");
    let mut c = client(&cfg);
    let err = ask(&mut c).unwrap_err();
    assert!(matches!(err, ChatError::Connect { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains(&format!("http://127.0.0.1:{port}/v1/chat/completions")),
        "{err}"
    );
    assert!(err.is_permanent());
}

#[test]
fn request_and_token_caps() {
    let server = MockLlm::start(vec![MockResponse::completion("a"); 5]);
    let mut cfg = config(&server);
    cfg.max_requests = 2;
    let mut c = client(&cfg);
    ask(&mut c).unwrap();
    ask(&mut c).unwrap();
    let err = ask(&mut c).unwrap_err();
    assert!(
        matches!(
            err,
            ChatError::BudgetExhausted {
                what: "requests",
                used: 2,
                cap: 2
            }
        ),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 2, "refused without a request");

    let server = MockLlm::start(vec![MockResponse::completion("a"); 5]);
    let mut cfg = config(&server);
    cfg.max_tokens = 50;
    let mut c = client(&cfg);
    ask(&mut c).unwrap();
    ask(&mut c).unwrap();
    assert_eq!(
        server.requests()[1].json()["max_tokens"],
        20,
        "asks for no more than is left"
    );
    let err = ask(&mut c).unwrap_err();
    assert!(
        matches!(
            err,
            ChatError::BudgetExhausted {
                what: "tokens",
                used: 60,
                cap: 50
            }
        ),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 2);
}

const REFERENCE: &str =
    "__kernel void scale(const int n, __global const float* x, __global float* y) {\n    int i = get_global_id(0);\n    y[i] = 3.0f * x[i];\n}\n";

fn ctx() -> MutationContext {
    MutationContext {
        kernel: "scale".into(),
        reference_source: REFERENCE.into(),
        parent_source: REFERENCE.into(),
        parent_params: vec![("WG".into(), 64)],
        geometry: Some("global = n, local = WG".into()),
        device: DeviceDescription {
            vendor: "pocl".into(),
            name: "cpu".into(),
            kind: "cpu".into(),
            ..Default::default()
        },
        time: Some(2e-3),
        reference_time: Some(2e-3),
        roofline_fraction: Some(0.1),
        inspirations: vec![],
        hints: vec![],
    }
}

#[test]
fn key_sent_as_bearer_but_never_shown() {
    let rewrite = "```c\n__kernel void scale(const int n, __global const float* x, __global float* y) {\n    int i = get_global_id(0);\n    y[i] = x[i] * 3.0f;\n}\n```";
    let server = MockLlm::start(vec![MockResponse::completion(rewrite)]);
    let cfg = config(&server);
    let c = client(&cfg);
    assert!(!format!("{cfg:?} {c:?}").contains(KEY));
    assert!(!serde_json::to_string(&cfg).unwrap().contains(KEY));
    let mut m = Mutator::new(Box::new(c), &cfg, 1);
    let p = m.propose(&ctx()).unwrap();
    m.report(p.prompt_variant, Feedback::Accepted { score: 1.1 });
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let state = serde_json::to_string(&m.state()).unwrap();
    assert!(!state.contains(KEY) && !format!("{m:?}").contains(KEY));
}

#[test]
fn mutator_over_the_real_client() {
    let good = "Vectorised.\n```c\n// kfoundry-params: UNROLL=[1,2]\n__kernel void scale(const int n, __global const float* x, __global float* y) {\n    int i = get_global_id(0);\n    vstore4(3.0f * vload4(i, x), i, y);\n}\n```";
    let changed = "```c\n__kernel void scale(const int n, __global float* x, __global float* y) { y[0] = x[0]; }\n```";
    let edit = "<<<<<<< SEARCH\n    y[i] = 3.0f * x[i];\n=======\n    y[i] = x[i] + x[i] + x[i];\n>>>>>>> REPLACE\n";
    let meta = "## Optimisation philosophy\nmeasure first\n## Strategies\nvectorise everything possible\n## Pitfalls\nunaligned vloads\n## Analysis guidance\ncheck the roofline\n";
    let server = MockLlm::start(vec![
        MockResponse::completion(good),
        MockResponse::completion(changed),
        MockResponse::error(429, "slow down").header("Retry-After", "0"),
        MockResponse::completion(edit),
        MockResponse::completion(meta),
        MockResponse::status(200, "{not json"),
    ]);
    let mut cfg = config(&server);
    cfg.meta_every = 3;
    let mut m = Mutator::new(Box::new(client(&cfg)), &cfg, 7);

    let p = m.propose(&ctx()).unwrap();
    assert_eq!(p.declared_params[0].name, "UNROLL");
    m.report(p.prompt_variant, Feedback::Accepted { score: 1.9 });
    let r = m.propose(&ctx()).unwrap_err();
    assert_eq!(r.kind, RefusalKind::Invalid);
    assert!(r.reason.contains("argument 2 (`x`)"), "{}", r.reason);
    let p = m.propose(&ctx()).unwrap(); // after a 429
    assert!(p.source.contains("x[i] + x[i] + x[i]"));
    // The third sample makes a meta-request due: it runs on this report.
    let event = m.report(
        p.prompt_variant,
        Feedback::Wrong {
            summary: "y[5]: expected 1.5, got 1.4".into(),
        },
    );
    assert!(
        matches!(
            event,
            Some(kfoundry_tune::llm::mutator::MetaEvent::Added { .. })
        ),
        "{event:?}"
    );
    assert_eq!(m.population().variants().len(), 4);
    let r = m.propose(&ctx()).unwrap_err();
    assert_eq!(r.kind, RefusalKind::Chat { permanent: false });
    assert!(m.disabled().is_none());

    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    // Later prompts carry the failures.
    let last_prompt = requests[5].json()["messages"][1]["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        last_prompt.contains("argument 2 (`x`)") && last_prompt.contains("y[5]: expected 1.5"),
        "{last_prompt}"
    );

    // The state resumes: spending and population carry over.
    let state: kfoundry_tune::llm::mutator::MutatorState =
        serde_json::from_str(&serde_json::to_string(&m.state()).unwrap()).unwrap();
    let resumed = Mutator::resume(Box::new(client(&cfg)), state, &cfg).unwrap();
    assert_eq!(resumed.spent().requests, 6);
    assert_eq!(resumed.population(), m.population());
}

/// A server that answers with more than a response can be (a 4 GiB body filled the memory
/// before), lies about its token counts, or redirects elsewhere: each is an error, nothing is
/// read past the limit, nothing panics.
#[test]
fn hostile_servers_are_bounded() {
    let huge = "x".repeat((kfoundry_tune::llm::http::MAX_BODY_BYTES + 1024) as usize);
    let overflow = r#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":18446744073709551615}}"#;
    let server = MockLlm::start(vec![
        MockResponse::status(200, &huge),
        MockResponse::status(302, "").header("Location", "http://collector.example/steal"),
        MockResponse::status(200, overflow),
    ]);
    let mut cfg = config(&server);
    cfg.max_retries = 0;
    let mut c = client(&cfg);
    let e = ask(&mut c).unwrap_err().to_string();
    assert!(e.contains("at most 16 MiB"), "{e}");
    let e = ask(&mut c).unwrap_err().to_string();
    assert!(e.contains("redirect"), "{e}");
    assert_eq!(
        ask(&mut c).unwrap(),
        "hi",
        "token counts that overflow saturate"
    );
    assert_eq!(c.spent().tokens, u64::MAX);
    assert_eq!(server.requests().len(), 3, "the redirect was not followed");
}
