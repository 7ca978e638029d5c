//! `brute-force` on the local device (PoCL in CI): a small space with one configuration that
//! does not build and one that computes the wrong result; the file is a Kernel Tuner cache that
//! the simulator replays, `--max-configs` refuses a larger space, and `--resume` after a
//! finished run evaluates nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kfoundry_search::cache::CacheSpace;
use serde_json::Value;

use crate::common;

use common::bundle;

const SOURCE: &str = r#"
#if WG == 16 && U == 2
#error this configuration does not build
#endif
__kernel void scale(const int n, __global const float* x, __global float* y) {
    int i = get_global_id(0) * U;
    for (int u = 0; u < U; u++) y[i + u] = (WG == 32 && U == 4 ? 3.0f : 2.0f) * x[i + u];
}
"#;

fn brute_force(bundle: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .args([
            "brute-force",
            "--repeats",
            "1",
            "--message-format",
            "json",
            "--bundle",
        ])
        .arg(bundle)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

/// The one JSON line the command prints for the kernel.
fn summary(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert_eq!(lines[0]["reason"], "brute-forced");
    lines[0].clone()
}

#[test]
fn brute_forces_a_small_space_into_a_cache_file_the_simulator_replays() {
    let dir = tempfile::tempdir().unwrap();
    // 4 × 3 = 12 configurations; WG * U <= 128 drops (64, 4): 11 valid.
    let args = format!(
        r#"code = {SOURCE:?}, params(WG = [8, 16, 32, 64], U = [1, 2, 4]), reference(WG = 8, U = 1),
           require(n % (WG * U) == 0, WG * U <= 128),
           global = n / U, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 16384))"#
    );
    let bundle = bundle::write(dir.path(), "b.json", "Scale", &args);
    let out = dir.path().join("spaces");

    let first = summary(&brute_force(&bundle, &out, &[]));
    assert_eq!(first["kernel"], "test::Scale");
    assert_eq!(first["workload"], "w");
    assert_eq!(first["valid"], 11);
    assert_eq!(first["evaluated"], 11);
    assert_eq!(first["resumed"], 0);
    assert_eq!(first["timed"], 9);
    assert_eq!(
        first["failures"],
        serde_json::json!({ "build": 1, "wrong": 1 })
    );
    let path = PathBuf::from(first["path"].as_str().unwrap());
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with("test__Scale-") && name.contains("@w@") && name.ends_with(".json"),
        "{name}"
    );
    assert_eq!(path.parent(), Some(out.as_path()));

    // The file: a Kernel Tuner cache with one entry per valid configuration.
    let space = CacheSpace::load(&path).unwrap();
    assert_eq!(space.kernel_name, "test::Scale");
    assert!(!space.device_name.is_empty());
    assert_eq!(space.entries.len(), 11);
    assert!(
        !space.is_valid(&vec![64, 4]),
        "a configuration the constraints reject is absent"
    );
    let raw: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(raw["tune_params_keys"], serde_json::json!(["WG", "U"]));
    assert_eq!(raw["problem_size"], serde_json::json!([16384]));
    assert_eq!(raw["objective"], "time");
    assert_eq!(raw["cache"]["16,2"]["time"], "CompilationFailedConfig");
    assert_eq!(raw["cache"]["16,2"]["kfoundry_failure"]["kind"], "build");
    assert_eq!(raw["cache"]["32,4"]["time"], "RuntimeFailedConfig");
    assert_eq!(raw["cache"]["32,4"]["kfoundry_failure"]["kind"], "wrong");
    assert_eq!(raw["kfoundry"]["workload"], "w");
    assert_eq!(raw["kfoundry"]["repeats"], 1);
    assert_eq!(raw["kfoundry"]["complete"], true);
    // What the engine's work-group limit needs: `local`'s parameter and the driver's limit.
    assert_eq!(
        raw["kfoundry"]["work_group"]["params"],
        serde_json::json!(["WG"])
    );
    assert!(raw["kfoundry"]["work_group"]["limit"].as_u64() >= Some(1));
    assert!(raw["cache"]["8,1"]["time"].as_f64().unwrap() > 0.0);
    // The best recorded configuration is a correct one.
    let best = space
        .entries
        .iter()
        .filter_map(|(c, e)| e.time_ms.as_ref().ok().map(|t| (c.clone(), *t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert!(best.0 != vec![16, 2] && best.0 != vec![32, 4], "{best:?}");
    let best_json: Vec<i64> = ["WG", "U"]
        .iter()
        .map(|n| first["best"][n].as_i64().unwrap())
        .collect();
    assert_eq!(best_json, best.0);

    // The simulator replays it and, with a budget as large as the space, finds the optimum.
    let sim = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .args([
            "simulate",
            "--runs",
            "3",
            "--budget-evals",
            "12",
            "--message-format",
            "json",
        ])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&sim.stdout);
    assert!(
        sim.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for r in runs {
        assert_eq!(r["fraction"].as_f64(), Some(1.0), "{r}");
    }
    assert_eq!(report["incomplete"], false);

    // Other engine settings replay through --set; an unknown one is a clear error.
    let simulate_with = |set: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
            .args([
                "simulate",
                "--runs",
                "1",
                "--budget-evals",
                "12",
                "--message-format",
                "json",
            ])
            .args(set.iter().flat_map(|s| ["--set", s]))
            .arg(&path)
            .output()
            .unwrap()
    };
    let plain = simulate_with(&["screening=1", "screen_model=Nearest"]);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let unknown = simulate_with(&["screenings=1"]);
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        !unknown.status.success()
            && stderr.contains("screenings")
            && stderr.contains("no such setting"),
        "{stderr}"
    );

    // A space larger than --max-configs is refused, naming the kernel and the count.
    let refused = brute_force(&bundle, &out, &["--max-configs", "5"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("test::Scale")
            && stderr.contains("11 valid configurations")
            && stderr.contains("--max-configs 5"),
        "{stderr}"
    );
    assert_eq!(
        CacheSpace::load(&path).unwrap().entries.len(),
        11,
        "the earlier file is untouched"
    );

    // Resuming a finished run evaluates nothing.
    let before = std::fs::read_to_string(&path).unwrap();
    let again = summary(&brute_force(&bundle, &out, &["--resume"]));
    assert_eq!(again["evaluated"], 0);
    assert_eq!(again["resumed"], 11);
    assert_eq!(again["best"], first["best"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);

    // Resuming with other measurement settings is refused.
    let other = brute_force(&bundle, &out, &["--resume", "--seed", "3"]);
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(
        !other.status.success() && stderr.contains("cannot resume") && stderr.contains("--seed"),
        "{stderr}"
    );
}
