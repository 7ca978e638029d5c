//! Runs the example kernels through kfoundry's dispatch on the default OpenCL device and checks
//! each result against a CPU computation. Exits non-zero on any mismatch.

use kfoundry::ocl::{Buffer, Context, Queue};
use kfoundry_examples::Saxpy;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (platform, device) = kfoundry::default_device()?;
    let context = Context::builder().platform(platform).devices(device).build()?;
    let queue = Queue::new(&context, device, None)?;
    println!("device: {}", kfoundry::device_key(&device)?);

    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.01).collect();
    let y0: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
    let xb = Buffer::builder().queue(queue.clone()).len(n).copy_host_slice(&x).build()?;
    let yb = Buffer::builder().queue(queue.clone()).len(n).copy_host_slice(&y0).build()?;
    let step = Saxpy::launch(&queue, n, 2.5, &xb, &yb)?;
    let mut y = vec![0f32; n];
    yb.read(&mut y).enq()?;
    let bad = (0..n).filter(|&i| (y[i] - (2.5f32).mul_add(x[i], y0[i])).abs() > 1e-5).count();
    print!("{}", Saxpy::explain(&device, n)?);
    println!("saxpy: {step}, {bad} mismatches of {n}");
    if bad > 0 {
        return Err("saxpy result mismatch".into());
    }
    Ok(())
}
