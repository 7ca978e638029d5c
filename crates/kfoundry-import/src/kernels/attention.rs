//! Attention: `y = chain(softmax(scores(q k)) v)`, the softmax along the keys, in one pass over
//! the keys (the online softmax of Milakov and Gimelshein, 2018, as FlashAttention uses it):
//! the scores and probabilities never reach memory.
//!
//!   WG      items per work-group                              pow2(32..=256)  ref 64
//!   KSPLIT  items per query row, each taking every KSPLIT-th  [1, 2, 4, 8]    ref 1
//!           key of a tile; their partial results (maximum,
//!           sum, weighted values) merged at the end
//!   BK      keys per tile staged in local memory (k and v)   [8, 16, 32, 64] ref 16
//!
//! An item keeps its query row (d floats) and its output row (dv floats) in registers: the
//! head dimensions are fixed by the graph and written into the source. Launch:
//! (ceil_div(lq, WG / KSPLIT) * WG, batch), local (WG, 1).
//!
//! A row whose scores are all -inf (masked out) gives NaN, as Softmax does; a score of -inf
//! weighs nothing, including in a tile before the row's first finite one.

use super::{
    chain_call, chain_function, fits_int, params, prelude, product, side_buffers, BufferArg, Cx,
    Dims, Kernel, Size,
};
use crate::fuse::Anchor;

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let Anchor::Attention {
        q,
        k: kv,
        v,
        trans_k,
        trans_v,
        scores,
        score_shape,
    } = &g.anchor
    else {
        unreachable!("attention::generate on attention")
    };
    let r = score_shape.len();
    let (sq, sk, sv) = (
        cx.shape(*q).to_vec(),
        cx.shape(*kv).to_vec(),
        cx.shape(*v).to_vec(),
    );
    let (lq, lk, d) = (score_shape[r - 2], score_shape[r - 1], sq[r - 1]);
    let dv = g.shape[r - 1];
    let mut k = cx.kernel();
    let batch = Dims::named("b", &score_shape[..r - 2], &mut k.sizes, 2);
    k.sizes.push(Size {
        name: "lq".into(),
        full: lq,
        small: lq.min(40),
    });
    k.sizes.push(Size {
        name: "lk".into(),
        full: lk,
        small: lk.min(40),
    });
    let bt = batch.total();
    let score_dims = Dims {
        exprs: [batch.exprs.clone(), vec!["lq".into(), "lk".into()]].concat(),
        full: score_shape.clone(),
    };
    let out_dims = Dims {
        exprs: [batch.exprs.clone(), vec!["lq".into(), dv.to_string()]].concat(),
        full: g.shape.clone(),
    };
    params(
        &mut k,
        &[
            ("WG", "pow2(32..=256)", 64),
            ("KSPLIT", "[1, 2, 4, 8]", 1),
            ("BK", "[8, 16, 32, 64]", 16),
        ],
    );
    k.require.extend([
        "BK % KSPLIT == 0".to_string(),
        format!(
            "4 * (BK * {} + (KSPLIT > 1) * WG * {}) <= min(device_local_mem, 49152)",
            d + dv,
            dv + 2
        ),
    ]);
    let batched = |s: &[usize]| s[..r - 2].iter().any(|&x| x != 1);
    let operand = |s: &[usize], rows: &str, cols: String| {
        product(&[
            if batched(s) { bt.clone() } else { "1".into() },
            rows.into(),
            cols,
        ])
    };
    let q_len = operand(&sq, "lq", d.to_string());
    let k_len = operand(&sk, "lk", d.to_string());
    let v_len = operand(&sv, "lk", dv.to_string());
    let y_len = product(&[bt.clone(), "lq".into(), dv.to_string()]);
    let s_len = product(&[bt.clone(), "lq".into(), "lk".into()]);
    fits_int(
        &mut k,
        &[
            q_len.clone(),
            k_len.clone(),
            v_len.clone(),
            y_len.clone(),
            s_len,
        ],
    );
    k.buffers.push(BufferArg {
        name: "q".into(),
        len: q_len,
        value: *q,
        output: false,
        inputs: None,
    });
    k.buffers.push(BufferArg {
        name: "k".into(),
        len: k_len,
        value: *kv,
        output: false,
        inputs: None,
    });
    k.buffers.push(BufferArg {
        name: "v".into(),
        len: v_len,
        value: *v,
        output: false,
        inputs: None,
    });
    side_buffers(cx, &mut k, &[(scores, &score_dims), (&g.chain, &out_dims)]);
    k.buffers.push(BufferArg {
        name: "y".into(),
        len: y_len.clone(),
        value: g.output,
        output: true,
        inputs: None,
    });
    k.global = vec!["ceil_div(lq, WG / KSPLIT) * WG".into(), bt.clone()];
    k.local = vec!["WG".into(), "1".into()];
    // The scores sum d products; the output sums lk weighted values, in another order in
    // each configuration (the tiles and the split set where the maximum is rescaled).
    k.atol = (2.5e-7 * (d + lk) as f64).max(1e-5);
    k.bytes = super::compulsory_bytes(&k);
    k.flops = format!("2 * {bt} * lq * lk * {}", d + dv);

    let mut s = prelude(
        &k,
        "attention (softmax of the scores along the keys, times v)",
    );
    s += &chain_function(cx, &k, "kf_scores", scores, &score_dims);
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &out_dims);
    let offset = |sh: &[usize], per: String| {
        if batched(sh) {
            format!("bb * {per}")
        } else {
            "0".into()
        }
    };
    let (q_off, k_off, v_off) = (
        offset(&sq, format!("lq * {d}")),
        offset(&sk, format!("lk * {d}")),
        offset(&sv, format!("lk * {dv}")),
    );
    // Element (key j, column c) of k and v.
    let k_at = if *trans_k {
        format!("k[koff + (j) * {d} + (c)]")
    } else {
        "k[koff + (c) * lk + (j)]".to_string()
    };
    let v_at = if *trans_v {
        "v[voff + (c) * lk + (j)]".to_string()
    } else {
        format!("v[voff + (j) * {dv} + (c)]")
    };
    let args = super::arguments(
        cx,
        &k,
        &["__global const float* restrict q, __global const float* restrict k, __global const float* restrict v"],
        "__global float* restrict y",
    );
    let score_call = chain_call(cx, &k, "kf_scores", "dot", "(bb * lq + rr) * lk + k0 + j");
    let out_call = chain_call(cx, &k, "kf_chain", "o", "(bb * lq + row) * KF_DV + c");
    s += &format!(
        r#"
#define KF_D {d}
#define KF_DV {dv}
#define KF_K(j, c) {k_at}
#define KF_V(j, c) {v_at}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void {entry}({args})
{{
    __local float ks[BK * KF_D];
    __local float vs[BK * KF_DV];
    /* The partial results of a row's KSPLIT items, to merge (none with KSPLIT = 1). */
    __local float part[KSPLIT > 1 ? WG * (KF_DV + 2) : 1];
    const int bb = get_global_id(1);
    const int lid = get_local_id(0);
    const int split = lid % KSPLIT;
    const int row = get_group_id(0) * (WG / KSPLIT) + lid / KSPLIT;
    const int rr = min(row, lq - 1);
    const int qoff = {q_off}, koff = {k_off}, voff = {v_off};
    float qr[KF_D], acc[KF_DV];
    for (int c = 0; c < KF_D; c++) qr[c] = q[qoff + rr * KF_D + c];
    for (int c = 0; c < KF_DV; c++) acc[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int k0 = 0; k0 < lk; k0 += BK) {{
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int e = lid; e < BK * KF_D; e += WG) {{
            const int j = k0 + e / KF_D, c = e % KF_D;
            ks[e] = j < lk ? KF_K(j, c) : 0.0f;
        }}
        for (int e = lid; e < BK * KF_DV; e += WG) {{
            const int j = k0 + e / KF_DV, c = e % KF_DV;
            vs[e] = j < lk ? KF_V(j, c) : 0.0f;
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
        /* This item's keys of the tile: split, split + KSPLIT, ... */
        float sc[BK / KSPLIT];
        float mt = m;
        for (int t = 0; t < BK / KSPLIT; t++) {{
            const int j = split + t * KSPLIT;
            float x = -INFINITY;
            if (k0 + j < lk) {{
                float dot = 0.0f;
                for (int c = 0; c < KF_D; c++) dot = fma(qr[c], ks[j * KF_D + c], dot);
                x = {score_call};
            }}
            sc[t] = x;
            mt = fmax(mt, x);
        }}
        /* Rescaled to the new maximum (by 1 where it stays, -inf included). */
        const float corr = mt == m ? 1.0f : exp(m - mt);
        l *= corr;
        for (int c = 0; c < KF_DV; c++) acc[c] *= corr;
        for (int t = 0; t < BK / KSPLIT; t++) {{
            const int j = split + t * KSPLIT;
            if (k0 + j < lk) {{
                const float p = sc[t] == -INFINITY ? 0.0f : exp(sc[t] - mt);
                l += p;
                for (int c = 0; c < KF_DV; c++) acc[c] = fma(p, vs[j * KF_DV + c], acc[c]);
            }}
        }}
        m = mt;
    }}
#if KSPLIT == 1
    if (row < lq) {{
        for (int c = 0; c < KF_DV; c++) {{
            const float o = acc[c] / l;
            y[(bb * lq + row) * KF_DV + c] = {out_call};
        }}
    }}
#else
    /* The row's KSPLIT partial results merged; each of its items writes every KSPLIT-th output. */
    __local float* mine = part + lid * (KF_DV + 2);
    mine[0] = m;
    mine[1] = l;
    for (int c = 0; c < KF_DV; c++) mine[2 + c] = acc[c];
    barrier(CLK_LOCAL_MEM_FENCE);
    const __local float* first = part + (lid - split) * (KF_DV + 2);
    float mx = -INFINITY;
    for (int u = 0; u < KSPLIT; u++) mx = fmax(mx, first[u * (KF_DV + 2)]);
    float w[KSPLIT];
    float sum = 0.0f;
    for (int u = 0; u < KSPLIT; u++) {{
        const float mu = first[u * (KF_DV + 2)];
        w[u] = mu == mx ? 1.0f : exp(mu - mx);
        sum = fma(first[u * (KF_DV + 2) + 1], w[u], sum);
    }}
    if (row < lq) {{
        for (int c = split; c < KF_DV; c += KSPLIT) {{
            float a = 0.0f;
            for (int u = 0; u < KSPLIT; u++) a = fma(first[u * (KF_DV + 2) + 2 + c], w[u], a);
            const float o = a / sum;
            y[(bb * lq + row) * KF_DV + c] = {out_call};
        }}
    }}
#endif
}}
"#,
        entry = k.entry
    );
    k.source = s;
    k
}
