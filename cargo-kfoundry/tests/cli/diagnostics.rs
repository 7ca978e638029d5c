//! What kfoundry says about the user's files names the right ones: a mistake in a TOML file at
//! its `path:line:col`; a build error at the kernel's own source file, not the driver's
//! temporary copy; `check -p` about that package's kernels alone; this repository's own
//! `Kfoundry.lock` passing `check --locked` as a fresh clone has it.

use std::path::Path;
use std::process::Command;

use crate::common;

use common::bundle;

fn kfoundry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
}

/// The repository's root (this crate's parent).
fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cargo-kfoundry is in the repository")
}

/// The committed lockfile is what CI checks on a machine without the devices it was tuned on:
/// every entry matches the sources (a workload one GPU was not tuned at is said, not failed),
/// and `-p` checks that package only (the others' entries are not orphaned).
#[test]
fn the_committed_lockfile_passes_check_locked_for_the_workspace_and_each_package() {
    let manifest = repository().join("Cargo.toml");
    for package in [None, Some("cnn-block"), Some("kfoundry-examples")] {
        let out = kfoundry()
            .args(["check", "--locked", "--manifest-path"])
            .arg(&manifest)
            .args(package.map(|p| ["-p", p]).into_iter().flatten())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "check --locked {package:?}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!stdout.contains("orphaned"), "{package:?}: {stdout}");
        assert!(stdout.contains("Kfoundry.lock is up to date"), "{stdout}");
    }
}

/// A language-model configuration file that is not TOML, or names a wrong value, is named with
/// the line and column of the mistake.
#[cfg(feature = "llm")]
#[test]
fn a_mistake_in_the_model_configuration_is_named_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let args = r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)]; }",
        params(WG = [1, 2]), reference(WG = 1), global = n, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 1024))"#;
    let b = bundle::write(dir.path(), "b.json", "K", args);
    let config = dir.path().join("llm.toml");
    for (text, at) in [
        (
            "base_url = \"http://127.0.0.1:1/v1\"\nmodel = = \"m\"\n",
            ":2:9: ",
        ),
        (
            "base_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n\nevery = \"often\"\n",
            ":4:9: ",
        ),
    ] {
        std::fs::write(&config, text).unwrap();
        let out = kfoundry()
            .args(["tune", "--bundle"])
            .arg(&b)
            .arg("--lockfile")
            .arg(dir.path().join("k.lock"))
            .arg("--llm-config")
            .arg(&config)
            .args(["--budget-evals", "2"])
            .env("KFOUNDRY_CONFIG_DIR", dir.path().join("none"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        let place = format!("{}{at}", config.display());
        assert!(stderr.contains(&place), "{place} not in:\n{stderr}");
    }
}

/// A candidate of the kernel's own source that does not build is reported at that source's
/// file, line and column (not the OpenCL driver's temporary copy): in the search's lines and
/// in the log of failed candidates.
#[test]
fn a_build_error_names_the_kernels_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("k.cl");
    std::fs::write(
        &source,
        "__kernel void copy(const int n, __global const float* x, __global float* y) {\n    int i = get_global_id(0);\n#if U == 2\n    y[i] = 2.0f * x[i] + undeclared_thing;\n#else\n    y[i] = 2.0f * x[i];\n#endif\n}\n",
    )
    .unwrap();
    let args = r#"source = "k.cl", params(U = [1, 2]), reference(U = 1), global = n, local = 16,
        buffers(x = n, y = n), check(y), workloads(w(n = 1024))"#;
    let spec = bundle::spec(args, dir.path(), "K");
    let b = dir.path().join("b.json");
    let kernel = serde_json::json!({ "package": "test", "file": "src/lib.rs", "line": 1, "spec": spec, "source_path": source });
    std::fs::write(
        &b,
        serde_json::json!({ "format": "kfoundry-bundle", "version": 1, "kernels": [kernel] })
            .to_string(),
    )
    .unwrap();
    let out = kfoundry()
        .args(["tune", "-v", "--no-llm", "--bundle"])
        .arg(&b)
        .arg("--lockfile")
        .arg(dir.path().join("k.lock"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["--budget-evals", "4", "--repeats", "1", "--seed", "1"])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    let place = format!("{}:4:", source.display());
    assert!(said.contains(&place), "{place} not in:\n{said}");
    let logs = common::walk(&dir.path().join("state"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    assert!(logs.contains(&place), "{place} not in the logs:\n{logs}");
    for text in [&said, &logs] {
        assert!(!text.contains("tempfile"), "{text}");
    }
}
