//! Deliberately bad candidates on the local OpenCL device (PoCL in CI): each is rejected with
//! the right reason, the tuner survives them all, and the tune ends with a correct winner.

use std::process::Command;

use kfoundry_tooling::lockfile::Lockfile;

use crate::common;

use common::bundle;

/// One parameter picks the misbehaviour; BAD = 0 is the correct reference.
const SOURCE: &str = r#"
__kernel void scale(const int n, __global const float* x, __global float* y) {
    int i = get_global_id(0);
#if BAD == 1
    while (x[0] < 1e30f) { y[i] = x[i]; }        /* never ends: x is in [-1, 1) */
#elif BAD == 2
    y[i + (1 << 28)] = x[i];                       /* writes 1 GiB past the end */
#elif BAD == 3
    ((__global volatile int*)0)[i] = 1;             /* null pointer: crashes the process */
#elif BAD == 4
    y[i] = 42.0f;                                   /* constants, whatever the input */
#elif BAD == 5
    if (i % 2 == 0) y[i] = 3.0f * x[i];             /* leaves odd elements unwritten */
#elif BAD == 6
    y[i] = n == 4096 ? 3.0f * x[i] : 0.0f;          /* right only at the tuned size */
#else
    float zero = 0.0f;                              /* a slow reference, so that BAD = 6 */
    for (int k = 0; k < 256; k++)                   /* is the fastest candidate and must */
        zero += x[(i + k) % n] * 0.0f;              /* be caught by probing other sizes  */
    y[i] = 3.0f * x[i] + zero;
#endif
}
"#;

fn bundle(dir: &std::path::Path) -> std::path::PathBuf {
    let args = format!(
        r#"code = {SOURCE:?}, params(BAD = [0, 1, 2, 3, 4, 5, 6]), reference(BAD = 0),
           global = n, local = 64, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    );
    bundle::write(dir, "bundle.json", "Bad", &args)
}

#[test]
fn bad_candidates_are_contained_and_rejected_with_their_reason() {
    bad_candidates_in_batches_of(1);
}

/// Proposed in batches of 4, the worker builds the bad candidates ahead of their evaluation;
/// a crash or a hang still fails only the candidate that caused it.
#[test]
fn bad_candidates_built_ahead_are_contained_too() {
    bad_candidates_in_batches_of(4);
}

fn bad_candidates_in_batches_of(batch: usize) {
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle(dir.path());
    let lock = dir.path().join("Kfoundry.lock");
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .args(["tune", "--bundle"])
        .arg(&bundle)
        .arg("--lockfile")
        .arg(&lock)
        .args([
            "--budget-evals",
            "7",
            "--candidate-timeout",
            "10",
            "--repeats",
            "1",
            "--message-format",
            "json",
        ])
        .args(["--set", &format!("batch={batch}")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tune failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // One evaluation message per candidate, with its outcome.
    let mut outcome = std::collections::BTreeMap::new();
    let mut probe_rejections = Vec::new();
    let mut tuned = serde_json::Value::Null;
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["reason"] == "evaluation" {
            outcome.insert(v["params"]["BAD"].as_i64().unwrap(), v["outcome"].clone());
        }
        if v["reason"] == "rejected" && v["stage"] == "probe" {
            probe_rejections.push((
                v["params"]["BAD"].as_i64().unwrap(),
                v["why"].as_str().unwrap().to_string(),
            ));
        }
        if v["reason"] == "tuned" {
            tuned = v["result"].clone();
        }
    }
    let failed = |bad: i64| -> (String, String) {
        let o = &outcome[&bad]["Failed"];
        assert!(
            o.is_object(),
            "BAD={bad} should have failed: {}",
            outcome[&bad]
        );
        (
            o["kind"].as_str().unwrap().to_string(),
            o["reason"].as_str().unwrap().to_string(),
        )
    };
    assert!(
        outcome[&0]["Ok"].is_object(),
        "the reference passes: {}",
        outcome[&0]
    );
    assert_eq!(failed(1).0, "Timeout", "{:?}", failed(1));
    let (kind, reason) = failed(2);
    // Depending on where the write lands, the driver crashes, hangs or corrupts the output.
    assert!(
        ["Runtime", "Wrong", "Timeout"].contains(&kind.as_str()),
        "out-of-bounds write: {kind} {reason}"
    );
    // A fault in a kernel either kills the worker or (PoCL 3.1 here) leaves it hung inside the
    // driver: either way it is contained and the worker replaced.
    let (kind, reason) = failed(3);
    assert!(
        kind == "Runtime" && reason.contains("died")
            || kind == "Timeout" && reason.contains("killed"),
        "{kind} {reason}"
    );
    let (kind, reason) = failed(4);
    assert_eq!(kind, "Wrong", "{reason}");
    let (kind, reason) = failed(5);
    assert_eq!(kind, "Wrong", "{reason}");
    assert!(
        reason.contains("NaN"),
        "unwritten elements stay poisoned: {reason}"
    );

    // Right at the tuned size, so it passes the search; caught by probing other sizes.
    assert!(
        outcome[&6]["Ok"].is_object(),
        "BAD=6 is right at n = 4096: {}",
        outcome[&6]
    );
    assert_eq!(probe_rejections.len(), 1, "{probe_rejections:?}");
    let (bad, why) = &probe_rejections[0];
    assert_eq!(*bad, 6);
    assert!(why.starts_with("Wrong at sizes n="), "{why}");
    // The report gives the winner's output errors, the rejections and where the failures are logged.
    assert_eq!(tuned["params"]["BAD"], 0);
    assert_eq!(tuned["rel_error_norm"].as_f64(), Some(0.0), "{tuned}");
    assert_eq!(tuned["probe_rejections"].as_array().map(Vec::len), Some(1));
    let log =
        std::fs::read_to_string(tuned["failure_log"].as_str().expect("a failure log")).unwrap();
    for bad in 1..=5 {
        assert!(
            log.contains(&format!("BAD={bad}:")),
            "failure log lists BAD={bad}:\n{log}"
        );
    }

    // The winner is the correct kernel.
    let lock = Lockfile::read(&lock).unwrap().unwrap();
    // (and where it has a floor, its general variant: correct too)
    let variants = &lock.kernels["test::Bad"].variants;
    assert_eq!(variants.iter().filter(|v| !v.general).count(), 1);
    assert!(
        variants.iter().all(|v| v.params["BAD"] == 0),
        "{variants:?}"
    );
}
