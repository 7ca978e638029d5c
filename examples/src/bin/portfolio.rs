//! How much of the per-size best speed the portfolio of `RmsNorm` (`ranges(rows = 1..=4096,
//! cols = 2048)`) keeps, at eight sizes of the range that are not its anchors.
//!
//! ```text
//! cargo kfoundry tune --kernel 'kfoundry-examples::RmsNorm*' --budget-evals 12
//! cargo run --release -p kfoundry-examples --bin portfolio [-- ROUNDS [LOCKFILE]]
//! ```
//!
//! With `LOCKFILE`, the variants are read from that file when the program runs (a tune made on
//! a machine without a Rust toolchain, `tune --bundle ... --lockfile LOCKFILE`) instead of those
//! embedded at build; the choice is the same rule (`select::choose`).
//!
//! At each size: the variant dispatch picks for `RmsNorm` (its bucket's), the winner tuned at
//! exactly that size for `RmsNormPerSize` (the same kernel, with the same search budget per
//! workload as each anchor got) and the reference, each built with `ocl` from the annotated
//! source and its parameters, timed by profiling events in rounds that alternate between them
//! (median over rounds of the mean of 20 launches). Printed per size: the three times, and the
//! fraction of the per-size best the portfolio keeps (per-size time ÷ portfolio time, the
//! faster of the two counting as the best); then their geometric mean and minimum.

