//! The suite's kernels on the default OpenCL device (PoCL in CI): each kernel's reference and a
//! few parameter points chosen to cover its code paths (local tiles and vector loads, online
//! softmax, recomputation, ragged sizes), against the CPU; and the harness's input generator,
//! bit for bit against the Rust implementation and fixed values that `bench/test_hash.py`
//! checks too.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed test says where

use kfoundry::model::spec::Params;
use kfoundry::ocl::{Buffer, Context, Kernel, Program, Queue};
use kfoundry_examples::checks::{self, small, How, Outcome, Result};
use kfoundry_examples::cpu::{self, ConvShape};
use kfoundry_examples::suite::*;

/// An example kernel's source as the annotation reads it: its `#include`s (kfoundry's template
/// library) expanded.
fn kernel_source(file: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    kfoundry_tooling::library::expand(&text, Some(&path), &dir)
        .unwrap()
        .text
}

/// `source` built for the queue's device with build `options`.
fn build(q: &Queue, source: &str, options: &str) -> Program {
    Program::builder()
        .src(source)
        .devices(q.device())
        .cmplr_opt(options)
        .build(&q.context())
        .unwrap_or_else(|e| panic!("{options}: {e}"))
}

fn queue() -> Queue {
    let (platform, device) = kfoundry::default_device().expect("an OpenCL device");
    let context = Context::builder()
        .platform(platform)
        .devices(device)
        .build()
        .unwrap();
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
    assert!(
        o.ok(),
        "{name} ({}): {} of {} elements differ from the CPU",
        o.ran,
        o.mismatches,
        o.len
    );
}

#[test]
fn sgemm_reference_and_tiles() {
    let q = queue();
    let r = &SuiteSgemm::evolved().spec().unwrap().reference;
    let (m, n, k) = small::SGEMM;
    assert_ok("reference", checks::sgemm(&q, How::Params(r), m, n, k));
    let local = with(
        r,
        &[
            ("USE_LOCAL", 1),
            ("TM", 4),
            ("TN", 4),
            ("VEC", 4),
            ("TK", 16),
            ("PAD", 1),
            ("LVEC", 4),
            ("UNROLL", 4),
            ("WGX", 8),
            ("WGY", 8),
        ],
    );
    assert_ok(
        "local tiles",
        checks::sgemm(&q, How::Params(&local), 64, 96, 40),
    );
    let global = with(
        r,
        &[
            ("TM", 2),
            ("TN", 8),
            ("VEC", 2),
            ("UNROLL", 8),
            ("WGX", 8),
            ("WGY", 16),
        ],
    );
    assert_ok(
        "register tiles",
        checks::sgemm(&q, How::Params(&global), 37, 52, 19),
    );
    let prefetch = with(
        r,
        &[
            ("USE_LOCAL", 1),
            ("PREFETCH", 1),
            ("TM", 8),
            ("TN", 4),
            ("VEC", 4),
            ("TK", 8),
            ("PAD", 4),
            ("WGX", 16),
            ("WGY", 8),
        ],
    );
    assert_ok(
        "prefetch",
        checks::sgemm(&q, How::Params(&prefetch), 37, 52, 19),
    );
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
    assert_ok(
        "three passes",
        checks::softmax(&q, How::Params(&three), rows, cols),
    );
    let r2 = &LinearSoftmax::evolved().spec().unwrap().reference;
    let p2 = with(r2, &[("WG", 128), ("VEC", 2), ("ONLINE", 1)]);
    assert_ok(
        "linear stage 2",
        checks::linear_softmax(&q, How::Params(&p2), 7, 100),
    );
}

/// The two-stage softmax: each stage alone against the CPU (stage 2 fed the CPU's partials) and
/// the pipeline, for several parameter sets and awkward sizes: cols not a multiple of the chunk,
/// of VEC or of WG; chunks and rows shorter than a vector (so rows start unaligned); one chunk
/// per row; rows = 1; chunk = 1.
#[test]
fn softmax_stages_and_pipeline() {
    let q = queue();
    let (r1, r2) = (
        &SoftmaxStats::evolved().spec().unwrap().reference,
        &SoftmaxApply::evolved().spec().unwrap().reference,
    );
    let stats = [
        r1.clone(),
        with(r1, &[("WG", 32), ("VEC", 4), ("ITEMS", 2)]),
        with(r1, &[("WG", 64), ("VEC", 8), ("ITEMS", 8)]),
        with(r1, &[("WG", 512), ("VEC", 2), ("ITEMS", 4)]),
    ];
    let apply = [
        r2.clone(),
        with(r2, &[("WG", 32), ("VEC", 4), ("ITEMS", 16)]),
        with(r2, &[("WG", 64), ("VEC", 8), ("ITEMS", 1)]),
        with(r2, &[("WG", 128), ("VEC", 2), ("ITEMS", 4)]),
    ];
    let (rows, cols, chunk) = small::SOFTMAX_STAGES;
    // (rows, cols, chunk)
    let sizes = [
        (rows, cols, chunk),
        (5, 1001, 96),
        (3, 7, 3),
        (4, 1001, 4096),
        (1, 333, 50),
        (2, 5, 1),
        (3, 100, 33),
    ];
    for (p1, p2) in stats.iter().zip(&apply) {
        for &(r, c, ch) in &sizes {
            let at = format!("{r} x {c}, chunk {ch}");
            assert_ok(
                &format!("stats {at}"),
                checks::softmax_stats(&q, How::Params(p1), r, c, ch),
            );
            assert_ok(
                &format!("apply {at}"),
                checks::softmax_apply(&q, How::Params(p2), r, c, ch),
            );
            assert_ok(
                &format!("pipeline {at}"),
                checks::softmax_stages(&q, (How::Params(p1), How::Params(p2)), r, c, ch),
            );
        }
    }
}

