//! Shared by the tests that build crates against kfoundry in temporary workspaces: cargo with
//! the configuration trybuild uses, so that they all share one set of compiled dependencies.
#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Held by each test that builds with cargo in the shared target directory (the UI tests, the
/// whole chain, the lockfile tracking): one such build at a time, as when they were binaries of
/// their own, so that neither waits on the other's lock nor rebuilds what the other replaced.
pub fn one_build_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static BUILDS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    BUILDS.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the copy builds. Not the workspace's own target directory: cargo hashes path crates
/// relative to their workspace, so the copy's artifacts would replace the test run's own. The
/// directory trybuild uses for the UI tests is shared instead, with
/// the `--target`, rustflags and `CARGO_INCREMENTAL` that trybuild 1.0.122 passes (see
/// `cargo_like_trybuild`): both build the same dependencies, which then compile once, and cargo
/// rebuilds the kfoundry crates there whenever the source path changes. If trybuild changes its
/// flags, the dependencies just compile twice.
pub fn target_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    base.join("tests").join("trybuild")
}

/// The host's target triple (`rustc -vV`).
pub fn host() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host")
}

pub fn cargo(ws: &Path, args: &[&str]) -> Output {
    let out = cargo_like_trybuild()
        .args(args)
        .arg("--manifest-path")
        .arg(ws.join("Cargo.toml"))
        .args(["--target", &host()])
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `cargo` with the configuration trybuild uses, so that the two share compiled dependencies.
pub fn cargo_like_trybuild() -> Command {
    let flags = r#"["--cfg", "trybuild", "--verbose", "-A", "dead_code"]"#;
    let mut cmd = Command::new(env!("CARGO"));
    cmd.arg(format!("--config=build.rustflags={flags}"))
        .arg(format!("--config=target.{}.rustflags={flags}", host()))
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_INCREMENTAL", "0");
    cmd
}
