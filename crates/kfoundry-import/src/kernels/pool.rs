//! MaxPool and AveragePool (1-D, 2-D and 3-D) with padding, strides, (max) dilations and
//! ceil_mode, then the chain. One output element per item step.
//!
//!   WG     items per work-group     pow2(32..=512)   ref 64
//!   ITEMS  outputs per item         [1, 2, 4]        ref 1

use super::{
    chain_call, chain_function, fits_int, params, plus, prelude, product, side_buffers, BufferArg,
    Cx, Dims, Kernel, Size,
};
use crate::fuse::Anchor;
use crate::graph::PoolKind;

const NAMES: [&str; 3] = ["d", "h", "w"];

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let Anchor::Pool {
        x,
        kind,
        window,
        count_include_pad,
    } = &g.anchor
    else {
        unreachable!("pool::generate on a pooling")
    };
    let xs = cx.shape(*x).to_vec();
    let input = window.spatial(&xs);
    let present: Vec<usize> = (0..3).filter(|&i| window.present(i)).collect();
    let mut k = cx.kernel();
    let (kn, st, dl, pads) = (window.kernel, window.strides, window.dilations, window.pads);
    k.sizes.push(Size {
        name: "n".into(),
        full: xs[0],
        small: 1,
    });
    k.sizes.push(Size {
        name: "c".into(),
        full: xs[1],
        small: xs[1].min(8),
    });
    let mut in_expr = ["1".to_string(), "1".to_string(), "1".to_string()];
    let mut o_expr = in_expr.clone();
    for &i in &present {
        let ext = window.extent(i);
        let p = pads[i] + pads[i + 3];
        // A few outputs along each dimension on CPU devices.
        let small = input[i].min(
            (ext + 8)
                .saturating_sub(p)
                .max(ext.saturating_sub(p))
                .max(1),
        );
        k.sizes.push(Size {
            name: NAMES[i].into(),
            full: input[i],
            small,
        });
        let n = NAMES[i];
        in_expr[i] = n.to_string();
        // floor((n + p - ext) / s) + 1, or with ceil_mode the ceiling, less one when the last
        // window would start past the input and its leading padding. Plain arithmetic and a
        // comparison (0 or 1): the same text in C and in the annotation.
        o_expr[i] = if window.ceil {
            let c = format!(
                "({} / {})",
                plus(n, p as i64 - ext as i64 + st[i] as i64 - 1),
                st[i]
            );
            format!("({c} + 1 - ({c} * {} >= {n} + {}))", st[i], pads[i])
        } else {
            format!("({} / {} + 1)", plus(n, p as i64 - ext as i64), st[i])
        };
        k.require.push(format!("{n} + {p} >= {ext}"));
    }
    let dims = Dims {
        exprs: [
            vec!["n".into(), "c".into()],
            present.iter().map(|&i| o_expr[i].clone()).collect(),
        ]
        .concat(),
        full: g.shape.clone(),
    };
    let total = dims.total();
    params(
        &mut k,
        &[("WG", "pow2(32..=512)", 64), ("ITEMS", "[1, 2, 4]", 1)],
    );
    let x_len = product(&[vec!["n".into(), "c".into()], in_expr.to_vec()].concat());
    fits_int(&mut k, &[x_len.clone(), total.clone()]);
    k.buffers.push(BufferArg {
        name: "x".into(),
        len: x_len,
        value: *x,
        output: false,
        inputs: None,
    });
    side_buffers(cx, &mut k, &[(&g.chain, &dims)]);
    k.buffers.push(BufferArg {
        name: "y".into(),
        len: total.clone(),
        value: g.output,
        output: true,
        inputs: None,
    });
    k.global = vec![format!("ceil_div({total}, WG * ITEMS) * WG")];
    k.local = vec!["WG".into()];
    k.bytes = super::compulsory_bytes(&k);
    k.flops = format!("{total} * {}", kn.iter().product::<usize>());

    let mut s = prelude(
        &k,
        if *kind == PoolKind::Max {
            "max pooling"
        } else {
            "average pooling"
        },
    );
    for (i, l) in ["D", "H", "W"].iter().enumerate() {
        s += &format!("#define KF_O{l} {}\n", o_expr[i]);
    }
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &dims);
    let args = super::arguments(
        cx,
        &k,
        &["__global const float* restrict x"],
        "__global float* restrict y",
    );
    // With count_include_pad the divisor counts padding, but not the part of a window past the
    // padding (ceil_mode): per dimension, the taps before the padded input's end.
    let (ov, iv, kv) = (["oz", "oy", "ox"], ["iz", "iy", "ix"], ["kz", "ky", "kx"]);
    let padded: Vec<String> = (0..3)
        .map(|i| {
            format!(
                "min((int){}, {} + {} - ({} * {} - {}))",
                kn[i],
                in_expr[i],
                pads[i + 3],
                ov[i],
                st[i],
                pads[i]
            )
        })
        .collect();
    let (init, fold, finish) = match kind {
        PoolKind::Max => ("-INFINITY", "r = fmax(r, xv);", "r".to_string()),
        PoolKind::Avg if *count_include_pad => (
            "0.0f",
            "r += xv;",
            format!("r / (float)({})", padded.join(" * ")),
        ),
        PoolKind::Avg => ("0.0f", "r += xv;", "r / (float)cnt".to_string()),
    };
    let mut loops = String::new();
    let mut close = String::new();
    for i in 0..3 {
        let pad = " ".repeat(8 + 4 * i);
        loops += &format!(
            "{pad}for (int {k} = 0; {k} < {}; {k}++) {{\n{pad}    const int {ii} = {o} * {} - {} + {k} * {};\n{pad}    if ({ii} < 0 || {ii} >= {}) continue;\n",
            kn[i],
            st[i],
            pads[i],
            dl[i],
            in_expr[i],
            k = kv[i],
            ii = iv[i],
            o = ov[i]
        );
        close.insert_str(0, &format!("{pad}}}\n"));
    }
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
        const int oz = (i / (KF_OW * KF_OH)) % KF_OD;
        const int nc = i / (KF_OW * KF_OH * KF_OD);
        const __global float* xc = x + nc * {plane};
        float r = {init};
        int cnt = 0;
{loops}                    const float xv = xc[(iz * {h} + iy) * {w} + ix];
                    {fold}
                    cnt++;
{close}        (void)cnt;
        const float v = {finish};
        y[i] = {call};
    }}
}}
"#,
        entry = k.entry,
        plane = product(&in_expr),
        h = in_expr[1],
        w = in_expr[2],
    );
    k.source = s;
    k
}
