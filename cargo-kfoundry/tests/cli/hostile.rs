//! Kernels written to cheat the verifier, tuned over 20 seeds on the local OpenCL device (PoCL
//! in CI): none may ever win. Each is faster than the reference (whose slow loop makes cheating
//! attractive) and each is wrong in a way that a weaker verifier misses:
//!
//! | BAD | how it cheats | what catches it |
//! | --- | --- | --- |
//! | 1 | reads a `__local` tile that only work-group 0 fills | local memory scrubbed before each candidate run; on PoCL, verification also with the work-groups numbered in reverse |
//! | 2 | right only at the tuned size | probes at smaller and larger sizes |
//! | 3 | writes one element past the end of `y` | the guard zone after every buffer |
//! | 4 | reads past the end of `x` (times zero) | the guard zone (NaN) after every buffer |
//! | 5 | wrong above the tuned size | probes at larger sizes |
//! | 6 | ignores the tail when `n` is not a multiple of 256 | probes at sizes as unaligned as the constraints allow |
//! | 7 | writes constants | the reference's outputs must react to the inputs; fresh inputs |
//! | 8 | leaves odd elements unwritten | outputs poisoned before every run |
//! | 9 | writes 1 GiB past the end of `y` | crash contained in the worker, or the guard / comparison |
//!
//! The two bad kernels of `bad_kernels.rs` that never produce a time at all (an infinite loop
//! and a null-pointer write, which PoCL answers by hanging) cannot win by construction; that
//! test shows they are contained. They are left out here, where each would cost a time-out per
//! seed.
//!
//! `cargo test -p cargo-kfoundry --test cli hostile:: -- --nocapture` prints the tally.

use std::collections::BTreeMap;
use std::process::Command;

use kfoundry_tooling::lockfile::Lockfile;

use crate::cheats::{escape_args, hostile_args};
use crate::common;

use common::bundle;

const SEEDS: u64 = 20;

#[test]
fn kernels_written_to_cheat_never_win() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle::write(dir.path(), "hostile.json", "Hostile", &hostile_args());
    // per BAD value: (times it passed the search, times it was rejected by probing or
    // re-measuring, times it shipped)
    let mut passed_search: BTreeMap<i64, usize> = BTreeMap::new();
    let mut rejected_later: BTreeMap<i64, usize> = BTreeMap::new();
    let mut shipped: BTreeMap<i64, usize> = BTreeMap::new();
    let mut failed_in_search: BTreeMap<i64, usize> = BTreeMap::new();
    let mut crashes = 0;
    for seed in 0..SEEDS {
        let lock = dir.path().join(format!("Kfoundry-{seed}.lock"));
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
            .args(["tune", "--bundle"])
            .arg(&bundle)
            .arg("--lockfile")
            .arg(&lock)
            .arg("--state-dir")
            .arg(dir.path().join(format!("state-{seed}")))
            .args([
                "--budget-evals",
                "10",
                "--repeats",
                "1",
                "--candidate-timeout",
                "5",
                "--seed",
                &seed.to_string(),
                "--message-format",
                "json",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            crashes += 1;
            eprintln!(
                "seed {seed}: the tune failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        }
        for line in stdout.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let bad = || v["params"]["BAD"].as_i64().unwrap();
            match v["reason"].as_str() {
                Some("evaluation") if v["outcome"]["Ok"].is_object() => {
                    *passed_search.entry(bad()).or_default() += 1
                }
                Some("evaluation") => *failed_in_search.entry(bad()).or_default() += 1,
                Some("rejected") => *rejected_later.entry(bad()).or_default() += 1,
                _ => {}
            }
        }
        let lock = Lockfile::read(&lock).unwrap().expect("a lockfile");
        let winner = lock.kernels["test::Hostile"].variants[0].params["BAD"];
        *shipped.entry(winner).or_default() += 1;
    }
    let cheaters = 1..=9;
    let tried: usize = cheaters
        .clone()
        .map(|b| passed_search.get(&b).unwrap_or(&0) + failed_in_search.get(&b).unwrap_or(&0))
        .sum();
    let rejected_in_search: usize = cheaters
        .clone()
        .map(|b| failed_in_search.get(&b).copied().unwrap_or(0))
        .sum();
    let rejected_when_proven: usize = cheaters
        .clone()
        .map(|b| rejected_later.get(&b).copied().unwrap_or(0))
        .sum();
    let shipped_wrong: usize = cheaters
        .clone()
        .map(|b| shipped.get(&b).copied().unwrap_or(0))
        .sum();
    eprintln!("hostile kernels over {SEEDS} seeds (per BAD value: failed in the search / passed the search / rejected when proven / shipped)");
    for b in cheaters.clone() {
        let g = |m: &BTreeMap<i64, usize>| m.get(&b).copied().unwrap_or(0);
        eprintln!(
            "  BAD={b}: {} / {} / {} / {}",
            g(&failed_in_search),
            g(&passed_search),
            g(&rejected_later),
            g(&shipped)
        );
    }
    let passed: usize = cheaters
        .clone()
        .map(|b| passed_search.get(&b).copied().unwrap_or(0))
        .sum();
    eprintln!(
        "tried {tried}, rejected correctly {} (in the search {rejected_in_search}, when proven {rejected_when_proven}, not a finalist {}), shipped wrong {shipped_wrong}, tunes that failed or panicked {crashes}",
        tried - shipped_wrong,
        passed - rejected_when_proven - shipped_wrong
    );
    assert_eq!(crashes, 0, "every tune finishes");
    assert_eq!(shipped_wrong, 0, "a cheating kernel won: {shipped:?}");
    assert_eq!(shipped.get(&0), Some(&(SEEDS as usize)));
}

#[test]
fn kernels_that_escape_their_buffers_or_the_diagonal_never_win() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle::write(dir.path(), "escape.json", "Escape", &escape_args());
    for seed in 0..3u64 {
        let lock = dir.path().join(format!("Kfoundry-{seed}.lock"));
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
            .args(["tune", "--bundle"])
            .arg(&bundle)
            .arg("--lockfile")
            .arg(&lock)
            .arg("--state-dir")
            .arg(dir.path().join(format!("state-{seed}")))
            .args([
                "--budget-evals",
                "4",
                "--repeats",
                "1",
                "--seed",
                &seed.to_string(),
                "--message-format",
                "json",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let reason = |bad: i64, reason: &str| {
            stdout.lines().find_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["reason"] == reason && v["params"]["BAD"] == bad).then(|| v.to_string())
            })
        };
        let failed = |bad: i64| {
            reason(bad, "evaluation")
                .filter(|v| v.contains("\"Failed\""))
                .unwrap_or_default()
        };
        assert!(
            failed(1).contains("writes past the end of `y`"),
            "seed {seed}: {}",
            failed(1)
        );
        assert!(
            failed(2).contains("writes before the start of `y`"),
            "seed {seed}: {}",
            failed(2)
        );
        // right at the (square) tuned shape, so it passes the search; rejected when each size
        // is varied alone
        let probe = reason(3, "rejected")
            .filter(|v| v.contains("\"stage\":\"probe\""))
            .unwrap_or_default();
        assert!(
            probe.contains("Wrong at sizes") && probe.contains("cols=") && probe.contains("rows="),
            "seed {seed}: {probe}"
        );
        let lock = Lockfile::read(&lock).unwrap().expect("a lockfile");
        assert_eq!(
            lock.kernels["test::Escape"].variants[0].params["BAD"], 0,
            "seed {seed}"
        );
    }
}
