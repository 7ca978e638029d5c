//! The Slurm path for real: `examples/slurm/single-node.sh` starts a one-node cluster on
//! 127.0.0.1, submits a tune job array (one `--partition` share per task) and a merge job that
//! depends on it, and checks the merged lockfile with `check --locked`. It needs root and
//! Debian's `slurm-wlm` and `munge`, so it runs only with `KFOUNDRY_TEST_SLURM=1` (`.ci/run` sets
//! it after installing them).

use std::process::Command;

#[test]
fn a_job_array_and_a_merge_job_on_a_one_node_cluster() {
    if std::env::var("KFOUNDRY_TEST_SLURM").as_deref() != Ok("1") {
        eprintln!(
            "skipped: set KFOUNDRY_TEST_SLURM=1 (as root, with slurm-wlm and munge) to run it"
        );
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(root.join("examples/slurm/single-node.sh"))
        .env("BIN", env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .env("OUTDIR", out_dir.path())
        .env("TASKS", "2")
        .env("EVALS", "3")
        // The `small` workloads only: the large ones' proofs are minutes on 2 cores and test
        // nothing of Slurm.
        .env("WORKLOADS", "small")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // `.ci/run` installed Slurm and munge: a cluster that does not come up is a failure there.
    assert_ne!(
        out.status.code(),
        Some(77),
        "KFOUNDRY_TEST_SLURM=1 but the one-node cluster could not start on this machine: {stderr}"
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("2 task(s)") && stdout.contains("check --locked passed"),
        "{stdout}"
    );
    assert!(
        out_dir.path().join("shares/1.lock").exists()
            && out_dir.path().join("shares/2.lock").exists()
    );
}
