//! Tuning a fleet on the local device (PoCL in CI): workloads meant for one kind of device,
//! `--partition K/N` shares that cover every job once, `merge` of the shares' lockfiles (and
//! as git's merge driver), and `--device all`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use kfoundry_tooling::lockfile::Lockfile;

use crate::common;

use common::bundle;

const SOURCE: &str = r#"
__kernel void scale(const int n, __global const float* x, __global float* y) {
    int i = get_global_id(0);
    if (i < n) y[i] = 2.0f * x[i];
}
"#;

fn exe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "status {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn tune(bundle: &Path, lock: &Path, extra: &[&str]) -> Output {
    ok(exe()
        .args(["tune", "--budget-evals", "3", "--repeats", "1", "--bundle"])
        .arg(bundle)
        .arg("--lockfile")
        .arg(lock)
        .args(extra)
        .output()
        .unwrap())
}

/// (kernel, device, workload) of every variant.
fn jobs(lock: &Path) -> BTreeSet<(String, String, String)> {
    let l = Lockfile::read(lock).unwrap().unwrap();
    l.kernels
        .iter()
        .flat_map(|(id, e)| {
            e.variants
                .iter()
                .map(move |v| (id.clone(), v.device.clone(), v.workload.clone()))
        })
        .collect()
}

