//! Sweeps the suite kernels' parameter spaces on the default OpenCL device: every
//! configuration allowed by the annotation's `require` (or a sample of them, for the two GEMM
//! spaces) is built and run at the `small` size and at ragged sizes, and compared with the CPU.
//!
//! ```sh
//! cargo run --release -p kfoundry-examples --bin validate -- [--sample N] [--seed S]
//!     [--exhaustive-max N] [KERNEL...]
//! ```
//! KERNEL: sgemm softmax softmax_stats softmax_apply layernorm_stats layernorm_apply sum_dim1
//! linear_gelu linear_softmax conv_gn conv_gn_stats groupnorm_apply
//! (default: all). A space of more than `--exhaustive-max` (default 400) valid configurations
//! is sampled: `--sample N`
//! (default 150) "edge" configurations (every parameter at its minimum or maximum) and N others.
//! Exits non-zero if any run fails.

use kfoundry::model::device::DeviceTraits;
use kfoundry::model::spec::{KernelSpec, Params, Sizes};
use kfoundry::ocl::{Context, Queue};
use kfoundry_examples::checks::{self, small, How, Outcome, Result};
use kfoundry_examples::cpu::ConvShape;
use kfoundry_examples::suite::*;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// All combinations of the parameter domains, in order.
fn space(spec: &KernelSpec) -> Vec<Params> {
    let mut out = vec![Params::new()];
    for p in &spec.params {
        out = out
            .into_iter()
            .flat_map(|base| {
                p.values.iter().map(move |v| {
                    let mut q = base.clone();
                    q.insert(p.name.clone(), *v);
                    q
                })
            })
            .collect();
    }
    out
}

fn sizes(spec: &KernelSpec, values: &[usize]) -> Sizes {
    spec.sizes
        .iter()
        .cloned()
        .zip(values.iter().map(|v| *v as i64))
        .collect()
}

/// xorshift64*: a dependency-free seeded stream for sampling.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// Valid configurations at `first` sizes: all of them, or `sample` edge ones and `sample` others.
fn configs(
    spec: &KernelSpec,
    first: &Sizes,
    device: &DeviceTraits,
    sample: usize,
    exhaustive_max: usize,
    rng: &mut Rng,
) -> (usize, Vec<Params>) {
    let valid: Vec<Params> = space(spec)
        .into_iter()
        .filter(|p| spec.geometry(p, first, Some(device)).is_ok())
        .collect();
    let total = valid.len();
    if total <= exhaustive_max {
        return (total, valid);
    }
    let edge = |p: &Params| {
        spec.params.iter().all(|d| {
            let v = p[&d.name];
            Some(&v) == d.values.iter().min() || Some(&v) == d.values.iter().max()
        })
    };
    let (mut edges, mut rest): (Vec<Params>, Vec<Params>) = valid.into_iter().partition(edge);
    let mut picked = Vec::new();
    for pool in [&mut edges, &mut rest] {
        for _ in 0..sample.min(pool.len()) {
            let i = rng.below(pool.len());
            picked.push(pool.swap_remove(i));
        }
    }
    (total, picked)
}

