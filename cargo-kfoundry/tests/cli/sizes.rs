//! One tune serves every size a program calls (issue 55): without `ranges(...)` a winner is
//! proven over a default region (each size from the smallest value the reference accepts to
//! twice its largest workload value), the same for every tune; a size where the output is
//! legitimately constant is tuned and proven by equality; the user's first mistakes get the
//! messages the manual promises (on PoCL).

use std::path::Path;
use std::process::{Command, Output};

use kfoundry_rt::model::device::DeviceKey;
use kfoundry_rt::model::select::{choose, Step};
use kfoundry_rt::model::variant::Variant;
use kfoundry_tooling::lockfile::Lockfile;

use crate::common;
use crate::ranges::n;

use common::bundle;

fn tune(bundle: &Path, lock: &Path, extra: &[&str]) -> Output {
    common::tune(bundle, lock, "6", extra)
}

/// y = 2x + y, `VEC` elements per work-item with a correct tail (right at every `n`), at one
/// workload.
fn scale() -> String {
    crate::ranges::SCALE.replace("ranges(n = 1..=4096)", "workloads(w(n = 4096))")
}

/// `variants` with their floors removed (each floor checked to name the kernel's sizes): where
/// an entry is proven to run, whatever its speed there.
fn without_floors(variants: &[Variant]) -> Vec<Variant> {
    variants
        .iter()
        .map(|v| {
            if let Some(f) = &v.floor {
                assert!(f.keys().eq(v.sizes.keys()), "{f:?}");
            }
            Variant {
                floor: None,
                ..v.clone()
            }
        })
        .collect()
}

/// Two tunes with other proof seeds record the same region, 1..=8192 (the reference runs at
/// every n; twice the workload's 4096), and dispatch runs the tuned variant anywhere in it,
/// far below the tuned size too.
#[test]
fn a_tune_proves_and_records_the_default_region_whatever_its_seed() {
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "b.json", "Scale", &scale());
    let spec = bundle::spec(&scale(), dir.path(), "Scale");
    let mut regions = Vec::new();
    for seed in ["1", "2"] {
        let lock = dir.path().join(format!("K{seed}.lock"));
        let out = tune(&b, &lock, &["--proof-seed", seed]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let l = Lockfile::read(&lock).unwrap().unwrap();
        let v = &l.kernels["test::Scale"].variants[0];
        regions.push(v.proven_range());
        if v.params == spec.reference {
            continue;
        }
        let key = DeviceKey::parse(&v.device).unwrap();
        // where the entry runs at all; below a floor (a matter of speed) it gives way
        let variants = &without_floors(&l.kernels["test::Scale"].variants);
        for size in [1, 3, 100, 1000, 4097, 8191, 8192] {
            let c = choose(&spec, variants, &key, None, None, &n(size), None).unwrap();
            assert_eq!(c.step, Step::ExactDevice, "n = {size}: {:?}", c.reasons);
            assert_eq!(c.params, v.params);
        }
        let c = choose(&spec, variants, &key, None, None, &n(8193), None).unwrap();
        assert_eq!(c.step, Step::Reference, "{:?}", c.reasons);
    }
    assert_eq!(regions[0], regions[1], "the same region for every seed");
    assert_eq!(regions[0]["n"], (1, 8192), "{regions:?}");
}

/// out = 2x + y. The fast configurations load four elements at once and need `n % 4 == 0`;
/// `DUP` work-items compute each element (the same value, written again), so the reference
/// (`DUP = 8`) does eight times the work, and the one configuration that runs at every `n`
/// besides it (`VEC = 1, DUP = 2`) twice.
const VEC4: &str = r#"code = "__kernel void k(const int n, __global const float* x, __global const float* y, __global float* out) {
        int g = get_global_id(0) / DUP;
    #if VEC == 4
        if (g * 4 < n) vstore4(2.0f * vload4(g, x) + vload4(g, y), g, out);
    #else
        if (g < n) out[g] = 2.0f * x[g] + y[g];
    #endif
    }", params(VEC = [1, 4], DUP = [1, 2, 8]), reference(VEC = 1, DUP = 8),
    require(n % VEC == 0, VEC == 4 || DUP >= 2), global = ceil_div(n, VEC) * DUP,
    buffers(x = n, y = n, out = n), check(out), workloads(w(n = 65536))"#;

