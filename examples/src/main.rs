//! Runs the example kernels through kfoundry's dispatch on the default OpenCL device and checks
//! each result against a CPU computation. Prints one line per kernel:
//! `<name>: <dispatch step> (<parameters>) ok`. Exits non-zero on any mismatch.
//!
//! `cargo run -p kfoundry-examples` runs at the sizes of the `small` workloads; pass `large`
//! as the first argument for the `large` ones.

use kfoundry::ocl::{Buffer, Context, Device, Queue};
use kfoundry::Choice;
use kfoundry_examples::Saxpy;

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
    let context = Context::builder().platform(platform).devices(device).build()?;
    let queue = Queue::new(&context, device, None)?;
    eprintln!("device: {}", kfoundry::device_key(&device)?);
    saxpy(&queue, &device, if large { 1 << 22 } else { 1 << 16 })?;
    Ok(())
}

fn report(name: &str, choice: &Choice, mismatches: usize, len: usize) -> Result<()> {
    let params: Vec<String> = choice.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("{name}: {} ({}) {}", choice.step, params.join(", "), if mismatches == 0 { "ok" } else { "WRONG" });
    if mismatches > 0 {
        return Err(format!("{name}: {mismatches} of {len} elements differ from the CPU result").into());
    }
    Ok(())
}

/// Deterministic test data in [-1, 1).
fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len as u32).map(|i| ((i.wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 2000) as f32 / 1000.0 - 1.0).collect()
}

fn saxpy(queue: &Queue, device: &Device, n: usize) -> Result<()> {
    let (a, x, y0) = (2.5f32, data(n, 1), data(n, 2));
    let xb = Buffer::builder().queue(queue.clone()).len(n).copy_host_slice(&x).build()?;
    let yb = Buffer::builder().queue(queue.clone()).len(n).copy_host_slice(&y0).build()?;
    Saxpy::launch(queue, n, a, &xb, &yb)?;
    let mut y = vec![0f32; n];
    yb.read(&mut y).enq()?;
    let bad = (0..n).filter(|&i| (y[i] - a.mul_add(x[i], y0[i])).abs() > 1e-5).count();
    report("saxpy", &Saxpy::explain(device, n)?, bad, n)
}