type Check = dyn Fn(&Queue, How<'_>, &[usize]) -> Result<Outcome>;

fn run() -> Result<()> {
    let mut sample = 150usize;
    let mut seed = 1u64;
    let mut exhaustive_max = 400usize;
    let mut only = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sample" => sample = args.next().ok_or("--sample N")?.parse()?,
            "--seed" => seed = args.next().ok_or("--seed S")?.parse()?,
            "--exhaustive-max" => {
                exhaustive_max = args.next().ok_or("--exhaustive-max N")?.parse()?
            }
            _ => only.push(a),
        }
    }
    let (platform, device) = kfoundry::default_device()?;
    let context = Context::builder()
        .platform(platform)
        .devices(device)
        .build()?;
    let queue = Queue::new(&context, device, None)?;
    eprintln!("device: {}", kfoundry::device_key(&device)?);
    let traits = kfoundry::traits_of(&device)?;

    let conv = |s: &[usize]| ConvShape {
        n: s[0],
        cin: s[1],
        h: s[2],
        w: s[3],
        cout: s[4],
        groups: s[5],
    };
    let (sm, sn, sk) = small::SGEMM;
    let (lm, ln, lk) = small::LINEAR;
    let (nn, nd, nc) = small::LAYERNORM;
    let (ssr, ssc, ssch) = small::SOFTMAX_STAGES;
    let (sb, sr, sc) = small::SUM;
    let c = small::CONV;
    #[allow(clippy::type_complexity)]
    let kernels: Vec<(&str, &KernelSpec, Vec<Vec<usize>>, Box<Check>)> = vec![
        (
            "sgemm",
            SuiteSgemm::evolved().spec()?,
            vec![vec![sm, sn, sk], vec![64, 96, 40], vec![37, 52, 19]],
            Box::new(|q, h, s| checks::sgemm(q, h, s[0], s[1], s[2])),
        ),
        (
            "softmax",
            Softmax::evolved().spec()?,
            vec![
                vec![small::SOFTMAX.0, small::SOFTMAX.1],
                vec![5, 1000],
                vec![3, 7],
            ],
            Box::new(|q, h, s| checks::softmax(q, h, s[0], s[1])),
        ),
        (
            "softmax_stats",
            SoftmaxStats::evolved().spec()?,
            vec![
                vec![ssr, ssc, ssch],
                vec![5, 1000, 96],
                vec![3, 7, 3],
                vec![1, 33, 64],
            ],
            Box::new(|q, h, s| checks::softmax_stats(q, h, s[0], s[1], s[2])),
        ),
        (
            "softmax_apply",
            SoftmaxApply::evolved().spec()?,
            vec![
                vec![ssr, ssc, ssch],
                vec![5, 1000, 96],
                vec![3, 7, 3],
                vec![1, 33, 64],
            ],
            Box::new(|q, h, s| checks::softmax_apply(q, h, s[0], s[1], s[2])),
        ),
        (
            "layernorm_stats",
            LayerNormStats::evolved().spec()?,
            vec![vec![nn, nd, nc], vec![3, 1000, 96], vec![2, 1001, 97]],
            Box::new(|q, h, s| checks::layernorm_stats(q, h, s[0], s[1], s[2])),
        ),
        (
            "layernorm_apply",
            LayerNormApply::evolved().spec()?,
            vec![vec![nn, nd, nc], vec![3, 1000, 96], vec![2, 1001, 97]],
            Box::new(|q, h, s| checks::layernorm_apply(q, h, s[0], s[1], s[2])),
        ),
        (
            "sum_dim1",
            SumDim1::evolved().spec()?,
            vec![vec![sb, sr, sc], vec![3, 37, 13]],
            Box::new(|q, h, s| checks::sum_dim1(q, h, s[0], s[1], s[2])),
        ),
        (
            "linear_gelu",
            LinearGelu::evolved().spec()?,
            vec![vec![lm, ln, lk], vec![33, 40, 52], vec![17, 24, 19]],
            Box::new(|q, h, s| checks::linear_gelu(q, h, s[0], s[1], s[2])),
        ),
        (
            "linear_softmax",
            LinearSoftmax::evolved().spec()?,
            vec![vec![small::SOFTMAX.0, 256], vec![7, 100]],
            Box::new(|q, h, s| checks::linear_softmax(q, h, s[0], s[1])),
        ),
        (
            "conv_gn",
            ConvGroupNorm::evolved().spec()?,
            vec![
                vec![c.n, c.cin, c.h, c.w, c.cout, c.groups],
                vec![1, 3, 9, 13, 8, 4],
                vec![1, 2, 5, 40, 8, 2],
            ],
            Box::new(move |q, h, s| checks::conv_gn(q, h, conv(s))),
        ),
        // The two-launch form: ragged chunks (rows not dividing h - 2), one chunk, one row a
        // chunk, widths that are not a multiple of any vector width.
        (
            "conv_gn_stats",
            ConvGnStats::evolved().spec()?,
            vec![
                vec![c.n, c.cin, c.h, c.w, c.cout, c.groups, small::CONV_ROWS],
                vec![1, 3, 9, 13, 8, 4, 3],
                vec![1, 2, 5, 40, 8, 2, 8],
                vec![2, 1, 6, 7, 4, 1, 1],
            ],
            Box::new(move |q, h, s| checks::conv_gn_stats(q, h, conv(s), s[6])),
        ),
        (
            "groupnorm_apply",
            GroupNormApply::evolved().spec()?,
            vec![
                vec![c.n, c.h, c.w, c.cout, c.groups, small::CONV_ROWS],
                vec![1, 9, 13, 8, 4, 3],
                vec![1, 5, 40, 8, 2, 8],
                vec![2, 6, 7, 4, 1, 1],
            ],
            Box::new(move |q, h, s| {
                let shape = conv(&[s[0], 1, s[1], s[2], s[3], s[4]]);
                checks::groupnorm_apply(q, h, shape, s[5])
            }),
        ),
    ];

    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut failed_total = 0;
    println!("kernel            valid  tested  runs  failed  sizes");
    for (name, spec, size_sets, check) in &kernels {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        let first = sizes(spec, &size_sets[0]);
        let (total, cfgs) = configs(spec, &first, &traits, sample, exhaustive_max, &mut rng);
        let (mut runs, mut failed) = (0, 0);
        let started = std::time::Instant::now();
        for p in &cfgs {
            for s in size_sets {
                if spec.geometry(p, &sizes(spec, s), Some(&traits)).is_err() {
                    continue; // a size constraint (e.g. n % VEC) excludes this configuration here
                }
                runs += 1;
                match check(&queue, How::Params(p), s) {
                    Ok(o) if o.ok() => {}
                    Ok(o) => {
                        failed += 1;
                        eprintln!(
                            "{name} {s:?} {}: {} of {} wrong",
                            o.ran, o.mismatches, o.len
                        );
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!(
                            "{name} {s:?} {}: {e}",
                            kfoundry::model::spec::fmt_assignments(p, ", ")
                        );
                    }
                }
            }
        }
        failed_total += failed;
        let sets: Vec<String> = size_sets.iter().map(|s| format!("{s:?}")).collect();
        println!(
            "{name:<17} {total:>5}  {:>6}  {runs:>4}  {failed:>6}  {}  ({:.0} s)",
            cfgs.len(),
            sets.join(" "),
            started.elapsed().as_secs_f64()
        );
    }
    if failed_total > 0 {
        return Err(format!("{failed_total} runs failed").into());
    }
    Ok(())
}
