//! `report --cross` on the local device (PoCL in CI): a lockfile holding winners of this device
//! and of another one; the other's winner is re-measured here and hws computed.

use std::process::Command;

use kfoundry_tooling::lockfile::Lockfile;

use crate::common;

use common::bundle;

const SOURCE: &str = r#"
__kernel void scale(const int n, __global const float* x, __global float* y) {
    int i = get_global_id(0) * U;
    for (int u = 0; u < U; u++) y[i + u] = 2.0f * x[i + u];
}
"#;

#[test]
fn cross_measures_the_other_devices_winner_here() {
    let dir = tempfile::tempdir().unwrap();
    let args = format!(
        r#"code = {SOURCE:?}, params(WG = [8, 64], U = [1, 4]), reference(WG = 8, U = 1), require(n % (WG * U) == 0),
           global = n / U, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 65536)), cost(bytes = 8 * n)"#
    );
    let bundle = bundle::write(dir.path(), "b.json", "Scale", &args);
    let lock = dir.path().join("Kfoundry.lock");
    let exe = env!("CARGO_BIN_EXE_cargo-kfoundry");
    let tune = Command::new(exe)
        .args([
            "tune",
            "-q",
            "--budget-evals",
            "4",
            "--repeats",
            "1",
            "--bundle",
        ])
        .arg(&bundle)
        .arg("--lockfile")
        .arg(&lock)
        .output()
        .unwrap();
    assert!(
        tune.status.success(),
        "{}",
        String::from_utf8_lossy(&tune.stderr)
    );

    // Pretend another device tuned it too, to other parameters.
    let mut l = Lockfile::read(&lock).unwrap().unwrap();
    let entry = l.kernels.get_mut("test::Scale").unwrap();
    let mut other = entry.variants[0].clone();
    let here = other.device.clone();
    other.device = "10de|some gpu|1.0|3.0".into();
    other.params = [
        ("WG".to_string(), 64),
        ("U".to_string(), if other.params["U"] == 4 { 1 } else { 4 }),
    ]
    .into();
    entry.variants.push(other.clone());
    let mut info = l.devices[&here].clone();
    info.name = "Some GPU".into();
    l.devices.insert(other.device.clone(), info);
    l.write_atomic(&lock).unwrap();

    let out = Command::new(exe)
        .args([
            "report",
            "--cross",
            "--repeats",
            "2",
            "--message-format",
            "json",
            "--bundle",
        ])
        .arg(&bundle)
        .arg("--lockfile")
        .arg(&lock)
        .arg("--html")
        .arg(dir.path().join("report.html"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cells: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["result"].clone())
        .collect();
    // The HTML report made in the same run holds the matrix.
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(
        html.contains("<table class=\"cross\">") && html.contains("1.00 (itself)"),
        "the hardware-awareness matrix"
    );
    assert_eq!(cells.len(), 2, "{stdout}");
    for c in &cells {
        assert_eq!(
            c["on"],
            here.as_str(),
            "only the device present is measured on"
        );
        assert!(c["time_ns"].as_u64().unwrap() > 0);
    }
    let own = cells.iter().find(|c| c["owner"] == here.as_str()).unwrap();
    assert_eq!(own["hws"].as_f64(), Some(1.0));
    let foreign = cells
        .iter()
        .find(|c| c["owner"] == other.device.as_str())
        .unwrap();
    let hws = foreign["hws"].as_f64().unwrap();
    let ratio = foreign["time_ns"].as_f64().unwrap() / own["time_ns"].as_f64().unwrap();
    assert!(
        (hws - ratio).abs() < 0.01 * ratio,
        "hws {hws} is the ratio of the measured times {ratio}"
    );

    // Without --cross: the recorded winners.
    let out = Command::new(exe)
        .args(["report", "--bundle"])
        .arg(&bundle)
        .arg("--lockfile")
        .arg(&lock)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("test::Scale") && text.contains("Some GPU"),
        "{text}"
    );
}

#[test]
fn roofline_stop_ends_the_search_once_close_enough() {
    let dir = tempfile::tempdir().unwrap();
    let args = format!(
        r#"code = {SOURCE:?}, params(WG = [8, 16, 32, 64], U = [1, 2, 4]), reference(WG = 8, U = 1), require(n % (WG * U) == 0),
           global = n / U, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 65536)), cost(bytes = 8 * n)"#
    );
    let bundle = bundle::write(dir.path(), "b.json", "Scale", &args);
    let lock = dir.path().join("Kfoundry.lock");
    let tune = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
            .args([
                "tune",
                "--budget-evals",
                "6",
                "--repeats",
                "1",
                "--message-format",
                "json",
                "--bundle",
            ])
            .arg(&bundle)
            .arg("--lockfile")
            .arg(&lock)
            .args(extra)
            .env("KFOUNDRY_CACHE_DIR", dir.path().join("cache"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let tuned: serde_json::Value = stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["reason"] == "tuned")
            .unwrap();
        tuned["result"].clone()
    };
    let full = tune(&[]);
    assert_eq!(full["evaluations"], 6);
    let roofline = full["roofline"]
        .as_f64()
        .expect("a roofline fraction from cost(...) and the measured peaks");
    assert!(roofline > 0.0);
    // Any fraction the first candidate already reaches stops the search right after it.
    let early = tune(&["--roofline-stop", "1e-9"]);
    assert_eq!(early["evaluations"], 1, "{early}");
}