/// A masked softmax: -inf in every row, a whole chunk of them at the start of each row. The
/// stats stage must leave such a chunk empty (maximum -inf, sum 0, not NaN) and the apply stage
/// must ignore it and write 0 where x is -inf.
#[test]
fn softmax_stages_with_masked_chunks() -> Result<()> {
    let q = queue();
    let (rows, cols, chunk) = (3, 1000, 96);
    let mut x: Vec<f32> = cpu::data(rows * cols, 26).iter().map(|v| v * 8.0).collect();
    for r in 0..rows {
        for c in 0..cols {
            if c < chunk + 5 || c % 7 == 3 {
                x[r * cols + c] = f32::NEG_INFINITY;
            }
        }
    }
    let want = cpu::softmax(&x, rows, cols);
    assert!(
        want.iter().all(|v| v.is_finite())
            && want.iter().filter(|v| **v == 0.0).count() > rows * chunk
    );
    let nch = cols.div_ceil(chunk);
    let r1 = &SoftmaxStats::evolved().spec().unwrap().reference;
    let r2 = &SoftmaxApply::evolved().spec().unwrap().reference;
    let p1 = with(r1, &[("WG", 32), ("VEC", 4), ("ITEMS", 2)]);
    let p2 = with(r2, &[("WG", 64), ("VEC", 8), ("ITEMS", 2)]);
    for (a, b) in [(r1, r2), (&p1, &p2)] {
        let (xb, mb, sb, yb) = (
            checks::input(&q, &x)?,
            checks::output(&q, rows * nch)?,
            checks::output(&q, rows * nch)?,
            checks::output(&q, rows * cols)?,
        );
        // SAFETY: buffers of the annotations' lengths; the result is checked against the CPU.
        unsafe {
            SoftmaxStats::launch_params(&q, a, rows, cols, chunk, &xb, &mb, &sb)?;
            SoftmaxApply::launch_params(&q, b, rows, cols, chunk, &xb, &mb, &sb, &yb)?;
        }
        let (pm, ps) = (checks::read(&mb)?, checks::read(&sb)?);
        for r in 0..rows {
            assert_eq!(
                (pm[r * nch], ps[r * nch]),
                (f32::NEG_INFINITY, 0.0),
                "row {r}: the masked chunk is not empty"
            );
        }
        let got = checks::read(&yb)?;
        assert_eq!(
            cpu::mismatches(&got, &want, 1e-4, 1e-12),
            0,
            "masked softmax differs from the CPU"
        );
    }
    Ok(())
}

#[test]
fn layernorm_stages_and_pipeline() {
    let q = queue();
    let (r1, r2) = (
        &LayerNormStats::evolved().spec().unwrap().reference,
        &LayerNormApply::evolved().spec().unwrap().reference,
    );
    let (n, d, chunk) = small::LAYERNORM;
    let p1 = with(r1, &[("WG", 64), ("VEC", 8), ("ITEMS", 2)]);
    let p2 = with(r2, &[("WG", 32), ("VEC", 4), ("ITEMS", 8)]);
    assert_ok(
        "stats",
        checks::layernorm_stats(&q, How::Params(&p1), 3, 1000, 96),
    );
    assert_ok(
        "apply",
        checks::layernorm_apply(&q, How::Params(&p2), 3, 1000, 96),
    );
    // Several samples per group, with a ragged last group (5 samples, 2 per group).
    let grouped = with(r2, &[("WG", 32), ("VEC", 4), ("ITEMS", 2), ("NS", 2)]);
    assert_ok(
        "apply, 2 samples a group",
        checks::layernorm_apply(&q, How::Params(&grouped), 5, 1000, 96),
    );
    assert_ok(
        "reference pipeline",
        checks::layernorm(&q, (How::Params(r1), How::Params(r2)), n, d, chunk),
    );
    assert_ok(
        "tuned pipeline",
        checks::layernorm(&q, (How::Params(&p1), How::Params(&p2)), n, d, chunk),
    );
    // Awkward sizes: d not a multiple of VEC (unaligned samples: vloadN path of apply, scalar
    // ends of the chunks in stats), of the chunk or of WG; one chunk per sample; n = 1.
    let p1b = with(r1, &[("WG", 32), ("VEC", 4), ("ITEMS", 8)]);
    let p2b = with(
        r2,
        &[
            ("WG", 32),
            ("VEC", 8),
            ("ITEMS", 2),
            ("NS", 4),
            ("REV", 1),
            ("SFAST", 1),
        ],
    );
    for (a, b) in [(r1, r2), (&p1, &p2), (&p1b, &p2b)] {
        for (n, d, chunk) in [(5, 1001, 97), (3, 1003, 2048), (1, 333, 50), (2, 7, 3)] {
            let at = format!("{n} x {d}, chunk {chunk}");
            assert_ok(
                &format!("stats {at}"),
                checks::layernorm_stats(&q, How::Params(a), n, d, chunk),
            );
            assert_ok(
                &format!("apply {at}"),
                checks::layernorm_apply(&q, How::Params(b), n, d, chunk),
            );
            assert_ok(
                &format!("pipeline {at}"),
                checks::layernorm(&q, (How::Params(a), How::Params(b)), n, d, chunk),
            );
        }
    }
}

/// REV and SFAST of the LayerNorm apply stage only renumber the blocks: the output must be bit
/// for bit the same as without them, aligned (d % VEC == 0) or not, with a ragged last sample
/// group.
#[test]
fn layernorm_apply_block_order_keeps_the_output() -> Result<()> {
    let q = queue();
    let r2 = &LayerNormApply::evolved().spec().unwrap().reference;
    for (n, d, chunk) in [(5usize, 4096usize, 512usize), (7, 1001, 97)] {
        let nch = d.div_ceil(chunk);
        let x = cpu::data(n * d, 38);
        let (w, b) = (cpu::data(d, 39), cpu::data(d, 40));
        let (mean, m2) = cpu::layernorm_partials(&x, n, d, chunk);
        let (mean, m2): (Vec<f32>, Vec<f32>) = (
            mean.iter().map(|v| *v as f32).collect(),
            m2.iter().map(|v| *v as f32).collect(),
        );
        let bufs = (
            checks::input(&q, &x)?,
            checks::input(&q, &mean)?,
            checks::input(&q, &m2)?,
            checks::input(&q, &w)?,
            checks::input(&q, &b)?,
        );
        assert_eq!(mean.len(), n * nch);
        let mut outs = Vec::new();
        for (rev, sfast) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let p = with(
                r2,
                &[
                    ("WG", 64),
                    ("VEC", 4),
                    ("ITEMS", 2),
                    ("NS", 2),
                    ("REV", rev),
                    ("SFAST", sfast),
                ],
            );
            let yb = checks::output(&q, n * d)?;
            // SAFETY: buffers of the annotation's lengths; the outputs are compared below.
            unsafe {
                LayerNormApply::launch_params(
                    &q, &p, n, d, chunk, 1e-5f32, &bufs.0, &bufs.1, &bufs.2, &bufs.3, &bufs.4, &yb,
                )?
            };
            outs.push(checks::read(&yb)?);
        }
        let want = cpu::layernorm_apply(&x, &mean, &m2, &w, &b, n, d, chunk, 1e-5);
        assert_eq!(
            cpu::mismatches(&outs[0], &want, 1e-4, 1e-4),
            0,
            "{n} x {d}: differs from the CPU"
        );
        for o in &outs[1..] {
            assert!(
                o.iter()
                    .zip(&outs[0])
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{n} x {d}: REV / SFAST changed the output"
            );
        }
    }
    Ok(())
}

