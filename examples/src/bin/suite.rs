//! The GPU suite harness: runs each suite problem at its `full` workload (or another named
//! one) on one OpenCL device, reference kernels against the variants dispatch picks, and
//! writes what `bench/torch_suite.py` needs to compare them with PyTorch.
//!
//! ```sh
//! suite OUT_DIR [--workload full] [--problem NAME]... [--seed S] [--runs N] [--warmup N]
//!               [--device gpu|cpu|INDEX|TEXT] [--clblast PATH]
//!               [--sample-above-mib N]
//! ```
//! For each problem, one at a time (its buffers are freed before the next):
//! 1. inputs are filled on the device by `hash_fill` (`kernels/suite_util.cl`): a counter-based
//!    hash of (tensor seed, index) → uniform [-1, 1); tensor seeds derive from `--seed`
//!    (default: from the clock, so every run draws new inputs) and are written to the JSON;
//! 2. the reference (every stage at its reference parameters, `launch_reference`) and the tuned
//!    problem (every stage through the macro-generated dispatcher, `Evolved::launch`, i.e.
//!    what `X::launch` calls) run `--warmup` times (default 3), then each is timed `--runs`
//!    times (default 20, at least 10; reference and tuned runs alternate) with OpenCL
//!    profiling events on every kernel launch (a run's time is the sum of its stages' kernel
//!    times; median, min, max). The timed launches enqueue the same specification and
//!    parameters that dispatch picks (`explain`), through kfoundry's `enqueue`, since the
//!    launcher does not hand out an event;
//! 3. outputs are poisoned with NaN, reference and tuned run once more, and the tuned output
//!    is compared with the reference's on the host (relative L2 error, max abs difference,
//!    elements outside the annotation's tolerance, NaNs);
//! 4. the tuned output is written as raw little-endian f32 (`<problem>.out.f32`), or, above
//!    256 MiB (`--sample-above-mib`), a strided sample of it (`<problem>.sample.f32` with `<problem>.sample_idx.u64`:
//!    element j of the sample is output index j * stride; stride is the smallest prime ≥
//!    len / 2^24, so about 16 M elements are kept).
//!
//! For SGEMM, with `--clblast PATH` or `$CLBLAST_LIB` (e.g. `libclblast.so.1`), CLBlast's
//! `CLBlastSgemm` is timed on the same queue and input buffers (host-timed per call, since it
//! may run several kernels) and its output checked against the reference.
//! Everything is written to `OUT_DIR/suite.json`; a table is printed on stdout.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use kfoundry::model::spec::{fmt_assignments, KernelSpec, Params, Sizes};
use kfoundry::ocl::core::{self as core};
use kfoundry::ocl::flags::CommandQueueProperties;
use kfoundry::ocl::{Buffer, Context, Device, Kernel, Platform, Program, Queue};
use kfoundry::{Arg, Evolved, Scalar};
use kfoundry_examples::suite::*;
use serde_json::{json, Value};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const UTIL: &str = include_str!("../../kernels/suite_util.cl");
const SAMPLE_TARGET: usize = 1 << 24;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

struct Options {
    out: PathBuf,
    workload: String,
    problems: Vec<String>,
    seed: u32,
    runs: usize,
    warmup: usize,
    device: String,
    clblast: Option<String>,
    /// Outputs larger than this are sampled (default 256 MiB).
    sample_above: usize,
}

fn options() -> Result<Options> {
    let usage = "usage: suite OUT_DIR [--workload NAME] [--problem NAME]... [--seed S] [--runs N] [--warmup N] [--device SEL] [--clblast PATH]";
    let mut args = std::env::args().skip(1);
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u32;
    let mut o = Options {
        out: PathBuf::new(),
        workload: "full".into(),
        problems: Vec::new(),
        seed: clock,
        runs: 20,
        warmup: 3,
        device: "gpu".into(),
        clblast: std::env::var("CLBLAST_LIB").ok().filter(|s| !s.is_empty()),
        sample_above: 256 << 20,
    };
    let mut out = None;
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(usage);
        match a.as_str() {
            "--workload" => o.workload = val()?,
            "--problem" => o.problems.push(val()?),
            "--seed" => o.seed = val()?.parse()?,
            "--runs" => o.runs = val()?.parse::<usize>()?.max(10),
            "--warmup" => o.warmup = val()?.parse()?,
            "--device" => o.device = val()?,
            "--clblast" => o.clblast = Some(val()?),
            "--sample-above-mib" => o.sample_above = val()?.parse::<usize>()? << 20,
            "-h" | "--help" => {
                println!("{usage}");
                std::process::exit(0);
            }
            _ if out.is_none() && !a.starts_with('-') => out = Some(PathBuf::from(a)),
            _ => return Err(usage.into()),
        }
    }
    o.out = out.ok_or(usage)?;
    Ok(o)
}

