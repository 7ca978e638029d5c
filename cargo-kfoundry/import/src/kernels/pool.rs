//! MaxPool and AveragePool (2-D, and 1-D as a height of 1) with padding, strides and (max)
//! dilations, then the chain. One output element per item step.
//!
//!   WG     items per work-group     pow2(32..=512)   ref 64
//!   ITEMS  outputs per item         [1, 2, 4]        ref 1

use super::{chain_call, chain_function, fits_int, params, prelude, side_buffers, BufferArg, Cx, Dims, Kernel, Size};
use crate::fuse::Anchor;
use crate::graph::{PoolKind, Window};

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let Anchor::Pool { x, kind, window, count_include_pad } = &g.anchor else { unreachable!("pool::generate on a pooling") };
    let xs = cx.shape(*x).to_vec();
    let one_d = xs.len() == 3;
    let mut k = cx.kernel();
    let Window { kernel: [kh, kw], strides: [sh, sw], dilations: [dh, dw], pads: [pt, pl, pb, pr] } = window.clone();
    let ext_h = (kh - 1) * dh + 1;
    let ext_w = (kw - 1) * dw + 1;
    let small = |full: usize, ext: usize, pads: usize| full.min((ext + 8).saturating_sub(pads).max(ext.saturating_sub(pads)).max(1));
    k.sizes.push(Size { name: "n".into(), full: xs[0], small: 1 });
    k.sizes.push(Size { name: "c".into(), full: xs[1], small: xs[1].min(8) });
    let h = if one_d {
        "1".to_string()
    } else {
        k.sizes.push(Size { name: "h".into(), full: xs[2], small: small(xs[2], ext_h, pt + pb) });
        "h".to_string()
    };
    let wfull = *xs.last().expect("rank 3 or 4");
    k.sizes.push(Size { name: "w".into(), full: wfull, small: small(wfull, ext_w, pl + pr) });
    let oh = if one_d { "1".to_string() } else { format!("((h + {} - {ext_h}) / {sh} + 1)", pt + pb) };
    let ow = format!("((w + {} - {ext_w}) / {sw} + 1)", pl + pr);
    if !one_d {
        k.require.push(format!("h + {} >= {ext_h}", pt + pb));
    }
    k.require.push(format!("w + {} >= {ext_w}", pl + pr));
    let dims = Dims {
        exprs: if one_d { vec!["n".into(), "c".into(), ow.clone()] } else { vec!["n".into(), "c".into(), oh.clone(), ow.clone()] },
        full: g.shape.clone(),
    };
    let total = dims.total();
    params(&mut k, &[("WG", "pow2(32..=512)", 64), ("ITEMS", "[1, 2, 4]", 1)]);
    let x_len = super::product(&["n".into(), "c".into(), h.clone(), "w".into()]);
    fits_int(&mut k, &[x_len.clone(), total.clone()]);
    k.buffers.push(BufferArg { name: "x".into(), len: x_len, value: *x, output: false, inputs: None });
    side_buffers(cx, &mut k, &[(&g.chain, &dims)]);
    k.buffers.push(BufferArg { name: "y".into(), len: total.clone(), value: g.output, output: true, inputs: None });
    k.global = vec![format!("ceil_div({total}, WG * ITEMS) * WG")];
    k.local = vec!["WG".into()];
    k.bytes = super::compulsory_bytes(&k);
    k.flops = format!("{total} * {}", kh * kw);

    let mut s = prelude(&k, if *kind == PoolKind::Max { "max pooling" } else { "average pooling" });
    s += &format!("#define KF_OH {oh}\n#define KF_OW {ow}\n");
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &dims);
    let args = super::arguments(cx, &k, &["__global const float* restrict x"], "__global float* restrict y");
    let (init, fold, finish) = match kind {
        PoolKind::Max => ("-INFINITY", "r = fmax(r, xv);", "r".to_string()),
        PoolKind::Avg if *count_include_pad => ("0.0f", "r += xv;", format!("r / {}.0f", kh * kw)),
        PoolKind::Avg => ("0.0f", "r += xv;", "r / (float)cnt".to_string()),
    };
    // With count_include_pad, padding counts but the window's part beyond the padding does not
    // exist (ONNX clips windows to the padded input).
    let call = chain_call(cx, &k, "kf_chain", "v", "i");
    s += &format!(
        r#"
__kernel void {entry}({args})
{{
    const int total = {total};
    const int base = get_group_id(0) * (WG * ITEMS) + get_local_id(0);
    for (int e = 0; e < ITEMS; e++) {{
        const int i = base + e * WG;
        if (i >= total) continue;
        const int ox = i % KF_OW;
        const int oy = (i / KF_OW) % KF_OH;
        const int nc = i / (KF_OW * KF_OH);
        const __global float* xc = x + nc * {h} * w;
        float r = {init};
        int cnt = 0;
        for (int ky = 0; ky < {kh}; ky++) {{
            const int iy = oy * {sh} - {pt} + ky * {dh};
            if (iy < 0 || iy >= {h}) continue;
            for (int kx = 0; kx < {kw}; kx++) {{
                const int ix = ox * {sw} - {pl} + kx * {dw};
                if (ix < 0 || ix >= w) continue;
                const float xv = xc[iy * w + ix];
                {fold}
                cnt++;
            }}
        }}
        (void)cnt;
        const float v = {finish};
        y[i] = {call};
    }}
}}
"#,
        entry = k.entry
    );
    k.source = s;
    k
}