use kfoundry::model::select::{choose, Choice};
use kfoundry::model::spec::{KernelSpec, Params, Sizes};
use kfoundry::model::variant::Variant;
use kfoundry::ocl::{Buffer, Context, Event, Kernel, Program, Queue};
use kfoundry::Step;
use kfoundry_examples::{RmsNorm, RmsNormPerSize};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The sizes measured: none is an anchor of the range (1, 4, 16, 64, 256, 1024, 4096).
const ROWS: [usize; 8] = [2, 7, 24, 90, 300, 1000, 2900, 3600];
const COLS: usize = 2048;
const PER_ROUND: usize = 20;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(15);
    let lockfile = std::env::args().nth(2).map(std::path::PathBuf::from);
    let (platform, device) = kfoundry::default_device()?;
    let context = Context::builder()
        .platform(platform)
        .devices(device)
        .build()?;
    let queue = Queue::new(
        &context,
        device,
        Some(kfoundry::ocl::flags::QUEUE_PROFILING_ENABLE),
    )?;
    let spec = RmsNorm::evolved().spec()?;
    let per_spec = RmsNormPerSize::evolved().spec()?;
    let traits = kfoundry::traits_of(&device)?;
    // The variants of a lockfile read now, when one is named.
    let read = match &lockfile {
        Some(path) => {
            let lock = kfoundry_tooling::lockfile::Lockfile::read(path)?
                .ok_or_else(|| format!("{} does not exist", path.display()))?;
            let variants = |spec: &KernelSpec| -> Result<Vec<Variant>> {
                let entry = lock
                    .kernels
                    .get(&spec.id)
                    .ok_or_else(|| format!("{} has no entry for `{}`", path.display(), spec.id))?;
                if entry.fingerprint != kfoundry_tooling::fingerprint(spec)? {
                    return Err(format!(
                        "the entry of `{}` in {} is stale (another fingerprint)",
                        spec.id,
                        path.display()
                    )
                    .into());
                }
                Ok(entry.variants.clone())
            };
            Some((
                variants(spec)?,
                variants(per_spec)?,
                kfoundry::device_key(&device)?,
            ))
        }
        None => None,
    };
    let pick = |which: usize, rows: usize| -> Result<Choice> {
        let sizes: Sizes = [
            ("rows".to_string(), rows as i64),
            ("cols".to_string(), COLS as i64),
        ]
        .into_iter()
        .collect();
        Ok(match &read {
            Some((port, per, key)) => {
                let (spec, variants) = if which == 0 {
                    (spec, port)
                } else {
                    (per_spec, per)
                };
                choose(spec, variants, key, None, Some(&traits), &sizes, None)?
            }
            None if which == 0 => RmsNorm::explain(&device, rows, COLS)?,
            None => RmsNormPerSize::explain(&device, rows, COLS)?,
        })
    };
    println!("device: {}", device.name()?);
    println!("| rows | portfolio (bucket's variant) | tuned at this size | reference us | portfolio us | per-size us | kept |");
    println!("| ---: | --- | --- | ---: | ---: | ---: | ---: |");
    let (mut kept, mut all_tuned) = (Vec::new(), true);
    for rows in ROWS {
        let (port, per) = (pick(0, rows)?, pick(1, rows)?);
        all_tuned &= port.step != Step::Reference;
        let n = rows * COLS;
        let x = Buffer::<f32>::builder()
            .queue(queue.clone())
            .len(n)
            .fill_val(0.5)
            .build()?;
        let w = Buffer::<f32>::builder()
            .queue(queue.clone())
            .len(COLS)
            .fill_val(1.5)
            .build()?;
        let y = Buffer::<f32>::builder()
            .queue(queue.clone())
            .len(n)
            .fill_val(0.0)
            .build()?;
        let sizes = [
            ("rows".to_string(), rows as i64),
            ("cols".to_string(), COLS as i64),
        ]
        .into_iter()
        .collect();
        let build = |params: &Params| -> Result<Kernel> {
            let program = Program::builder()
                .src(spec.source.clone())
                .devices(device)
                .cmplr_opt(spec.build_options(params, &[])?)
                .build(&context)?;
            let g = spec.geometry(params, &sizes, Some(&traits))?;
            let mut b = Kernel::builder();
            b.program(&program)
                .name("rmsnorm")
                .queue(queue.clone())
                .global_work_size(g.global[0]);
            if let Some(local) = &g.local {
                b.local_work_size(local[0]);
            }
            Ok(b.arg(rows as i32)
                .arg(COLS as i32)
                .arg(1e-5f32)
                .arg(&x)
                .arg(&w)
                .arg(&y)
                .build()?)
        };
        let kernels = [
            build(&spec.reference)?,
            build(&port.params)?,
            build(&per.params)?,
        ];
        let mut times: [Vec<f64>; 3] = Default::default();
        for _ in 0..rounds {
            for (k, t) in kernels.iter().zip(times.iter_mut()) {
                t.push(mean_launch_us(k)?);
            }
        }
        let [r, p, s] = times.map(|mut t| median(&mut t));
        let frac = s.min(p) / p;
        kept.push(frac);
        let fmt = |params: &Params| kfoundry::model::spec::fmt_assignments(params, ", ");
        let mark = if port.step == Step::Reference {
            " (reference: no variant here)"
        } else {
            ""
        };
        println!(
            "| {rows} | {}{mark} | {} | {r:.1} | {p:.1} | {s:.1} | {:.0}% |",
            fmt(&port.params),
            fmt(&per.params),
            100.0 * frac
        );
    }
    let geomean = (kept.iter().map(|k| k.ln()).sum::<f64>() / kept.len() as f64).exp();
    let min = kept.iter().copied().fold(1.0, f64::min);
    println!(
        "portfolio keeps {:.0}% of the per-size best (geometric mean over {} sizes; worst {:.0}%); a tuned variant dispatched at every size: {}",
        100.0 * geomean,
        kept.len(),
        100.0 * min,
        if all_tuned { "yes" } else { "no" }
    );
    Ok(())
}

/// The mean kernel time of [`PER_ROUND`] launches, microseconds (profiling events).
fn mean_launch_us(kernel: &Kernel) -> Result<f64> {
    let mut total = 0.0;
    for _ in 0..PER_ROUND {
        let mut event = Event::empty();
        // SAFETY: the arguments are buffers of rows·cols, cols and rows·cols floats, and the
        // geometry is the annotation's at these sizes: the kernel touches only those elements.
        unsafe { kernel.cmd().enew(&mut event).enq()? };
        event.wait_for()?;
        let start = event
            .profiling_info(kfoundry::ocl::enums::ProfilingInfo::Start)?
            .time()?;
        let end = event
            .profiling_info(kfoundry::ocl::enums::ProfilingInfo::End)?
            .time()?;
        total += end.saturating_sub(start) as f64 / 1e3;
    }
    Ok(total / PER_ROUND as f64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
