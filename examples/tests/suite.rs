//! The suite's kernels on the default OpenCL device (PoCL in CI): each kernel's reference and a
//! few parameter points chosen to cover its code paths (local tiles and vector loads, online
//! softmax, recomputation, ragged sizes), against the CPU; and the harness's input generator,
//! bit for bit against the Rust implementation and fixed values that `bench/test_hash.py`
//! checks too.

use kfoundry::model::spec::Params;
use kfoundry::ocl::{Buffer, Context, Kernel, Program, Queue};
use kfoundry_examples::checks::{self, small, How, Outcome, Result};
use kfoundry_examples::cpu::{self, ConvShape};
use kfoundry_examples::suite::*;

fn queue() -> Queue {
    let (platform, device) = kfoundry::default_device().expect("an OpenCL device");
    let context = Context::builder().platform(platform).devices(device).build().unwrap();
    Queue::new(&context, device, None).unwrap()
}

/// The reference parameters with some overridden.
fn with(reference: &Params, over: &[(&str, i64)]) -> Params {
    let mut p = reference.clone();
    for (k, v) in over {
        assert!(p.contains_key(*k), "unknown parameter {k}");
        p.insert(k.to_string(), *v);
    }
    p
}

fn assert_ok(name: &str, o: Result<Outcome>) {
    let o = o.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(o.ok(), "{name} ({}): {} of {} elements differ from the CPU", o.ran, o.mismatches, o.len);
}

#[test]
fn sgemm_reference_and_tiles() {
    let q = queue();
    let r = &SuiteSgemm::evolved().spec().unwrap().reference;
    let (m, n, k) = small::SGEMM;
    assert_ok("reference", checks::sgemm(&q, How::Params(r), m, n, k));
    let local =
        with(r, &[("USE_LOCAL", 1), ("TM", 4), ("TN", 4), ("VEC", 4), ("TK", 16), ("PAD", 1), ("LVEC", 4), ("UNROLL", 4), ("WGX", 8), ("WGY", 8)]);
    assert_ok("local tiles", checks::sgemm(&q, How::Params(&local), 64, 96, 40));
    let global = with(r, &[("TM", 2), ("TN", 8), ("VEC", 2), ("UNROLL", 8), ("WGX", 8), ("WGY", 16)]);
    assert_ok("register tiles", checks::sgemm(&q, How::Params(&global), 37, 52, 19));
    let prefetch = with(r, &[("USE_LOCAL", 1), ("PREFETCH", 1), ("TM", 8), ("TN", 4), ("VEC", 4), ("TK", 8), ("PAD", 4), ("WGX", 16), ("WGY", 8)]);
    assert_ok("prefetch", checks::sgemm(&q, How::Params(&prefetch), 37, 52, 19));
}

#[test]
fn softmax_reference_and_online() {
    let q = queue();
    let r = &Softmax::evolved().spec().unwrap().reference;
    let (rows, cols) = small::SOFTMAX;
    assert_ok("reference", checks::softmax(&q, How::Params(r), rows, cols));
    let online = with(r, &[("WG", 64), ("VEC", 4), ("ITEMS", 2), ("ONLINE", 1)]);
    assert_ok("online", checks::softmax(&q, How::Params(&online), 5, 1000));
    let three = with(r, &[("WG", 32), ("VEC", 8), ("ITEMS", 4)]);
    assert_ok("three passes", checks::softmax(&q, How::Params(&three), rows, cols));
    let r2 = &LinearSoftmax::evolved().spec().unwrap().reference;
    let p2 = with(r2, &[("WG", 128), ("VEC", 2), ("ONLINE", 1)]);
    assert_ok("linear stage 2", checks::linear_softmax(&q, How::Params(&p2), 7, 100));
}

