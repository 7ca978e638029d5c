//! Does one tune serve every size a program calls? For the examples' `Saxpy`, `RowSum` and
//! `Sgemm`, at `COUNT` sizes drawn at random (a fixed seed, printed) inside each kernel's
//! proven region on this device (the box of its variants' `proven` sets: without `ranges`,
//! the tune's default region), each call goes through dispatch and is checked against the CPU;
//! then the dispatched variant, the reference and (given a second lockfile, `PER_SIZE`, tuned
//! at exactly those sizes) the winner of a tune at that very size are timed there.
//!
//! ```text
//! cargo kfoundry tune --kernel 'kfoundry-examples::{Saxpy,RowSum,Sgemm}' ...
//! cargo run --release -p kfoundry-examples --bin sizes -- sizes [SEED [COUNT]]
//!     (prints the sizes drawn as a bundle's workloads: `s0`, `s1`, ...)
//! cargo run --release -p kfoundry-examples --bin sizes -- measure SEED COUNT [PER_SIZE]
//! ```
//!
//! The variants are those embedded at build, or those of the lockfile `SIZES_LOCKFILE` names
//! (a tune made where no Rust toolchain is, `tune --bundle`).
//!
//! `bench/sizes.sh` runs the whole of it (tune, draw, tune per size, measure). Printed per
//! kernel and size: what dispatch ran (a tuned variant or the reference) and whether the CPU
//! agreed, the three times (the device's time of a launch from profiling events, the mean of
//! 20 launches, median over rounds that alternate between them; until 2026-12-07's sixth
//! session the wall clock of 20 launches, which on a GPU is the host's launch cost), and the fraction of the per-size best the dispatched variant keeps; then,
//! over the kernels whose tune found a variant faster than the reference, the share of calls
//! that ran a tuned variant and the geometric mean of the fraction kept.

use std::collections::BTreeMap;

