//! Source-level evolution end to end on the local OpenCL device (PoCL in CI), against a local
//! OpenAI-compatible server with scripted answers: the real client, the real search, the real
//! worker. A correct faster rewrite wins, is stored beside the lockfile and dispatched from the
//! embedded form; every bad answer is rejected with its reason; the meta-prompt population
//! evolves; the tune is interrupted and resumed without asking or evaluating anything twice;
//! the API key appears in no file.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use kfoundry_tooling::generated;
use kfoundry_tooling::lockfile::Lockfile;

use crate::common;

use common::bundle;
use common::mock_llm::{MockLlm, MockResponse};

/// A deliberately slow reference: a loop that adds zeros.
const REFERENCE: &str = r#"
__kernel void scale(const int n, __global const float* x, __global float* y) {
    int i = get_global_id(0);
    float zero = 0.0f;
    for (int k = 0; k < 512; k++) zero += x[(i + k) % n] * 0.0f;
    y[i] = 3.0f * x[i] + zero;
}
"#;

const KEY: &str = "sk-test-never-written-anywhere";

fn kernel(body: &str) -> String {
    format!(
        "```c\n__kernel void scale(const int n, __global const float* x, __global float* y) {{\n    int i = get_global_id(0);\n    {body}\n}}\n```"
    )
}

fn tune(
    bundle: &std::path::Path,
    lock: &std::path::Path,
    config: &std::path::Path,
    extra: &[&str],
) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .args([
            "tune",
            "--budget-evals",
            "10",
            "--repeats",
            "1",
            "--seed",
            "3",
            "--message-format",
            "json",
            "--bundle",
        ])
        .arg(bundle)
        .arg("--lockfile")
        .arg(lock)
        .arg("--llm-config")
        .arg(config)
        .args(extra)
        .env("KFOUNDRY_LLM_API_KEY", KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cargo-kfoundry")
}

