//! Crash-safe tuning on the local OpenCL device (PoCL in CI):
//! - a tune killed with SIGKILL, resumed, stopped with SIGTERM, resumed again: no
//!   configuration is evaluated twice, the lockfile is never torn and keeps what was there;
//! - two tunes writing one lockfile at once (while a third party holds its lock) both wait,
//!   then both kernels' entries survive.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kfoundry_tooling::lockfile::Lockfile;

use crate::common;

use common::bundle;

const SOURCE: &str = r#"
__kernel void scale(const int n, __global const float* x, __global float* y) {
    int i = get_global_id(0) * U;
    for (int u = 0; u < U; u++) y[i + u] = 2.0f * x[i + u] + (float)(A - A);
}
"#;

/// 4 × 4 × 4 = 64 configurations, so a budget of 14 leaves the search plenty to choose from.
fn kernel_bundle(dir: &Path, file: &str, item: &str) -> PathBuf {
    let args = format!(
        r#"code = {SOURCE:?}, params(WG = [8, 16, 32, 64], U = [1, 2, 4, 8], A = [0, 1, 2, 3]),
           reference(WG = 8, U = 1, A = 0), require(n % (WG * U) == 0),
           global = n / U, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 8192))"#
    );
    bundle::write(dir, file, item, &args)
}

/// A running tune whose JSON messages arrive on a channel; its stderr so far can be read while
/// it runs.
struct Tune {
    child: Child,
    lines: mpsc::Receiver<serde_json::Value>,
    stderr: std::thread::JoinHandle<String>,
    stderr_so_far: std::sync::Arc<std::sync::Mutex<String>>,
}

fn start(bundle: &Path, lock: &Path, budget: usize, extra: &[&str]) -> Tune {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .args(["tune", "--bundle"])
        .arg(bundle)
        .arg("--lockfile")
        .arg(lock)
        .args([
            "--budget-evals",
            &budget.to_string(),
            "--repeats",
            "1",
            "--seed",
            "7",
            "--message-format",
            "json",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cargo-kfoundry");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let v: serde_json::Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    let stderr_so_far = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let so_far = stderr_so_far.clone();
    let stderr = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut all = so_far.lock().unwrap();
            all.push_str(&line);
            all.push('\n');
        }
        let all = so_far.lock().unwrap().clone();
        all
    });
    Tune {
        child,
        lines,
        stderr,
        stderr_so_far,
    }
}

/// Polls until `what` holds or `within` has passed; whether it held.
fn eventually(within: Duration, mut what: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if what() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Seconds of CPU time process `pid` has used (user + system, from /proc), 0 when it is gone.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces) start after its `)`.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the `)`; 100 ticks a
    // second on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

type Config = (i64, i64, i64);

fn config(v: &serde_json::Value) -> Config {
    let p = &v["params"];
    (
        p["WG"].as_i64().expect("WG"),
        p["U"].as_i64().expect("U"),
        p["A"].as_i64().expect("A"),
    )
}