#[test]
fn layernorm_stages_and_pipeline() {
    let q = queue();
    let (r1, r2) = (&LayerNormStats::evolved().spec().unwrap().reference, &LayerNormApply::evolved().spec().unwrap().reference);
    let (n, d, chunk) = small::LAYERNORM;
    let p1 = with(r1, &[("WG", 64), ("VEC", 8), ("ITEMS", 2)]);
    let p2 = with(r2, &[("WG", 32), ("VEC", 4), ("ITEMS", 8)]);
    assert_ok("stats", checks::layernorm_stats(&q, How::Params(&p1), 3, 1000, 96));
    assert_ok("apply", checks::layernorm_apply(&q, How::Params(&p2), 3, 1000, 96));
    // Several samples per group, with a ragged last group (5 samples, 2 per group).
    let grouped = with(r2, &[("WG", 32), ("VEC", 4), ("ITEMS", 2), ("NS", 2)]);
    assert_ok("apply, 2 samples a group", checks::layernorm_apply(&q, How::Params(&grouped), 5, 1000, 96));
    assert_ok("reference pipeline", checks::layernorm(&q, (How::Params(r1), How::Params(r2)), n, d, chunk));
    assert_ok("tuned pipeline", checks::layernorm(&q, (How::Params(&p1), How::Params(&p2)), n, d, chunk));
}

#[test]
fn sum_dim1_reference_and_split() {
    let q = queue();
    let r = &SumDim1::evolved().spec().unwrap().reference;
    let (b, rows, cols) = small::SUM;
    assert_ok("reference", checks::sum_dim1(&q, How::Params(r), b, rows, cols));
    let split = with(r, &[("TX", 32), ("TY", 8), ("VEC", 4), ("ITEMS", 4)]);
    assert_ok("split", checks::sum_dim1(&q, How::Params(&split), b, rows, cols));
    assert_ok("ragged", checks::sum_dim1(&q, How::Params(&split), 3, 37, 13));
}

#[test]
fn linear_reference_and_tiles() {
    let q = queue();
    let r = &LinearGelu::evolved().spec().unwrap().reference;
    let (m, n, k) = small::LINEAR;
    let local = with(r, &[("USE_LOCAL", 1), ("LVEC", 4), ("PAD", 4), ("TM", 8), ("TN", 4), ("VEC", 4), ("WGX", 16), ("WGY", 8), ("UNROLL", 2)]);
    assert_ok("local tiles", checks::linear_gelu(&q, How::Params(&local), 33, 40, 52));
    let prefetch = with(r, &[("USE_LOCAL", 1), ("PREFETCH", 1), ("LVEC", 4), ("TK", 32), ("TM", 4), ("TN", 8), ("VEC", 2), ("WGX", 8), ("WGY", 16)]);
    assert_ok("prefetch", checks::linear_gelu(&q, How::Params(&prefetch), 33, 40, 52));
    let global = with(r, &[("TN", 4), ("VEC", 4), ("TM", 2), ("UNROLL", 4), ("WGX", 8), ("WGY", 8)]);
    assert_ok("register tiles", checks::linear_gelu(&q, How::Params(&global), 17, 24, 19));
    let r2 = &LinearSoftmax::evolved().spec().unwrap().reference;
    assert_ok("reference pipeline", checks::linear(&q, (How::Params(r), How::Params(r2)), m, n, k));
}

#[test]
fn conv_groupnorm_reference_and_variants() {
    let q = queue();
    let r = &ConvGroupNorm::evolved().spec().unwrap().reference;
    assert_ok("reference", checks::conv_gn(&q, How::Params(r), small::CONV));
    let re = with(r, &[("WG", 64), ("PX", 4), ("CB", 4), ("RECOMPUTE", 1), ("WLOCAL", 1)]);
    assert_ok("recompute", checks::conv_gn(&q, How::Params(&re), ConvShape { n: 1, cin: 3, h: 9, w: 13, cout: 8, groups: 2 }));
    let st = with(r, &[("WG", 128), ("PX", 8), ("CB", 2), ("WLOCAL", 1)]);
    assert_ok("stored", checks::conv_gn(&q, How::Params(&st), small::CONV));
}