#[test]
fn rewrites_are_verified_and_the_good_one_wins_and_is_embedded() {
    let good = kernel("y[i] = 3.0f * x[i];");
    let meta = "## Optimisation philosophy\nremove redundant work first\n## Strategies\ndelete loops that compute nothing\n## Pitfalls\nchanging the signature\n## Analysis guidance\ncompare with the roofline\n";
    let server = MockLlm::start(vec![
        // 1. correct and faster
        MockResponse::completion(&format!("The loop adds zeros; drop it.\n{good}")),
        // 2. does not compile
        MockResponse::completion(&kernel("y[i] = 3.0f * x[i] +;")),
        // 3. changes the signature (x no longer const)
        MockResponse::completion(
            "```c\n__kernel void scale(const int n, __global float* x, __global float* y) { y[get_global_id(0)] = 3.0f * x[get_global_id(0)]; }\n```",
        ),
        // (three samples: the meta-request that rewrites a prompt comes next)
        MockResponse::completion(meta),
        // 4. wrong
        MockResponse::completion(&kernel("y[i] = 2.0f * x[i];")),
        // 5. malformed JSON
        MockResponse::status(200, "{not json"),
        // 6. 429, then a correct answer after the retry
        MockResponse::error(429, "slow down").header("Retry-After", "0"),
        MockResponse::completion(&kernel("y[i] = x[i] + x[i] + x[i];")),
        // (three more samples: another meta-request, answered with the same sections: a
        // duplicate, dropped)
        MockResponse::completion(meta),
        // 7. no answer within the time limit, twice (one retry)
        MockResponse::completion(&good).delayed(Duration::from_secs(3)),
        MockResponse::completion(&good).delayed(Duration::from_secs(3)),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let args = format!(
        r#"code = {REFERENCE:?}, params(WG = [16, 32, 64]), reference(WG = 16), global = n, local = WG,
           buffers(x = n, y = n), check(y), edges = finite, workloads(w(n = 65536))"#
    );
    // (`edges = finite`: the reference's loop multiplies by zero, which an infinity turns
    // into NaN; the rewrites that drop the loop are right for finite inputs only.)
    let bundle = bundle::write(dir.path(), "bundle.json", "Scale", &args);
    let lock = dir.path().join("Kfoundry.lock");
    let config = dir.path().join("llm.toml");
    std::fs::write(
        &config,
        format!("base_url = \"{}\"\nmodel = \"test-model\"\nevery = 2\nmeta_every = 3\nmax_retries = 1\ntimeout_secs = 1\n", server.base_url()),
    )
    .unwrap();

    // Run 1, stopped with SIGTERM after the second mutation.
    let mut child = tune(&bundle, &lock, &config, &[]);
    let mut records = Vec::new();
    let mut tuned = Vec::new();
    let stdout = child.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["reason"] == "language-model" {
            records.push(v["turn"].clone());
            if records.len() == 2 {
                Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status()
                    .unwrap();
            }
        }
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let first_run = records.len();

    // Run 2: resumes, finishes.
    let child = tune(&bundle, &lock, &config, &["--resume"]);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        match v["reason"].as_str() {
            Some("language-model") => records.push(v["turn"].clone()),
            Some("tuned") => tuned.push(v["result"].clone()),
            _ => {}
        }
    }
    assert!(
        first_run >= 2 && records.len() == 7,
        "{first_run} then {} mutations: {records:#?}",
        records.len()
    );
    let outcome = |i: usize| {
        (
            records[i]["outcome"].as_str().unwrap().to_string(),
            records[i]["detail"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(outcome(0).0, "accepted", "{:?}", outcome(0));
    assert_eq!(outcome(1).0, "build", "{:?}", outcome(1));
    assert!(
        outcome(1).1.contains("error"),
        "the build log is kept: {:?}",
        outcome(1)
    );
    assert_eq!(outcome(2).0, "rejected");
    assert!(
        outcome(2).1.contains("`x`"),
        "names the changed argument: {:?}",
        outcome(2)
    );
    assert_eq!(outcome(3).0, "wrong", "{:?}", outcome(3));
    assert_eq!(outcome(4).0, "rejected");
    assert!(
        outcome(4).1.to_lowercase().contains("json"),
        "{:?}",
        outcome(4)
    );
    assert_eq!(outcome(5).0, "accepted", "after a 429: {:?}", outcome(5));
    assert_eq!(outcome(6).0, "rejected");
    assert!(
        outcome(6).1.contains("did not answer within"),
        "{:?}",
        outcome(6)
    );
    // Every scripted answer was asked for exactly once: nothing was asked twice across the
    // interruption (the 429 and the timeout were retried by the client, as they should be).
    assert_eq!(server.remaining(), 0);
    assert_eq!(
        server.requests().len(),
        11,
        "7 mutations, 2 meta-requests, 2 retries"
    );

    // The good rewrite wins (the slow loop is gone) and the population evolved.
    assert_eq!(tuned.len(), 1);
    let result = &tuned[0];
    let source = result["generated_source"]
        .as_str()
        .expect("a source-level winner");
    assert!(!source.contains("for (int k"), "{source}");
    assert_eq!(result["llm"]["meta_requests"], 2);
    assert_eq!(
        result["llm"]["prompt_variants"], 4,
        "three seed prompts and one rewritten by a meta-request (the second was a duplicate)"
    );
    assert_eq!(result["llm"]["mutations"], 7);

    // Stored beside the lockfile, referenced by hash, and it verifies.
    let l = Lockfile::read(&lock).unwrap().unwrap();
    let v = &l.kernels["test::Scale"].variants[0];
    let hash = v
        .source
        .clone()
        .expect("the variant references its generated source");
    let (path, text) = generated::read_verified(&lock, "test::Scale", &hash).unwrap();
    assert_eq!(text, source);
    assert!(path.starts_with(dir.path().join("kfoundry")));

    // Embedded as the macro embeds it, dispatched on this device, and correct.
    let spec = bundle::spec(&args, dir.path(), "Scale");
    let kfoundry_tooling::embed::Embedded { variants, sources } =
        kfoundry_tooling::embed::embeddable(&lock, &l, &spec).unwrap();
    assert_eq!(sources.len(), 1);
    let map: std::collections::BTreeMap<&str, &str> = sources
        .iter()
        .map(|s| (s.hash.as_str(), s.text.as_str()))
        .collect();
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let evolved = kfoundry_rt::Evolved::with_sources(
        leak(serde_json::to_string(&spec).unwrap()),
        leak(serde_json::to_string(&variants).unwrap()),
        leak(serde_json::to_string(&map).unwrap()),
    );
    let (platform, device) = kfoundry_rt::list_devices().unwrap()[0];
    let context = kfoundry_rt::ocl::Context::builder()
        .platform(platform)
        .devices(device)
        .build()
        .unwrap();
    let queue = kfoundry_rt::ocl::Queue::new(&context, device, None).unwrap();
    let n = 65536usize;
    let xs: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25 - 12.0).collect();
    let x = kfoundry_rt::ocl::Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(n)
        .copy_host_slice(&xs)
        .build()
        .unwrap();
    let y = kfoundry_rt::ocl::Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(n)
        .build()
        .unwrap();
    let choice = evolved.explain(&device, &[("n", n)]).unwrap();
    assert_eq!(choice.variant, Some(0), "{choice}");
    evolved
        .launch(
            &queue,
            &[("n", n)],
            &[
                kfoundry_rt::Arg::Buffer(x.as_core()),
                kfoundry_rt::Arg::Buffer(y.as_core()),
            ],
        )
        .unwrap();
    let mut ys = vec![0.0f32; n];
    y.read(&mut ys).enq().unwrap();
    assert!(xs.iter().zip(&ys).all(|(x, y)| *y == 3.0 * x));

    // The key went to the server, and nowhere else.
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    for entry in common::walk(dir.path()) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "{} holds the key",
            entry.display()
        );
    }
}
