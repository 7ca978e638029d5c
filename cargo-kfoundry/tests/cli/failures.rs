//! A tune that meets trouble says what and keeps what it can: no OpenCL at all, an unwritable
//! lockfile (refused before any search), one kernel failing among others (the rest recorded,
//! exit status 3).

use std::process::Command;
use std::time::{Duration, Instant};

use kfoundry_tooling::lockfile::Lockfile;

use crate::common;

use common::bundle;

const GOOD: &str = r#"__kernel void copy(const int n, __global const float* x, __global float* y) {
    int i = get_global_id(0) * U;
    for (int u = 0; u < U; u++) y[i + u] = 2.0f * x[i + u];
}"#;

/// A reference that writes past the end of its output: it cannot be trusted, so nothing can
/// be verified against it.
const BROKEN: &str = r#"__kernel void copy(const int n, __global const float* x, __global float* y) {
    int i = get_global_id(0) * U;
    for (int u = 0; u < U; u++) y[i + u + 1] = 2.0f * x[i + u];
}"#;

fn good_args() -> String {
    format!(
        r#"code = {GOOD:?}, params(U = [1, 2, 4]), reference(U = 1), global = n / U, local = 16, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    )
}

fn kfoundry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
}

#[test]
fn without_opencl_the_error_is_immediate_and_says_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle::write(dir.path(), "b.json", "Good", &good_args());
    for args in [
        vec!["devices"],
        vec![
            "tune",
            "--bundle",
            bundle.to_str().unwrap(),
            "--lockfile",
            dir.path().join("K.lock").to_str().unwrap(),
        ],
    ] {
        let started = Instant::now();
        // an ICD loader that finds no driver
        let out = kfoundry()
            .args(&args)
            .env("OCL_ICD_VENDORS", dir.path())
            .output()
            .unwrap();
        // A guard against a hang (waiting on a driver that is not there), not a timing test.
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{args:?} took {:?}",
            started.elapsed()
        );
        assert!(!out.status.success());
        assert_eq!(
            out.status.code(),
            Some(5),
            "an environment error has its own exit status"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("no OpenCL device found: install an OpenCL driver")
                && stderr.contains("pocl-opencl-icd"),
            "{stderr}"
        );
    }
}

#[cfg(unix)]
#[test]
fn an_unwritable_lockfile_is_refused_before_any_search() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle::write(dir.path(), "b.json", "Good", &good_args());
    let lock = dir.path().join("Kfoundry.lock");
    std::fs::write(&lock, Lockfile::default().to_toml().unwrap()).unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = kfoundry()
        .args(["tune", "--bundle"])
        .arg(&bundle)
        .arg("--lockfile")
        .arg(&lock)
        .args(["--message-format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("read-only") && stderr.contains("nothing was tuned"),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("\"evaluation\""),
        "nothing was evaluated"
    );
}

/// A short tune of `bundle` into `lock`, JSON messages on standard output.
fn tune_json(bundle: &std::path::Path, lock: &std::path::Path) -> std::process::Output {
    kfoundry()
        .args(["tune", "--bundle"])
        .arg(bundle)
        .arg("--lockfile")
        .arg(lock)
        .args([
            "--budget-evals",
            "3",
            "--repeats",
            "1",
            "--message-format",
            "json",
        ])
        .output()
        .unwrap()
}

#[test]
fn a_kernel_that_fails_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let broken = format!(
        r#"code = {BROKEN:?}, params(U = [1, 2]), reference(U = 1), global = n / U, local = 16, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    );
    let bundle = bundle::write_many(
        dir.path(),
        "b.json",
        &[("Broken", &broken), ("Good", &good_args())],
    );
    let lock = dir.path().join("Kfoundry.lock");
    let out = tune_json(&bundle, &lock);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a partly failed tune exits with 3:\n{stderr}"
    );
    assert!(
        stderr.contains("`test::Broken`") && stderr.contains("writes past the end of `y`"),
        "{stderr}"
    );
    assert!(stderr.contains("1 of 2 tune(s) failed"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("\"reason\":\"failed\"") && l.contains("test::Broken")),
        "{stdout}"
    );
    let lock = Lockfile::read(&lock)
        .unwrap()
        .expect("the good kernel is recorded");
    assert!(
        lock.kernels.contains_key("test::Good") && !lock.kernels.contains_key("test::Broken"),
        "{:?}",
        lock.kernels.keys()
    );
}

/// A reference that does not compile is reported before any search, at its own source's line
/// (not the compiler's temporary file), and the other kernels are tuned and recorded.
#[test]
fn a_reference_that_does_not_build_is_reported_before_any_search_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let source = "__kernel void copy(const int n, __global const float* x, __global float* y) {\n    int i = get_global_id(0) * U;\n    y[i] = x[i] + undefined_thing;\n}";
    let broken = format!(
        r#"code = {source:?}, params(U = [1, 2]), reference(U = 1), global = n / U, local = 16, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    );
    // The good kernel first: the broken one's error must not wait for its tune.
    let bundle = bundle::write_many(
        dir.path(),
        "b.json",
        &[("Good", &good_args()), ("Uncompilable", &broken)],
    );
    let lock = dir.path().join("Kfoundry.lock");
    let out = tune_json(&bundle, &lock);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("`test::Uncompilable`: the reference does not build"),
        "{stderr}"
    );
    assert!(
        stderr.contains("inline:1 (inline `code`):3:") && !stderr.contains("tempfile_"),
        "the error points into the source: {stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let failed = lines
        .iter()
        .position(|l| l.contains("\"reason\":\"failed\"") && l.contains("test::Uncompilable"))
        .expect("a failed message");
    let first_evaluation = lines
        .iter()
        .position(|l| l.contains("\"reason\":\"evaluation\""))
        .expect("the good kernel is tuned");
    assert!(
        failed < first_evaluation,
        "reported before any search:\n{stdout}"
    );
    let lock = Lockfile::read(&lock)
        .unwrap()
        .expect("the good kernel is recorded");
    assert!(
        lock.kernels.contains_key("test::Good"),
        "{:?}",
        lock.kernels.keys()
    );
}
