//! What a tune prints when stderr is not a terminal (a CI log, `| tee`): a line when each
//! search starts and ends, progress lines in between, and `-v`'s line per evaluation.

use std::process::Command;

use crate::common;

use common::bundle;

#[test]
fn progress_is_line_oriented_off_a_terminal_and_verbose_works_there() {
    let dir = tempfile::tempdir().unwrap();
    let args = r#"code = "__kernel void scale(const int n, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = 2.0f * x[i]; }",
        params(WG = [16, 32, 64]), reference(WG = 16), global = n, local = WG, buffers(x = n, y = n), check(y), workloads(small(n = 4096))"#;
    let bundle = bundle::write(dir.path(), "b.json", "Scale", args);
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .args([
            "tune",
            "-v",
            "--budget-evals",
            "3",
            "--repeats",
            "1",
            "--bundle",
        ])
        .arg(&bundle)
        .arg("--lockfile")
        .arg(dir.path().join("K.lock"))
        // a progress line after every evaluation instead of every 10 s
        .env("KFOUNDRY_PROGRESS_SECS", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for expected in [
        "test::Scale @ small: searching (budget 3 evaluations)",
        "test::Scale @ small: 1/3 evaluations, search best",
        "test::Scale @ small: 3/3 evaluations, search best",
        "test::Scale @ small: search done, 3 evaluations, search best",
        "  Reference WG=16 → ",
    ] {
        assert!(
            stderr.contains(expected),
            "expected {expected:?} in:\n{stderr}"
        );
    }
}

/// A kernel the compiler warns about (a pointer of another type): the warning is shown once
/// under the table with how many times it came, never "1 warning generated." per build, and
/// it is in the JSON result.
#[test]
fn compiler_warnings_are_shown_once_per_search() {
    let dir = tempfile::tempdir().unwrap();
    let args = r#"code = "__kernel void scale(const int n, __global const float* x, __global float* y) {
            __global const int* bits = x;
            int i = get_global_id(0) * U;
            for (int u = 0; u < U; u++) if (i + u < n) y[i + u] = 2.0f * x[i + u] + (bits == 0);
        }",
        params(U = [1, 2, 4]), reference(U = 1), global = ceil_div(n, U), buffers(x = n, y = n), check(y), workloads(small(n = 4096))"#;
    let bundle = bundle::write(dir.path(), "b.json", "Scale", args);
    let tune = |json: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"));
        cmd.args(["tune", "--budget-evals", "3", "--repeats", "1", "--bundle"])
            .arg(&bundle)
            .arg("--lockfile")
            .arg(dir.path().join("K.lock"));
        if json {
            cmd.args(["--message-format", "json"]);
        }
        let out = cmd.env("POCL_KERNEL_CACHE", "0").output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let out = tune(false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("warning generated"), "{stderr}");
    assert!(
        stderr.contains("test::Scale @ small: the OpenCL compiler warned"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("incompatible pointer types").count(),
        1,
        "once, however many builds: {stderr}"
    );
    // Named by the kernel's own place (here a bundle's inline `code`), not the driver's copy.
    assert!(
        stderr.contains("x) warning: inline:1 (inline `code`):"),
        "{stderr}"
    );
    let out = tune(true);
    let tuned = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains("\"tuned\""))
        .map(str::to_string)
        .expect("a tuned message");
    assert!(
        tuned.contains("build_warnings") && tuned.contains("incompatible pointer types"),
        "{tuned}"
    );
}

