//! Reductions (ReduceSum/Mean/Max/Min, global pooling) and Softmax/LogSoftmax over adjacent
//! axes: the input read as (outer, r, inner), one row = one (outer, inner) pair.
//!
//!   WG     items per work-group                       pow2(32..=1024)  ref 64 (softmax 256)
//!   MODE   reductions only: 0 = a work-group per row  [0, 1]           ref 0
//!          (tree in local memory), 1 = an item per row
//!   UNROLL independent partial results per item       [1, 2, 4, 8]     ref 1
//!          (loads in flight)

use super::{chain_call, chain_function, fits_int, params, prelude, product, side_buffers, BufferArg, Cx, Dims, Kernel};
use super::{strided_fold, tree};
use crate::fuse::Anchor;
use crate::graph::ReduceKind;

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let (x, axes, softmax) = match &g.anchor {
        Anchor::Reduce { x, axes, .. } => (*x, axes.clone(), false),
        Anchor::Softmax { x, axis, .. } => (*x, vec![*axis], true),
        _ => unreachable!("reduce::generate on a reduction"),
    };
    let xs = cx.shape(x).to_vec();
    let mut k = cx.kernel();
    let input = Dims::named("d", &xs, &mut k.sizes, 16);
    // Reduced axes that matter (size > 1) are adjacent (the graph reader checks).
    let real: Vec<usize> = axes.iter().copied().filter(|&a| xs[a] != 1).collect();
    let (first, last) = match (real.first(), real.last()) {
        (Some(&f), Some(&l)) => (f, l),
        _ => (axes[0], axes[0]),
    };
    let outer = input.product(0..first);
    let r = input.product(first..last + 1);
    let inner = input.product(last + 1..xs.len());
    let rows = product(&[outer.clone(), inner.clone()]);
    let dims = if softmax {
        input.clone()
    } else {
        let keep = g.shape.len() == xs.len();
        let exprs: Vec<String> =
            (0..xs.len()).filter_map(|j| if axes.contains(&j) { keep.then(|| "1".to_string()) } else { Some(input.exprs[j].clone()) }).collect();
        Dims { exprs, full: g.shape.clone() }
    };
    let total = input.total();
    fits_int(&mut k, std::slice::from_ref(&total));
    if softmax {
        params(&mut k, &[("WG", "pow2(32..=1024)", 256), ("UNROLL", "[1, 2, 4, 8]", 1)]);
        k.global = vec![format!("WG * {rows}")];
    } else {
        params(&mut k, &[("WG", "pow2(32..=1024)", 64), ("MODE", "[0, 1]", 0), ("UNROLL", "[1, 2, 4, 8]", 1)]);
        k.global = vec![format!("(1 - MODE) * WG * {rows} + MODE * round_up({rows}, WG)")];
    }
    k.local = vec!["WG".into()];
    k.buffers.push(BufferArg { name: "x".into(), len: total.clone(), value: x, output: false, inputs: None });
    side_buffers(cx, &mut k, &[(&g.chain, &dims)]);
    let y_len = if softmax { total.clone() } else { rows.clone() };
    k.buffers.push(BufferArg { name: "y".into(), len: y_len, value: g.output, output: true, inputs: None });
    k.bytes = super::compulsory_bytes(&k);
    k.flops = format!("{} * {total}", if softmax { 4 } else { 1 });
    let rfull: usize = real.iter().map(|&a| xs[a]).product();
    k.atol = if softmax { 1e-6 } else { (2.5e-7 * rfull as f64).max(1e-5) };

    let (what, body) = if softmax {
        let log = matches!(g.anchor, Anchor::Softmax { log: true, .. });
        ("softmax", softmax_body(cx, &k, &dims, log))
    } else {
        let Anchor::Reduce { kind, .. } = g.anchor else { unreachable!() };
        ("reduction", reduce_body(cx, &k, &dims, kind))
    };
    let mut s = prelude(&k, what);
    s += &format!("#define KF_OUTER {outer}\n#define KF_R {r}\n#define KF_INNER {inner}\n");
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &dims);
    let args = super::arguments(cx, &k, &["__global const float* restrict x"], "__global float* restrict y");
    s += &format!("\n__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\nvoid {}({args})\n{{\n{body}}}\n", k.entry);
    k.source = s;
    k
}

fn reduce_body(cx: &Cx, k: &Kernel, _dims: &Dims, kind: ReduceKind) -> String {
    let (init, op, combine, finish) = match kind {
        ReduceKind::Sum => ("0.0f", "+", "buf[lid] + buf[lid + s]", "acc"),
        ReduceKind::Mean => ("0.0f", "+", "buf[lid] + buf[lid + s]", "acc / (float)(KF_R)"),
        ReduceKind::Max => ("-INFINITY", "fmax", "fmax(buf[lid], buf[lid + s])", "acc"),
        ReduceKind::Min => ("INFINITY", "fmin", "fmin(buf[lid], buf[lid + s])", "acc"),
    };
    let f = |a: &str, b: &str| if op == "+" { format!("{a} + {b}") } else { format!("{op}({a}, {b})") };
    let fold_wg = strided_fold("acc", init, "lid", "WG", "KF_R", "x[base + ({j}) * KF_INNER]", f);
    let fold_item = strided_fold("acc", init, "0", "1", "KF_R", "x[base + ({j}) * KF_INNER]", f);
    let call = chain_call(cx, k, "kf_chain", "v", "i");
    format!(
        r#"    const int rows = KF_OUTER * KF_INNER;
#if MODE == 0
    __local float buf[WG];
    const int lid = get_local_id(0);
    const int i = get_group_id(0);
    const int base = (i / KF_INNER) * KF_R * KF_INNER + i % KF_INNER;
{fold_wg}    buf[lid] = acc;
{tree}    if (lid == 0) {{
        acc = buf[0];
        const float v = {finish};
        y[i] = {call};
    }}
#else
    const int i = get_global_id(0);
    if (i >= rows) return;
    const int base = (i / KF_INNER) * KF_R * KF_INNER + i % KF_INNER;
{fold_item}    const float v = {finish};
    y[i] = {call};
#endif
"#,
        tree = tree(combine),
    )
}

fn softmax_body(cx: &Cx, k: &Kernel, _dims: &Dims, log: bool) -> String {
    let call = chain_call(cx, k, "kf_chain", "v", "i");
    let value = if log { "xv - m - log(sum)" } else { "exp(xv - m) / sum" };
    format!(
        r#"    __local float buf[WG];
    const int lid = get_local_id(0);
    const int row = get_group_id(0);
    const int base = (row / KF_INNER) * KF_R * KF_INNER + row % KF_INNER;
{max_fold}    buf[lid] = m;
{tree_max}    m = buf[0];
{sum_fold}    barrier(CLK_LOCAL_MEM_FENCE);
    buf[lid] = sum;
{tree_sum}    sum = buf[0];
    for (int j = lid; j < KF_R; j += WG) {{
        const int i = base + j * KF_INNER;
        const float xv = x[i];
        const float v = {value};
        y[i] = {call};
    }}
"#,
        tree_max = tree("fmax(buf[lid], buf[lid + s])"),
        tree_sum = tree("buf[lid] + buf[lid + s]"),
        max_fold = strided_fold("m", "-INFINITY", "lid", "WG", "KF_R", "x[base + ({j}) * KF_INNER]", |a, b| format!("fmax({a}, {b})")),
        sum_fold = strided_fold("sum", "0.0f", "lid", "WG", "KF_R", "exp(x[base + ({j}) * KF_INNER] - m)", |a, b| format!("{a} + {b}")),
    )
}
