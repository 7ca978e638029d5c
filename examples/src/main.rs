//! Runs the example kernels through kfoundry's dispatch on the default OpenCL device and checks
//! each result against a CPU computation. Prints one line per kernel:
//! `<name>: <dispatch step> (<parameters>) ok`. Exits non-zero on any mismatch.
//!
//! `cargo run -p kfoundry-examples` runs at the sizes of the `small` workloads; pass `large`
//! as the first argument for the `large` ones of the first three kernels. The suite's kernels
//! (`src/suite.rs`) always run at their `small` sizes here; `src/bin/suite.rs` runs them at full
//! size on a GPU.

use kfoundry::ocl::{Buffer, Context, Device, Queue};
use kfoundry::Choice;
use kfoundry_examples::checks::{self, small, How, Outcome};
use kfoundry_examples::cpu::Half;
use kfoundry_examples::{RowSum, Saxpy, Sgemm, SgemmLargeK};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn run() -> Result<()> {
    let large = std::env::args().nth(1).as_deref() == Some("large");
    let (platform, device) = kfoundry::default_device()?;
    let context = Context::builder()
        .platform(platform)
        .devices(device)
        .build()?;
    let queue = Queue::new(&context, device, None)?;
    eprintln!("device: {}", kfoundry::device_key(&device)?);
    saxpy(&queue, &device, if large { 1 << 22 } else { 1 << 16 })?;
    let (rows, cols) = if large { (1024, 8192) } else { (256, 1024) };
    row_sum(&queue, &device, rows, cols)?;
    let s = if large { 256 } else { 128 };
    sgemm(&queue, &device, s, s, s)?;
    sgemm_large_k(&queue, &device, 64, 64, 8192)?;
    suite(&queue)
}

/// The suite's kernels at their `small` sizes, through dispatch, checked against the CPU.
fn suite(queue: &Queue) -> Result<()> {
    let d = How::Dispatch;
    let (m, n, k) = small::SGEMM;
    suite_report("suite_sgemm", checks::sgemm(queue, d, m, n, k)?)?;
    for (name, format) in [("suite_hgemm", Half::F16), ("suite_bgemm", Half::Bf16)] {
        suite_report(name, checks::gemm16(queue, d, format, m, n, k)?)?;
    }
    let (rows, cols, chunk) = small::SOFTMAX_STAGES;
    suite_report(
        "softmax",
        checks::softmax_stages(queue, (d, d), rows, cols, chunk)?,
    )?;
    let (n, dd, chunk) = small::LAYERNORM;
    suite_report("layernorm", checks::layernorm(queue, (d, d), n, dd, chunk)?)?;
    let (b, r, c) = small::SUM;
    suite_report("sum_dim1", checks::sum_dim1(queue, d, b, r, c)?)?;
    let (m, n, k) = small::LINEAR;
    suite_report(
        "linear_gelu_softmax",
        checks::linear(queue, (d, d), m, n, k)?,
    )?;
    suite_report("conv_groupnorm", checks::conv_gn(queue, d, small::CONV)?)?;
    Ok(())
}

fn suite_report(name: &str, o: Outcome) -> Result<()> {
    println!("{name}: {} {}", o.ran, if o.ok() { "ok" } else { "WRONG" });
    if !o.ok() {
        return Err(format!(
            "{name}: {} of {} elements differ from the CPU result",
            o.mismatches, o.len
        )
        .into());
    }
    Ok(())
}

fn report(name: &str, choice: &Choice, mismatches: usize, len: usize) -> Result<()> {
    let params = kfoundry::model::spec::fmt_assignments(&choice.params, ", ");
    println!(
        "{name}: {} ({params}) {}",
        choice.step,
        if mismatches == 0 { "ok" } else { "WRONG" }
    );
    if mismatches > 0 {
        return Err(
            format!("{name}: {mismatches} of {len} elements differ from the CPU result").into(),
        );
    }
    Ok(())
}

