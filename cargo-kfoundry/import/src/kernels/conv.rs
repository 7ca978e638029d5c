//! Conv (2-D, and 1-D as a height of 1) with bias, its element-wise chain, and a fused pooling
//! whose windows tile its output (then the chain after the pooling); ConvTranspose.
//!
//!   WG     items per work-group (along output pixels)        pow2(32..=256)  ref 64
//!   PX     output pixels per item, WG apart                  [1, 2, 4]       ref 1
//!   OCB    output channels per item (same group)             [1, 2, 4, 8]    ref 1
//!   ICU    input channels per step of the channel loop       [1, 2, 4]       ref 1
//!   WLOCAL the work-group's weights staged in local memory    [0, 1]          ref 0
//!
//! Launch: (ceil_div(pixels, WG * PX) * WG, cout / OCB, n), local (WG, 1, 1). Geometry (kernel,
//! strides, dilations, pads, groups) is fixed by the graph and written into the source; the
//! sizes are n, cin, h, w, cout.

use super::{chain_call, chain_function, fits_int, params, prelude, side_buffers, BufferArg, Cx, Dims, Kernel, Size};
use crate::fuse::Anchor;
use crate::graph::{PoolKind, Window};

/// `size + c` as an expression (`size`, `(size + 2)`, `(size - 2)`).
fn plus(size: &str, c: i64) -> String {
    match c {
        0 => size.to_string(),
        c if c > 0 => format!("({size} + {c})"),
        c => format!("({size} - {})", -c),
    }
}

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let (x, w, bias, window, groups, transposed) = match &g.anchor {
        Anchor::Conv { x, w, bias, window, groups } => (*x, *w, *bias, window, *groups, false),
        Anchor::ConvTranspose { x, w, bias, window, groups } => (*x, *w, *bias, window, *groups, true),
        _ => unreachable!("conv::generate on a convolution"),
    };
    let xs = cx.shape(x).to_vec();
    let one_d = xs.len() == 3;
    let (h, wd) = if one_d { (1, xs[2]) } else { (xs[2], xs[3]) };
    let cout = g.shape[1];
    let mut k = cx.kernel();
    let Window { kernel: [kh, kw], strides: [sh, sw], dilations: [dh, dw], pads: [pt, pl, pb, pr] } = window.clone();
    // Output size as an expression of the input's (the same text in C and in the annotation).
    let out_expr = |size: &str, kernel: usize, stride: usize, dil: usize, p0: usize, p1: usize| -> String {
        let extent = (kernel - 1) * dil + 1;
        let pads = p0 + p1;
        if transposed {
            format!("(({size} - 1) * {stride} + {extent} - {pads})")
        } else {
            if stride == 1 {
                plus(size, pads as i64 + 1 - extent as i64)
            } else {
                format!("({} / {stride} + 1)", plus(size, pads as i64 - extent as i64))
            }
        }
    };
    // The smallest input extent (for CPU workloads) whose output keeps `want` pixels.
    let small_input = |full: usize, kernel: usize, stride: usize, dil: usize, p: usize, want: usize| -> usize {
        let extent = (kernel - 1) * dil + 1;
        (1..=full)
            .find(|&s| {
                let o = if transposed { ((s - 1) * stride + extent).saturating_sub(p) } else { (s + p).saturating_sub(extent) / stride + 1 };
                (transposed || s + p >= extent) && o >= want
            })
            .unwrap_or(full)
    };
    let pool_k = g.pool.as_ref().map(|p| p.kernel).unwrap_or([1, 1]);
    let out_full = if one_d { [1, g.shape[2]] } else { [g.shape[2], g.shape[3]] };
    let want_h = out_full[0].min(4 * pool_k[0]);
    let want_w = out_full[1].min(4 * pool_k[1]);
    k.sizes.push(Size { name: "n".into(), full: xs[0], small: 1 });
    k.sizes.push(Size { name: "cin".into(), full: xs[1], small: xs[1] });
    let h_expr = if one_d {
        "1".to_string()
    } else {
        k.sizes.push(Size { name: "h".into(), full: h, small: small_input(h, kh, sh, dh, pt + pb, want_h) });
        "h".to_string()
    };
    k.sizes.push(Size { name: "w".into(), full: wd, small: small_input(wd, kw, sw, dw, pl + pr, want_w) });
    k.sizes.push(Size { name: "cout".into(), full: cout, small: cout });
    let oh = if one_d { "1".to_string() } else { out_expr("h", kh, sh, dh, pt, pb) };
    let ow = out_expr("w", kw, sw, dw, pl, pr);
    let (ph, pw) = (pool_k[0], pool_k[1]);
    let poh = if ph == 1 { oh.clone() } else { format!("({oh} / {ph})") };
    let pow = if pw == 1 { ow.clone() } else { format!("({ow} / {pw})") };
    // The chain before any pooling runs over the convolution's own output.
    let conv_dims = Dims {
        exprs: if one_d { vec!["n".into(), "cout".into(), ow.clone()] } else { vec!["n".into(), "cout".into(), oh.clone(), ow.clone()] },
        full: g.shape.clone(),
    };
    let pool_dims =
        Dims { exprs: vec!["n".into(), "cout".into(), poh.clone(), pow.clone()], full: g.pool.as_ref().map(|p| p.shape.clone()).unwrap_or_default() };
    params(
        &mut k,
        &[("WG", "pow2(32..=256)", 64), ("PX", "[1, 2, 4]", 1), ("OCB", "[1, 2, 4, 8]", 1), ("ICU", "[1, 2, 4]", 1), ("WLOCAL", "[0, 1]", 0)],
    );
    let per_group = |size: &str| if groups == 1 { size.to_string() } else { format!("({size} / {groups})") };
    if groups > 1 {
        k.require.push(format!("cin % {groups} == 0"));
        k.require.push(format!("cout % {groups} == 0"));
    }
    k.require.push(format!("{} % OCB == 0", per_group("cout")));
    if !transposed {
        let fits =
            |size: &str, pads: usize, extent: usize| if pads == 0 { format!("{size} >= {extent}") } else { format!("{size} + {pads} >= {extent}") };
        if !one_d {
            k.require.push(fits("h", pt + pb, (kh - 1) * dh + 1));
        }
        k.require.push(fits("w", pl + pr, (kw - 1) * dw + 1));
    } else {
        if !one_d {
            k.require.push(format!("{oh} >= 1"));
        }
        k.require.push(format!("{ow} >= 1"));
    }
    if ph > 1 || pw > 1 {
        k.require.push(format!("{poh} >= 1"));
        k.require.push(format!("{pow} >= 1"));
    }
    let x_len = super::product(&["n".into(), "cin".into(), h_expr.clone(), "w".into()]);
    let w_len = if transposed { format!("cin * {} * {}", per_group("cout"), kh * kw) } else { format!("cout * {} * {}", per_group("cin"), kh * kw) };
    let y_len = super::product(&["n".into(), "cout".into(), poh.clone(), pow.clone()]);
    let conv_len = super::product(&["n".into(), "cout".into(), oh.clone(), ow.clone()]);
    fits_int(&mut k, &[x_len.clone(), w_len.clone(), conv_len.clone()]);
    k.buffers.push(BufferArg { name: "x".into(), len: x_len, value: x, output: false, inputs: None });
    k.buffers.push(BufferArg { name: "weight".into(), len: w_len, value: w, output: false, inputs: None });
    if let Some(b) = bias {
        k.buffers.push(BufferArg { name: "bias".into(), len: "cout".into(), value: b, output: false, inputs: None });
    }
    let post = g.pool.as_ref().map(|p| p.chain.clone()).unwrap_or_default();
    let mut spaces = vec![(&g.chain, &conv_dims)];
    if g.pool.is_some() {
        spaces.push((&post, &pool_dims));
    }
    side_buffers(cx, &mut k, &spaces);
    k.buffers.push(BufferArg { name: "y".into(), len: y_len.clone(), value: g.output, output: true, inputs: None });
    // The work-group's weights in local memory (WLOCAL = 1): OCB channels x the group's input
    // channels x the taps.
    let wl_len = format!("{} * {}", per_group("cin"), kh * kw);
    k.locals.push(("wl".into(), format!("max(1, WLOCAL * OCB * {wl_len})")));
    k.require.push(format!("WLOCAL * 4 * OCB * {wl_len} <= min(device_local_mem, 49152)"));
    let pixels = format!("{poh} * {pow}");
    k.global = vec![format!("ceil_div({pixels}, WG * PX) * WG"), "cout / OCB".into(), "n".into()];
    k.local = vec!["WG".into(), "1".into(), "1".into()];
    let taps = (xs[1] / groups) * kh * kw;
    k.atol = (2.5e-7 * taps as f64).max(1e-5);
    k.bytes = super::compulsory_bytes(&k);
    k.flops = format!("2 * {conv_len} * {} * {}", per_group("cin"), kh * kw);

    let mut s = prelude(&k, if transposed { "transposed convolution" } else { "convolution" });
    s += &format!("#define KF_OH {oh}\n#define KF_OW {ow}\n#define KF_POH {poh}\n#define KF_POW {pow}\n");
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &conv_dims);
    if g.pool.is_some() {
        s += &chain_function(cx, &k, "kf_post", &post, &pool_dims);
    }
    let bias_param = if bias.is_some() { "__global const float* restrict bias".to_string() } else { String::new() };
    let args = super::arguments(
        cx,
        &k,
        &["__global const float* restrict x, __global const float* restrict weight", &bias_param],
        "__global float* restrict y, __local float* wl",
    );
    let bias_init = if bias.is_some() { "bias[oc0 + o]" } else { "0.0f" };
    // One convolution output (channel oc0 + o, pixel (oy, ox)) into acc[e][o].
    // The taps of input channel `ic` (of the group) for one output pixel into acc[0..OCB]; the
    // channel loop around it is unrolled ICU times (the same order: results do not change).
    let body = if transposed {
        format!(
            r#"                    const int ci = g * cpg_in + ic;
                    for (int ky = 0; ky < {kh}; ky++) {{
                        const int ty = oy + {pt} - ky * {dh};
                        if (ty < 0 || ty % {sh} != 0 || ty / {sh} >= {h_expr}) continue;
                        for (int kx = 0; kx < {kw}; kx++) {{
                            const int tx = ox + {pl} - kx * {dw};
                            if (tx < 0 || tx % {sw} != 0 || tx / {sw} >= w) continue;
                            const float xv = x[((nb * cin + ci) * {h_expr} + ty / {sh}) * w + tx / {sw}];
                            for (int o = 0; o < OCB; o++)
                                acc[o] = fma(xv, KF_W(o, ic, ky * {kw} + kx), acc[o]);
                        }}
                    }}
"#
        )
    } else {
        format!(
            r#"                    const __global float* xc = x + (nb * cin + g * cpg_in + ic) * {h_expr} * w;
                    for (int ky = 0; ky < {kh}; ky++) {{
                        const int iy = oy * {sh} - {pt} + ky * {dh};
                        if (iy < 0 || iy >= {h_expr}) continue;
                        for (int kx = 0; kx < {kw}; kx++) {{
                            const int ix = ox * {sw} - {pl} + kx * {dw};
                            if (ix < 0 || ix >= w) continue;
                            const float xv = xc[iy * w + ix];
                            for (int o = 0; o < OCB; o++)
                                acc[o] = fma(xv, KF_W(o, ic, ky * {kw} + kx), acc[o]);
                        }}
                    }}
"#
        )
    };
    let taps_code = format!(
        "                int icb = 0;\n                for (; icb + ICU <= cpg_in; icb += ICU)\n                for (int u = 0; u < ICU; u++) {{\n                    const int ic = icb + u;\n{body}                }}\n                for (; icb < cpg_in; icb++) {{\n                    const int ic = icb;\n{body}                }}\n"
    );
    // Weight (output channel oc0 + o, input channel ic of the group, tap t): from local memory
    // (copied once per work-group) or global memory.
    let global_w = if transposed {
        format!("weight[((g * cpg_in + (ic)) * cpg_out + (oc0 - g * cpg_out) + (o)) * {taps2} + (t)]", taps2 = kh * kw)
    } else {
        format!("weight[((oc0 + (o)) * cpg_in + (ic)) * {taps2} + (t)]", taps2 = kh * kw)
    };
    let weights_setup = format!(
        r#"#if WLOCAL
    for (int e = get_local_id(0); e < OCB * cpg_in * {taps2}; e += WG) {{
        const int o = e / (cpg_in * {taps2}), ic = (e / {taps2}) % cpg_in, t = e % {taps2};
        wl[e] = {global_w};
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
#define KF_W(o, ic, t) wl[((o) * cpg_in + (ic)) * {taps2} + (t)]
#else
#define KF_W(o, ic, t) {global_w}
#endif
"#,
        taps2 = kh * kw
    );
    let chain = chain_call(cx, &k, "kf_chain", "acc[o]", "ci_out");
    let (pool_open, pool_close, store) = match &g.pool {
        None => ("                const int oy = py, ox = px;\n".to_string(), String::new(), "                    y[ci_out] = v;\n".to_string()),
        Some(p) => {
            let (init, fold, finish) = match p.kind {
                PoolKind::Max => ("-INFINITY", "red[o] = fmax(red[o], v);", "red[o]".to_string()),
                PoolKind::Avg => ("0.0f", "red[o] += v;", format!("red[o] / {}.0f", ph * pw)),
            };
            let post_call = chain_call(cx, &k, "kf_post", "pv", "po");
            (
                format!(
                    "            float red[OCB];\n            for (int o = 0; o < OCB; o++) red[o] = {init};\n            for (int wy = 0; wy < {ph}; wy++)\n            for (int wx = 0; wx < {pw}; wx++) {{\n                const int oy = py * {ph} + wy, ox = px * {pw} + wx;\n"
                ),
                format!(
                    "            }}\n            for (int o = 0; o < OCB; o++) {{\n                const int po = ((nb * cout + oc0 + o) * KF_POH + py) * KF_POW + px;\n                const float pv = {finish};\n                y[po] = {post_call};\n            }}\n"
                ),
                format!("                    {fold}\n"),
            )
        }
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
    const int g = oc0 / cpg_out;
{weights_setup}    for (int e = 0; e < PX; e++) {{
        const int p = get_group_id(0) * (WG * PX) + e * WG + get_local_id(0);
        if (p < KF_POH * KF_POW) {{
            const int py = p / KF_POW, px = p % KF_POW;
{pool_open}                float acc[OCB];
                for (int o = 0; o < OCB; o++) acc[o] = {bias_init};
{taps_code}                for (int o = 0; o < OCB; o++) {{
                    const int ci_out = ((nb * cout + oc0 + o) * KF_OH + oy) * KF_OW + ox;
                    const float v = {chain};
{store}                }}
{pool_close}        }}
    }}
}}
"#,
        entry = k.entry
    );
    k.source = s;
    k
}