#[test]
fn sum_dim1_reference_and_split() {
    let q = queue();
    let r = &SumDim1::evolved().spec().unwrap().reference;
    let (b, rows, cols) = small::SUM;
    assert_ok(
        "reference",
        checks::sum_dim1(&q, How::Params(r), b, rows, cols),
    );
    let split = with(r, &[("TX", 32), ("TY", 8), ("VEC", 4), ("ITEMS", 4)]);
    assert_ok(
        "split",
        checks::sum_dim1(&q, How::Params(&split), b, rows, cols),
    );
    assert_ok(
        "ragged",
        checks::sum_dim1(&q, How::Params(&split), 3, 37, 13),
    );
}

#[test]
fn linear_reference_and_tiles() {
    let q = queue();
    let r = &LinearGelu::evolved().spec().unwrap().reference;
    let (m, n, k) = small::LINEAR;
    let local = with(
        r,
        &[
            ("USE_LOCAL", 1),
            ("LVEC", 4),
            ("PAD", 4),
            ("TM", 8),
            ("TN", 4),
            ("VEC", 4),
            ("WGX", 16),
            ("WGY", 8),
            ("UNROLL", 2),
        ],
    );
    assert_ok(
        "local tiles",
        checks::linear_gelu(&q, How::Params(&local), 33, 40, 52),
    );
    let prefetch = with(
        r,
        &[
            ("USE_LOCAL", 1),
            ("PREFETCH", 1),
            ("LVEC", 4),
            ("TK", 32),
            ("TM", 4),
            ("TN", 8),
            ("VEC", 2),
            ("WGX", 8),
            ("WGY", 16),
        ],
    );
    assert_ok(
        "prefetch",
        checks::linear_gelu(&q, How::Params(&prefetch), 33, 40, 52),
    );
    let global = with(
        r,
        &[
            ("TN", 4),
            ("VEC", 4),
            ("TM", 2),
            ("UNROLL", 4),
            ("WGX", 8),
            ("WGY", 8),
        ],
    );
    assert_ok(
        "register tiles",
        checks::linear_gelu(&q, How::Params(&global), 17, 24, 19),
    );
    let r2 = &LinearSoftmax::evolved().spec().unwrap().reference;
    assert_ok(
        "reference pipeline",
        checks::linear(&q, (How::Params(r), How::Params(r2)), m, n, k),
    );
}

#[test]
fn conv_groupnorm_reference_and_variants() {
    let q = queue();
    let r = &ConvGroupNorm::evolved().spec().unwrap().reference;
    assert_ok(
        "reference",
        checks::conv_gn(&q, How::Params(r), small::CONV),
    );
    let re = with(
        r,
        &[
            ("WG", 64),
            ("PX", 4),
            ("CB", 4),
            ("RECOMPUTE", 1),
            ("WLOCAL", 1),
        ],
    );
    assert_ok(
        "recompute",
        checks::conv_gn(
            &q,
            How::Params(&re),
            ConvShape {
                n: 1,
                cin: 3,
                h: 9,
                w: 13,
                cout: 8,
                groups: 2,
            },
        ),
    );
    let st = with(r, &[("WG", 128), ("PX", 8), ("CB", 2), ("WLOCAL", 1)]);
    assert_ok("stored", checks::conv_gn(&q, How::Params(&st), small::CONV));
}

#[test]
fn conv_groupnorm_in_two_launches() {
    let q = queue();
    let (r1, r2) = (
        &ConvGnStats::evolved().spec().unwrap().reference,
        &GroupNormApply::evolved().spec().unwrap().reference,
    );
    let rows = small::CONV_ROWS;
    assert_ok(
        "reference pipeline",
        checks::conv_gn_staged(&q, (How::Params(r1), How::Params(r2)), small::CONV, rows),
    );
    // Register tiles of every kind, weights in local memory; vectors of 4 and 8 over blocks
    // whose channels are 32 x 32 outputs.
    let p1 = with(
        r1,
        &[("WG", 64), ("PX", 8), ("CB", 4), ("RY", 4), ("WLOCAL", 1)],
    );
    let p2 = with(r2, &[("WG", 32), ("VEC", 8), ("ITEMS", 4)]);
    assert_ok(
        "tuned pipeline",
        checks::conv_gn_staged(&q, (How::Params(&p1), How::Params(&p2)), small::CONV, rows),
    );
    // Ragged: rows not dividing h - 2 (a short last chunk), tiles past the chunk and the image,
    // channels of 7 x 11 outputs (vectors across channels: the element-wise path).
    let ragged = ConvShape {
        n: 1,
        cin: 3,
        h: 9,
        w: 13,
        cout: 8,
        groups: 4,
    };
    let p1b = with(r1, &[("WG", 32), ("PX", 4), ("CB", 2), ("RY", 2)]);
    let p2b = with(r2, &[("WG", 32), ("VEC", 4), ("ITEMS", 2)]);
    assert_ok(
        "stats, ragged",
        checks::conv_gn_stats(&q, How::Params(&p1b), ragged, 3),
    );
    assert_ok(
        "apply, ragged",
        checks::groupnorm_apply(&q, How::Params(&p2b), ragged, 3),
    );
    assert_ok(
        "pipeline, one row a chunk",
        checks::conv_gn_staged(&q, (How::Params(&p1b), How::Params(&p2b)), ragged, 1),
    );
}