/// A winner that needs `n % 4 == 0` gets the workload's general variant beside it, proven over
/// the same region: dispatch runs the winner where it can and the general variant at every
/// other size of the region, and `check --verify` re-proves both.
#[test]
fn a_winner_that_refuses_sizes_gets_a_general_variant_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "b.json", "Vec4", VEC4);
    let spec = bundle::spec(VEC4, dir.path(), "Vec4");
    let lock = dir.path().join("K.lock");
    let out = tune(&b, &lock, &["--message-format", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let messages: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // the note says so in JSON too, and the result carries the general variant
    let note = messages
        .iter()
        .find(|m| m["reason"] == "note" && m["text"].as_str().unwrap().contains("general variant"))
        .unwrap_or_else(|| panic!("no note: {messages:?}"));
    assert!(
        note["text"]
            .as_str()
            .unwrap()
            .contains("the general variant (DUP=2, VEC=1) serves there"),
        "{note}"
    );
    let tuned = messages.iter().find(|m| m["reason"] == "tuned").unwrap();
    assert_eq!(tuned["result"]["general"]["params"]["VEC"], 1, "{tuned}");
    let l = Lockfile::read(&lock).unwrap().unwrap();
    let variants = &without_floors(&l.kernels["test::Vec4"].variants);
    let winner = variants.iter().find(|v| !v.general).unwrap();
    assert_eq!(winner.params["VEC"], 4, "{stderr}");
    let general = variants
        .iter()
        .find(|v| v.general)
        .unwrap_or_else(|| panic!("no general variant: {stderr}"));
    assert_eq!(
        (general.params["VEC"], general.params["DUP"]),
        (1, 2),
        "{stderr}"
    );
    assert!(
        stderr.contains("the general variant (DUP=2, VEC=1) serves there"),
        "{stderr}"
    );
    assert_eq!(general.proven_range()["n"], (1, 2 * 65536));
    let key = DeviceKey::parse(&winner.device).unwrap();
    for size in [4, 4096, 65536, 2 * 65536] {
        let c = choose(&spec, variants, &key, None, None, &n(size), None).unwrap();
        assert_eq!(c.params, winner.params, "n = {size}: {c}");
    }
    for size in [1, 3, 4097, 65535, 2 * 65536 - 1] {
        let c = choose(&spec, variants, &key, None, None, &n(size), None).unwrap();
        assert_eq!(c.params, general.params, "n = {size}: {c}");
    }
    common::check_locked(&b, &lock, &["--verify"]);
}

/// Softmax over `cols`: at one column every output is 1 whatever the inputs. A range that
/// includes it is tuned there (no "a kernel writing constants would pass"), and `check
/// --locked` passes afterwards.
const SOFTMAX: &str = r#"code = "__kernel void k(const int rows, const int cols, __global const float* x, __global float* y) {
        int r = get_global_id(0);
        float m = -INFINITY, s = 0.0f;
        for (int c = 0; c < cols; c++) m = fmax(m, x[r * cols + c]);
        for (int c = 0; c < cols; c++) s += exp(x[r * cols + c] - m);
        for (int c = 0; c < cols; c++) y[r * cols + c] = exp(x[r * cols + c] - m) / s;
    }", params(WG = [1, 32]), reference(WG = 1), global = ceil_div(rows, WG) * WG, local = WG,
    require(rows % WG == 0), buffers(x = rows * cols, y = rows * cols), check(y), ranges(rows = 64, cols = 1..=16)"#;

