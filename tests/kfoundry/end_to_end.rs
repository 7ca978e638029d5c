//! The whole chain on the local OpenCL device (PoCL in CI): tune the examples into a temporary
//! copy of the workspace, check the lockfile, rebuild and run the examples program (which
//! checks every kernel against a CPU computation), then change the lockfile and a kernel source
//! and see the rebuild follow.

use std::path::Path;
use std::process::{Command, Output};

use crate::common;
use common::{cargo, host, repo, target_dir};

/// Copies what a build of the workspace needs (no target/, no lockfile of kfoundry's own).
fn copy_workspace(dst: &Path) {
    fn copy_dir(src: &Path, dst: &Path) {
        std::fs::create_dir_all(dst).unwrap();
        for entry in std::fs::read_dir(src).unwrap().flatten() {
            let name = entry.file_name();
            let name_str = name.to_string_lossy();
            if name_str == "target" || name_str.starts_with('.') || name_str == "Kfoundry.lock" {
                continue;
            }
            let path = entry.path();
            if path.is_dir() {
                copy_dir(&path, &dst.join(&name));
            } else {
                std::fs::copy(&path, dst.join(&name)).unwrap();
            }
        }
    }
    for f in ["Cargo.toml", "Cargo.lock"] {
        std::fs::copy(repo().join(f), dst.join(f)).unwrap();
    }
    for d in [
        "src",
        "book",
        "kfoundry-rt",
        "kfoundry-macros",
        "cargo-kfoundry",
        "crates",
        "examples",
    ] {
        copy_dir(&repo().join(d), &dst.join(d));
    }
}

fn kfoundry(ws: &Path, args: &[&str]) -> Output {
    Command::new(
        target_dir()
            .join(host())
            .join("debug")
            .join("cargo-kfoundry"),
    )
    .arg("kfoundry")
    .args(args)
    .arg("--manifest-path")
    .arg(ws.join("Cargo.toml"))
    .env("CARGO_TARGET_DIR", target_dir())
    .output()
    .expect("cargo-kfoundry runs")
}

/// Runs the examples program; returns its stdout (it exits non-zero on a wrong result).
fn run_examples(ws: &Path) -> String {
    let out = cargo(ws, &["run", "-q", "-p", "kfoundry-examples"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn line_of<'a>(stdout: &'a str, kernel: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{kernel}:")))
        .unwrap_or_else(|| panic!("no `{kernel}:` line in\n{stdout}"))
}

#[test]
fn tune_lock_embed_dispatch() {
    let _one = common::one_build_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    copy_workspace(ws);
    cargo(
        ws,
        &[
            "build",
            "-q",
            "-p",
            "cargo-kfoundry",
            "-p",
            "kfoundry-examples",
        ],
    );

    // Before any tune: no lockfile, every kernel runs its reference, and `check --locked` fails.
    let before = run_examples(ws);
    for kernel in ["saxpy", "row_sum", "sgemm"] {
        assert!(
            line_of(&before, kernel).contains(": reference ("),
            "{before}"
        );
    }
    let check = kfoundry(ws, &["check", "--locked"]);
    assert!(!check.status.success());
    assert_eq!(
        check.status.code(),
        Some(4),
        "`check --locked` drift has its own exit status"
    );
    assert!(String::from_utf8_lossy(&check.stdout).contains("no Kfoundry.lock"));

    // Tune the three example kernels (not the suite's) with a small seeded budget at the small
    // workloads, one tuner run each: each run adds its kernel to the lockfile.
    for id in [
        "kfoundry-examples::Saxpy",
        "kfoundry-examples::RowSum",
        "kfoundry-examples::Sgemm",
    ] {
        let tune = kfoundry(
            ws,
            &[
                "tune",
                "--kernel",
                id,
                "--workload",
                "small",
                "--budget-evals",
                "6",
                "--seed",
                "7",
                "--repeats",
                "3",
                "-q",
            ],
        );
        let stdout = String::from_utf8_lossy(&tune.stdout);
        assert!(
            tune.status.success(),
            "tune failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&tune.stderr)
        );
        assert!(stdout.contains(id), "{stdout}");
    }

    // The lockfile has entries for this device.
    let (_, device) = kfoundry::default_device().unwrap();
    let key = kfoundry::device_key(&device).unwrap().to_string();
    let lock_path = ws.join("Kfoundry.lock");
    let lock = kfoundry_tooling::lockfile::Lockfile::read(&lock_path)
        .unwrap()
        .expect("a lockfile");
    assert!(
        lock.devices.contains_key(&key),
        "device {key} missing from {:?}",
        lock.devices.keys()
    );
    for entry in lock.kernels.values() {
        assert!(
            entry
                .variants
                .iter()
                .any(|v| v.device == key && v.workload == "small"),
            "{entry:?}"
        );
    }
    assert_eq!(lock.kernels.len(), 3);

    // The first build after the first tune embeds the variants: the tuned one is dispatched
    // and the program's CPU check passes.
    // (The program checks every result against the CPU and fails otherwise.)
    let after = run_examples(ws);
    for kernel in ["saxpy", "row_sum", "sgemm"] {
        assert!(
            line_of(&after, kernel).contains(": exact device ("),
            "{after}"
        );
    }

    // Editing the lockfile rebuilds the crate with the new variant.
    let text = std::fs::read_to_string(&lock_path).unwrap();
    let mut edited: kfoundry_tooling::lockfile::Lockfile =
        kfoundry_tooling::lockfile::Lockfile::parse(&text, &lock_path).unwrap();
    for v in &mut edited
        .kernels
        .get_mut("kfoundry-examples::Saxpy")
        .unwrap()
        .variants
    {
        v.params = [("WG", 32), ("VEC", 2), ("ITEMS", 3), ("STRIDED", 1)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    }
    edited.write_atomic(&lock_path).unwrap();
    let edited_run = run_examples(ws);
    assert!(
        line_of(&edited_run, "saxpy").contains("ITEMS=3, STRIDED=1, VEC=2, WG=32"),
        "{edited_run}"
    );

    // Changing the kernel source makes its entry stale: never embedded, and `check` says so.
    let cl = ws.join("examples/kernels/saxpy.cl");
    let mut source = std::fs::read_to_string(&cl).unwrap();
    source.push_str("\n// edited\n");
    std::fs::write(&cl, source).unwrap();
    let stale_run = run_examples(ws);
    assert!(
        line_of(&stale_run, "saxpy").contains("reference"),
        "{stale_run}"
    );
    let check = kfoundry(ws, &["check", "--locked"]);
    assert!(!check.status.success());
    assert_eq!(
        check.status.code(),
        Some(4),
        "`check --locked` drift has its own exit status"
    );
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        report.contains("stale: `kfoundry-examples::Saxpy` changed"),
        "{report}"
    );
}