/// (seed, index, value): computed independently in Python (`bench/test_hash.py` holds the same).
#[expect(clippy::excessive_precision, reason = "the values exactly as Python prints them")]
const GOLDEN: [(u32, u32, f32); 7] = [
    (0, 0, -1.0),
    (0, 1, -0.3050144910812378),
    (1, 0, -0.3050144910812378),
    (7016, 12345, 0.4451010227203369),
    (4294967295, 4294967295, -0.6536140441894531),
    (123456789, 2146959359, 0.08108901977539062),
    (42, 1000000007, -0.09798789024353027),
];

#[test]
fn generator_matches_golden_values_and_opencl() -> Result<()> {
    for (s, i, v) in GOLDEN {
        assert_eq!(cpu::hash_uniform(s, i).to_bits(), v.to_bits(), "seed {s} index {i}");
    }
    let q = queue();
    let program = Program::builder().src(include_str!("../kernels/suite_util.cl")).devices(q.device()).build(&q.context())?;
    let n = 100_003usize;
    for seed in [3u32, 0xdead_beef] {
        let b = Buffer::<f32>::builder().queue(q.clone()).len(n).fill_val(f32::NAN).build()?;
        let k = Kernel::builder()
            .program(&program)
            .name("hash_fill")
            .queue(q.clone())
            .global_work_size(n.div_ceil(64) * 64)
            .arg(seed)
            .arg(n as u64)
            .arg(&b)
            .build()?;
        unsafe { k.enq()? };
        let got = checks::read(&b)?;
        for (i, g) in got.iter().enumerate() {
            assert_eq!(g.to_bits(), cpu::hash_uniform(seed, i as u32).to_bits(), "seed {seed} index {i}");
        }
        assert!(got.iter().all(|v| (-1.0..1.0).contains(v)));
        let mean = got.iter().map(|v| *v as f64).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "mean {mean}");
    }
    Ok(())
}

/// The tensor-core path of the GEMM kernels (`MMA = 1`) with its warp-wide instructions
/// emulated (`KM_EMULATE`: cp.async as plain copies, mma.sync through local memory), built from
/// the kernels' own sources: the fragment layouts, tile loads, pipeline stages and 3xTF32 split
/// are checked on any device (the PTX itself runs only on NVIDIA's). Its error against FP64
/// must stay within twice the sequential FP32 sum's.
#[test]
fn tensor_core_path_emulated_matches_fp64() {
    let q = queue();
    for (kernel, source) in [("gemm", include_str!("../kernels/gemm.cl")), ("linear_gelu", include_str!("../kernels/linear_gelu.cl"))] {
        // (WGX, WGY, TM, TN, WM, TK, STAGES, FLUSH, m, n, k): one warp; 2 warps along m, each
        // with two n8 pieces, two steps per flush; 4 warps in 2 x 2, each with two m16 pieces.
        // Small tiles: PoCL's compile time grows with the emulation's barriers.
        for (wgx, wgy, tm, tn, wm, tk, stages, flush, m, n, k) in
            [(8, 4, 4, 1, 1, 8, 2, 1, 32, 16, 24), (8, 8, 4, 2, 2, 16, 3, 2, 64, 32, 48), (16, 8, 8, 1, 2, 8, 4, 1, 128, 32, 40)]
        {
            let options = format!(
                "-D MMA=1 -D KM_EMULATE=1 -D WGX={wgx} -D WGY={wgy} -D TM={tm} -D TN={tn} -D WM={wm} -D TK={tk} -D STAGES={stages} -D FLUSH={flush}"
            );
            let program = Program::builder().src(source).devices(q.device()).cmplr_opt(options.clone()).build(&q.context()).unwrap();
            let (bm, bn) = (wgy * tm, wgx * tn);
            let a = cpu::data(m * k, 41);
            let b = cpu::data(k * n, 42);
            let bias = cpu::data(n, 43);
            let upload = |v: &[f32]| Buffer::<f32>::builder().queue(q.clone()).len(v.len()).copy_host_slice(v).build().unwrap();
            let (ab, bb, biasb) = (upload(&a), upload(&b), upload(&bias));
            let out = Buffer::<f32>::builder().queue(q.clone()).len(m * n).fill_val(f32::NAN).build().unwrap();
            let mut kb = Kernel::builder();
            kb.program(&program).name(kernel).queue(q.clone()).global_work_size([n / bn * wgx, m / bm * wgy]).local_work_size([wgx, wgy]);
            kb.arg(m as i32).arg(n as i32).arg(k as i32).arg(&ab).arg(&bb);
            if kernel == "linear_gelu" {
                kb.arg(&biasb);
            }
            let k_obj = kb.arg(&out).build().unwrap();
            unsafe { k_obj.enq().unwrap() };
            let mut got = vec![0f32; m * n];
            out.read(&mut got).enq().unwrap();
            // FP64 truth, and the sequential FP32 sum the portable kernels compute.
            let (want, fp32): (Vec<f64>, Vec<f64>) = (0..m * n)
                .map(|e| {
                    let (i, j) = (e / n, e % n);
                    // linear_gelu reads its weight as n x k
                    let bv = |kk: usize| if kernel == "gemm" { b[kk * n + j] } else { b[j * k + kk] };
                    let exact: f64 = (0..k).map(|kk| f64::from(a[i * k + kk]) * f64::from(bv(kk))).sum();
                    let single = (0..k).fold(0f32, |s, kk| a[i * k + kk].mul_add(bv(kk), s));
                    if kernel == "gemm" {
                        (exact, f64::from(single))
                    } else {
                        (cpu::gelu(exact + f64::from(bias[j])), cpu::gelu(f64::from(single + bias[j])))
                    }
                })
                .unzip();
            let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
            let err = |v: &[f64]| norm(&v.iter().zip(&want).map(|(x, y)| x - y).collect::<Vec<_>>()) / norm(&want);
            let got64: Vec<f64> = got.iter().map(|v| f64::from(*v)).collect();
            let (e_mma, e_fp32) = (err(&got64), err(&fp32));
            assert_eq!(cpu::mismatches(&got, &want, 1e-4, 1e-4), 0, "{kernel} {options}: differs from FP64 beyond the check");
            assert!(e_mma <= 2.0 * e_fp32, "{kernel} {options}: relative error {e_mma:.2e} > 2 x FP32's {e_fp32:.2e}");
        }
    }
}