#[test]
fn a_range_through_a_constant_output_is_tuned_and_stays_checked() {
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "b.json", "Softmax", SOFTMAX);
    let lock = dir.path().join("K.lock");
    let out = tune(&b, &lock, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("writing constants"), "{stderr}");
    let l = Lockfile::read(&lock).unwrap().unwrap();
    assert!(
        l.kernels["test::Softmax"]
            .variants
            .iter()
            .any(|v| v.workload == "range_cols_1"),
        "{stderr}"
    );
    common::check_locked(&b, &lock, &[]);
}

/// A CSR product whose row pointers and column indices are left at the default distribution:
/// the tune names them and how they are drawn, whether the reference crashed or read outside
/// its buffers.
#[test]
fn integer_inputs_left_at_their_default_are_named_when_the_reference_fails() {
    let csr = r#"code = "__kernel void k(const int rows, const int nnz, __global const int* row_ptr, __global const int* col_idx, __global const float* val, __global const float* x, __global float* y) {
            int r = get_global_id(0);
            float s = 0.0f;
            for (int j = row_ptr[r]; j < row_ptr[r + 1]; j++) s += val[j] * x[col_idx[j]];
            y[r] = s * WG;
        }", params(WG = [1, 2]), reference(WG = 1), global = rows,
        buffers(row_ptr = rows + 1, col_idx = nnz, val = nnz, x = rows, y = rows), check(y), workloads(w(rows = 4096, nnz = 40960))"#;
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "b.json", "Csr", csr);
    let lock = dir.path().join("K.lock");
    let out = tune(&b, &lock, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for name in ["row_ptr", "col_idx"] {
        assert!(
            stderr.contains(&format!("`{name}` is drawn from")),
            "{name}: {stderr}"
        );
    }
    assert!(
        stderr.contains("inputs(ids = uniform_int(0, vocab))"),
        "{stderr}"
    );
}

/// `cargo kfoundry bundle` names the workspace's files relative to it: a bundle goes to other
/// machines and says nothing of this one's directories.
#[test]
fn a_bundle_names_files_relative_to_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("rel");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"rel\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("k.cl"),
        "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)] * WG; }\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "#[kfoundry::evolve(source = \"k.cl\", params(WG = [1, 2]), reference(WG = 1), global = n, buffers(x = n, y = n), check(y), workloads(w(n = 64)))]\npub struct K;\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .current_dir(&root)
        .args(["bundle", "-o", "b.json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(root.join("b.json")).unwrap();
    let root = root.canonicalize().unwrap();
    assert!(!text.contains(&*root.to_string_lossy()), "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["kernels"][0]["file"], "src/lib.rs", "{text}");
    assert_eq!(json["kernels"][0]["source_path"], "k.cl", "{text}");
}

/// `ranges(..., on = gpu)`: on a CPU device (PoCL) the anchors are skipped like a workload for
/// GPUs only, the declared workload is tuned, and `check --locked` asks for nothing more.
#[test]
fn ranges_for_gpus_only_are_skipped_on_a_cpu() {
    let args = crate::ranges::SCALE.replace(
        "ranges(n = 1..=4096)",
        "workloads(w(n = 4096)), ranges(n = 1..=1 << 20, on = gpu)",
    );
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "b.json", "Scale", &args);
    let lock = dir.path().join("K.lock");
    let out = tune(&b, &lock, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("workload `range_n_1` is for gpu only; skipped"),
        "{stderr}"
    );
    let l = Lockfile::read(&lock).unwrap().unwrap();
    // the workload's winner (and, where it has a floor, its general variant beside it)
    let workloads: Vec<&str> = l.kernels["test::Scale"]
        .variants
        .iter()
        .filter(|v| !v.general)
        .map(|v| v.workload.as_str())
        .collect();
    assert_eq!(workloads, ["w"]);
    assert!(l.kernels["test::Scale"]
        .variants
        .iter()
        .all(|v| v.workload == "w"));
    common::check_locked(&b, &lock, &[]);
}
