//! The binary always matches the lockfile: a crate built against kfoundry in a temporary
//! workspace, rebuilt after the lockfile appears, changes, disappears, becomes malformed or
//! turns into a directory, and after an entry is edited by hand. Each build embeds exactly what
//! the lockfile says, or fails with a clear error; the program prints what dispatch chose.

use std::path::Path;
use std::process::Output;

use crate::common;
use common::{cargo_like_trybuild, host, repo, target_dir};

use kfoundry::model::variant::Variant;
use kfoundry_tooling::lockfile::Lockfile;

const APP: &str = r#"
#[kfoundry::evolve(
    code = "__kernel void twice(const int n, __global const float* x, __global float* y) {
        for (int k = 0; k < ITEMS; ++k) { int i = get_global_id(0) * ITEMS + k; y[i] = 2.0f * x[i] + y[i]; }
    }",
    params(WG = [16, 32, 64], ITEMS = [1, 2, 4]),
    reference(WG = 16, ITEMS = 1),
    require(n % (WG * ITEMS) == 0),
    global = n / ITEMS, local = WG,
    buffers(x = n, y = n),
    inputs(y = uniform(-1.0, 1.0)),
    check(y),
    workloads(large(n = 65536)),
)]
pub struct Twice;

fn main() {
    let (_, device) = kfoundry::default_device().expect("a device");
    let spec = Twice::evolved().spec().expect("spec");
    println!("fingerprint {}", Twice::FINGERPRINT);
    let choice = Twice::explain(&device, 65536).expect("explain");
    println!("{}", choice.to_string().lines().next().unwrap_or(""));
}
"#;

fn build(ws: &Path) -> Output {
    cargo_like_trybuild()
        .args(["build", "-q", "--offline", "--manifest-path"])
        .arg(ws.join("Cargo.toml"))
        .args(["--target", &host()])
        .output()
        .expect("cargo runs")
}

/// Builds and runs the app: the line naming dispatch's choice, and the kernel's fingerprint.
fn run(ws: &Path) -> (String, String) {
    let out = build(ws);
    assert!(
        out.status.success(),
        "build failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(target_dir().join(host()).join("debug").join("track"))
        .output()
        .expect("the app runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let fingerprint = text
        .lines()
        .find_map(|l| l.strip_prefix("fingerprint "))
        .unwrap_or("")
        .to_string();
    let chosen = text
        .lines()
        .find(|l| l.starts_with("chosen:"))
        .unwrap_or("")
        .to_string();
    (chosen, fingerprint)
}

/// A build that must fail: its error output.
fn build_fails(ws: &Path) -> String {
    let out = build(ws);
    assert!(!out.status.success(), "the build should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn lockfile(fingerprint: &str, wg: i64, items: i64) -> Lockfile {
    let (platform, device) = kfoundry::default_device().unwrap();
    let key = kfoundry::device_key(&device).unwrap().to_string();
    let info = kfoundry::device_info(&platform, &device).unwrap();
    let sizes = |n: i64| [("n".to_string(), n)].into_iter().collect();
    let variant = Variant {
        device: key.clone(),
        workload: "large".into(),
        sizes: sizes(65536),
        params: [("WG".to_string(), wg), ("ITEMS".to_string(), items)]
            .into_iter()
            .collect(),
        time_ns: 100,
        reference_time_ns: 200,
        evaluations: 10,
        failures: 0,
        source: None,
        proven: vec![sizes(32768), sizes(65536), sizes(131072)],
        scalars: Default::default(),
        proof: 0,
        partial: false,
        general: false,
        floor: None,
        device_info: None,
    };
    let mut lock = Lockfile::default();
    lock.record("track::Twice", fingerprint, &key, info, vec![variant]);
    lock
}

/// Writes the lockfile as a user or a tool would (a new modification time).
fn write(path: &Path, text: &str) {
    // cargo compares modification times at a resolution the file system may round: make the
    // change unmistakably newer than the last build.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_build_always_embeds_what_the_lockfile_says() {
    let _one = common::one_build_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(
        ws.join("Cargo.toml"),
        format!(
            "[workspace]\n\n[package]\nname = \"track\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nkfoundry = {{ path = {:?} }}\n",
            repo()
        ),
    )
    .unwrap();
    std::fs::copy(repo().join("Cargo.lock"), ws.join("Cargo.lock")).unwrap();
    std::fs::write(ws.join("src/main.rs"), APP).unwrap();
    let lock_path = ws.join("Kfoundry.lock");

    // No lockfile: the reference, and the first build leaves an empty lockfile that cargo tracks.
    let (chosen, fingerprint) = run(ws);
    assert!(chosen.starts_with("chosen: reference"), "{chosen}");
    let empty = Lockfile::read(&lock_path)
        .unwrap()
        .expect("an empty lockfile was created");
    assert!(empty.kernels.is_empty());

    // 1. It appears (written over the empty one): the tuned variant is embedded.
    write(
        &lock_path,
        &lockfile(&fingerprint, 32, 2).to_toml().unwrap(),
    );
    assert_eq!(run(ws).0, "chosen: exact device (ITEMS=2, WG=32)");

    // 2. It changes.
    write(
        &lock_path,
        &lockfile(&fingerprint, 64, 4).to_toml().unwrap(),
    );
    assert_eq!(run(ws).0, "chosen: exact device (ITEMS=4, WG=64)");

    // 3. It disappears: the reference again.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::remove_file(&lock_path).unwrap();
    assert!(run(ws).0.starts_with("chosen: reference"));

    // A hand-edited entry that does not match the annotation: the build fails, naming it.
    let mut edited = lockfile(&fingerprint, 32, 2);
    for v in &mut edited.kernels.get_mut("track::Twice").unwrap().variants {
        v.params.insert("X -cl-fast-relaxed-math -DITEMS".into(), 1);
    }
    write(&lock_path, &edited.to_toml().unwrap());
    let e = build_fails(ws);
    assert!(
        e.contains("disagrees with the annotation of `track::Twice`")
            && e.contains("is not a parameter"),
        "{e}"
    );

    // 4. It becomes malformed: the build fails and says where (file, line and column).
    write(&lock_path, "version = 2\n[kernels\n");
    let e = build_fails(ws);
    assert!(
        e.contains("Kfoundry.lock:2:") && e.contains(": not a valid Kfoundry.lock: "),
        "{e}"
    );

    // 5. It turns into a directory: the build fails and says so.
    std::fs::remove_file(&lock_path).unwrap();
    std::fs::create_dir(&lock_path).unwrap();
    let e = build_fails(ws);
    assert!(e.contains("is not a regular file"), "{e}");

    // And back to a good file: embedded again.
    std::fs::remove_dir(&lock_path).unwrap();
    write(
        &lock_path,
        &lockfile(&fingerprint, 32, 2).to_toml().unwrap(),
    );
    assert_eq!(run(ws).0, "chosen: exact device (ITEMS=2, WG=32)");
}