/// `gpu`, `cpu`, an index into all devices, or text in the device or platform name.
fn pick_device(sel: &str) -> Result<(Platform, Device)> {
    let all = kfoundry::list_devices()?;
    let name = |d: &Device| d.name().unwrap_or_default();
    let is = |d: &Device, t: core::DeviceType| matches!(d.info(kfoundry::ocl::enums::DeviceInfo::Type), Ok(kfoundry::ocl::enums::DeviceInfoResult::Type(x)) if x.contains(t));
    let found = match sel {
        "gpu" => all
            .iter()
            .find(|(_, d)| is(d, core::DeviceType::GPU))
            .or(all.first()),
        "cpu" => all.iter().find(|(_, d)| is(d, core::DeviceType::CPU)),
        s if s.parse::<usize>().is_ok() => all.get(s.parse::<usize>()?),
        s => all.iter().find(|(p, d)| {
            let t = s.to_lowercase();
            name(d).to_lowercase().contains(&t)
                || p.name().unwrap_or_default().to_lowercase().contains(&t)
        }),
    };
    found
        .copied()
        .ok_or_else(|| format!("no OpenCL device matches `{sel}`").into())
}

/// One kernel launch of a problem: the annotated kernel, its sizes and its arguments by name.
struct Stage {
    label: &'static str,
    evolved: &'static Evolved,
    sizes: Sizes,
    args: Vec<ArgRef>,
}