/// (seed, index, value): computed independently in Python (`bench/test_hash.py` holds the same).
#[expect(
    clippy::excessive_precision,
    reason = "the values exactly as Python prints them"
)]
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
        assert_eq!(
            cpu::hash_uniform(s, i).to_bits(),
            v.to_bits(),
            "seed {s} index {i}"
        );
    }
    let q = queue();
    let program = Program::builder()
        .src(include_str!("../kernels/suite_util.cl"))
        .devices(q.device())
        .build(&q.context())?;
    let n = 100_003usize;
    for seed in [3u32, 0xdead_beef] {
        let b = Buffer::<f32>::builder()
            .queue(q.clone())
            .len(n)
            .fill_val(f32::NAN)
            .build()?;
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
            assert_eq!(
                g.to_bits(),
                cpu::hash_uniform(seed, i as u32).to_bits(),
                "seed {seed} index {i}"
            );
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
    for (kernel, source) in [
        ("gemm", kernel_source("gemm.cl")),
        ("linear_gelu", kernel_source("linear_gelu.cl")),
    ] {
        // (WGX, WGY, TM, TN, WM, TK, STAGES, FLUSH, RASTER, m, n, k): one warp; 2 warps along
        // m, each with two n8 pieces, two steps per flush; 4 warps in 2 x 2, each with two m16
        // pieces; one warp of four n8 pieces (B's chunks permuted), k-tiles of 32 (rows of 36
        // floats), bands of 2 tile rows over 3 (a short last band). Small tiles: PoCL's compile
        // time grows with the emulation's barriers (bench/h200/tc_dev.py emulate runs more).
        for (wgx, wgy, tm, tn, wm, tk, stages, flush, raster, m, n, k) in [
            (8, 4, 4, 1, 1, 8, 2, 1, 0, 32, 16, 24),
            (8, 8, 4, 2, 2, 16, 3, 2, 0, 64, 32, 48),
            (16, 8, 8, 1, 2, 8, 4, 1, 0, 128, 32, 40),
            (8, 4, 4, 4, 1, 32, 2, 2, 2, 48, 64, 96),
        ] {
            let options = format!(
                "-D MMA=1 -D KM_EMULATE=1 -D WGX={wgx} -D WGY={wgy} -D TM={tm} -D TN={tn} -D WM={wm} -D TK={tk} -D STAGES={stages} -D FLUSH={flush} -D RASTER={raster}"
            );
            let program = build(&q, &source, &options);
            let (bm, bn) = (wgy * tm, wgx * tn);
            let a = cpu::data(m * k, 41);
            let b = cpu::data(k * n, 42);
            let bias = cpu::data(n, 43);
            let upload = |v: &[f32]| {
                Buffer::<f32>::builder()
                    .queue(q.clone())
                    .len(v.len())
                    .copy_host_slice(v)
                    .build()
                    .unwrap()
            };
            let (ab, bb, biasb) = (upload(&a), upload(&b), upload(&bias));
            let out = Buffer::<f32>::builder()
                .queue(q.clone())
                .len(m * n)
                .fill_val(f32::NAN)
                .build()
                .unwrap();
            let mut kb = Kernel::builder();
            kb.program(&program)
                .name(kernel)
                .queue(q.clone())
                .global_work_size([n / bn * wgx, m / bm * wgy])
                .local_work_size([wgx, wgy]);
            kb.arg(m as i32)
                .arg(n as i32)
                .arg(k as i32)
                .arg(&ab)
                .arg(&bb);
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
                    let bv = |kk: usize| {
                        if kernel == "gemm" {
                            b[kk * n + j]
                        } else {
                            b[j * k + kk]
                        }
                    };
                    let exact: f64 = (0..k)
                        .map(|kk| f64::from(a[i * k + kk]) * f64::from(bv(kk)))
                        .sum();
                    let single = (0..k).fold(0f32, |s, kk| a[i * k + kk].mul_add(bv(kk), s));
                    if kernel == "gemm" {
                        (exact, f64::from(single))
                    } else {
                        (
                            cpu::gelu(exact + f64::from(bias[j])),
                            cpu::gelu(f64::from(single + bias[j])),
                        )
                    }
                })
                .unzip();
            let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
            let err = |v: &[f64]| {
                norm(&v.iter().zip(&want).map(|(x, y)| x - y).collect::<Vec<_>>()) / norm(&want)
            };
            let got64: Vec<f64> = got.iter().map(|v| f64::from(*v)).collect();
            let (e_mma, e_fp32) = (err(&got64), err(&fp32));
            assert_eq!(
                cpu::mismatches(&got, &want, 1e-4, 1e-4),
                0,
                "{kernel} {options}: differs from FP64 beyond the check"
            );
            assert!(
                e_mma <= 2.0 * e_fp32,
                "{kernel} {options}: relative error {e_mma:.2e} > 2 x FP32's {e_fp32:.2e}"
            );
        }
    }
}