use kfoundry::model::device::DeviceKey;
use kfoundry::model::select::{choose, Choice};
use kfoundry::model::spec::{fmt_assignments, KernelSpec, Params, Sizes};
use kfoundry::model::variant::Variant;
use kfoundry::ocl::{Buffer, Queue};
use kfoundry::{Arg, Configuration, Scalar, Step};
use kfoundry_examples::checks::{input, output};
use kfoundry_examples::{RowSum, Saxpy, Sgemm};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const ROUNDS: usize = 7;
const PER_ROUND: usize = 20;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// One kernel of the benchmark: its spec and variants, and how to run it at some sizes.
struct Subject {
    name: &'static str,
    spec: &'static KernelSpec,
    variants: Vec<Variant>,
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    let seed: u64 = arg(1).map(str::parse).transpose()?.unwrap_or(1);
    let count: usize = arg(2).map(str::parse).transpose()?.unwrap_or(20);
    let (platform, device) = kfoundry::default_device()?;
    let context = kfoundry::ocl::Context::builder()
        .platform(platform)
        .devices(device)
        .build()?;
    let queue = Queue::new(
        &context,
        device,
        Some(kfoundry::ocl::flags::CommandQueueProperties::new().profiling()),
    )?;
    let key = kfoundry::device_key(&device)?;
    let traits = kfoundry::traits_of(&device)?;
    let lockfile = std::env::var_os("SIZES_LOCKFILE").map(std::path::PathBuf::from);
    let subjects = subjects(lockfile.as_deref())?;
    let drawn: Vec<(&Subject, Vec<Sizes>)> = subjects
        .iter()
        .map(|s| {
            let sizes = draw(s, &key, seed, count);
            (s, sizes)
        })
        .collect();
    match arg(0) {
        Some("sizes") => {
            // The sizes as workloads of a bundle: `kernel: s0(n = ..), s1(..)`.
            for (s, sizes) in &drawn {
                let list: Vec<String> = sizes
                    .iter()
                    .enumerate()
                    .map(|(i, z)| format!("s{i}({})", fmt_assignments(z, ", ")))
                    .collect();
                println!("{}\t{}", s.spec.id, list.join(", "));
            }
            Ok(())
        }
        Some("measure") => {
            let per_size = arg(3).map(|p| per_size_variants(std::path::Path::new(p)));
            let per_size = per_size.transpose()?;
            println!("device: {}; seed {seed}, {count} sizes per kernel", key);
            let (mut calls, mut tuned_calls, mut kept) = (0usize, 0usize, Vec::new());
            let mut wrong = 0usize;
            let mut built = Built::new();
            // calls that ran the reference because they were below an entry's floor
            let mut floored = 0usize;
            // reference time / dispatched time of every call, per kernel
            let mut speedups: Vec<(String, Vec<f64>)> = Vec::new();
            for (s, sizes) in &drawn {
                speedups.push((s.spec.id.clone(), Vec::new()));
                let faster = s.variants.iter().any(|v| {
                    DeviceKey::parse(&v.device).is_ok_and(|d| d == key)
                        && v.params != s.spec.reference
                });
                println!(
                    "\n{} ({} variants here; a faster one found: {faster})",
                    s.spec.id,
                    s.variants.len()
                );
                println!("| sizes | dispatched | CPU | reference us | dispatched us | per-size best us | kept |");
                println!("| --- | --- | --- | ---: | ---: | ---: | ---: |");
                for (i, z) in sizes.iter().enumerate() {
                    let choice = choose(s.spec, &s.variants, &key, None, Some(&traits), z, None)?;
                    let ok = check(s.name, &queue, z)?;
                    wrong += usize::from(!ok);
                    let per = per_size
                        .as_ref()
                        .and_then(|m| m.get(&(s.spec.id.clone(), format!("s{i}"))))
                        .cloned();
                    let mut configs = vec![s.spec.reference.clone(), choice.params.clone()];
                    if let Some(p) = &per {
                        configs.push(p.clone());
                    }
                    let times = time(s.name, &queue, z, &configs, &mut built)?;
                    let (r, d) = (times[0], times[1]);
                    if let Some((_, v)) = speedups.last_mut() {
                        v.push(r / d);
                    }
                    let best = times.iter().skip(1).copied().fold(f64::INFINITY, f64::min);
                    let frac = if per.is_some() { best / d } else { f64::NAN };
                    if faster {
                        calls += 1;
                        tuned_calls += usize::from(choice.step != Step::Reference);
                        floored += usize::from(
                            choice.step == Step::Reference
                                && choice.reasons.iter().any(|r| r.contains("its floor")),
                        );
                        if per.is_some() {
                            kept.push(frac);
                        }
                    }
                    println!(
                        "| {} | {} | {} | {r:.1} | {d:.1} | {} | {} |",
                        fmt_assignments(z, ", "),
                        describe(&choice),
                        if ok { "ok" } else { "WRONG" },
                        per.as_ref()
                            .map_or("-".into(), |_| format!("{:.1}", times[2])),
                        if frac.is_nan() {
                            "-".into()
                        } else {
                            format!("{:.0}%", 100.0 * frac)
                        }
                    );
                }
            }
            let geo = |v: &[f64]| (v.iter().map(|k| k.ln()).sum::<f64>() / v.len() as f64).exp();
            let geomean = if kept.is_empty() {
                f64::NAN
            } else {
                geo(&kept)
            };
            println!();
            for (id, v) in &speedups {
                println!(
                    "{id}: the dispatched kernel against the reference at the drawn sizes: {:.2}x (geometric mean), slower by more than 10% at {} of {} calls",
                    geo(v),
                    v.iter().filter(|&&x| x < 1.0 / 1.1).count(),
                    v.len()
                );
            }
            println!(
                "\ncalls that ran a tuned variant, over kernels whose tune found one faster: {tuned_calls} of {calls} ({:.0}%), and {floored} more ran the reference below an entry's floor (where the tune measured the reference faster); wrong against the CPU: {wrong}; fraction of the per-size best kept (geometric mean over {} calls): {}",
                100.0 * tuned_calls as f64 / calls.max(1) as f64,
                kept.len(),
                if geomean.is_nan() { "-".into() } else { format!("{:.0}%", 100.0 * geomean) }
            );
            if wrong > 0 {
                return Err(format!("{wrong} call(s) differ from the CPU").into());
            }
            Ok(())
        }
        _ => Err("usage: sizes (sizes [SEED [COUNT]] | measure [SEED [COUNT [PER_SIZE]]])".into()),
    }
}