/// Deterministic test data in [-1, 1).
fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| {
            ((i.wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn saxpy(queue: &Queue, device: &Device, n: usize) -> Result<()> {
    let (a, x, y0) = (2.5f32, data(n, 1), data(n, 2));
    let xb = Buffer::builder()
        .queue(queue.clone())
        .len(n)
        .copy_host_slice(&x)
        .build()?;
    let yb = Buffer::builder()
        .queue(queue.clone())
        .len(n)
        .copy_host_slice(&y0)
        .build()?;
    Saxpy::launch(queue, n, a, &xb, &yb)?;
    let mut y = vec![0f32; n];
    yb.read(&mut y).enq()?;
    let bad = (0..n)
        .filter(|&i| (y[i] - a.mul_add(x[i], y0[i])).abs() > 1e-5)
        .count();
    report("saxpy", &Saxpy::explain(device, n)?, bad, n)
}

fn row_sum(queue: &Queue, device: &Device, rows: usize, cols: usize) -> Result<()> {
    let m: Vec<f32> = data(rows * cols, 3).iter().map(|v| v.abs()).collect();
    let mb = Buffer::builder()
        .queue(queue.clone())
        .len(m.len())
        .copy_host_slice(&m)
        .build()?;
    let ob = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(rows)
        .fill_val(f32::NAN)
        .build()?;
    RowSum::launch(queue, rows, cols, &mb, &ob)?;
    let mut out = vec![0f32; rows];
    ob.read(&mut out).enq()?;
    let bad = (0..rows)
        .filter(|&r| {
            let want: f64 = m[r * cols..(r + 1) * cols].iter().map(|v| *v as f64).sum();
            kfoundry_examples::cpu::differs(out[r] as f64, want, 1e-4, 1e-5)
        })
        .count();
    report("row_sum", &RowSum::explain(device, rows, cols)?, bad, rows)
}

fn sgemm(queue: &Queue, device: &Device, m: usize, n: usize, k: usize) -> Result<()> {
    let launch = |ab: &Buffer<f32>, bb: &Buffer<f32>, cb: &Buffer<f32>| {
        Sgemm::launch(queue, m, n, k, ab, bb, cb).map(|_| ())
    };
    let bad = matmul_mismatches(queue, (m, n, k), 1e-4, launch)?;
    report("sgemm", &Sgemm::explain(device, m, n, k)?, bad, m * n)
}

/// The split-K GEMM, called twice: its scratch (the launcher's) must be all zero again for the
/// second call to be right.
fn sgemm_large_k(queue: &Queue, device: &Device, m: usize, n: usize, k: usize) -> Result<()> {
    let launch = |ab: &Buffer<f32>, bb: &Buffer<f32>, cb: &Buffer<f32>| {
        SgemmLargeK::launch(queue, m, n, k, ab, bb, cb)?;
        SgemmLargeK::launch(queue, m, n, k, ab, bb, cb).map(|_| ())
    };
    // A sum of 8192 products in FP32 is off by up to about 3e-4 where it nears zero.
    let bad = matmul_mismatches(queue, (m, n, k), 1e-3, launch)?;
    let choice = SgemmLargeK::explain(device, m, n, k)?;
    report("sgemm_large_k", &choice, bad, m * n)
}

/// C = A·B through `launch` on fresh inputs: the outputs that differ from the CPU's FP64 by
/// more than `atol` plus 1e-4 of it.
fn matmul_mismatches(
    queue: &Queue,
    (m, n, k): (usize, usize, usize),
    atol: f64,
    launch: impl Fn(
        &Buffer<f32>,
        &Buffer<f32>,
        &Buffer<f32>,
    ) -> std::result::Result<(), kfoundry::Error>,
) -> Result<usize> {
    let (a, b) = (data(m * k, 4), data(k * n, 5));
    let ab = Buffer::builder()
        .queue(queue.clone())
        .len(a.len())
        .copy_host_slice(&a)
        .build()?;
    let bb = Buffer::builder()
        .queue(queue.clone())
        .len(b.len())
        .copy_host_slice(&b)
        .build()?;
    let cb = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(m * n)
        .fill_val(f32::NAN)
        .build()?;
    launch(&ab, &bb, &cb)?;
    let mut c = vec![0f32; m * n];
    cb.read(&mut c).enq()?;
    let mut bad = 0;
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                .sum();
            if kfoundry_examples::cpu::differs(c[i * n + j] as f64, want, 1e-4, atol) {
                bad += 1;
            }
        }
    }
    Ok(bad)
}