/// The 16-bit GEMMs (`hgemm.cl`, `bgemm.cl`): the portable path (the reference and a register
/// tile, ragged sizes) and the tensor-core path with its m16n8k16 instructions emulated
/// (`KM_EMULATE`), covering the library's 16-bit fragment loads: NJ of 1, 2, 4, 8 and 16 n8
/// pieces a warp (B's rows read 2, 4, 8, 16 and 32 bytes a lane, paired into registers), k-tiles
/// of 16, 32 and 64 (the padded rows), stages, flushes and a short raster band. Each output
/// must be within one unit of its FP64 truth (of the 16-bit inputs), plus the FP32 sum's own
/// rounding (k · 2^-24 · Σ|a·b|).
#[test]
fn gemm_16bit_paths_match_fp64_to_one_unit() {
    let q = queue();
    for (kernel, file, format) in [
        ("hgemm", "hgemm.cl", cpu::Half::F16),
        ("bgemm", "bgemm.cl", cpu::Half::Bf16),
    ] {
        let bf16 = format == cpu::Half::Bf16;
        let source = kernel_source(file);
        // (options, (WGX, WGY, TM, TN), (m, n, k))
        let mut runs = vec![
            (String::new(), (16, 16, 1, 1), (37, 29, 51)),
            (
                "-D TM=2 -D TN=4 -D WGX=8 -D WGY=8".to_string(),
                (8, 8, 2, 4),
                (45, 70, 33),
            ),
        ];
        // (WGX, WGY, TM, TN, WM, TK, STAGES, FLUSH, RASTER, m, n, k): one warp with one n8
        // piece; 2 warps along m with two pieces, TK 32 flushed every 2 steps; one warp with
        // four pieces, TK 64 (rows of 72), a band of 2 tile rows over 3; one warp with eight
        // pieces (16-byte chunks), and with sixteen (two chunks, the other permutation).
        type Shape = (
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
        );
        let shapes: &[Shape] = if bf16 {
            &[
                (8, 4, 4, 8, 1, 32, 3, 1, 0, 32, 64, 160),
                (8, 8, 4, 2, 2, 16, 2, 1, 2, 96, 32, 48),
            ]
        } else {
            &[
                (8, 4, 4, 1, 1, 16, 2, 1, 0, 32, 16, 48),
                (8, 8, 4, 2, 2, 32, 3, 2, 0, 64, 32, 96),
                (8, 4, 4, 4, 1, 64, 2, 1, 2, 48, 64, 128),
                (8, 4, 4, 16, 1, 16, 4, 1, 0, 16, 128, 96),
            ]
        };
        // B's fragments by ldmatrix.trans (LDSM = 1; 64-column tiles at least): one warp with
        // eight pieces, TK 32; two warps along n with four pieces, four stages over six
        // k-tiles, two steps a flush; four warps along n with two pieces (one x4 load), a band
        // of 2 tile rows over 3; eight warps along n with one piece (the x2 load), TK 64 in
        // one flush.
        let ldsm: &[Shape] = &[
            (8, 4, 4, 8, 1, 32, 3, 1, 0, 32, 64, 160),
            (8, 8, 4, 8, 1, 32, 4, 2, 0, 32, 128, 192),
            (16, 8, 2, 4, 1, 16, 2, 1, 2, 48, 128, 48),
            (16, 16, 1, 4, 1, 64, 2, 4, 0, 16, 64, 128),
        ];
        // The ldmatrix path moves bits whatever the format: bfloat16 takes one of its shapes.
        let ldsm = if bf16 { &ldsm[1..2] } else { ldsm };
        let with_ldsm = shapes
            .iter()
            .map(|s| (s, 0))
            .chain(ldsm.iter().map(|s| (s, 1)));
        for (&(wgx, wgy, tm, tn, wm, tk, stages, flush, raster, m, n, k), ldsm) in with_ldsm {
            runs.push((
                format!(
                    "-D MMA=1 -D KM_EMULATE=1 -D WGX={wgx} -D WGY={wgy} -D TM={tm} -D TN={tn} -D WM={wm} -D TK={tk} -D STAGES={stages} -D FLUSH={flush} -D RASTER={raster} -D LDSM={ldsm}"
                ),
                (wgx, wgy, tm, tn),
                (m, n, k),
            ));
        }
        for (options, (wgx, wgy, tm, tn), (m, n, k)) in runs {
            let program = build(&q, &source, &options);
            let a = format.encode_all(&cpu::data(m * k, 51));
            let b = format.encode_all(&cpu::data(k * n, 52));
            let upload = |v: &[u16]| checks::input(&q, v).unwrap();
            let (ab, bb, out) = (upload(&a), upload(&b), upload(&vec![cpu::HALF_NAN; m * n]));
            let k_obj = Kernel::builder()
                .program(&program)
                .name(kernel)
                .queue(q.clone())
                .global_work_size([n.div_ceil(wgx * tn) * wgx, m.div_ceil(wgy * tm) * wgy])
                .local_work_size([wgx, wgy])
                .arg(m as i32)
                .arg(n as i32)
                .arg(k as i32)
                .arg(&ab)
                .arg(&bb)
                .arg(&out)
                .build()
                .unwrap();
            unsafe { k_obj.enq().unwrap() };
            let mut got = vec![0u16; m * n];
            out.read(&mut got).enq().unwrap();
            let bad = cpu::gemm16_mismatches(format, &a, &b, &got, (m, n, k));
            assert!(
                bad.is_empty(),
                "{kernel} {options}: {} outputs farther than one unit from FP64, first (i, j, got, FP64) {:?}",
                bad.len(),
                bad.first()
            );
        }
    }
}

