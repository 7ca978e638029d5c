//! Conv (1-D, 2-D and 3-D) with bias, its element-wise chain, and a fused pooling whose
//! windows tile its output (then the chain after the pooling); ConvTranspose.
//!
//!   WG     items per work-group (along output pixels)        pow2(32..=256)  ref 64
//!   PX     output pixels per item, WG apart                  [1, 2, 4]       ref 1
//!   OCB    output channels per item (same group)             [1, 2, 4, 8]    ref 1
//!   ICU    input channels per step of the channel loop       [1, 2, 4]       ref 1
//!   WLOCAL the work-group's weights staged in local memory    [0, 1]          ref 0
//!   TILE   without a fused pooling: 1 = an item's PX pixels   [0, 1]          ref 0
//!          and OCB channels as one register tile (each input
//!          value used OCB times, each weight PX times), in the
//!          reference's order of summation
//!   MMA    1: the convolution as an implicit GEMM on NVIDIA's  [0, 1]          ref 0
//!          tensor cores (the suite's 3xTF32 tiles, FP32-
//!          accurate; sm >= 80): m = a sample's output pixels
//!          (WG * PX per work-group), n = output channels (OCB,
//!          up to 64), k = the group's input channels x taps,
//!          gathered (im2col) into local memory, zero outside
//!          the input; without a fused pooling, when the
//!          group's channels are a multiple of 8
//!   WM, STAGES, FLUSH, TK   MMA: as the matrix product's
//!
//! Launch: (ceil_div(pixels, WG * PX) * WG, cout / OCB, n), local (WG, 1, 1). Geometry (kernel,
//! strides, dilations, pads, output padding, groups) is fixed by the graph and written into the
//! source; the sizes are n, cin, the input's spatial extents (d, h, w: those it has) and cout.

use super::tensor_core::{self, Loader};
use super::{
    chain_call, chain_function, fits_int, params, plus, prelude, product, side_buffers, BufferArg,
    Cx, Dims, Kernel, Precision, Size,
};
use crate::fuse::Anchor;
use crate::graph::{PoolKind, Window};

/// The spatial dimensions' names, depth to width.
const NAMES: [&str; 3] = ["d", "h", "w"];

