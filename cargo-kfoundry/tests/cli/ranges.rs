//! `ranges(...)`: a kernel tuned for the sizes a program calls it at. Its anchors are tuned,
//! a portfolio of at most four variants is chosen among their winners, each proven over its
//! bucket of the range, and dispatch finds one of them at every size of the range (on PoCL).

use std::path::Path;
use std::process::Output;

use kfoundry_rt::model::device::DeviceKey;
use kfoundry_rt::model::select::{choose, Step};
use kfoundry_rt::model::spec::Sizes;
use kfoundry_tooling::lockfile::Lockfile;

use crate::common;

use common::bundle;

fn tune(bundle: &Path, lock: &Path, extra: &[&str]) -> Output {
    common::tune(bundle, lock, "4", extra)
}

/// y = 2x + y, `VEC` elements per work-item with a correct tail: every configuration is right
/// at every `n`, and which is fastest depends on `n`.
pub(crate) const SCALE: &str = r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) {
        int i = get_global_id(0) * VEC;
        for (int v = 0; v < VEC; v++) if (i + v < n) y[i + v] = 2.0f * x[i + v] + y[i + v];
    }", params(WG = [1, 16, 64], VEC = [1, 4]), reference(WG = 1, VEC = 1), global = ceil_div(n, VEC * WG) * WG, local = WG,
    buffers(x = n, y = n), inputs(y = uniform(-1.0, 1.0)), check(y), ranges(n = 1..=4096)"#;

/// The size set `n = v`.
pub(crate) fn n(v: i64) -> Sizes {
    [("n".to_string(), v)].into()
}

#[test]
fn a_range_is_served_by_a_portfolio_proven_over_its_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "b.json", "Scale", SCALE);
    let lock = dir.path().join("K.lock");
    let out = tune(&b, &lock, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("portfolio `test::Scale`"), "{stderr}");
    eprintln!("{}", &stderr[stderr.find("portfolio").unwrap_or(0)..]);
    let spec = bundle::spec(SCALE, dir.path(), "Scale");
    let anchors: Vec<&str> = spec.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(
        anchors,
        [
            "range_n_1",
            "range_n_4",
            "range_n_16",
            "range_n_64",
            "range_n_256",
            "range_n_1024",
            "range_n_4096"
        ]
    );
    let l = Lockfile::read(&lock).unwrap().unwrap();
    let variants = &l.kernels["test::Scale"].variants;
    assert_eq!(
        variants.len(),
        anchors.len(),
        "every anchor records its bucket's variant"
    );
    let distinct: std::collections::BTreeSet<_> = variants.iter().map(|v| &v.params).collect();
    assert!(distinct.len() <= 4, "{distinct:?}");
    for v in variants {
        kfoundry_rt::model::variant::check_variant(&spec, v, &[]).unwrap();
    }
    // The summary table shows what was recorded at each anchor (the bucket's variant), not the
    // anchor's own winner that the portfolio replaced.
    let stdout = String::from_utf8_lossy(&out.stdout);
    for v in variants {
        let params = kfoundry_rt::model::spec::fmt_assignments(&v.params, " ");
        assert!(
            stdout.lines().any(
                |l| l.contains(&format!(" {} ", v.workload)) && l.trim_end().ends_with(&params)
            ),
            "{} {params} not in the summary:\n{stdout}",
            v.workload
        );
    }
    // At every size of the range (powers of two, their neighbours, residues), exactly one
    // bucket's variant is eligible: all that dispatch may choose there have the same parameters.
    let key = DeviceKey::parse(&variants[0].device).unwrap();
    for size in [
        1, 2, 3, 5, 7, 9, 15, 17, 31, 33, 100, 127, 129, 255, 257, 999, 1023, 1025, 2047, 3000,
        4095, 4096,
    ] {
        let eligible: std::collections::BTreeSet<_> = variants
            .iter()
            .filter(|v| v.proven_range()["n"].0 <= size && size <= v.proven_range()["n"].1)
            .map(|v| &v.params)
            .collect();
        assert_eq!(eligible.len(), 1, "n = {size}: {eligible:?}");
        let c = choose(&spec, variants, &key, None, None, &n(size), None).unwrap();
        assert_eq!(c.step, Step::ExactDevice, "n = {size}: {:?}", c.reasons);
        assert_eq!(&c.params, *eligible.iter().next().unwrap());
        assert!(
            c.reasons
                .iter()
                .any(|r| r.contains("the buckets of `ranges`") && r.contains("n 1..=")),
            "{:?}",
            c.reasons
        );
    }
    // Outside the range nothing was proven.
    let c = choose(&spec, variants, &key, None, None, &n(4097), None).unwrap();
    assert_eq!(c.step, Step::Reference, "{:?}", c.reasons);
    // `check --locked` is satisfied, and `check --verify` re-proves every bucket's claim here.
    common::check_locked(&b, &lock, &["--verify"]);
}

#[test]
fn a_declared_workload_beside_ranges_keeps_its_own_variant() {
    let args = SCALE.replace(
        "ranges(n = 1..=4096)",
        "ranges(n = 1..=64), workloads(big(n = 1 << 16))",
    );
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "b.json", "Scale", &args);
    let lock = dir.path().join("K.lock");
    let out = tune(&b, &lock, &["--message-format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the portfolio as a typed message: its buckets cover the range
    let portfolio: serde_json::Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|m| m["reason"] == "portfolio")
        .expect("a portfolio message");
    let buckets = portfolio["buckets"].as_array().unwrap();
    assert_eq!(buckets.first().unwrap()["lo"], 1);
    assert_eq!(buckets.last().unwrap()["hi"], 64);
    assert!(
        buckets.len() <= 4 && portfolio["kept_min"].as_f64().unwrap() > 0.0,
        "{portfolio}"
    );
    let l = Lockfile::read(&lock).unwrap().unwrap();
    let workloads: Vec<&str> = l.kernels["test::Scale"]
        .variants
        .iter()
        .map(|v| v.workload.as_str())
        .collect();
    assert!(workloads.contains(&"big"), "{workloads:?}");
    assert!(workloads.contains(&"range_n_64"), "{workloads:?}");
    // `--workload big` tunes only it: no anchor, no portfolio.
    let lock2 = dir.path().join("K2.lock");
    let out = tune(&b, &lock2, &["--workload", "big"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("portfolio"),
        "{stderr}"
    );
    // the workload's winner (and, where it has a floor, its general variant beside it)
    let variants = &Lockfile::read(&lock2).unwrap().unwrap().kernels["test::Scale"].variants;
    assert_eq!(variants.iter().filter(|v| !v.general).count(), 1);
    assert!(variants.iter().all(|v| v.workload == "big"), "{variants:?}");
}