/// The library's 16-bit path with B stored n x k (`KM_B_KMAJOR 1`, C = A·Bᵀ, the layout of a
/// Linear layer's weight), which no suite kernel takes yet: a kernel written here around the
/// library, its instructions emulated, against the FP64 product.
#[test]
fn gemm_16bit_k_major_b_emulated_matches_fp64() {
    let q = queue();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (format, ty) in [(cpu::Half::F16, "half"), (cpu::Half::Bf16, "ushort")] {
        // gemm16.cl without MMA gives the 16-bit stores (G16_STORE) and leaves the library to
        // this kernel, which includes it with B stored n x k.
        let code = format!(
            "#define KM_HALF {}\n#include \"kernels/gemm16.cl\"\n\
             #define KM_B_KMAJOR 1\n#include <kfoundry/tensor_core.cl>\n\
             __kernel void gemm_nt(const int m, const int n, const int k, __global const {ty}* a, __global const {ty}* b, __global {ty}* c)\n{{\n\
             #include <kfoundry/tensor_core_tiles.cl>\n#define KM_A a\n#define KM_B b\n#include <kfoundry/tensor_core_loop.cl>\n\
             for (int i = 0; i < KM_MI; ++i)\n for (int j = 0; j < KM_NJ; ++j)\n  for (int r = 0; r < 4; ++r)\n\
             G16_STORE(acc[i][j][r], (size_t)KM_ROW(i, r) * n + KM_COL(j, r), c);\n}}\n",
            if format == cpu::Half::F16 { 1 } else { 2 },
        );
        let source = kfoundry_tooling::library::expand(&code, None, dir)
            .unwrap()
            .text;
        // (WGX, WGY, TM, TN, WM, TK, STAGES, FLUSH, m, n, k): one warp, two n8 pieces, TK 32;
        // two warps along m, TK 64 (rows of 72), three stages that wrap, two steps a flush;
        // four warps along n, TK 16.
        for (wgx, wgy, tm, tn, wm, tk, stages, flush, m, n, k) in [
            (8, 4, 4, 2, 1, 32, 2, 1, 32, 16, 96),
            (8, 8, 4, 2, 2, 64, 3, 2, 64, 32, 320),
            (16, 8, 2, 4, 1, 16, 2, 1, 16, 128, 48),
        ] {
            let options = format!(
                "-D KM_EMULATE=1 -D WGX={wgx} -D WGY={wgy} -D TM={tm} -D TN={tn} -D WM={wm} -D TK={tk} -D STAGES={stages} -D FLUSH={flush}"
            );
            let program = build(&q, &source, &options);
            let a = format.encode_all(&cpu::data(m * k, 61));
            let b = format.encode_all(&cpu::data(n * k, 62));
            let upload = |v: &[u16]| checks::input(&q, v).unwrap();
            let (ab, bb, out) = (upload(&a), upload(&b), upload(&vec![cpu::HALF_NAN; m * n]));
            let kernel = Kernel::builder()
                .program(&program)
                .name("gemm_nt")
                .queue(q.clone())
                .global_work_size([n / (wgx * tn) * wgx, m / (wgy * tm) * wgy])
                .local_work_size([wgx, wgy])
                .arg(m as i32)
                .arg(n as i32)
                .arg(k as i32)
                .arg(&ab)
                .arg(&bb)
                .arg(&out)
                .build()
                .unwrap();
            unsafe { kernel.enq().unwrap() };
            let mut got = vec![0u16; m * n];
            out.read(&mut got).enq().unwrap();
            // B transposed to k x n for the check.
            let bt: Vec<u16> = (0..k * n).map(|e| b[(e % n) * k + e / n]).collect();
            let bad = cpu::gemm16_mismatches(format, &a, &bt, &got, (m, n, k));
            assert!(
                bad.is_empty(),
                "{ty} {options}: {} outputs farther than one unit from FP64, first {:?}",
                bad.len(),
                bad.first()
            );
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
    let mma = with(
        r,
        &[
            ("MMA", 1),
            ("WGX", 16),
            ("WGY", 16),
            ("TM", 8),
            ("TN", 8),
            ("WM", 2),
            ("TK", 16),
        ],
    );
    let e = checks::sgemm(&q, How::Params(&mma), 256, 256, 64)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not hold on this device") && e.contains("device_sm >= 80"),
        "{e}"
    );
}

/// The tensor-core path has one copy: kfoundry's template library, which gemm.cl, linear_gelu.cl
/// and conv_gn.cl include (and the importer's generated kernels take). No kernel file of the
/// examples or the importer holds the instructions or the machinery itself.
#[test]
fn the_tensor_core_path_is_one_copy_in_the_template_library() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, includes) in [
        (
            "gemm.cl",
            &[
                "tensor_core.cl",
                "tensor_core_tiles.cl",
                "tensor_core_loop.cl",
            ][..],
        ),
        (
            "linear_gelu.cl",
            &[
                "tensor_core.cl",
                "tensor_core_tiles.cl",
                "tensor_core_loop.cl",
            ][..],
        ),
        ("conv_gn.cl", &["mma_emulated.cl", "mma_ptx.cl"][..]),
        ("gemm16.cl", &["tensor_core.cl"][..]),
        (
            "gemm16_body.cl",
            &["tensor_core_tiles.cl", "tensor_core_loop.cl"][..],
        ),
    ] {
        let text = std::fs::read_to_string(dir.join("kernels").join(file)).unwrap();
        for name in includes {
            assert!(
                text.contains(&format!("#include <kfoundry/{name}>\n")),
                "{file} includes {name}"
            );
        }
        // Where the instructions come in (gemm16_body.cl is the loop's half of gemm16.cl).
        let whole = kernel_source(file);
        assert!(!whole.contains("#include"), "{file}");
        if file != "gemm16_body.cl" {
            assert!(whole.contains("mma.sync.aligned.m16n8k8"), "{file}");
        }
        if file == "gemm16.cl" {
            assert!(whole.contains("mma.sync.aligned.m16n8k16"), "{file}");
        }
    }
    // The instructions' text is nowhere else: not in a kernel file, not in the importer.
    let mut files = Vec::new();
    for sub in [
        "kernels",
        "../crates/kfoundry-import/src",
        "../crates/kfoundry-import/src/kernels",
    ] {
        for e in std::fs::read_dir(dir.join(sub)).unwrap().flatten() {
            let code = e.path().extension().is_some_and(|x| x == "cl" || x == "rs");
            if e.path().is_file() && code {
                files.push(e.path());
            }
        }
    }
    assert!(files.len() > 20, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for copy in [
            "asm volatile(\"mma.sync.aligned.m16n8k8",
            "asm volatile(\"mma.sync.aligned.m16n8k16",
            "inline void km_mma_emulated",
            "inline void km_mma16_emulated",
            "asm(\"cvt.rna.tf32.f32",
        ] {
            assert!(
                !text.contains(copy),
                "{} holds a copy of the tensor-core path (`{copy}`)",
                path.display()
            );
        }
    }
}