enum ArgRef {
    Buf(&'static str),
    F32(f32),
}

/// A suite problem at one workload.
struct Problem {
    name: &'static str,
    what: &'static str,
    /// Generated on the device, in this order (tensor index = position).
    inputs: Vec<(&'static str, Vec<usize>)>,
    /// Intermediate buffers (lengths).
    temps: Vec<(&'static str, usize)>,
    /// Shape of the final output (buffer `out`).
    output: Vec<usize>,
    stages: Vec<Stage>,
    /// The problem's FLOPs (main operation).
    flops: f64,
    /// Tolerance of the last stage's check, for counting elements outside it.
    tol: (f64, f64),
}

fn workload(e: &Evolved, name: &str) -> Result<Sizes> {
    let spec = e.spec()?;
    let w = spec
        .workloads
        .iter()
        .find(|w| w.name == name)
        .ok_or_else(|| format!("{} has no workload `{name}`", spec.id))?;
    Ok(w.sizes.clone())
}

fn tol(e: &Evolved) -> Result<(f64, f64)> {
    let c = e.spec()?.checks.last().ok_or("no check")?;
    Ok((c.rtol, c.atol))
}

fn problems(wl: &str) -> Result<Vec<Problem>> {
    use ArgRef::{Buf, F32};
    let u = |s: &Sizes, k: &str| s[k] as usize;
    let mut out = Vec::new();

    let s = workload(SuiteSgemm::evolved(), wl)?;
    let (m, n, k) = (u(&s, "m"), u(&s, "n"), u(&s, "k"));
    out.push(Problem {
        name: "sgemm",
        what: "C = A·B (square matmul)",
        inputs: vec![("a", vec![m, k]), ("b", vec![k, n])],
        temps: vec![],
        output: vec![m, n],
        stages: vec![Stage {
            label: "gemm",
            evolved: SuiteSgemm::evolved(),
            sizes: s,
            args: vec![Buf("a"), Buf("b"), Buf("out")],
        }],
        flops: 2.0 * (m * n * k) as f64,
        tol: tol(SuiteSgemm::evolved())?,
    });

    // Two stages (the row's partial maxima and sums by chunk, then the combination and the
    // output), so that many work-groups share a row; `Softmax` is the one-launch form.
    let s = workload(SoftmaxStats::evolved(), wl)?;
    let (rows, cols, chunk) = (u(&s, "rows"), u(&s, "cols"), u(&s, "chunk"));
    let nch = cols.div_ceil(chunk);
    out.push(Problem {
        name: "softmax",
        what: "softmax over the rows of x",
        inputs: vec![("x", vec![rows, cols])],
        temps: vec![("pmax", rows * nch), ("psum", rows * nch)],
        output: vec![rows, cols],
        stages: vec![
            Stage {
                label: "stats",
                evolved: SoftmaxStats::evolved(),
                sizes: s.clone(),
                args: vec![Buf("x"), Buf("pmax"), Buf("psum")],
            },
            Stage {
                label: "apply",
                evolved: SoftmaxApply::evolved(),
                sizes: workload(SoftmaxApply::evolved(), wl)?,
                args: vec![Buf("x"), Buf("pmax"), Buf("psum"), Buf("out")],
            },
        ],
        flops: 5.0 * (rows * cols) as f64,
        tol: tol(SoftmaxApply::evolved())?,
    });

    let s = workload(LayerNormStats::evolved(), wl)?;
    let (nn, d, chunk) = (u(&s, "n"), u(&s, "d"), u(&s, "chunk"));
    let nch = d.div_ceil(chunk);
    // KernelBench: x is 16 x 64 x 256 x 256, normalised over the last three dims.
    let inner = if d == 64 * 256 * 256 {
        vec![64, 256, 256]
    } else {
        vec![d]
    };
    out.push(Problem {
        name: "layernorm",
        what: "LayerNorm over all but the first dim, affine",
        inputs: vec![
            ("x", [vec![nn], inner.clone()].concat()),
            ("weight", inner.clone()),
            ("bias", inner),
        ],
        temps: vec![("mean", nn * nch), ("m2", nn * nch)],
        output: vec![nn, d],
        stages: vec![
            Stage {
                label: "stats",
                evolved: LayerNormStats::evolved(),
                sizes: s.clone(),
                args: vec![Buf("x"), Buf("mean"), Buf("m2")],
            },
            Stage {
                label: "apply",
                evolved: LayerNormApply::evolved(),
                sizes: workload(LayerNormApply::evolved(), wl)?,
                args: vec![
                    F32(1e-5),
                    Buf("x"),
                    Buf("mean"),
                    Buf("m2"),
                    Buf("weight"),
                    Buf("bias"),
                    Buf("out"),
                ],
            },
        ],
        flops: 8.0 * (nn * d) as f64,
        tol: tol(LayerNormApply::evolved())?,
    });

    let s = workload(SumDim1::evolved(), wl)?;
    let (b, r, c) = (u(&s, "batch"), u(&s, "rows"), u(&s, "cols"));
    out.push(Problem {
        name: "sum_dim1",
        what: "sum over dim 1, keepdim",
        inputs: vec![("x", vec![b, r, c])],
        temps: vec![],
        output: vec![b, 1, c],
        stages: vec![Stage {
            label: "sum",
            evolved: SumDim1::evolved(),
            sizes: s,
            args: vec![Buf("x"), Buf("out")],
        }],
        flops: (b * r * c) as f64,
        tol: (1e-4, 1e-3),
    });

    let s = workload(LinearGelu::evolved(), wl)?;
    let (m, n, k) = (u(&s, "m"), u(&s, "n"), u(&s, "k"));
    out.push(Problem {
        name: "linear_gelu_softmax",
        what: "Linear (x·wᵀ + bias), exact GELU, softmax over dim 1",
        inputs: vec![("x", vec![m, k]), ("weight", vec![n, k]), ("bias", vec![n])],
        temps: vec![("h", m * n)],
        output: vec![m, n],
        stages: vec![
            Stage {
                label: "linear_gelu",
                evolved: LinearGelu::evolved(),
                sizes: s,
                args: vec![Buf("x"), Buf("weight"), Buf("bias"), Buf("h")],
            },
            Stage {
                label: "softmax",
                evolved: LinearSoftmax::evolved(),
                sizes: workload(LinearSoftmax::evolved(), wl)?,
                args: vec![Buf("h"), Buf("out")],
            },
        ],
        flops: 2.0 * (m * n * k) as f64,
        tol: tol(LinearSoftmax::evolved())?,
    });

    let s = workload(ConvGroupNorm::evolved(), wl)?;
    let (n, cin, h, w, cout) = (
        u(&s, "n"),
        u(&s, "cin"),
        u(&s, "h"),
        u(&s, "w"),
        u(&s, "cout"),
    );
    out.push(Problem {
        name: "conv_groupnorm",
        what: "Conv2d 3x3 (+conv bias) + bias, × scale, sigmoid, GroupNorm affine",
        inputs: vec![
            ("x", vec![n, cin, h, w]),
            ("weight", vec![cout, cin, 3, 3]),
            ("conv_bias", vec![cout]),
            ("bias", vec![cout, 1, 1]),
            ("scale", vec![cout, 1, 1]),
            ("gamma", vec![cout]),
            ("beta", vec![cout]),
        ],
        temps: vec![],
        output: vec![n, cout, h - 2, w - 2],
        stages: vec![Stage {
            label: "conv_gn",
            evolved: ConvGroupNorm::evolved(),
            sizes: s,
            args: vec![
                F32(1e-5),
                Buf("x"),
                Buf("weight"),
                Buf("conv_bias"),
                Buf("bias"),
                Buf("scale"),
                Buf("gamma"),
                Buf("beta"),
                Buf("out"),
            ],
        }],
        flops: 2.0 * (n * cout * (h - 2) * (w - 2) * cin * 9) as f64,
        tol: tol(ConvGroupNorm::evolved())?,
    });
    Ok(out)
}

fn run() -> Result<()> {
    let o = options()?;
    std::fs::create_dir_all(&o.out)?;
    let (platform, device) = pick_device(&o.device)?;
    let context = Context::builder()
        .platform(platform)
        .devices(device)
        .build()?;
    let queue = Queue::new(
        &context,
        device,
        Some(CommandQueueProperties::new().profiling()),
    )?;
    let key = kfoundry::device_key(&device)?;
    eprintln!("device: {} ({key})", device.name()?);
    let util = Program::builder()
        .src(UTIL)
        .devices(device)
        .build(&context)?;
    let mut clblast = match &o.clblast {
        Some(p) => Some(ClBlast::load(p)?),
        None => None,
    };

    let mut results = Vec::new();
    println!(
        "{:<20} {:>12} {:>12} {:>8} {:>10}  dispatch (params)",
        "problem", "ref ms", "tuned ms", "speedup", "rel err"
    );
    for p in problems(&o.workload)? {
        if !o.problems.is_empty() && !o.problems.iter().any(|n| n == p.name) {
            continue;
        }
        let r = run_problem(&o, &queue, &util, &p, clblast.as_mut())?;
        let tuned_ms = r["tuned"]["median_ms"].as_f64().unwrap_or(f64::NAN);
        let ref_ms = r["reference"]["median_ms"].as_f64().unwrap_or(f64::NAN);
        let dispatch: Vec<String> = r["stages"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| {
                        format!(
                            "{} ({})",
                            s["dispatch"].as_str().unwrap_or("?"),
                            s["tuned_params_text"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "{:<20} {:>12.4} {:>12.4} {:>7.2}x {:>10.2e}  {}",
            p.name,
            ref_ms,
            tuned_ms,
            ref_ms / tuned_ms,
            r["check"]["rel_l2"].as_f64().unwrap_or(f64::NAN),
            dispatch.join(" + ")
        );
        if let Some(cb) = r.get("clblast") {
            println!(
                "{:<20} {:>12} {:>12.4}   (CLBlast SGEMM, host-timed per call; rel err {:.2e})",
                "",
                "",
                cb["median_ms"].as_f64().unwrap_or(f64::NAN),
                cb["rel_l2_vs_reference"].as_f64().unwrap_or(f64::NAN)
            );
        }
        results.push(r);
        // Partial results survive a later failure.
        write_json(&o.out, &o, &device, &key.to_string(), &results)?;
    }
    write_json(&o.out, &o, &device, &key.to_string(), &results)?;
    eprintln!("wrote {}", o.out.join("suite.json").display());
    Ok(())
}

fn write_json(
    dir: &Path,
    o: &Options,
    device: &Device,
    key: &str,
    results: &[Value],
) -> Result<()> {
    let doc = json!({
        "version": 1,
        "device": device.name()?,
        "device_key": key,
        "workload": o.workload,
        "seed": o.seed,
        "runs": o.runs,
        "warmup": o.warmup,
        "generator": "hash_fill (examples/kernels/suite_util.cl): h = mix(mix(i) + mix(tensor_seed)), mix = lowbias32 (x ^= x>>16; x *= 0x7feb352d; x ^= x>>15; x *= 0x846ca68b; x ^= x>>16), value = ((h>>8) - 2^23) * 2^-23",
        "problems": results,
    });
    let tmp = dir.join("suite.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&doc)?)?;
    std::fs::rename(tmp, dir.join("suite.json"))?;
    Ok(())
}

fn buffer(queue: &Queue, len: usize) -> Result<Buffer<f32>> {
    Ok(Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(len)
        .build()?)
}

fn tensor_seed(seed: u32, problem: usize, tensor: usize) -> u32 {
    seed.wrapping_mul(1000)
        .wrapping_add((problem * 16 + tensor) as u32)
}

fn fill(queue: &Queue, util: &Program, buf: &Buffer<f32>, seed: u32) -> Result<()> {
    let n = buf.len();
    let k = Kernel::builder()
        .program(util)
        .name("hash_fill")
        .queue(queue.clone())
        .global_work_size(n.div_ceil(256) * 256)
        .arg(seed)
        .arg(n as u64)
        .arg(buf)
        .build()?;
    unsafe { k.enq()? };
    Ok(())
}

/// NaN into every element (a grid-stride kernel: see `nan_fill` in suite_util.cl).
fn poison(queue: &Queue, util: &Program, buf: &Buffer<f32>) -> Result<()> {
    let k = Kernel::builder()
        .program(util)
        .name("nan_fill")
        .queue(queue.clone())
        .global_work_size(1 << 18)
        .arg(buf.len() as u64)
        .arg(buf)
        .build()?;
    unsafe { k.enq()? };
    Ok(())
}

fn args<'a>(
    stage: &Stage,
    bufs: &'a BTreeMap<&'static str, Buffer<f32>>,
    out: &'a Buffer<f32>,
) -> Result<Vec<Arg<'a>>> {
    stage
        .args
        .iter()
        .map(|a| match a {
            ArgRef::Buf("out") => Ok(Arg::Buffer(out.as_core())),
            ArgRef::Buf(name) => bufs
                .get(name)
                .map(|b| Arg::Buffer(b.as_core()))
                .ok_or_else(|| format!("no buffer `{name}`").into()),
            ArgRef::F32(v) => Ok(Arg::Scalar(Scalar::F32(*v))),
        })
        .collect()
}

fn size_list(s: &Sizes) -> Vec<(&str, usize)> {
    s.iter().map(|(k, v)| (k.as_str(), *v as usize)).collect()
}

/// Runs every stage once: the reference parameters, or through dispatch.
fn run_once(
    queue: &Queue,
    p: &Problem,
    bufs: &BTreeMap<&'static str, Buffer<f32>>,
    out: &Buffer<f32>,
    tuned: bool,
) -> Result<Vec<String>> {
    let mut steps = Vec::new();
    for st in &p.stages {
        let a = args(st, bufs, out)?;
        let sizes = size_list(&st.sizes);
        if tuned {
            steps.push(st.evolved.launch(queue, &sizes, &a)?.to_string());
        } else {
            st.evolved.launch_reference(queue, &sizes, &a)?;
            steps.push("reference".into());
        }
    }
    Ok(steps)
}

fn stats(v: &[f64]) -> Value {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let med = if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    };
    json!({ "median_ms": med, "min_ms": s[0], "max_ms": s[s.len() - 1], "runs_ms": v })
}

/// Times `runs` runs of the problem for each of the variants (per-stage parameters and output
/// buffer), alternating between them so that drifting clocks or load affect both alike. A
/// run's time is the sum of its kernels' profiled times. Returns, per variant, the statistics
/// of the totals and the per-stage medians.
fn time_variants(
    queue: &Queue,
    p: &Problem,
    variants: &[(&[Params], &Buffer<f32>)],
    bufs: &BTreeMap<&'static str, Buffer<f32>>,
    runs: usize,
) -> Result<Vec<(Value, Vec<f64>)>> {
    let mut configured = Vec::new();
    for (params, _) in variants {
        let stages: Vec<_> = p
            .stages
            .iter()
            .zip(params.iter())
            .map(|(st, pr)| st.evolved.configure(queue, pr))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        configured.push(stages);
    }
    let mut totals = vec![Vec::new(); variants.len()];
    let mut per_stage = vec![vec![Vec::new(); p.stages.len()]; variants.len()];
    for _ in 0..runs {
        for (v, (_, out)) in variants.iter().enumerate() {
            let mut timings = Vec::new();
            for (i, st) in p.stages.iter().enumerate() {
                let a = args(st, bufs, out)?;
                // SAFETY: the variants timed are each stage's reference and its tuned winners,
                // which the tuner verified; the buffers have the annotations' lengths.
                timings.push(unsafe {
                    configured[v][i].enqueue_profiled(queue, &size_list(&st.sizes), &a)?
                });
            }
            queue.finish()?;
            let mut total = 0.0;
            for (i, t) in timings.iter().enumerate() {
                let ms = t.seconds()? * 1e3;
                per_stage[v][i].push(ms);
                total += ms;
            }
            totals[v].push(total);
        }
    }
    Ok(totals
        .iter()
        .zip(&per_stage)
        .map(|(t, ps)| {
            (
                stats(t),
                ps.iter()
                    .map(|v| stats(v)["median_ms"].as_f64().unwrap_or(f64::NAN))
                    .collect(),
            )
        })
        .collect())
}

/// Reads a buffer in chunks and folds over (offset, chunk).
fn chunks(a: &Buffer<f32>, mut f: impl FnMut(usize, &[f32])) -> Result<()> {
    const CH: usize = 1 << 26;
    let mut host = vec![0f32; CH.min(a.len())];
    let mut off = 0;
    while off < a.len() {
        let n = CH.min(a.len() - off);
        a.read(&mut host[..n]).offset(off).enq()?;
        f(off, &host[..n]);
        off += n;
    }
    Ok(())
}

/// Compares `got` with `want` on the host, chunk by chunk.
fn compare(got: &Buffer<f32>, want: &Buffer<f32>, tol: (f64, f64)) -> Result<Value> {
    const CH: usize = 1 << 26;
    let mut w = vec![0f32; CH.min(want.len())];
    let (mut num, mut den, mut max_abs, mut outside, mut nan) = (0f64, 0f64, 0f64, 0usize, 0usize);
    chunks(got, |off, g| {
        let n = g.len();
        if want.read(&mut w[..n]).offset(off).enq().is_err() {
            nan = usize::MAX;
            return;
        }
        for (x, y) in g.iter().zip(&w[..n]) {
            let (x, y) = (*x as f64, *y as f64);
            if !x.is_finite() {
                nan += 1;
                continue;
            }
            let d = (x - y).abs();
            num += d * d;
            den += y * y;
            max_abs = max_abs.max(d);
            if kfoundry_examples::cpu::differs(x, y, tol.0, tol.1) {
                outside += 1;
            }
        }
    })?;
    if nan == usize::MAX {
        return Err("reading the reference output failed".into());
    }
    Ok(json!({
        "rel_l2": (num / den.max(f64::MIN_POSITIVE)).sqrt(),
        "max_abs_diff": max_abs,
        "rtol": tol.0, "atol": tol.1,
        "outside_tolerance": outside,
        "non_finite": nan,
        "passed": outside == 0 && nan == 0,
    }))
}

fn smallest_prime_at_least(n: usize) -> usize {
    let is_prime = |k: usize| {
        k >= 2
            && (2..)
                .take_while(|d| d * d <= k)
                .all(|d| !k.is_multiple_of(d))
    };
    (n.max(2)..).find(|k| is_prime(*k)).unwrap_or(n)
}

fn write_f32(path: &Path, b: &Buffer<f32>) -> Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut err = None;
    chunks(b, |_, c| {
        let bytes: Vec<u8> = c.iter().flat_map(|v| v.to_le_bytes()).collect();
        if let Err(e) = f.write_all(&bytes) {
            err = Some(e);
        }
    })?;
    if let Some(e) = err {
        return Err(e.into());
    }
    f.flush()?;
    Ok(())
}

/// Writes the output, or a strided sample of it; returns its description.
fn save_output(
    o: &Options,
    queue: &Queue,
    util: &Program,
    name: &str,
    out: &Buffer<f32>,
) -> Result<Value> {
    let len = out.len();
    if len * 4 <= o.sample_above {
        let file = format!("{name}.out.f32");
        write_f32(&o.out.join(&file), out)?;
        return Ok(json!({ "kind": "full", "file": file, "len": len }));
    }
    let stride = smallest_prime_at_least(len.div_ceil(SAMPLE_TARGET));
    let count = len.div_ceil(stride);
    let dst = buffer(queue, count)?;
    let k = Kernel::builder()
        .program(util)
        .name("gather_stride")
        .queue(queue.clone())
        .global_work_size(count.div_ceil(256) * 256)
        .arg(stride as u64)
        .arg(count as u64)
        .arg(out)
        .arg(&dst)
        .build()?;
    unsafe { k.enq()? };
    let file = format!("{name}.sample.f32");
    let idx_file = format!("{name}.sample_idx.u64");
    write_f32(&o.out.join(&file), &dst)?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(o.out.join(&idx_file))?);
    for j in 0..count as u64 {
        f.write_all(&(j * stride as u64).to_le_bytes())?;
    }
    f.flush()?;
    Ok(
        json!({ "kind": "strided_sample", "file": file, "index_file": idx_file, "len": len, "stride": stride, "count": count,
               "note": "sample[j] = output[j * stride] (flat index), j < count" }),
    )
}

fn cost_of(spec: &KernelSpec, params: &Params, sizes: &Sizes) -> (Option<i64>, Option<i64>) {
    let env = spec.env(params, sizes);
    let ev = |e: &Option<kfoundry::model::expr::Expr>| e.as_ref().and_then(|e| e.eval(&env).ok());
    match &spec.cost {
        Some(c) => (ev(&c.bytes), ev(&c.flops)),
        None => (None, None),
    }
}

fn run_problem(
    o: &Options,
    queue: &Queue,
    util: &Program,
    p: &Problem,
    clblast: Option<&mut ClBlast>,
) -> Result<Value> {
    let index = [
        "sgemm",
        "softmax",
        "layernorm",
        "sum_dim1",
        "linear_gelu_softmax",
        "conv_groupnorm",
    ]
    .iter()
    .position(|n| *n == p.name)
    .unwrap_or(99);
    let device = queue.device();
    eprintln!("{}: allocating and filling inputs", p.name);
    let mut bufs: BTreeMap<&'static str, Buffer<f32>> = BTreeMap::new();
    let mut inputs_json = Vec::new();
    for (t, (name, shape)) in p.inputs.iter().enumerate() {
        let len: usize = shape.iter().product();
        let b = buffer(queue, len)?;
        let seed = tensor_seed(o.seed, index, t);
        fill(queue, util, &b, seed)?;
        bufs.insert(name, b);
        inputs_json.push(json!({ "name": name, "shape": shape, "tensor_seed": seed }));
    }
    for (name, len) in &p.temps {
        bufs.insert(name, buffer(queue, *len)?);
    }
    let out_len: usize = p.output.iter().product();
    let out_ref = buffer(queue, out_len)?;
    let out_tuned = buffer(queue, out_len)?;
    queue.finish()?;

    let ref_params: Vec<Params> = p
        .stages
        .iter()
        .map(|s| Ok(s.evolved.spec()?.reference.clone()))
        .collect::<Result<_>>()?;
    let mut tuned_params = Vec::new();
    let mut stages_json = Vec::new();
    for st in &p.stages {
        let choice = st.evolved.explain(&device, &size_list(&st.sizes))?;
        let spec = st.evolved.spec()?;
        let (bytes, flops) = cost_of(spec, &choice.params, &st.sizes);
        stages_json.push(json!({
            "stage": st.label, "kernel": spec.id, "sizes": st.sizes,
            "dispatch": choice.step.to_string(), "tuned_params": choice.params,
            "tuned_params_text": fmt_assignments(&choice.params, ", "),
            "explain": choice.to_string(), "reference_params": spec.reference,
            "cost_bytes": bytes, "cost_flops": flops,
        }));
        tuned_params.push(choice.params);
    }

    eprintln!("{}: warm-up", p.name);
    for _ in 0..o.warmup {
        run_once(queue, p, &bufs, &out_ref, false)?;
        run_once(queue, p, &bufs, &out_tuned, true)?;
    }
    queue.finish()?;
    eprintln!("{}: timing", p.name);
    let mut timed = time_variants(
        queue,
        p,
        &[(&ref_params, &out_ref), (&tuned_params, &out_tuned)],
        &bufs,
        o.runs,
    )?;
    let (tuned_t, tuned_stage) = timed.pop().ok_or("timing")?;
    let (ref_t, ref_stage) = timed.pop().ok_or("timing")?;
    for (i, s) in stages_json.iter_mut().enumerate() {
        s["reference_median_ms"] = json!(ref_stage[i]);
        s["tuned_median_ms"] = json!(tuned_stage[i]);
    }

    // The checked outputs: poisoned, then one run of each through the launchers.
    eprintln!("{}: checking", p.name);
    poison(queue, util, &out_ref)?;
    poison(queue, util, &out_tuned)?;
    run_once(queue, p, &bufs, &out_ref, false)?;
    let steps = run_once(queue, p, &bufs, &out_tuned, true)?;
    queue.finish()?;
    let check = compare(&out_tuned, &out_ref, p.tol)?;
    let output = save_output(o, queue, util, p.name, &out_tuned)?;
    // The reference's output too, at the same indices: the accuracy rule (a variant's error
    // against FP64 at most twice the reference's) is judged by bench/torch_suite.py.
    let reference_output = save_output(o, queue, util, &format!("{}.ref", p.name), &out_ref)?;

    let input_bytes: usize = p
        .inputs
        .iter()
        .map(|(_, s)| s.iter().product::<usize>() * 4)
        .sum();
    let mut r = json!({
        "name": p.name, "what": p.what,
        "inputs": inputs_json, "output_shape": p.output,
        "compulsory_bytes": input_bytes + out_len * 4, "flops": p.flops,
        "stages": stages_json, "dispatch_steps": steps,
        "reference": ref_t, "tuned": tuned_t,
        "check": check, "output": output, "reference_output": reference_output,
    });

    if let (Some(cb), "sgemm") = (clblast, p.name) {
        r["clblast"] = cb.time_sgemm(queue, p, &bufs, &out_ref, o)?;
    }
    Ok(r)
}

/// CLBlast's C API, loaded at run time.
struct ClBlast {
    _lib: libloading::Library,
    sgemm: SgemmFn,
    path: String,
}

#[allow(clippy::type_complexity)]
type SgemmFn = unsafe extern "C" fn(
    i32,
    i32,
    i32,
    usize,
    usize,
    usize,
    f32,
    *mut c_void,
    usize,
    usize,
    *mut c_void,
    usize,
    usize,
    f32,
    *mut c_void,
    usize,
    usize,
    *mut *mut c_void,
    *mut *mut c_void,
) -> i32;

const CLBLAST_ROW_MAJOR: i32 = 101;
const CLBLAST_NO_TRANS: i32 = 111;

impl ClBlast {
    fn load(path: &str) -> Result<ClBlast> {
        // SAFETY: loading a shared library runs its initialisers; CLBlast's are benign.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("cannot load CLBlast from {path}: {e}"))?;
        // SAFETY: the symbol has the C signature declared by `SgemmFn` (clblast_c.h, 1.5).
        let sgemm = unsafe {
            *lib.get::<SgemmFn>(b"CLBlastSgemm\0")
                .map_err(|e| format!("CLBlastSgemm: {e}"))?
        };
        Ok(ClBlast {
            _lib: lib,
            sgemm,
            path: path.into(),
        })
    }

