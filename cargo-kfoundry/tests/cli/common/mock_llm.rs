//! A scripted OpenAI-compatible server for tests: no model can be reached from CI, so tests
//! start this on 127.0.0.1 (an ephemeral port) and point the real client at it.
//!
//! Each request gets the next scripted [`MockResponse`] (status, body, extra headers, an
//! optional delay before answering); when the script is empty it answers 500. Requests are
//! recorded ([`RecordedRequest`]) for assertions. HTTP/1.1 is parsed minimally: request line,
//! headers, a `Content-Length` body; every answer closes its connection. The server stops
//! when the [`MockLlm`] is dropped.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct MockResponse {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(String, String)>,
    pub delay: Duration,
}

impl MockResponse {
    /// A chat completion whose message is `content`, with usage 10 + 20 = 30 tokens.
    pub fn completion(content: &str) -> MockResponse {
        MockResponse::completion_with_usage(content, 10, 20)
    }

    pub fn completion_with_usage(
        content: &str,
        prompt_tokens: u64,
        completion_tokens: u64,
    ) -> MockResponse {
        let body = serde_json::json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "model": "mock",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens
            }
        });
        MockResponse::status(200, &body.to_string())
    }

    /// Any status with a raw body.
    pub fn status(status: u16, body: &str) -> MockResponse {
        MockResponse {
            status,
            body: body.to_string(),
            headers: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    /// An OpenAI-style error body.
    pub fn error(status: u16, message: &str) -> MockResponse {
        let body =
            serde_json::json!({"error": {"message": message, "type": "invalid_request_error"}});
        MockResponse::status(status, &body.to_string())
    }

    pub fn header(mut self, name: &str, value: &str) -> MockResponse {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn delayed(mut self, delay: Duration) -> MockResponse {
        self.delay = delay;
        self
    }
}

/// A request as received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

struct Shared {
    script: Mutex<VecDeque<MockResponse>>,
    requests: Mutex<Vec<RecordedRequest>>,
}

/// The running server.
pub struct MockLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MockLlm {
    /// Starts a server on 127.0.0.1 that answers with `script`, in order.
    pub fn start(script: Vec<MockResponse>) -> MockLlm {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let shared = shared.clone();
                    // One thread per connection, so that a delayed answer does not hold up
                    // the client's retry on a new connection.
                    std::thread::spawn(move || serve(stream, &shared));
                }
            })
        };
        MockLlm {
            addr,
            shared,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT/v1`, what `base_url` should be.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Appends to the script.
    pub fn push(&self, response: MockResponse) {
        self.shared
            .script
            .lock()
            .expect("script lock")
            .push_back(response);
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().expect("requests lock").clone()
    }

    /// Scripted answers not used yet.
    pub fn remaining(&self) -> usize {
        self.shared.script.lock().expect("script lock").len()
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    shared.requests.lock().expect("requests lock").push(request);
    let response = shared
        .script
        .lock()
        .expect("script lock")
        .pop_front()
        .unwrap_or_else(|| MockResponse::error(500, "mock: no scripted response left"));
    if !response.delay.is_zero() {
        std::thread::sleep(response.delay);
    }
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        response.status,
        reason(response.status),
        response.body.len()
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    // The client may have given up (timeout tests): write errors are expected then.
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(response.body.as_bytes());
    let _ = stream.flush();
}

fn read_request(stream: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 || buf.len() > 1 << 20 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split_whitespace();
    let (method, path) = (
        request_line.next()?.to_string(),
        request_line.next()?.to_string(),
    );
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some(RecordedRequest {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