/// The tensor-core path is refused, before any build, on a device that is not an NVIDIA GPU
/// of compute capability 8.0 or later (the default device in CI is PoCL's CPU).
#[test]
fn tensor_core_path_is_refused_where_the_device_cannot_run_it() {
    let q = queue();
    let traits = kfoundry::traits_of(&q.device()).unwrap();
    if traits.value("device_sm").unwrap_or(0) >= 80 {
        return; // an NVIDIA GPU that runs it: nothing to refuse here
    }
    let r = &SuiteSgemm::evolved().spec().unwrap().reference;
    let mma = with(r, &[("MMA", 1), ("WGX", 16), ("WGY", 16), ("TM", 8), ("TN", 8), ("WM", 2), ("TK", 16)]);
    let e = checks::sgemm(&q, How::Params(&mma), 256, 256, 64).unwrap_err().to_string();
    assert!(e.contains("does not hold on this device") && e.contains("device_sm >= 80"), "{e}");
}

/// The tensor-core machinery is the same text in gemm.cl and linear_gelu.cl (an annotation
/// reads one source file): the two copies must not drift apart.
#[test]
fn tensor_core_blocks_of_the_two_gemm_kernels_are_identical() {
    let block = |source: &'static str| -> &'static str {
        let start = source.find("/* ---- The 3xTF32 tensor-core path").expect("the block's first line");
        let end = source[start..].find("#else /* the portable path */").expect("the block's end") + start;
        &source[start..end]
    };
    let gemm = block(include_str!("../kernels/gemm.cl"));
    let linear = block(include_str!("../kernels/linear_gelu.cl"));
    assert!(gemm.contains("KM_B_KMAJOR") && gemm.len() > 4000, "the block was found whole");
    assert_eq!(gemm, linear, "the tensor-core blocks of gemm.cl and linear_gelu.cl differ");
}