/// Builds `conv_gn.cl` with `options` (none: the reference) and runs it on the inputs of
/// `checks::conv_gn` at shape `s` with `wg` items a group; returns its output, and the FP64
/// truth when `truth`.
fn conv_gn_built(
    q: &Queue,
    options: &str,
    s: ConvShape,
    wg: usize,
    truth: bool,
) -> (Vec<f32>, Vec<f64>) {
    let source = kernel_source("conv_gn.cl");
    let program = build(q, &source, options);
    let x = cpu::data(s.n * s.cin * s.h * s.w, 61);
    let weight: Vec<f32> = cpu::data(s.cout * s.cin * 9, 62)
        .iter()
        .map(|v| v * 0.3)
        .collect();
    let per = |seed| cpu::data(s.cout, seed);
    let (cb, bi, sc, ga, be) = (per(63), per(64), per(65), per(66), per(67));
    let upload = |v: &[f32]| checks::input(q, v).unwrap();
    let len = s.n * s.cout * (s.h - 2) * (s.w - 2);
    let out = checks::output(q, len).unwrap();
    let bufs = [
        upload(&x),
        upload(&weight),
        upload(&cb),
        upload(&bi),
        upload(&sc),
        upload(&ga),
        upload(&be),
    ];
    let mut kb = Kernel::builder();
    kb.program(&program)
        .name("conv_gn")
        .queue(q.clone())
        .global_work_size([wg * s.groups, s.n])
        .local_work_size([wg, 1]);
    for size in [s.n, s.cin, s.h, s.w, s.cout, s.groups] {
        kb.arg(size as i32);
    }
    kb.arg(1e-5f32);
    for b in &bufs {
        kb.arg(b);
    }
    let kernel = kb.arg(&out).arg_local::<f32>(1).build().unwrap();
    unsafe { kernel.enq().unwrap() };
    let p = cpu::ConvParams {
        weight: &weight,
        conv_bias: &cb,
        bias: &bi,
        scale: &sc,
        gamma: &ga,
        beta: &be,
    };
    (
        checks::read(&out).unwrap(),
        if truth {
            cpu::conv_gn(&x, &p, s, 1e-5)
        } else {
            Vec::new()
        },
    )
}

/// The tensor-core path of the convolution (`MMA = 1`) with its warp-wide instructions
/// emulated (`KM_EMULATE`), built from conv_gn.cl: fragment layouts, the patches in local memory
/// (split once when staged, or at each load with the next patch in flight), the strip walk over input rows, partial tiles, chunks of
/// input channels (cin = 3, 17) and of output channels (cout / groups = 4, 6), 16-byte copies
/// (w % 4 == 0) and 4-byte ones with zeros, both second passes.
/// Its error against FP64 must stay within twice the FP32 reference kernel's. On a device that
/// runs the PTX (NVIDIA, compute capability >= 8.0) the same, and larger strips at the full
/// image size, also without the emulation: the tensor cores' own rounding.
#[test]
fn conv_tensor_core_path_emulated_matches_fp64() {
    let q = queue();
    let ptx = kfoundry::traits_of(&q.device())
        .unwrap()
        .value("device_sm")
        .unwrap_or(0)
        >= 80;
    let ragged = ConvShape {
        n: 1,
        cin: 3,
        h: 9,
        w: 13,
        cout: 8,
        groups: 2,
    };
    let chunks = ConvShape {
        n: 2,
        cin: 17,
        h: 11,
        w: 40,
        cout: 12,
        groups: 2,
    };
    let image = ConvShape {
        n: 2,
        cin: 8,
        h: 256,
        w: 256,
        cout: 32,
        groups: 8,
    };
    // (WG, RW, MW, SPLIT, RECOMPUTE, shape): two warps stacked (tiles of 4 x 16); two side by
    // side, one row each (1 x 32), on ragged sizes; four in 2 x 2 with 2 rows each (4 x 32),
    // four side by side (1 x 64) and two side by side with 4 rows each (4 x 32: an input row
    // feeds 3 output rows) over several chunks. Small strips: PoCL's compile time grows with
    // the emulation's barriers.
    let emulated = [
        (64, 2, 1, 0, 0, small::CONV),
        (64, 1, 2, 1, 1, ragged),
        (128, 2, 2, 0, 1, chunks),
        (128, 1, 4, 1, 0, chunks),
        (64, 4, 2, 1, 1, chunks),
    ];
    let device_only = [
        (256, 4, 4, 0, 0, image),
        (256, 2, 2, 1, 1, image),
        (128, 8, 4, 0, 1, image),
        (512, 2, 4, 1, 0, image),
        (64, 8, 2, 1, 0, chunks),
    ];
    let mut runs: Vec<_> = emulated.iter().map(|c| (true, *c)).collect();
    if ptx {
        runs.extend(emulated.iter().chain(&device_only).map(|c| (false, *c)));
    }
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let err = |v: &[f32], want: &[f64]| {
        norm(
            &v.iter()
                .zip(want)
                .map(|(x, y)| f64::from(*x) - y)
                .collect::<Vec<_>>(),
        ) / norm(want)
    };
    // per shape: the FP64 truth and the FP32 reference kernel's error
    let mut truths: Vec<(String, Vec<f64>, f64)> = Vec::new();
    for (emulate, (wg, rw, mw, split, recompute, shape)) in runs {
        let key = format!("{shape:?}");
        if !truths.iter().any(|t| t.0 == key) {
            let (reference, want) = conv_gn_built(&q, "", shape, 256, true);
            let e = err(&reference, &want);
            truths.push((key.clone(), want, e));
        }
        let (_, want, e_fp32) = truths.iter().find(|t| t.0 == key).unwrap();
        let mut options = format!(
            "-D MMA=1 -D WG={wg} -D RW={rw} -D MW={mw} -D SPLIT={split} -D RECOMPUTE={recompute}"
        );
        if emulate {
            options += " -D KM_EMULATE=1";
        }
        let (got, _) = conv_gn_built(&q, &options, shape, wg, false);
        let (e_mma, e_fp32) = (err(&got, want), *e_fp32);
        eprintln!("{options} {shape:?}: relative error {e_mma:.3e}, FP32 reference {e_fp32:.3e}");
        assert_eq!(
            cpu::mismatches(&got, want, 2e-5, 2e-5),
            0,
            "{options} {shape:?}: differs from FP64 beyond 2e-5"
        );
        assert!(
            e_mma <= 2.0 * e_fp32,
            "{options} {shape:?}: relative error {e_mma:.2e} > 2 x FP32's {e_fp32:.2e}"
        );
    }
}