fn describe(c: &Choice) -> String {
    match c.step {
        Step::Reference => "reference".into(),
        step => format!("{step} ({})", fmt_assignments(&c.params, ", ")),
    }
}

/// The kernels, with their embedded variants or those of `lockfile`.
fn subjects(lockfile: Option<&std::path::Path>) -> Result<Vec<Subject>> {
    let lock = match lockfile {
        Some(p) => Some(
            kfoundry_tooling::lockfile::Lockfile::read(p)?
                .ok_or_else(|| format!("{} does not exist", p.display()))?,
        ),
        None => None,
    };
    let mut out = Vec::new();
    for (name, evolved) in [
        ("saxpy", Saxpy::evolved()),
        ("row_sum", RowSum::evolved()),
        ("sgemm", Sgemm::evolved()),
    ] {
        let spec = evolved.spec()?;
        let variants = match &lock {
            Some(l) => l
                .kernels
                .get(&spec.id)
                .map(|e| e.variants.clone())
                .unwrap_or_default(),
            None => evolved.variants()?.to_vec(),
        };
        out.push(Subject {
            name,
            spec,
            variants,
        });
    }
    Ok(out)
}

/// Per-size winners: (kernel, workload) → parameters, from a lockfile tuned at the sizes drawn.
fn per_size_variants(path: &std::path::Path) -> Result<BTreeMap<(String, String), Params>> {
    let lock = kfoundry_tooling::lockfile::Lockfile::read(path)?
        .ok_or_else(|| format!("{} does not exist", path.display()))?;
    let mut out = BTreeMap::new();
    for (id, entry) in &lock.kernels {
        for v in &entry.variants {
            out.insert((id.clone(), v.workload.clone()), v.params.clone());
        }
    }
    Ok(out)
}

/// `count` size sets drawn log-uniformly inside the box of this device's variants' proven
/// sets, each one the reference can run at (xorshift from `seed`: the same sets every run).
fn draw(s: &Subject, key: &DeviceKey, seed: u64, count: usize) -> Vec<Sizes> {
    let mut region: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for v in s
        .variants
        .iter()
        .filter(|v| DeviceKey::parse(&v.device).is_ok_and(|d| d == *key))
    {
        for (k, (lo, hi)) in v.proven_range() {
            let r = region.entry(k).or_insert((lo, hi));
            *r = (r.0.min(lo), r.1.max(hi));
        }
    }
    if region.is_empty() {
        return Vec::new();
    }
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut out = Vec::new();
    for _ in 0..count * 100 {
        if out.len() == count {
            break;
        }
        let z: Sizes = region
            .iter()
            .map(|(k, &(lo, hi))| {
                let (a, b) = ((lo.max(1) as f64).ln(), (hi.max(1) as f64).ln());
                (
                    k.clone(),
                    ((a + (b - a) * next()).exp().round() as i64).clamp(lo, hi),
                )
            })
            .collect();
        if s.spec.geometry(&s.spec.reference, &z, None).is_ok() {
            out.push(z);
        }
    }
    out
}

