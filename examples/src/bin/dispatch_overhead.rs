//! What dispatch costs the host per launch, after the first: `Saxpy::launch` against a direct
//! `ocl` enqueue of the same kernel (the variant dispatch chose, built with the same options),
//! on the same queue and buffers.
//!
//! ```text
//! cargo run --release -p kfoundry-examples --bin dispatch_overhead [-- N [ROUNDS]]
//! ```
//!
//! Three ways of launching, timed in rounds that alternate between them (so that clock changes
//! and queue state hit all three alike):
//! - `enq`: an `ocl::Kernel` with its arguments set once, `kernel.enq()` per launch (the least
//!   a launch can cost through `ocl`);
//! - `set+enq`: the same kernel, its four arguments set again before each `enq()` (what a caller
//!   with new arguments per call pays; `X::launch` takes its arguments every call);
//! - `launch`: `Saxpy::launch(queue, n, a, &x, &y)`: the device's variant looked up, every
//!   argument checked against the annotation (buffer sizes, scalar types), the geometry
//!   computed from the annotation's expressions, arguments set, the kernel enqueued.
//!
//! Each round times 200 launches back to back (host time of the calls only; the queue is
//! drained, untimed, after each round). Printed: the median over rounds of the time per launch
//! for each way, and dispatch's overhead: `launch` − `set+enq` and `launch` − `enq`.

use std::time::Instant;

use kfoundry::ocl::{Buffer, Context, Kernel, Program, Queue};
use kfoundry_examples::Saxpy;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const PER_ROUND: usize = 200;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1 << 12);
    let rounds: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(100);
    let (platform, device) = kfoundry::default_device()?;
    let context = Context::builder()
        .platform(platform)
        .devices(device)
        .build()?;
    let queue = Queue::new(&context, device, None)?;
    let a = 0.5f32;
    let x = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(n)
        .fill_val(1.0)
        .build()?;
    let y = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(n)
        .fill_val(2.0)
        .build()?;

    // The variant dispatch runs here, built directly with `ocl` from the same source and options.
    let choice = Saxpy::explain(&device, n)?;
    let spec = Saxpy::evolved().spec()?;
    if choice.variant.is_some_and(|v| {
        Saxpy::evolved()
            .variants()
            .ok()
            .and_then(|vs| vs.get(v))
            .is_some_and(|v| v.source.is_some())
    }) {
        return Err(
            "the chosen variant has a generated source; this benchmark builds the annotated one"
                .into(),
        );
    }
    let options = spec.build_options(&choice.params, &[])?;
    let program = Program::builder()
        .src(spec.source.clone())
        .devices(device)
        .cmplr_opt(options)
        .build(&context)?;
    let geometry = spec.geometry(
        &choice.params,
        &[("n".to_string(), n as i64)].into_iter().collect(),
        Some(&kfoundry::traits_of(&device)?),
    )?;
    let mut builder = Kernel::builder();
    builder
        .program(&program)
        .name("saxpy")
        .queue(queue.clone())
        .global_work_size(geometry.global[0]);
    if let Some(local) = &geometry.local {
        builder.local_work_size(local[0]);
    }
    let kernel = builder.arg(n as i32).arg(a).arg(&x).arg(&y).build()?;

    let enq = || -> Result<()> {
        // SAFETY: the kernel's arguments are set (at build) to buffers of `n` floats, and its
        // geometry is the annotation's for `n`: the variant touches only x[0..n), y[0..n).
        unsafe { kernel.enq()? };
        Ok(())
    };
    let set_enq = || -> Result<()> {
        kernel.set_arg(0, n as i32)?;
        kernel.set_arg(1, a)?;
        kernel.set_arg(2, &x)?;
        kernel.set_arg(3, &y)?;
        // SAFETY: as above, with the same arguments set again.
        unsafe { kernel.enq()? };
        Ok(())
    };
    let launch = || -> Result<()> {
        Saxpy::launch(&queue, n, a, &x, &y)?;
        Ok(())
    };
    let ways: [(&str, &dyn Fn() -> Result<()>); 3] =
        [("enq", &enq), ("set+enq", &set_enq), ("launch", &launch)];

    // The first calls build and cache (dispatch's choice and program); not timed.
    for (_, way) in &ways {
        for _ in 0..PER_ROUND {
            way()?;
        }
        queue.finish()?;
    }
    let mut per_launch: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); ways.len()];
    for round in 0..rounds {
        for i in 0..ways.len() {
            // Rotate the order each round: no way always goes first after a drained queue.
            let i = (i + round) % ways.len();
            let start = Instant::now();
            for _ in 0..PER_ROUND {
                ways[i].1()?;
            }
            per_launch[i].push(start.elapsed().as_secs_f64() / PER_ROUND as f64);
            queue.finish()?;
        }
    }
    let medians: Vec<f64> = per_launch.iter_mut().map(|v| median(v)).collect();
    println!("device: {}", kfoundry::device_key(&device)?);
    println!(
        "saxpy n = {n}, variant: {} ({})",
        choice.step,
        kfoundry::model::spec::fmt_assignments(&choice.params, ", ")
    );
    println!("{rounds} rounds of {PER_ROUND} launches per way; median over rounds of host time per launch:");
    for ((name, _), m) in ways.iter().zip(&medians) {
        println!("  {name:<8} {:>8.3} µs", m * 1e6);
    }
    println!(
        "dispatch overhead: launch − set+enq = {:.3} µs; launch − enq = {:.3} µs",
        (medians[2] - medians[1]) * 1e6,
        (medians[2] - medians[0]) * 1e6
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