/// The convolution's tensor-core path is refused, before any build, on a device that is not
/// an NVIDIA GPU of compute capability 8.0 or later.
#[test]
fn conv_tensor_core_path_is_refused_where_the_device_cannot_run_it() {
    let q = queue();
    let traits = kfoundry::traits_of(&q.device()).unwrap();
    if traits.value("device_sm").unwrap_or(0) >= 80 {
        return; // an NVIDIA GPU that runs it: nothing to refuse here
    }
    let r = &ConvGroupNorm::evolved().spec().unwrap().reference;
    let mma = with(r, &[("MMA", 1), ("RW", 2), ("MW", 2)]);
    let e = checks::conv_gn(&q, How::Params(&mma), small::CONV)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not hold on this device") && e.contains("device_sm >= 80"),
        "{e}"
    );
}

/// Split-K (`gemm_splitk.cl`, [`kfoundry_examples::SgemmLargeK`]): the portable path on ragged
/// sizes and the tensor-core path with its warp-wide instructions emulated (`KM_EMULATE`), each
/// with several slice counts (empty slices among them), launched twice on the same scratch:
/// both results match FP64 within the check, are the same bit for bit (the slices are added in
/// slice order whichever arrives last), and leave the scratch all zero.
#[test]
fn split_k_matches_fp64_and_leaves_its_scratch_zero() {
    let q = queue();
    let source = kernel_source("gemm_splitk.cl");
    // (MMA, WGX, WGY, TM, TN, WM, TK, STAGES, SPLITK, m, n, k)
    for (mma, wgx, wgy, tm, tn, wm, tk, stages, splitk, m, n, k) in [
        (0, 8, 8, 2, 2, 1, 8, 2, 1, 37usize, 21usize, 300),
        (0, 8, 8, 2, 2, 1, 8, 2, 4, 37, 21, 300),
        (0, 16, 8, 1, 4, 1, 8, 2, 64, 20, 70, 100),
        (1, 8, 4, 4, 1, 1, 8, 2, 3, 32, 16, 96),
        (1, 8, 8, 4, 2, 2, 16, 3, 8, 64, 32, 80),
    ] {
        let options = format!(
            "-D MMA={mma} -D KM_EMULATE=1 -D WGX={wgx} -D WGY={wgy} -D TM={tm} -D TN={tn} -D WM={wm} -D TK={tk} -D STAGES={stages} -D FLUSH=1 -D SPLITK={splitk}"
        );
        let program = build(&q, &source, &options);
        let (bm, bn) = (wgy * tm, wgx * tn);
        let (gm, gn) = (m.div_ceil(bm), n.div_ceil(bn));
        let a = cpu::data(m * k, 51);
        let b = cpu::data(k * n, 52);
        let upload = |v: &[f32]| checks::input(&q, v).unwrap();
        let (ab, bb) = (upload(&a), upload(&b));
        let out = checks::output(&q, m * n).unwrap();
        let ws = Buffer::<f32>::builder()
            .queue(q.clone())
            .len(splitk * m * n)
            .fill_val(0.0)
            .build()
            .unwrap();
        let arrivals = Buffer::<u32>::builder()
            .queue(q.clone())
            .len(gm * gn)
            .fill_val(0)
            .build()
            .unwrap();
        let kernel = Kernel::builder()
            .program(&program)
            .name("gemm_splitk")
            .queue(q.clone())
            .global_work_size([gn * wgx, gm * wgy, splitk])
            .local_work_size([wgx, wgy, 1])
            .arg(m as i32)
            .arg(n as i32)
            .arg(k as i32)
            .arg(&ab)
            .arg(&bb)
            .arg(&out)
            .arg(&ws)
            .arg(&arrivals)
            .build()
            .unwrap();
        let want: Vec<f64> = (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                (0..k)
                    .map(|kk| f64::from(a[i * k + kk]) * f64::from(b[kk * n + j]))
                    .sum()
            })
            .collect();
        let mut first = Vec::new();
        for round in 0..2 {
            unsafe { kernel.enq().unwrap() };
            let mut got = vec![0f32; m * n];
            out.read(&mut got).enq().unwrap();
            assert_eq!(
                cpu::mismatches(&got, &want, 1e-4, 1e-4),
                0,
                "{options} at {m} x {n} x {k}, round {round}: differs from FP64"
            );
            let mut left = vec![0f32; splitk * m * n];
            ws.read(&mut left).enq().unwrap();
            let mut counters = vec![0u32; gm * gn];
            arrivals.read(&mut counters).enq().unwrap();
            assert!(
                left.iter().all(|v| v.to_bits() == 0) && counters.iter().all(|c| *c == 0),
                "{options}: round {round} left its scratch dirty"
            );
            if round == 0 {
                first = got;
            } else {
                assert!(
                    first
                        .iter()
                        .zip(&got)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{options}: two launches differ"
                );
            }
        }
    }
}

/// The tuned softmax through dispatch at sizes no workload has (3 rows, and 37 × 3001 inside
/// the proven box) and at magnitudes none draws (rows near -1e4, all negative; near 1e4;
/// near 1e-20), against the CPU: whatever dispatch chooses (the lockfile's variant for this
/// device inside its box, the reference elsewhere) is right there.
#[test]
fn dispatched_softmax_is_right_at_sizes_and_magnitudes_no_workload_has() {
    let q = queue();
    for (rows, cols) in [(3, 4096), (37, 3001)] {
        let base = cpu::data(rows * cols, 31);
        for (what, map) in [
            ("near -1e4", (|v: f32| v - 1e4) as fn(f32) -> f32),
            ("near 1e4", |v: f32| v + 1e4),
            ("near 1e-20", |v: f32| v * 1e-20),
        ] {
            let x: Vec<f32> = base.iter().map(|v| map(*v)).collect();
            let xb = checks::input(&q, &x).unwrap();
            let yb = checks::output(&q, rows * cols).unwrap();
            Softmax::launch(&q, rows, cols, &xb, &yb).unwrap();
            let choice = Softmax::explain(&q.device(), rows, cols).unwrap();
            let got = checks::read(&yb).unwrap();
            let want = cpu::softmax(&x, rows, cols);
            let wrong = cpu::mismatches(&got, &want, 1e-4, 1e-9);
            eprintln!("{rows} x {cols}, {what}: {} ran", choice.step);
            assert_eq!(
                wrong, 0,
                "{rows} x {cols}, {what}: {wrong} elements differ ({} ran)",
                choice.step
            );
        }
    }
}
