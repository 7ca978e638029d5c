//! `cargo kfoundry import`: the committed crates under examples/imported are exactly what it
//! writes for the fixtures; how the crate depends on kfoundry follows the workspace it lands
//! in; a model it cannot import leaves nothing behind; an existing directory is kept unless
//! `--force`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn exe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn fixture(name: &str) -> PathBuf {
    repo().join(format!("crates/kfoundry-import/fixtures/{name}.onnx"))
}

fn import(model: &Path, name: &str, out: &Path, extra: &[&str]) -> Output {
    exe()
        .arg("import")
        .arg(model)
        .args(["--name", name, "-o"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn committed_crates_are_what_import_writes() {
    let tmp = tempfile::tempdir().unwrap();
    // kb_conv_gn reads its weights when it runs (`--weights file`), the others build them in.
    for (m, flags) in [
        ("kb_linear_gelu_softmax", &["-q"][..]),
        ("kb_conv_gn", &["-q", "--weights", "file"][..]),
        ("cnn_block", &["-q"][..]),
    ] {
        let out = tmp.path().join(m);
        let o = import(&fixture(m), &m.replace('_', "-"), &out, flags);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let committed = repo().join("examples/imported").join(m);
        assert_eq!(files(&out), files(&committed), "{m}: the files");
        for f in files(&out) {
            let fresh = std::fs::read(out.join(&f)).unwrap();
            let kept = std::fs::read(committed.join(&f)).unwrap();
            // Outside a workspace the crate asks crates.io; in this one, the workspace.
            let fresh = if f == Path::new("Cargo.toml") {
                String::from_utf8(fresh)
                    .unwrap()
                    .replace(
                        &format!("kfoundry = \"{}\"", env!("CARGO_PKG_VERSION")),
                        "kfoundry = { workspace = true }",
                    )
                    .into_bytes()
            } else {
                fresh
            };
            assert!(fresh == kept, "{m}/{}: differs from a fresh import (re-run `cargo kfoundry import` on the fixture)", f.display());
        }
    }
}

#[test]
fn the_dependency_follows_the_workspace() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // A workspace whose member depends on kfoundry by path.
    std::fs::create_dir_all(root.join("app/src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join("app/Cargo.toml"),
        format!(
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nkfoundry = {{ path = \"{}\" }}\n",
            repo().display()
        ),
    )
    .unwrap();
    std::fs::write(root.join("app/src/lib.rs"), "").unwrap();
    let o = import(
        &fixture("kb_conv_gn"),
        "conv-gn",
        &root.join("models/conv"),
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let toml = std::fs::read_to_string(root.join("models/conv/Cargo.toml")).unwrap();
    let expected = format!(
        "kfoundry = {{ path = \"{}\" }}",
        pathdiff(&root.join("models/conv"), &repo())
    );
    assert!(toml.contains(&expected), "{expected} in\n{toml}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("add \"models/conv\" to `members`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("K00Conv") && stderr.contains("K01GroupNorm"),
        "{stderr}"
    );

    // A workspace that declares kfoundry in [workspace.dependencies].
    std::fs::write(
        root.join("Cargo.toml"),
        format!(
            "[workspace]\nmembers = [\"app\", \"models/lin\"]\nresolver = \"2\"\n\n[workspace.dependencies]\nkfoundry = {{ path = \"{}\" }}\n",
            repo().display()
        ),
    )
    .unwrap();
    let o = import(
        &fixture("kb_linear_gelu_softmax"),
        "lin",
        &root.join("models/lin"),
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let toml = std::fs::read_to_string(root.join("models/lin/Cargo.toml")).unwrap();
    assert!(toml.contains("kfoundry = { workspace = true }"), "{toml}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("add \""), "already a member: {stderr}");
}

/// `to` relative to `from`, both absolute.
fn pathdiff(from: &Path, to: &Path) -> String {
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = std::iter::repeat_n("..".to_string(), f.len() - common).collect();
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

#[test]
fn a_model_it_cannot_import_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    // An ONNX file with an unsupported node: take a fixture and rename its first operator.
    let mut bytes = std::fs::read(fixture("kb_linear_gelu_softmax")).unwrap();
    let at = bytes.windows(4).position(|w| w == b"Gemm").unwrap();
    bytes[at..at + 4].copy_from_slice(b"Gemx");
    let model = tmp.path().join("bad.onnx");
    std::fs::write(&model, &bytes).unwrap();
    let out = tmp.path().join("crate");
    let o = import(&model, "bad", &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(
            "bad.onnx: node `linear`: operator `Gemx` is not supported; supported operators: Abs,"
        ),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing is written");
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers.len(),
        1,
        "no temporary directory is left: {leftovers:?}"
    );

    let o = import(&tmp.path().join("missing.onnx"), "m", &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    let o = import(&fixture("kb_conv_gn"), "9lives", &out, &[]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--name \"9lives\""),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = import(&fixture("kb_conv_gn"), "ok", &out, &["--dim", "batch"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--dim batch: expected NAME=N"));
    // kfoundry's own crates' names (and the names Rust reserves) would break the workspace
    for taken in ["kfoundry", "kfoundry_rt", "cargo-kfoundry", "std"] {
        let o = import(&fixture("kb_conv_gn"), taken, &out, &[]);
        assert_eq!(o.status.code(), Some(2), "{taken}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("that name is taken"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // so would a second package of a member's name
    let o = import(
        &fixture("kb_conv_gn"),
        "kb-conv-gn",
        &repo().join("target").join("kb-again"),
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already has a package of that name"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // the model must be a regular file (a FIFO would hang the import)
    #[cfg(unix)]
    {
        let fifo = tmp.path().join("model.onnx");
        assert!(Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let o = import(&fifo, "ok", &out, &[]);
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("a FIFO"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(!out.exists());
}

#[test]
fn an_existing_directory_is_kept_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("crate");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("mine.txt"), "keep me").unwrap();
    let o = import(&fixture("kb_conv_gn"), "conv", &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("exists and is not empty; pass --force"));
    assert_eq!(
        std::fs::read_to_string(out.join("mine.txt")).unwrap(),
        "keep me"
    );
    let o = import(&fixture("kb_conv_gn"), "conv", &out, &["--force", "-q"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!out.join("mine.txt").exists() && out.join("src/lib.rs").exists());
}

/// `import --bundle` writes what `tune --bundle` reads on a machine without cargo; `-p` picks
/// packages of a bundle as it picks workspace members, and a package the bundle lacks is an
/// error that lists the ones it has.
#[test]
fn import_writes_a_bundle_and_tune_picks_its_packages() {
    let tmp = tempfile::tempdir().unwrap();
    let mut kernels = Vec::new();
    for m in ["kb_linear_gelu_softmax", "cnn_block"] {
        let bundle = tmp.path().join(format!("{m}.json"));
        let o = import(
            &fixture(m),
            &m.replace('_', "-"),
            &tmp.path().join(m),
            &["-q", "--bundle", bundle.to_str().unwrap()],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let b: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&bundle).unwrap()).unwrap();
        assert_eq!(b["format"], "kfoundry-bundle");
        kernels.extend(b["kernels"].as_array().unwrap().iter().cloned());
    }
    assert_eq!(kernels.len(), 6, "2 + 4 kernels");
    let both = tmp.path().join("both.json");
    std::fs::write(
        &both,
        serde_json::json!({ "format": "kfoundry-bundle", "version": 1, "kernels": kernels })
            .to_string(),
    )
    .unwrap();
    let lock = tmp.path().join("K.lock");
    let tune = |p: &str| {
        exe()
            .args([
                "tune",
                "--bundle",
                both.to_str().unwrap(),
                "--lockfile",
                lock.to_str().unwrap(),
                "-p",
                p,
            ])
            .args([
                "--workload",
                "small",
                "--budget-evals",
                "2",
                "--message-format",
                "json",
            ])
            .output()
            .unwrap()
    };
    let o = tune("kb-linear-gelu-softmax");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tuned: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "tuned")
        .map(|m| m["result"]["kernel"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        tuned,
        [
            "kb-linear-gelu-softmax::K00Matmul",
            "kb-linear-gelu-softmax::K01Softmax"
        ]
    );
    let o = tune("nope");
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("-p nope: the bundle has no package of that name (it has: cnn-block, kb-linear-gelu-softmax)"), "{e}");
}

/// `run`: the imported model on the default device, its kernels as dispatch chooses them from
/// a lockfile (or their references), inputs from files, outputs to files; bad inputs are
/// errors that name the file and what the graph needs.
#[test]
fn run_executes_the_imported_graph_from_files() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fixture("cnn_block");
    let run = |extra: &[&str]| {
        exe()
            .arg("run")
            .arg(&model)
            .args(["--name", "cnn-block", "--repeats", "2"])
            .args(extra)
            .output()
            .unwrap()
    };
    let floats = |path: &Path| -> Vec<f32> {
        std::fs::read(path)
            .unwrap()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    // The input: (2, 3, 32, 32) of the fixture, from a file.
    let input = tmp.path().join("x.bin");
    let x: Vec<u8> = (0..2 * 3 * 32 * 32)
        .flat_map(|i| ((i % 17) as f32 / 8.0 - 1.0).to_le_bytes())
        .collect();
    std::fs::write(&input, &x).unwrap();
    let (reference, tuned) = (tmp.path().join("reference"), tmp.path().join("tuned"));
    let o = run(&[
        "--input",
        input.to_str().unwrap(),
        "--output-dir",
        reference.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["kernels"].as_array().unwrap().len(), 4);
    assert!(
        summary["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["step"] == "reference"),
        "{summary}"
    );
    assert_eq!(summary["outputs"][0]["shape"], serde_json::json!([2, 10]));
    assert!(summary["graph_wall_ms"].as_f64().unwrap() > 0.0);
    let lock = repo().join("Kfoundry.lock");
    let o = run(&[
        "--input",
        input.to_str().unwrap(),
        "--output-dir",
        tuned.to_str().unwrap(),
        "--lockfile",
        lock.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (a, b) = (
        floats(&reference.join("0.bin")),
        floats(&tuned.join("0.bin")),
    );
    assert_eq!(a.len(), 20);
    assert!(
        a.iter().all(|v| v.is_finite()) && a.iter().any(|&v| v != 0.0),
        "{a:?}"
    );
    for (p, q) in a.iter().zip(&b) {
        assert!(
            (p - q).abs() <= 1e-4 * (1.0 + p.abs()),
            "reference {p}, lockfile's variants {q}"
        );
    }
    // A hand-edited entry (a work-group size outside the annotation's domain) fails the run as
    // it would fail a build that embeds it.
    let text = std::fs::read_to_string(&lock).unwrap();
    let at = text
        .find("[kernels.\"cnn-block::K00Conv\".variants.params]")
        .expect("the committed lockfile has cnn-block's conv");
    let wg = at + text[at..].find("\nWG = ").unwrap();
    let end = wg + 1 + text[wg + 1..].find('\n').unwrap();
    let edited = tmp.path().join("edited.lock");
    std::fs::write(&edited, format!("{}\nWG = 48{}", &text[..wg], &text[end..])).unwrap();
    let o = run(&[
        "--input",
        input.to_str().unwrap(),
        "--lockfile",
        edited.to_str().unwrap(),
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("`cnn-block::K00Conv`") && e.contains("WG"),
        "{e}"
    );
    // An input of the wrong length, and the wrong number of inputs.
    std::fs::write(&input, &x[..x.len() - 4]).unwrap();
    let o = run(&["--input", input.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("x.bin")
            && e.contains("24572 bytes where input 0")
            && e.contains("needs 24576 (float32)"),
        "{e}"
    );
    let o = run(&[
        "--input",
        input.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("the model takes 1 input(s), 2 --input given")
    );
}