/// Deterministic data in [-1, 1).
fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| {
            ((i.wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn get(z: &Sizes, k: &str) -> usize {
    z.get(k).copied().unwrap_or(1) as usize
}

/// The call through dispatch at `z`, against the CPU.
fn check(name: &str, queue: &Queue, z: &Sizes) -> Result<bool> {
    let differs = kfoundry_examples::cpu::differs;
    match name {
        "saxpy" => {
            let n = get(z, "n");
            let (a, x, y0) = (2.5f32, data(n, 1), data(n, 2));
            let (xb, yb) = (input(queue, &x)?, input(queue, &y0)?);
            Saxpy::launch(queue, n, a, &xb, &yb)?;
            let mut y = vec![0f32; n];
            yb.read(&mut y).enq()?;
            Ok((0..n).all(|i| !differs(y[i] as f64, a.mul_add(x[i], y0[i]) as f64, 1e-5, 1e-5)))
        }
        "row_sum" => {
            let (rows, cols) = (get(z, "rows"), get(z, "cols"));
            let m: Vec<f32> = data(rows * cols, 3).iter().map(|v| v.abs()).collect();
            let (mb, ob) = (input(queue, &m)?, output(queue, rows)?);
            RowSum::launch(queue, rows, cols, &mb, &ob)?;
            let mut out = vec![0f32; rows];
            ob.read(&mut out).enq()?;
            Ok((0..rows).all(|r| {
                let want: f64 = m[r * cols..(r + 1) * cols].iter().map(|v| *v as f64).sum();
                !differs(out[r] as f64, want, 1e-4, 1e-5)
            }))
        }
        _ => {
            let (m, n, k) = (get(z, "m"), get(z, "n"), get(z, "k"));
            let (a, b) = (data(m * k, 4), data(k * n, 5));
            let (ab, bb, cb) = (input(queue, &a)?, input(queue, &b)?, output(queue, m * n)?);
            Sgemm::launch(queue, m, n, k, &ab, &bb, &cb)?;
            let mut c = vec![0f32; m * n];
            cb.read(&mut c).enq()?;
            Ok((0..m * n).all(|ij| {
                let (i, j) = (ij / n, ij % n);
                let want: f64 = (0..k)
                    .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                    .sum();
                !differs(c[ij] as f64, want, 1e-4, 1e-4 * (k as f64).sqrt())
            }))
        }
    }
}

/// Configurations built for timing, by kernel and parameters (built once, launched at every
/// size).
type Built = BTreeMap<(String, Params), Configuration<'static>>;

/// Each of `configs` at `z` (built into `built` when not there yet): the device's time of one launch in microseconds, from profiling
/// events (`queue` has profiling on): the mean of [`PER_ROUND`] launches, the median over
/// [`ROUNDS`] rounds that alternate between the configurations.
fn time(
    name: &str,
    queue: &Queue,
    z: &Sizes,
    configs: &[Params],
    built: &mut Built,
) -> Result<Vec<f64>> {
    let get = |k: &str| get(z, k);
    let bufs: Vec<Buffer<f32>> = match name {
        "saxpy" => vec![
            input(queue, &data(get("n"), 1))?,
            input(queue, &data(get("n"), 2))?,
        ],
        "row_sum" => vec![
            input(queue, &data(get("rows") * get("cols"), 3))?,
            input(queue, &vec![0.0; get("rows")])?,
        ],
        _ => vec![
            input(queue, &data(get("m") * get("k"), 4))?,
            input(queue, &data(get("k") * get("n"), 5))?,
            input(queue, &vec![0.0; get("m") * get("n")])?,
        ],
    };
    let evolved = match name {
        "saxpy" => Saxpy::evolved(),
        "row_sum" => RowSum::evolved(),
        _ => Sgemm::evolved(),
    };
    // the kernel's arguments that are not sizes, in its order
    let mut args: Vec<Arg> = Vec::new();
    if name == "saxpy" {
        args.push(Arg::Scalar(Scalar::F32(2.5)));
    }
    args.extend(bufs.iter().map(|b| Arg::Buffer(b.as_core())));
    let sizes: Vec<(&str, usize)> = z.iter().map(|(k, &v)| (k.as_str(), v as usize)).collect();
    for p in configs {
        let key = (name.to_string(), p.clone());
        if !built.contains_key(&key) {
            built.insert(key.clone(), evolved.configure(queue, p)?);
        }
    }
    let configured: Vec<&Configuration> = configs
        .iter()
        .map(|p| &built[&(name.to_string(), p.clone())])
        .collect();
    // SAFETY (each launch below): every configuration here is the reference, a proven
    // variant, or the winner of a tune at these very sizes (proven there); the buffers have
    // the annotation's lengths.
    for c in configured.iter() {
        unsafe { c.enqueue_profiled(queue, &sizes, &args)? }; // built and warm
    }
    queue.finish()?;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    for _ in 0..ROUNDS {
        for (c, t) in configured.iter().zip(times.iter_mut()) {
            let mut launches = Vec::with_capacity(PER_ROUND);
            for _ in 0..PER_ROUND {
                launches.push(unsafe { c.enqueue_profiled(queue, &sizes, &args)? });
            }
            queue.finish()?;
            let mut total = 0.0;
            for l in &launches {
                total += l.seconds()?;
            }
            t.push(total * 1e6 / PER_ROUND as f64);
        }
    }
    Ok(times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect())
}