/// Collects evaluation messages until `n` arrived (then sends `signal`) or the tune ends.
fn evaluations_until(tune: &mut Tune, n: Option<usize>, signal: &str) -> Vec<Config> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline {
        match tune.lines.recv_timeout(Duration::from_secs(1)) {
            Ok(v) if v["reason"] == "evaluation" => {
                seen.push(config(&v));
                if n.is_some_and(|n| seen.len() >= n) {
                    let status = Command::new("kill")
                        .args([signal, &tune.child.id().to_string()])
                        .status()
                        .expect("kill");
                    assert!(status.success());
                    break;
                }
            }
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // Whatever was printed before the signal took effect counts too.
    while let Ok(v) = tune.lines.recv_timeout(Duration::from_secs(30)) {
        if v["reason"] == "evaluation" {
            seen.push(config(&v));
        }
    }
    seen
}

/// The workers of tuner `pid` still alive once none is, or `within` has passed (a poll, not a
/// fixed sleep: a worker that notices its tuner's death may take a moment to exit).
fn workers_left(pid: u32, within: Duration) -> Vec<u32> {
    let mut left = Vec::new();
    eventually(within, || {
        left = live_workers(pid);
        left.is_empty()
    });
    left
}

/// Live processes (not zombies) started as workers by the tuner `pid` (read from /proc).
fn live_workers(pid: u32) -> Vec<u32> {
    let marker = format!("KFOUNDRY_TUNER_PID={pid}\0");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|p| {
            let environ = std::fs::read(format!("/proc/{p}/environ")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            String::from_utf8_lossy(&environ).contains(&marker) && !stat.contains(") Z ")
        })
        .collect()
}

fn finish(tune: Tune) -> (std::process::ExitStatus, String) {
    let mut tune = tune;
    let status = tune.child.wait().expect("wait");
    (status, tune.stderr.join().expect("stderr thread"))
}

#[test]
fn killed_and_interrupted_tunes_resume_without_evaluating_anything_twice() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("Kfoundry.lock");
    // A lockfile with another kernel's entry already in it: it must survive everything below.
    let other = kernel_bundle(dir.path(), "other.json", "Other");
    let (status, stderr) = finish(start(&other, &lock, 2, &[]));
    assert!(status.success(), "{stderr}");
    let before = std::fs::read_to_string(&lock).unwrap();

    const BUDGET: usize = 14;
    let bundle = kernel_bundle(dir.path(), "bundle.json", "Scale");

    // 1. SIGKILL after 4 evaluations: no chance to clean up.
    let mut tune = start(&bundle, &lock, BUDGET, &[]);
    let tuner_pid = tune.child.id();
    let first = evaluations_until(&mut tune, Some(4), "-KILL");
    let (status, _) = finish(tune);
    assert!(!status.success());
    let left = workers_left(tuner_pid, Duration::from_secs(10));
    assert!(left.is_empty(), "a worker outlived its tuner: {left:?}");
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        before,
        "a killed tune leaves the lockfile as it was"
    );

    // 2. Resume; SIGTERM (what Ctrl-C does) after 4 more: partial results are written.
    let mut tune = start(&bundle, &lock, BUDGET, &["--resume"]);
    let second = evaluations_until(&mut tune, Some(4), "-TERM");
    let (status, stderr) = finish(tune);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("resuming after"), "{stderr}");
    assert!(
        stderr.contains("--resume"),
        "says how to continue: {stderr}"
    );
    let partial = Lockfile::read(&lock).unwrap().expect("lockfile");
    assert!(partial.kernels.contains_key("test::Other"));
    assert!(
        partial.kernels.contains_key("test::Scale"),
        "Ctrl-C writes what was found"
    );

    // 3. Resume to the end.
    let mut tune = start(&bundle, &lock, BUDGET, &["--resume"]);
    let third = evaluations_until(&mut tune, None, "");
    let (status, stderr) = finish(tune);
    assert!(status.success(), "{stderr}");

    // Never the same configuration twice across the three runs. One evaluation may have
    // finished after the last checkpoint of run 1 (killed before it was saved): it is
    // evaluated again, so the runs together did BUDGET or BUDGET + 1 evaluations.
    let all: Vec<Config> = first.iter().chain(&second).chain(&third).copied().collect();
    let distinct: BTreeSet<Config> = all.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "a configuration was evaluated twice: {first:?} / {second:?} / {third:?}"
    );
    assert!(
        (BUDGET - 1..=BUDGET).contains(&all.len()),
        "{} evaluations reported: {first:?} / {second:?} / {third:?}",
        all.len()
    );

    let lock = Lockfile::read(&lock).unwrap().expect("lockfile");
    assert!(lock.kernels.contains_key("test::Other"));
    let scale = &lock.kernels["test::Scale"].variants;
    assert_eq!(scale.len(), 1);
    assert_eq!(scale[0].evaluations as usize, BUDGET);
    // A finished run removes its checkpoints.
    let checkpoints = dir.path().join("target/kfoundry/checkpoints");
    let left: Vec<_> = std::fs::read_dir(&checkpoints)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn concurrent_tunes_of_one_lockfile_keep_each_others_entries() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("Kfoundry.lock");
    let a = kernel_bundle(dir.path(), "a.json", "A");
    let b = kernel_bundle(dir.path(), "b.json", "B");
    // A third party holds the advisory lock (taken on the lockfile's directory, so that no lock
    // file is left in the workspace): both tuners must wait for it, and say so.
    let guard = std::fs::File::open(dir.path()).unwrap();
    guard.lock().unwrap();
    let state = |name: &str| dir.path().join(name);
    let ta = start(
        &a,
        &lock,
        3,
        &["--state-dir", state("sa").to_str().unwrap()],
    );
    let tb = start(
        &b,
        &lock,
        3,
        &["--state-dir", state("sb").to_str().unwrap()],
    );
    // Both finish their search and block on the lock; nothing is written meanwhile.
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut tuned = 0;
    let mut rx = [ta.lines, tb.lines];
    let so_far = [ta.stderr_so_far.clone(), tb.stderr_so_far.clone()];
    let mut done = [false, false];
    while tuned < 2 && Instant::now() < deadline {
        for (i, r) in rx.iter_mut().enumerate() {
            if let Ok(v) = r.recv_timeout(Duration::from_millis(200)) {
                if v["reason"] == "tuned" && !done[i] {
                    done[i] = true;
                    tuned += 1;
                }
            }
        }
    }
    assert_eq!(tuned, 2, "both tunes finished their search");
    // Both are blocked on the lock (they say so) and nothing was written meanwhile.
    let both_wait = eventually(Duration::from_secs(120), || {
        so_far
            .iter()
            .all(|s| s.lock().unwrap().contains("waiting for"))
    });
    assert!(both_wait, "both tunes wait for the lock");
    assert!(!lock.exists(), "nobody writes while the lock is held");
    guard.unlock().unwrap();
    let wait = |mut child: Child, stderr: std::thread::JoinHandle<String>| {
        let status = child.wait().unwrap();
        let text = stderr.join().unwrap();
        assert!(status.success(), "{text}");
        text
    };
    let ea = wait(ta.child, ta.stderr);
    let eb = wait(tb.child, tb.stderr);
    assert!(
        ea.contains("waiting for") && eb.contains("waiting for"),
        "{ea}\n{eb}"
    );
    let lock_text = Lockfile::read(&lock).unwrap().expect("lockfile");
    assert!(
        lock_text.kernels.contains_key("test::A") && lock_text.kernels.contains_key("test::B"),
        "{:?}",
        lock_text.kernels.keys()
    );
    // Nothing of the locking or the atomic writes is left beside the lockfile.
    let beside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
}