/// A tune's `tuned` message says where its wall time went: the worker's start, the search, the
/// proof (with the worker's own timing of its parts) and the re-measure, each within the
/// whole.
#[test]
fn the_tuned_message_says_where_the_time_went() {
    let dir = tempfile::tempdir().unwrap();
    // The reference waits at 64 barriers (the same result, far slower), so that a finalist
    // beats it on re-measure and is proven: only a finalist faster than the reference is.
    let args = r#"code = "__kernel void scale(const int n, __global const float* x, __global float* y) {
            int i = get_global_id(0) * U;
            for (int r = 0; r < (U == 1 ? 64 : 0); r++) barrier(CLK_GLOBAL_MEM_FENCE);
            for (int u = 0; u < U; u++) if (i + u < n) y[i + u] = 2.0f * x[i + u];
        }",
        params(U = [1, 2, 4]), reference(U = 1), global = ceil_div(n, U), buffers(x = n, y = n), check(y), workloads(small(n = 4096))"#;
    let bundle = bundle::write(dir.path(), "b.json", "Scale", args);
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .args(["tune", "--budget-evals", "3", "--repeats", "1", "--bundle"])
        .arg(&bundle)
        .arg("--lockfile")
        .arg(dir.path().join("K.lock"))
        .args(["--message-format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|m| m["reason"] == "tuned")
        .expect("a tuned message")["result"]
        .clone();
    let phases = &result["phases"];
    let secs = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{result}"));
    let whole = secs(&result["seconds"]);
    let [start, search, proof, remeasure] =
        ["start", "search", "proof", "remeasure"].map(|k| secs(&phases[k]));
    assert!(start > 0.0 && search > 0.0 && remeasure > 0.0, "{result}");
    assert!(
        start + search + proof + remeasure <= whole + 1e-3,
        "{result}"
    );
    assert!(search >= secs(&result["search_seconds"]), "{result}");
    let parts = phases["proof_parts"].as_object().expect("proof parts");
    let sum: f64 = parts.values().map(secs).sum();
    assert!(
        sum <= proof + 1e-3,
        "the worker's parts fit in the proof: {result}"
    );
    // The search's three evaluations are the whole space: its finalists other than the
    // reference were proven (whether or not one then beat it), and their cases drew, uploaded,
    // ran and compared.
    for part in [
        "draw",
        "upload",
        "reference",
        "candidate",
        "compare",
        "check_reference",
    ] {
        assert!(secs(&parts[part]) > 0.0, "{part}: {result}");
    }
}

/// After a tune, `report --html` writes one self-contained file: the kernel, reference against
/// winner, the convergence plots and the archive drawn as inline SVG, dispatch per device, and
/// nothing fetched from anywhere.
#[test]
fn the_html_report_is_self_contained_and_draws_the_search() {
    let dir = tempfile::tempdir().unwrap();
    // U = 8 does not build: the report lists its failures.
    let args = r##"code = "#if U == 8
        #error eight is too many
        #endif
        __kernel void scale(const int n, __global const float* x, __global float* y) { int i = get_global_id(0) * U; for (int u = 0; u < U; u++) if (i + u < n) y[i + u] = 2.0f * x[i + u]; }",
        params(U = [1, 2, 4, 8], WG = [16, 32, 64]), reference(U = 1, WG = 16), require(n % (U * WG) == 0),
        global = n / U, local = WG, buffers(x = n, y = n), check(y), workloads(small(n = 8192)), cost(bytes = 8 * n, flops = n)"##;
    let bundle = bundle::write(dir.path(), "b.json", "Scale", args);
    let lock = dir.path().join("K.lock");
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
            .args(extra)
            .arg("--bundle")
            .arg(&bundle)
            .arg("--lockfile")
            .arg(&lock)
            // the device's measured peaks (for the roofline) cached here
            .env("KFOUNDRY_CACHE_DIR", dir.path().join("cache"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // every one of the 12 configurations
    run(&["tune", "-q", "--budget-evals", "12", "--repeats", "1"]);
    let report = dir.path().join("report.html");
    run(&["report", "--html", report.to_str().unwrap()]);
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    assert!(
        html.contains("<h2 id=\"test::Scale\">"),
        "the kernel's section"
    );
    assert_eq!(
        html.matches("<svg class=\"convergence\"").count(),
        2,
        "against evaluations and against seconds"
    );
    assert!(
        html.contains("<polyline class=\"best\""),
        "the best-so-far line is drawn"
    );
    assert!(
        html.contains("<svg class=\"archive\"") && html.contains("<rect "),
        "the archive's cells are drawn"
    );
    assert!(
        html.contains("chosen: exact device"),
        "dispatch as explain() says it"
    );
    assert!(
        html.contains("<td>Build</td><td>3</td>") && html.contains("eight is too many"),
        "failures by kind with their first lines"
    );
    assert!(
        html.contains("<a class=\"log\" href=\"file://"),
        "a link to the failure log"
    );
    assert!(
        html.contains("<svg class=\"roofline\"") && html.matches("<circle ").count() == 2,
        "the roofline with the reference and the winner"
    );
    assert!(
        !html.contains("http://") && !html.contains("https://") && !html.contains("<script src"),
        "nothing is fetched"
    );
    // By default under the tune's state directory.
    run(&["report", "--html"]);
    assert!(dir.path().join("target/kfoundry/report.html").exists());
}

/// The report in a real browser: headless Chromium (Debian's `chromium`, which `.ci/run`
/// installs) loads it without a console error, its DOM has the charts drawn, and a screenshot
/// is taken. Skipped, saying so, where no Chromium is installed, unless `.ci/run` said it
/// installed one (`KFOUNDRY_TEST_CHROMIUM=1`): then a missing browser fails the test.
#[test]
fn the_html_report_renders_in_headless_chromium() {
    let Some(browser) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    else {
        assert_ne!(
            std::env::var("KFOUNDRY_TEST_CHROMIUM").as_deref(),
            Ok("1"),
            "KFOUNDRY_TEST_CHROMIUM=1 but no Chromium runs here"
        );
        eprintln!("skipped: no Chromium installed (apt-get install chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let args = r#"code = "__kernel void scale(const int n, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = 2.0f * x[i]; }",
        params(WG = [16, 32, 64]), reference(WG = 16), global = n, local = WG, buffers(x = n, y = n), check(y), workloads(small(n = 8192))"#;
    let bundle = bundle::write(dir.path(), "b.json", "Scale", args);
    let lock = dir.path().join("K.lock");
    let report = dir.path().join("report.html");
    for extra in [
        &["tune", "-q", "--budget-evals", "4", "--repeats", "1"][..],
        &["report", "--html", report.to_str().unwrap()][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
            .args(extra)
            .arg("--bundle")
            .arg(&bundle)
            .arg("--lockfile")
            .arg(&lock)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let url = format!("file://{}", report.display());
    let chromium = |extra: &[&str]| {
        let out = Command::new(browser)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("profile").display()
            ))
            .args(extra)
            .arg(&url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (dom, log) = chromium(&["--dump-dom"]);
    assert!(
        !log.lines().any(|l| l.contains("CONSOLE")),
        "console messages: {log}"
    );
    assert!(
        dom.contains("<polyline class=\"best\"") && dom.contains("<rect "),
        "charts in the DOM the browser built"
    );
    let shot = dir.path().join("report.png");
    chromium(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1000,760",
    ]);
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a screenshot of {} bytes",
        png.len()
    );
}
