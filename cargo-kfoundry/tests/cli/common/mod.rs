//! Test support shared by the integration tests (each test uses what it needs).
#![allow(dead_code)]

pub mod bundle;
pub mod mock_llm;

/// Every file below `dir`, at any depth.
pub fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `cargo kfoundry tune --bundle <bundle>` into `lock` (its state directory beside it): one
/// repeat, seed 3, `budget` evaluations, then `extra`.
pub fn tune(
    bundle: &std::path::Path,
    lock: &std::path::Path,
    budget: &str,
    extra: &[&str],
) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .args(["tune", "--bundle"])
        .arg(bundle)
        .arg("--lockfile")
        .arg(lock)
        .arg("--state-dir")
        .arg(lock.with_extension("state"))
        .args(["--repeats", "1", "--seed", "3", "--budget-evals", budget])
        .args(extra)
        .output()
        .expect("cargo-kfoundry runs")
}

/// `cargo kfoundry check --locked <extra> --bundle <bundle> --lockfile <lock>`, asserted to
/// pass (its output in the failure).
pub fn check_locked(bundle: &std::path::Path, lock: &std::path::Path, extra: &[&str]) {
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .args(["check", "--locked"])
        .args(extra)
        .arg("--bundle")
        .arg(bundle)
        .arg("--lockfile")
        .arg(lock)
        .output()
        .expect("cargo-kfoundry runs");
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}