#[test]
fn a_worker_dies_with_its_tuner_even_mid_kernel() {
    // A reference that runs for minutes: the worker is inside the OpenCL driver when the tuner
    // is killed, so only the parent-death signal can end it promptly.
    const SLOW: &str = r#"
__kernel void slow(const int n, __global const float* x, __global float* y) {
    int i = get_global_id(0);
    float acc = 0.0f;
    for (int k = 0; k < (1 << 26); k++) acc = acc * 0.999f + x[(i + k) % n];
    y[i] = acc;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let args = format!(
        r#"code = {SLOW:?}, params(WG = [8, 16]), reference(WG = 8), global = n, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    );
    let bundle = bundle::write(dir.path(), "slow.json", "Slow", &args);
    let lock = dir.path().join("Kfoundry.lock");
    let mut tune = start(&bundle, &lock, 2, &[]);
    let pid = tune.child.id();
    // Wait until the worker is up (it then builds and runs the slow reference).
    let mut workers = Vec::new();
    eventually(Duration::from_secs(10), || {
        workers = live_workers(pid);
        !workers.is_empty()
    });
    assert!(!workers.is_empty(), "no worker started");
    // Killed once the worker is busy (building, then inside the slow reference).
    let worker = workers[0];
    assert!(
        eventually(Duration::from_secs(120), || cpu_seconds(worker) >= 1.0),
        "the worker never got to work"
    );
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    let _ = tune.child.wait();
    let left = workers_left(pid, Duration::from_secs(10));
    assert!(left.is_empty(), "the worker outlived its tuner: {left:?}");
}