#[test]
fn partitions_cover_every_job_once_and_merge_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = |scale: u32| {
        format!(
            r#"code = {SOURCE:?}, params(WG = [16, 32, 64]), reference(WG = 16), global = n, local = WG, buffers(x = n, y = n), check(y),
               workloads(small(n = {}), medium(n = {}), huge(n = 268435456, on = gpu))"#,
            1024 * scale,
            8192 * scale
        )
    };
    let bundle = bundle::write_many(d, "b.json", &[("Scale", &args(1)), ("Twice", &args(2))]);

    // Two shares: together the four CPU jobs, each once; the GPU-only workload in neither.
    let first = tune(&bundle, &d.join("A.lock"), &["--partition", "1/2"]);
    tune(&bundle, &d.join("B.lock"), &["--partition", "2/2"]);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(stderr.contains("partition 1/2: 2 of 4 job(s)"), "{stderr}");
    assert!(
        stderr.contains("workload `huge` is for gpu only; skipped"),
        "{stderr}"
    );
    let (a, b) = (jobs(&d.join("A.lock")), jobs(&d.join("B.lock")));
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(b.len(), 2, "{b:?}");
    assert!(a.is_disjoint(&b));
    let workloads: BTreeSet<&str> = a.iter().chain(&b).map(|j| j.2.as_str()).collect();
    assert_eq!(workloads, ["medium", "small"].into());

    // merge: all four, and merging the result with a share changes nothing.
    ok(exe()
        .args(["merge", "--bundle"])
        .arg(&bundle)
        .arg(d.join("A.lock"))
        .arg(d.join("B.lock"))
        .arg("-o")
        .arg(d.join("C.lock"))
        .output()
        .unwrap());
    assert_eq!(jobs(&d.join("C.lock")), a.union(&b).cloned().collect());
    ok(exe()
        .args(["merge", "--bundle"])
        .arg(&bundle)
        .arg(d.join("C.lock"))
        .arg(d.join("A.lock"))
        .arg("-o")
        .arg(d.join("D.lock"))
        .output()
        .unwrap());
    assert_eq!(
        std::fs::read_to_string(d.join("C.lock")).unwrap(),
        std::fs::read_to_string(d.join("D.lock")).unwrap()
    );
    // To standard output without -o.
    let printed = ok(exe()
        .args(["merge", "--bundle"])
        .arg(&bundle)
        .arg(d.join("A.lock"))
        .arg(d.join("B.lock"))
        .output()
        .unwrap());
    assert_eq!(
        String::from_utf8_lossy(&printed.stdout),
        std::fs::read_to_string(d.join("C.lock")).unwrap()
    );

    // As git's merge driver: %O %A %B, the result over %A (the two branches started from an
    // empty lockfile, git's %O).
    std::fs::copy(d.join("A.lock"), d.join("ours")).unwrap();
    std::fs::write(d.join("ancestor"), "").unwrap();
    ok(exe()
        .args(["merge", "--git", "--bundle"])
        .arg(&bundle)
        .arg(d.join("ancestor"))
        .arg(d.join("ours"))
        .arg(d.join("B.lock"))
        .output()
        .unwrap());
    assert_eq!(
        std::fs::read_to_string(d.join("ours")).unwrap(),
        std::fs::read_to_string(d.join("C.lock")).unwrap()
    );
    // With A as the ancestor, B did not start from it: every slot A has, B removed.
    std::fs::copy(d.join("A.lock"), d.join("ours")).unwrap();
    ok(exe()
        .args(["merge", "--git", "--bundle"])
        .arg(&bundle)
        .arg(d.join("A.lock"))
        .arg(d.join("ours"))
        .arg(d.join("B.lock"))
        .output()
        .unwrap());
    assert_eq!(jobs(&d.join("ours")), b);

    // A stale side: the fingerprint the bundle gives wins, the other is dropped with a note.
    let mut stale = Lockfile::read(&d.join("A.lock")).unwrap().unwrap();
    for e in stale.kernels.values_mut() {
        e.fingerprint = "0123456789abcdef".into();
    }
    stale.write_atomic(&d.join("stale.lock")).unwrap();
    let out = ok(exe()
        .args(["merge", "--bundle"])
        .arg(&bundle)
        .arg(d.join("stale.lock"))
        .arg(d.join("B.lock"))
        .arg("-o")
        .arg(d.join("E.lock"))
        .output()
        .unwrap());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is stale"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(jobs(&d.join("E.lock")), b);
    // Without the sources, the same disagreement is an error.
    let out = exe()
        .current_dir(d)
        .args(["merge"])
        .arg(d.join("stale.lock"))
        .arg(d.join("B.lock"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("different fingerprints"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_device_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let args = format!(
        r#"code = {SOURCE:?}, params(WG = [16, 32]), reference(WG = 16), global = n, local = WG, buffers(x = n, y = n), check(y),
           workloads(small(n = 2048))"#
    );
    let bundle = bundle::write(dir.path(), "b.json", "Scale", &args);
    let lock = dir.path().join("Kfoundry.lock");
    tune(&bundle, &lock, &["--device", "all"]);
    let devices = String::from_utf8_lossy(&ok(exe().args(["devices"]).output().unwrap()).stdout)
        .matches("   key: ")
        .count();
    // Every device tuned the job (identical devices would have split it: one entry per key).
    let keys: BTreeSet<String> = jobs(&lock).into_iter().map(|j| j.1).collect();
    assert!(
        !keys.is_empty() && keys.len() <= devices,
        "{keys:?} of {devices} device(s)"
    );
    let out = exe()
        .args(["tune", "--device", "all", "--device", "0", "--bundle"])
        .arg(&bundle)
        .arg("--lockfile")
        .arg(&lock)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Git itself, with the merge driver configured as the manual's `book/src/fleet.md` says: two branches that each
/// tuned another device merge without conflict markers, and the result has both devices.
#[test]
fn git_merges_two_branches_that_tuned_different_devices() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = format!(
        r#"code = {SOURCE:?}, params(WG = [16, 32]), reference(WG = 16), global = n, local = WG, buffers(x = n, y = n), check(y),
           workloads(small(n = 2048))"#
    );
    let bundle = bundle::write(d, "b.json", "Scale", &args);
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(d)
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["config", "user.email", "t@example.com"]);
    git(&["config", "user.name", "t"]);
    std::fs::write(d.join(".gitattributes"), "Kfoundry.lock merge=kfoundry\n").unwrap();
    let driver = format!(
        "{} merge --git --bundle {} %O %A %B",
        env!("CARGO_BIN_EXE_cargo-kfoundry"),
        bundle.display()
    );
    git(&["config", "merge.kfoundry.name", "kfoundry lockfile merge"]);
    git(&["config", "merge.kfoundry.driver", &driver]);
    // One tune, then two branches that each say another device tuned the kernel.
    let lock = d.join("Kfoundry.lock");
    tune(&bundle, &lock, &[]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "base"]);
    let relabel = |key: &str, name: &str| {
        let mut l = Lockfile::read(&lock).unwrap().unwrap();
        let entry = l.kernels.values_mut().next().unwrap();
        let mut v = entry.variants[0].clone();
        let info = l.devices[&v.device].clone();
        v.device = key.into();
        entry.variants.push(v);
        l.devices.insert(
            key.into(),
            kfoundry_rt::DeviceInfo {
                name: name.into(),
                ..info
            },
        );
        l.write_atomic(&lock).unwrap();
    };
    git(&["checkout", "-q", "-b", "a"]);
    relabel("10de|gpu a|1|3.0", "GPU A");
    git(&["commit", "-q", "-am", "tuned on A"]);
    git(&["checkout", "-q", "main"]);
    git(&["checkout", "-q", "-b", "b"]);
    relabel("1002|gpu b|1|2.0", "GPU B");
    git(&["commit", "-q", "-am", "tuned on B"]);
    git(&["merge", "-q", "--no-edit", "a"]);
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(
        !text.contains("<<<<<<<") && !text.contains(">>>>>>>"),
        "{text}"
    );
    let devices: BTreeSet<String> = jobs(&lock).into_iter().map(|j| j.1).collect();
    assert_eq!(
        devices.len(),
        3,
        "the base device, A's and B's: {devices:?}"
    );
}