    #[expect(clippy::too_many_arguments, reason = "the arguments of CLBlastSgemm")]
    fn call(
        &self,
        queue: &Queue,
        m: usize,
        n: usize,
        k: usize,
        a: &Buffer<f32>,
        b: &Buffer<f32>,
        c: &Buffer<f32>,
    ) -> Result<()> {
        let mut q = queue.as_core().as_ptr();
        // SAFETY: live buffers of the right lengths (m·k, k·n, m·n) on this queue's context;
        // row-major leading dimensions k, n, n.
        let status = unsafe {
            (self.sgemm)(
                CLBLAST_ROW_MAJOR,
                CLBLAST_NO_TRANS,
                CLBLAST_NO_TRANS,
                m,
                n,
                k,
                1.0,
                a.as_core().as_ptr(),
                0,
                k,
                b.as_core().as_ptr(),
                0,
                n,
                0.0,
                c.as_core().as_ptr(),
                0,
                n,
                &mut q,
                std::ptr::null_mut(),
            )
        };
        if status != 0 {
            return Err(format!("CLBlastSgemm returned status {status}").into());
        }
        Ok(())
    }

    fn time_sgemm(
        &mut self,
        queue: &Queue,
        p: &Problem,
        bufs: &BTreeMap<&'static str, Buffer<f32>>,
        out_ref: &Buffer<f32>,
        o: &Options,
    ) -> Result<Value> {
        let s = &p.stages[0].sizes;
        let (m, n, k) = (s["m"] as usize, s["n"] as usize, s["k"] as usize);
        let (a, b) = (&bufs["a"], &bufs["b"]);
        let c = buffer(queue, m * n)?;
        eprintln!(
            "sgemm: CLBlast from {} (the first call compiles its kernels)",
            self.path
        );
        for _ in 0..o.warmup.max(1) {
            self.call(queue, m, n, k, a, b, &c)?;
        }
        queue.finish()?;
        let mut times = Vec::new();
        for _ in 0..o.runs {
            let t0 = Instant::now();
            self.call(queue, m, n, k, a, b, &c)?;
            queue.finish()?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        c.cmd().fill(f32::NAN, None).enq()?;
        self.call(queue, m, n, k, a, b, &c)?;
        queue.finish()?;
        let check = compare(&c, out_ref, p.tol)?;
        let mut r = stats(&times);
        r["timing"] =
            json!("host wall time per call (enqueue + finish), CLBlast may launch several kernels");
        r["library"] = json!(self.path);
        r["rel_l2_vs_reference"] = check["rel_l2"].clone();
        r["check_vs_reference"] = check;
        Ok(r)
    }
}
