//! Device peaks for the roofline: a copy-bandwidth and an FP32 multiply-add micro-benchmark
//! run through OpenCL on the device, cached per device key in
//! `${XDG_CACHE_HOME:-~/.cache}/kfoundry/peaks.json` (or `$KFOUNDRY_CACHE_DIR`).
//!
//! These are what a simple OpenCL kernel reaches, not the spec sheet: a kernel's roofline
//! fraction is its time against the floor `max(bytes / bandwidth, flops / rate)` from its
//! `cost(...)`, so above 100% would mean the micro-benchmark under-measured.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;
use kfoundry_rt::opencl::session::{Session, Timing};
use kfoundry_rt::{Arg, Scalar};

use super::Selected;

pub use kfoundry_messages::Peaks;

fn cache_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("KFOUNDRY_CACHE_DIR") {
        return Some(PathBuf::from(dir).join("peaks.json"));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("kfoundry").join("peaks.json"))
}

/// Every device's peaks measured so far on this machine (by device key), none measured now.
pub fn cached() -> BTreeMap<String, Peaks> {
    read_cache()
}

fn read_cache() -> BTreeMap<String, Peaks> {
    cache_path()
        .and_then(|p| kfoundry_tooling::files::read_text_bounded(&p, 1 << 20, "peaks cache").ok())
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// The cached peaks of `device`, measured now when absent (or when `remeasure`).
pub fn of(device: &Selected, remeasure: bool) -> Result<Peaks> {
    let key = device.key.to_string();
    let mut cache = read_cache();
    if let (Some(p), false) = (cache.get(&key), remeasure) {
        return Ok(*p);
    }
    let peaks = measure(device)?;
    cache.insert(key, peaks);
    if let Some(path) = cache_path() {
        // A cache that cannot be written only costs a re-measure next time.
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Ok(json) = serde_json::to_vec_pretty(&cache) {
            let _ = kfoundry_tooling::files::write_atomic(&path, &json);
        }
    }
    Ok(peaks)
}

const SOURCE: &str = r#"
__kernel void copy(__global const float4* a, __global float4* b) {
    size_t i = get_global_id(0);
    b[i] = a[i];
}
__kernel void mad_rate(__global float* out, const float s) {
    float x = (float)get_global_id(0) * 1e-9f;
    float4 a0 = (float4)(x, x + 1, x + 2, x + 3), a1 = a0 + 4, a2 = a0 + 8, a3 = a0 + 12;
    float4 a4 = a0 + 16, a5 = a0 + 20, a6 = a0 + 24, a7 = a0 + 28;
    const float4 m = (float4)(s), c = (float4)(1e-7f);
    for (int i = 0; i < ITERS; i++) {
        a0 = mad(a0, m, c); a1 = mad(a1, m, c); a2 = mad(a2, m, c); a3 = mad(a3, m, c);
        a4 = mad(a4, m, c); a5 = mad(a5, m, c); a6 = mad(a6, m, c); a7 = mad(a7, m, c);
    }
    float4 t = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    out[get_global_id(0)] = t.x + t.y + t.z + t.w;
}
"#;
const ITERS: u64 = 512;

/// Runs both micro-benchmarks on the device (a second or two).
pub fn measure(device: &Selected) -> Result<Peaks> {
    let session = Session::on_device(device.index)?;
    let limits = session.limits()?;
    let program = session.build("kfoundry peaks", SOURCE, &format!("-D ITERS={ITERS}"))?;

    // Copy: 256 MiB each way, or a quarter of the largest allocation when that is smaller.
    let bytes = ((256usize << 20)
        .min(usize::try_from(limits.max_alloc_bytes / 4).unwrap_or(usize::MAX))
        / 16
        * 16)
        .max(16);
    let n4 = bytes / 16;
    // (what is copied does not matter to the bandwidth)
    let a = session.alloc(bytes)?;
    let b = session.alloc(bytes)?;
    let copy = session.kernel(&program, "copy")?;
    // SAFETY: the copy kernel touches a[i] and b[i] for i < n4 float4s only: both hold n4.
    let copy_s = best_of(&session, 10, || unsafe {
        session.launch_raw(&copy, &[n4], None, &[a.arg(), b.arg()], true)
    })?;

    // FP32: enough work-items to fill the device several times over.
    let global = (device.info.compute_units.max(1) as usize) * 4096;
    let out = session.alloc(global * 4)?;
    let rate = session.kernel(&program, "mad_rate")?;
    // SAFETY: the kernel writes out[i] for i < global only: `out` holds `global` floats.
    let mad_s = best_of(&session, 5, || unsafe {
        session.launch_raw(
            &rate,
            &[global],
            None,
            &[out.arg(), Arg::Scalar(Scalar::F32(0.999))],
            true,
        )
    })?;
    let flops = global as f64 * ITERS as f64 * 8.0 * 4.0 * 2.0;
    Ok(Peaks {
        copy_gbytes_per_s: 2.0 * bytes as f64 / copy_s / 1e9,
        gflops: flops / mad_s / 1e9,
    })
}

/// The fastest of `runs` timed runs after one warm-up, in seconds (peaks are best cases).
fn best_of(
    session: &Session,
    runs: usize,
    mut run: impl FnMut() -> Result<Option<Timing>, kfoundry_rt::Error>,
) -> Result<f64> {
    if let Some(t) = run()? {
        t.seconds()?;
    }
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        if let Some(t) = run()? {
            best = best.min(t.seconds()?);
        }
    }
    session.finish()?;
    Ok(best.max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_is_the_slower_of_memory_and_compute() {
        let p = Peaks {
            copy_gbytes_per_s: 100.0,
            gflops: 1000.0,
        };
        assert_eq!(p.floor_seconds(None, None), None);
        assert!((p.floor_seconds(Some(1e9), None).unwrap() - 0.01).abs() < 1e-12);
        assert!((p.floor_seconds(Some(1e9), Some(1e11)).unwrap() - 0.1).abs() < 1e-12);
    }
}