/// Loops over the taps (or pool windows) of the present dimensions around `body`: for each
/// dimension `i`, `open(i)` is its loop head and the loop closes after the body.
fn nest(
    present: &[usize],
    open: impl Fn(usize) -> String,
    absent: impl Fn(usize) -> String,
    body: &str,
) -> String {
    let mut head = String::new();
    let mut tail = String::new();
    for i in 0..3 {
        if present.contains(&i) {
            head += &open(i);
            tail.insert_str(0, "}\n");
        } else {
            head += &absent(i);
        }
    }
    format!("{head}{body}{tail}")
}

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let (x, w, bias, window, groups, transposed) = match &g.anchor {
        Anchor::Conv {
            x,
            w,
            bias,
            window,
            groups,
        } => (*x, *w, *bias, window, *groups, false),
        Anchor::ConvTranspose {
            x,
            w,
            bias,
            window,
            groups,
        } => (*x, *w, *bias, window, *groups, true),
        _ => unreachable!("conv::generate on a convolution"),
    };
    let xs = cx.shape(x).to_vec();
    let input = window.spatial(&xs);
    let present: Vec<usize> = (0..3).filter(|&i| window.present(i)).collect();
    let cout = g.shape[1];
    let mut k = cx.kernel();
    let Window {
        kernel: kn,
        strides: st,
        dilations: dl,
        pads,
        output_padding: op,
        ..
    } = window.clone();
    let taps: usize = kn.iter().product();
    // Output extent of dimension i as an expression of the input's (the same text in C and in
    // the annotation).
    let out_expr = |i: usize, size: &str| -> String {
        let extent = window.extent(i);
        let pads = pads[i] + pads[i + 3];
        if transposed {
            format!(
                "(({size} - 1) * {} + {})",
                st[i],
                plus(&extent.to_string(), op[i] as i64 - pads as i64)
            )
        } else if st[i] == 1 {
            plus(size, pads as i64 + 1 - extent as i64)
        } else {
            format!(
                "({} / {} + 1)",
                plus(size, pads as i64 - extent as i64),
                st[i]
            )
        }
    };
    // The smallest input extent (for CPU workloads) whose output keeps `want` elements.
    let small_input = |i: usize, want: usize| -> usize {
        (1..=input[i])
            .find(|&s| window.output(i, s, transposed).is_some_and(|o| o >= want))
            .unwrap_or(input[i])
    };
    let pool_k = g.pool.as_ref().map(|p| p.kernel).unwrap_or([1; 3]);
    let out_full = {
        let mut o = [1; 3];
        for (j, &i) in present.iter().enumerate() {
            o[i] = g.shape[2 + j];
        }
        o
    };
    k.sizes.push(Size {
        name: "n".into(),
        full: xs[0],
        small: 1,
    });
    k.sizes.push(Size {
        name: "cin".into(),
        full: xs[1],
        small: xs[1],
    });
    let mut in_expr = ["1".to_string(), "1".to_string(), "1".to_string()];
    for &i in &present {
        let want = out_full[i].min(4 * pool_k[i]);
        k.sizes.push(Size {
            name: NAMES[i].into(),
            full: input[i],
            small: small_input(i, want),
        });
        in_expr[i] = NAMES[i].to_string();
    }
    k.sizes.push(Size {
        name: "cout".into(),
        full: cout,
        small: cout,
    });
    let o_expr: Vec<String> = (0..3)
        .map(|i| {
            if window.present(i) {
                out_expr(i, &in_expr[i])
            } else {
                "1".into()
            }
        })
        .collect();
    let po_expr: Vec<String> = (0..3)
        .map(|i| {
            if pool_k[i] == 1 {
                o_expr[i].clone()
            } else {
                format!("({} / {})", o_expr[i], pool_k[i])
            }
        })
        .collect();
    let spatial_exprs =
        |e: &[String]| -> Vec<String> { present.iter().map(|&i| e[i].clone()).collect() };
    let conv_dims = Dims {
        exprs: [vec!["n".into(), "cout".into()], spatial_exprs(&o_expr)].concat(),
        full: g.shape.clone(),
    };
    let pool_dims = Dims {
        exprs: [vec!["n".into(), "cout".into()], spatial_exprs(&po_expr)].concat(),
        full: g.pool.as_ref().map(|p| p.shape.clone()).unwrap_or_default(),
    };
    let tile = g.pool.is_none();
    // The tensor-core path: a plain convolution (no pooling fused) whose groups have whole
    // n8 pieces of output channels and at least one k8 step.
    let (cpg_in, cpg_out) = (xs[1] / groups, cout / groups);
    let mma = !transposed && tile && cpg_out % 8 == 0 && cpg_in * taps >= 8;
    params(
        &mut k,
        &[
            ("WG", "pow2(32..=256)", 64),
            ("PX", "[1, 2, 4]", 1),
            (
                "OCB",
                if mma {
                    "[1, 2, 4, 8, 16, 32, 64]"
                } else {
                    "[1, 2, 4, 8]"
                },
                1,
            ),
            ("ICU", "[1, 2, 4]", 1),
            ("WLOCAL", "[0, 1]", 0),
        ],
    );
    if tile {
        params(&mut k, &[("TILE", "[0, 1]", 0)]);
    }
    if mma {
        params(
            &mut k,
            &[
                ("MMA", "[0, 1]", 0),
                ("WM", "[1, 2, 4]", 1),
                ("STAGES", "[2, 3, 4]", 2),
                ("FLUSH", "[1, 2, 4]", 1),
                ("TK", "[8, 16, 32]", 8),
            ],
        );
        k.require.extend([
            "MMA == 0 || device_nvidia && device_sm >= 80".to_string(),
            "MMA == 1 || (OCB <= 8 && WM == 1 && STAGES == 2 && FLUSH == 1 && TK == 8)".into(),
            "MMA == 0 || (TILE == 0 && WLOCAL == 0 && ICU == 1 && TK % (8 * FLUSH) == 0)".into(),
            // Whole warps in a WM x (warps / WM) grid, warp tiles of whole m16n8 pieces, and
            // at most 64 accumulators (and as many partial sums) per item.
            "MMA == 0 || (WG / 32 % WM == 0 && WG * PX % (16 * WM) == 0 && OCB * WM * 32 % (8 * WG) == 0 && PX * OCB <= 64)".into(),
            "MMA * 4 * STAGES * (WG * PX + OCB) * (TK + TK / 32 * 4) <= min(device_local_mem, 49152)".into(),
        ]);
        // The TF32 split turns an infinity into NaN (inf - inf): finite inputs only.
        k.edges_finite = true;
    }
    let per_group = |size: &str| {
        if groups == 1 {
            size.to_string()
        } else {
            format!("({size} / {groups})")
        }
    };
    if groups > 1 {
        k.require.push(format!("cin % {groups} == 0"));
        k.require.push(format!("cout % {groups} == 0"));
    }
    k.require.push(format!("{} % OCB == 0", per_group("cout")));
    for &i in &present {
        if transposed {
            k.require.push(format!("{} >= 1", o_expr[i]));
        } else {
            let p = pads[i] + pads[i + 3];
            let extent = window.extent(i);
            k.require.push(if p == 0 {
                format!("{} >= {extent}", in_expr[i])
            } else {
                format!("{} + {p} >= {extent}", in_expr[i])
            });
        }
        if pool_k[i] > 1 {
            k.require.push(format!("{} >= 1", po_expr[i]));
        }
    }
    let x_len = product(&[vec!["n".into(), "cin".into()], in_expr.to_vec()].concat());
    let w_len = if transposed {
        format!("cin * {} * {taps}", per_group("cout"))
    } else {
        format!("cout * {} * {taps}", per_group("cin"))
    };
    let y_len = product(&[vec!["n".into(), "cout".into()], po_expr.clone()].concat());
    let conv_len = product(&[vec!["n".into(), "cout".into()], o_expr.clone()].concat());
    fits_int(&mut k, &[x_len.clone(), w_len.clone(), conv_len.clone()]);
    k.buffers.push(BufferArg {
        name: "x".into(),
        len: x_len,
        value: x,
        output: false,
        inputs: None,
    });
    k.buffers.push(BufferArg {
        name: "weight".into(),
        len: w_len,
        value: w,
        output: false,
        inputs: None,
    });
    if let Some(b) = bias {
        k.buffers.push(BufferArg {
            name: "bias".into(),
            len: "cout".into(),
            value: b,
            output: false,
            inputs: None,
        });
    }
    let post = g.pool.as_ref().map(|p| p.chain.clone()).unwrap_or_default();
    let mut spaces = vec![(&g.chain, &conv_dims)];
    if g.pool.is_some() {
        spaces.push((&post, &pool_dims));
    }
    side_buffers(cx, &mut k, &spaces);
    k.buffers.push(BufferArg {
        name: "y".into(),
        len: y_len.clone(),
        value: g.output,
        output: true,
        inputs: None,
    });
    // The work-group's weights in local memory (WLOCAL = 1): OCB channels x the group's input
    // channels x the taps.
    let wl_len = format!("{} * {taps}", per_group("cin"));
    k.locals
        .push(("wl".into(), format!("max(1, WLOCAL * OCB * {wl_len})")));
    k.require.push(format!(
        "WLOCAL * 4 * OCB * {wl_len} <= min(device_local_mem, 49152)"
    ));
    let pixels = product(&po_expr);
    k.global = vec![
        format!("ceil_div({pixels}, WG * PX) * WG"),
        "cout / OCB".into(),
        "n".into(),
    ];
    k.local = vec!["WG".into(), "1".into(), "1".into()];
    let reduction = (xs[1] / groups) * taps;
    k.atol = (2.5e-7 * reduction as f64).max(1e-5);
    if mma && cx.precision == Precision::Tf32 {
        k.atol = (1e-3 * (reduction as f64).sqrt()).max(1e-3);
        k.rtol = 1e-2;
        k.check_note = Some("TF32 products on the tensor cores (`import --precision tf32`): TF32's tolerance, not FP32's");
    }
    k.bytes = super::compulsory_bytes(&k);
    k.flops = format!("2 * {conv_len} * {} * {taps}", per_group("cin"));

    let mut s = prelude(
        &k,
        if transposed {
            "transposed convolution"
        } else {
            "convolution"
        },
    );
    for (i, l) in ["D", "H", "W"].iter().enumerate() {
        s += &format!(
            "#define KF_O{l} {}\n#define KF_PO{l} {}\n",
            o_expr[i], po_expr[i]
        );
    }
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &conv_dims);
    if g.pool.is_some() {
        s += &chain_function(cx, &k, "kf_post", &post, &pool_dims);
    }
    let bias_param = if bias.is_some() {
        "__global const float* restrict bias".to_string()
    } else {
        String::new()
    };
    let args = super::arguments(
        cx,
        &k,
        &[
            "__global const float* restrict x, __global const float* restrict weight",
            &bias_param,
        ],
        "__global float* restrict y, __local float* wl",
    );
    let bias_init = if bias.is_some() {
        "bias[oc0 + o]"
    } else {
        "0.0f"
    };
    // Tap coordinates (kz, ky, kx), output (oz, oy, ox), input (iz, iy, ix).
    let (kv, ov, iv) = (["kz", "ky", "kx"], ["oz", "oy", "ox"], ["iz", "iy", "ix"]);
    let tap = format!(
        "({kz} * {} + {ky}) * {} + {kx}",
        kn[1],
        kn[2],
        kz = kv[0],
        ky = kv[1],
        kx = kv[2]
    );
    let tap_loop = |i: usize| -> String {
        let (kk, o, ii, size) = (kv[i], ov[i], iv[i], &in_expr[i]);
        if transposed {
            format!(
                "for (int {kk} = 0; {kk} < {}; {kk}++) {{\n    const int t{i} = {o} + {} - {kk} * {};\n    if (t{i} < 0 || t{i} % {s} != 0 || t{i} / {s} >= {size}) continue;\n    const int {ii} = t{i} / {s};\n",
                kn[i],
                pads[i],
                dl[i],
                s = st[i]
            )
        } else {
            format!(
                "for (int {kk} = 0; {kk} < {}; {kk}++) {{\n    const int {ii} = {o} * {} - {} + {kk} * {};\n    if ({ii} < 0 || {ii} >= {size}) continue;\n",
                kn[i], st[i], pads[i], dl[i]
            )
        }
    };
    let no_tap = |i: usize| format!("const int {} = 0;\nconst int {} = 0;\n", kv[i], iv[i]);
    let w_ = &in_expr[2];
    let load = if transposed {
        format!(
            "const float xv = x[(nb * cin + g * cpg_in + ic) * {} + (iz * {} + iy) * {w_} + ix];\n",
            product(&in_expr),
            in_expr[1]
        )
    } else {
        format!(
            "const float xv = xc[(iz * {} + iy) * {w_} + ix];\n",
            in_expr[1]
        )
    };
    let inner = format!(
        "{load}for (int o = 0; o < OCB; o++)\n    acc[o] = fma(xv, KF_W(o, ic, {tap}), acc[o]);\n"
    );
    let body = indent(&nest(&present, tap_loop, no_tap, &inner), 20);
    let channel = if transposed {
        String::new()
    } else {
        format!("                    const __global float* xc = x + (nb * cin + g * cpg_in + ic) * {};\n", product(&in_expr))
    };
    let taps_code = format!(
        "                int icb = 0;\n                for (; icb + ICU <= cpg_in; icb += ICU)\n                for (int u = 0; u < ICU; u++) {{\n                    const int ic = icb + u;\n{channel}{body}                }}\n                for (; icb < cpg_in; icb++) {{\n                    const int ic = icb;\n{channel}{body}                }}\n"
    );
    // Weight (output channel oc0 + o, input channel ic of the group, tap t): from local memory
    // (copied once per work-group) or global memory.
    let global_w = if transposed {
        format!(
            "weight[((g * cpg_in + (ic)) * cpg_out + (oc0 - g * cpg_out) + (o)) * {taps} + (t)]"
        )
    } else {
        format!("weight[((oc0 + (o)) * cpg_in + (ic)) * {taps} + (t)]")
    };
    let weights_setup = format!(
        r#"#if WLOCAL
    for (int e = get_local_id(0); e < OCB * cpg_in * {taps}; e += WG) {{
        const int o = e / (cpg_in * {taps}), ic = (e / {taps}) % cpg_in, t = e % {taps};
        wl[e] = {global_w};
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
#define KF_W(o, ic, t) wl[((o) * cpg_in + (ic)) * {taps} + (t)]
#else
#define KF_W(o, ic, t) {global_w}
#endif
"#
    );
    let chain = chain_call(cx, &k, "kf_chain", "acc[o]", "ci_out");
    let (pool_open, pool_close, store) = match &g.pool {
        None => (
            "                const int oz = pz, oy = py, ox = px;\n".to_string(),
            String::new(),
            "                    y[ci_out] = v;\n".to_string(),
        ),
        Some(p) => {
            let (init, fold, finish) = match p.kind {
                PoolKind::Max => (
                    "-INFINITY",
                    "red[o] = fmax(red[o], v);",
                    "red[o]".to_string(),
                ),
                PoolKind::Avg => (
                    "0.0f",
                    "red[o] += v;",
                    format!("red[o] / {}.0f", pool_k.iter().product::<usize>()),
                ),
            };
            let post_call = chain_call(cx, &k, "kf_post", "pv", "po");
            let wv = ["wz", "wy", "wx"];
            let mut open = format!("            float red[OCB];\n            for (int o = 0; o < OCB; o++) red[o] = {init};\n");
            for i in 0..3 {
                open += &format!(
                    "            for (int {w} = 0; {w} < {}; {w}++)\n",
                    pool_k[i],
                    w = wv[i]
                );
            }
            open += &format!(
                "            {{\n                const int oz = pz * {} + wz, oy = py * {} + wy, ox = px * {} + wx;\n",
                pool_k[0], pool_k[1], pool_k[2]
            );
            (
                open,
                format!(
                    "            }}\n            for (int o = 0; o < OCB; o++) {{\n                const int po = (((nb * cout + oc0 + o) * KF_POD + pz) * KF_POH + py) * KF_POW + px;\n                const float pv = {finish};\n                y[po] = {post_call};\n            }}\n"
                ),
                format!("                    {fold}\n"),
            )
        }
    };
    let tiled = if tile {
        tile_code(
            &present, &kn, &st, &pads, &dl, &in_expr, transposed, &tap, bias_init, &chain,
        )
    } else {
        String::new()
    };
    let (tile_open, tile_close) = if tile {
        (format!("#if TILE\n{tiled}#else\n"), "#endif\n")
    } else {
        (String::new(), "")
    };
    let (mma_open, mma_close) = if mma {
        let (machinery, main_loop) = tensor_core::parts(cx.precision, Loader::Gather);
        s += &format!("#if MMA\n#define WGX 1\n#define WGY WG\n#define TM PX\n#define TN OCB\n#define KM_B_KMAJOR 1\n{machinery}#endif\n");
        let chain = chain_call(cx, &k, "kf_chain", "vc", "ci_out");
        let bias = if bias.is_some() { " + bias[oc]" } else { "" };
        (
            format!(
                "#if MMA\n{}#else\n",
                implicit_gemm(&main_loop, &kn, &st, &pads, &dl, &in_expr, taps, bias, &chain)
            ),
            "#endif\n",
        )
    } else {
        (String::new(), "")
    };
    s += &format!(
        r#"
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void {entry}({args})
{{
    const int nb = get_global_id(2);
    const int oc0 = get_global_id(1) * OCB;
    const int cpg_in = cin / {groups};
    const int cpg_out = cout / {groups};
{mma_open}    const int g = oc0 / cpg_out;
{weights_setup}{tile_open}    for (int e = 0; e < PX; e++) {{
        const int p = get_group_id(0) * (WG * PX) + e * WG + get_local_id(0);
        if (p < KF_POD * KF_POH * KF_POW) {{
            const int px = p % KF_POW, py = (p / KF_POW) % KF_POH, pz = p / (KF_POW * KF_POH);
{pool_open}                float acc[OCB];
                for (int o = 0; o < OCB; o++) acc[o] = {bias_init};
{taps_code}                for (int o = 0; o < OCB; o++) {{
                    const int ci_out = (((nb * cout + oc0 + o) * KF_OD + oz) * KF_OH + oy) * KF_OW + ox;
                    const float v = {chain};
{store}                }}
{pool_close}        }}
    }}
{tile_close}{mma_close}}}
"#,
        entry = k.entry
    );
    k.source = s;
    k
}

/// The MMA = 1 body: the convolution as an implicit GEMM on the suite's tensor-core main loop.
/// A (m = this sample's output pixels, k = (input channel of the group, tap)) is gathered from
/// x into local memory, each item filling the rows of its PX pixels (WG apart), four columns at
/// a time (one 16-byte store: a quarter-warp's stores hit distinct banks), zero outside the
/// input and past the end of k; B is the weights of the work-group's OCB channels, rows of k
/// contiguous floats. The tile loader has no `cp.async`: the pipeline's waits are no-ops and
/// the barrier after them publishes the plain stores.
#[allow(clippy::too_many_arguments)]
fn implicit_gemm(
    main_loop: &str,
    kn: &[usize; 3],
    st: &[usize; 3],
    pads: &[usize; 6],
    dl: &[usize; 3],
    in_expr: &[String; 3],
    taps: usize,
    bias: &str,
    chain: &str,
) -> String {
    let (d, h, w) = (&in_expr[0], &in_expr[1], &in_expr[2]);
    let plane = product(in_expr);
    format!(
        r#"    /* Implicit GEMM: this item's A rows are pixels p = bm0 + q * WG + lid (q < PX). */
    const int k = cpg_in * {taps};
    const int kf_pixels = KF_OD * KF_OH * KF_OW;
    const int kf_lid = get_local_id(0);
    int kf_iz[PX], kf_iy[PX], kf_ix[PX];
    bool kf_live[PX];
    for (int q = 0; q < PX; q++) {{
        const int p = get_group_id(0) * (WG * PX) + q * WG + kf_lid;
        kf_live[q] = p < kf_pixels;
        const int pp = kf_live[q] ? p : 0;
        kf_ix[q] = pp % KF_OW * {sx} - {px};
        kf_iy[q] = pp / KF_OW % KF_OH * {sy} - {py};
        kf_iz[q] = pp / (KF_OW * KF_OH) * {sz} - {pz};
    }}
    /* (The main loop names its lanes' rows g; the channels' group is oc0 / cpg_out.) */
    const __global float* kf_x = x + (nb * cin + oc0 / cpg_out * cpg_in) * {plane};
    const __global float* kf_w = weight + oc0 * k;
#define KM_LOAD_TILE(st, kt)                                                                     \
    {{                                                                                            \
        __local float* As_ = As + (st) * KM_ASZ;                                                 \
        __local float* Bs_ = Bs + (st) * KM_BSZ;                                                 \
        const int k0_ = (kt) * TK;                                                               \
        for (int c4 = 0; c4 < TK; c4 += 4) {{                                                      \
            float v_[PX][4];                                                                     \
            for (int u = 0; u < 4; u++) {{                                                         \
                const int kk_ = k0_ + c4 + u;                                                    \
                const int ic_ = kk_ / {taps}, t_ = kk_ % {taps};                                     \
                const int kz_ = t_ / {khw}, ky_ = t_ / {kw} % {kh}, kx_ = t_ % {kw};                      \
                for (int q = 0; q < PX; q++) {{                                                    \
                    const int iz_ = kf_iz[q] + kz_ * {dz}, iy_ = kf_iy[q] + ky_ * {dy}, ix_ = kf_ix[q] + kx_ * {dx}; \
                    const bool ok_ = kf_live[q] && kk_ < k && iz_ >= 0 && iz_ < {d} && iy_ >= 0 && iy_ < {h} && ix_ >= 0 && ix_ < {w}; \
                    v_[q][u] = ok_ ? kf_x[ic_ * {plane} + (iz_ * {h} + iy_) * {w} + ix_] : 0.0f;             \
                }}                                                                                \
            }}                                                                                    \
            for (int q = 0; q < PX; q++)                                                         \
                vstore4((float4)(v_[q][0], v_[q][1], v_[q][2], v_[q][3]), 0, As_ + (q * WG + kf_lid) * KM_LDA + c4); \
        }}                                                                                        \
        for (int e = kf_lid; e < KM_BN * TK; e += WG) {{                                           \
            const int r = e / TK, c = e % TK;                                                    \
            Bs_[r * KM_LDB + c] = k0_ + c < k ? kf_w[r * k + k0_ + c] : 0.0f;                     \
        }}                                                                                        \
    }}
{main_loop}{store}"#,
        store = tensor_core::for_each_accumulator(
            "p",
            "oc",
            &format!(
                "                if (p < kf_pixels) {{\n                    const int ci_out = (nb * cout + oc) * kf_pixels + p;\n                    const float vc = acc[i][j][r]{bias};\n                    y[ci_out] = {chain};\n                }}\n"
            ),
        ),
        khw = kn[1] * kn[2],
        kh = kn[1],
        kw = kn[2],
        sz = st[0],
        sy = st[1],
        sx = st[2],
        pz = pads[0],
        py = pads[1],
        px = pads[2],
        dz = dl[0],
        dy = dl[1],
        dx = dl[2],
    )
}

/// The TILE = 1 body: the item's PX pixels (WG apart) and OCB channels accumulated together,
/// each tap's input values loaded once for the OCB channels and each weight once for the PX
/// pixels. A tap outside the input (padding, or a stride a transposed convolution skips) is
/// skipped per pixel, so every output sums the same terms in the same order as the reference.
#[allow(clippy::too_many_arguments)]
fn tile_code(
    present: &[usize],
    kn: &[usize],
    st: &[usize],
    pads: &[usize],
    dl: &[usize],
    in_expr: &[String; 3],
    transposed: bool,
    tap: &str,
    bias_init: &str,
    chain: &str,
) -> String {
    let (kv, ov, iv) = (["kz", "ky", "kx"], ["oz", "oy", "ox"], ["iz", "iy", "ix"]);
    let mut coords = String::new();
    for i in 0..3 {
        let (kk, o, ii, size) = (kv[i], ov[i], iv[i], &in_expr[i]);
        if !present.contains(&i) {
            coords += &format!("                const int {ii} = 0;\n");
        } else if transposed {
            coords += &format!(
                "                const int t{i} = {o}[e] + {} - {kk} * {};\n                ok[e] = ok[e] && t{i} >= 0 && t{i} % {s} == 0 && t{i} / {s} < {size};\n                const int {ii} = t{i} / {s};\n",
                pads[i],
                dl[i],
                s = st[i]
            );
        } else {
            coords += &format!(
                "                const int {ii} = {o}[e] * {} - {} + {kk} * {};\n                ok[e] = ok[e] && {ii} >= 0 && {ii} < {size};\n",
                st[i], pads[i], dl[i]
            );
        }
    }
    let inner = format!(
        "float xv[PX];\nbool ok[PX];\nfor (int e = 0; e < PX; e++) {{\n    ok[e] = live[e];\n{}    xv[e] = ok[e] ? xc[(iz * {} + iy) * {} + ix] : 0.0f;\n}}\nfor (int o = 0; o < OCB; o++) {{\n    const float wv = KF_W(o, ic, {tap});\n    for (int e = 0; e < PX; e++)\n        if (ok[e]) acc[e][o] = fma(xv[e], wv, acc[e][o]);\n}}\n",
        coords.lines().map(|l| format!("{}\n", &l[12..])).collect::<String>(),
        in_expr[1],
        in_expr[2]
    );
    let open = |i: usize| format!("for (int {k} = 0; {k} < {}; {k}++) {{\n", kn[i], k = kv[i]);
    let absent = |i: usize| format!("const int {} = 0;\n", kv[i]);
    let body = indent(&nest(present, open, absent, &inner), 12);
    let plane = product(in_expr);
    let channel = format!(
        "            const __global float* xc = x + (nb * cin + g * cpg_in + ic) * {plane};\n"
    );
    format!(
        r#"    int oz[PX], oy[PX], ox[PX];
    bool live[PX];
    for (int e = 0; e < PX; e++) {{
        const int p = get_group_id(0) * (WG * PX) + e * WG + get_local_id(0);
        live[e] = p < KF_OD * KF_OH * KF_OW;
        const int q = live[e] ? p : 0;
        ox[e] = q % KF_OW;
        oy[e] = (q / KF_OW) % KF_OH;
        oz[e] = q / (KF_OW * KF_OH);
    }}
    float acc[PX][OCB];
    for (int e = 0; e < PX; e++)
        for (int o = 0; o < OCB; o++) acc[e][o] = {bias};
    int icb = 0;
    for (; icb + ICU <= cpg_in; icb += ICU)
        for (int u = 0; u < ICU; u++) {{
            const int ic = icb + u;
{channel}{body}        }}
    for (; icb < cpg_in; icb++) {{
        const int ic = icb;
{channel}{body}    }}
    for (int e = 0; e < PX; e++) {{
        if (!live[e]) continue;
        for (int o = 0; o < OCB; o++) {{
            const int ci_out = (((nb * cout + oc0 + o) * KF_OD + oz[e]) * KF_OH + oy[e]) * KF_OW + ox[e];
            const float v = {chain};
            y[ci_out] = v;
        }}
    }}
"#,
        bias = bias_init,
        chain = chain.replace("acc[o]", "acc[e][o]"),
    )
}

/// `code` with every line indented by `n` spaces.
fn indent(code: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    code.lines().map(|l| format!("{pad}{l}\n")).collect()
}
