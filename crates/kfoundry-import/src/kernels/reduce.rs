//! Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, ArgMax/ArgMin,
//! global pooling) over any axes, and Softmax/LogSoftmax over one: one row = one element of the
//! output, reducing the elements the reduced axes address.
//!
//!   WG     items per work-group                       pow2(32..=1024)  ref 64 (softmax 256)
//!   MODE   reductions only: 0 = a work-group per row  [0, 1]           ref 0
//!          (tree in local memory), 1 = an item per row
//!   UNROLL independent partial results per item       [1, 2, 4, 8]     ref 1
//!          (loads in flight; not for ArgMax/ArgMin, whose order decides ties)

use super::{
    chain_call, chain_function, fits_int, params, prelude, product, side_buffers, BufferArg, Cx,
    Dims, Kernel,
};
use super::{strided_fold, tree};
use crate::fuse::Anchor;
use crate::graph::ReduceKind;

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let (x, axes, softmax) = match &g.anchor {
        Anchor::Reduce { x, axes, .. } => (*x, axes.clone(), false),
        Anchor::Softmax { x, axis, .. } | Anchor::Scan { x, axis, .. } => (*x, vec![*axis], true),
        _ => unreachable!("reduce::generate on a reduction"),
    };
    let kind = match &g.anchor {
        Anchor::Reduce { kind, .. } => Some(*kind),
        _ => None,
    };
    let arg = matches!(
        kind,
        Some(ReduceKind::ArgMax { .. } | ReduceKind::ArgMin { .. })
    );
    let xs = cx.shape(x).to_vec();
    let mut k = cx.kernel();
    let input = Dims::named("d", &xs, &mut k.sizes, 16);
    let rank = xs.len();
    let kept: Vec<usize> = (0..rank).filter(|a| !axes.contains(a)).collect();
    let rows = product(
        &kept
            .iter()
            .map(|&a| input.exprs[a].clone())
            .collect::<Vec<_>>(),
    );
    let r = product(
        &axes
            .iter()
            .map(|&a| input.exprs[a].clone())
            .collect::<Vec<_>>(),
    );
    // Where row i starts and where its element j is, relative to that start. Reduced axes that
    // matter (size > 1) side by side make the input (outer, r, inner); otherwise each index is
    // taken apart into its coordinates.
    let real: Vec<usize> = axes.iter().copied().filter(|&a| xs[a] != 1).collect();
    let adjacent = match (real.first(), real.last()) {
        (Some(&f), Some(&l)) => (f..=l).all(|j| xs[j] == 1 || axes.contains(&j)),
        _ => true,
    };
    let (base, at) = if adjacent {
        let (first, last) = (
            real.first().copied().unwrap_or(axes[0]),
            real.last().copied().unwrap_or(axes[0]),
        );
        let inner = input.product(last + 1..rank);
        let span = input.product(first..last + 1);
        let base = if inner == "1" {
            format!("(i) * {span}")
        } else {
            format!("((i) / {inner}) * {span} * {inner} + (i) % {inner}")
        };
        let at = if inner == "1" {
            "(j)".to_string()
        } else {
            format!("(j) * {inner}")
        };
        (base, at)
    } else {
        let offset = |index: &str, dims: &[usize]| -> String {
            let terms: Vec<String> = dims
                .iter()
                .enumerate()
                .filter(|(_, &a)| xs[a] != 1)
                .map(|(m, &a)| {
                    let after = product(
                        &dims[m + 1..]
                            .iter()
                            .map(|&b| input.exprs[b].clone())
                            .collect::<Vec<_>>(),
                    );
                    let coord = if after == "1" {
                        format!("({index}) % {}", input.exprs[a])
                    } else {
                        format!("(({index}) / {after}) % {}", input.exprs[a])
                    };
                    let stride = input.product(a + 1..rank);
                    if stride == "1" {
                        format!("({coord})")
                    } else {
                        format!("({coord}) * {stride}")
                    }
                })
                .collect();
            if terms.is_empty() {
                "0".into()
            } else {
                terms.join(" + ")
            }
        };
        (offset("i", &kept), offset("j", &axes))
    };
    let dims = if softmax {
        input.clone()
    } else {
        let keep = g.shape.len() == xs.len();
        let exprs: Vec<String> = (0..xs.len())
            .filter_map(|j| {
                if axes.contains(&j) {
                    keep.then(|| "1".to_string())
                } else {
                    Some(input.exprs[j].clone())
                }
            })
            .collect();
        Dims {
            exprs,
            full: g.shape.clone(),
        }
    };
    let total = input.total();
    fits_int(&mut k, std::slice::from_ref(&total));
    let scan = matches!(g.anchor, Anchor::Scan { .. });
    if scan {
        // The reference sums each row in order, one item per row (as a CPU would).
        params(
            &mut k,
            &[("WG", "pow2(32..=1024)", 64), ("MODE", "[0, 1]", 1)],
        );
        k.global = vec![format!(
            "(1 - MODE) * WG * {rows} + MODE * round_up({rows}, WG)"
        )];
    } else if softmax {
        params(
            &mut k,
            &[
                ("WG", "pow2(32..=1024)", 256),
                ("UNROLL", "[1, 2, 4, 8]", 1),
            ],
        );
        k.global = vec![format!("WG * {rows}")];
    } else {
        if arg {
            params(
                &mut k,
                &[("WG", "pow2(32..=1024)", 64), ("MODE", "[0, 1]", 0)],
            );
        } else {
            params(
                &mut k,
                &[
                    ("WG", "pow2(32..=1024)", 64),
                    ("MODE", "[0, 1]", 0),
                    ("UNROLL", "[1, 2, 4, 8]", 1),
                ],
            );
        }
        k.global = vec![format!(
            "(1 - MODE) * WG * {rows} + MODE * round_up({rows}, WG)"
        )];
    }
    k.local = vec!["WG".into()];
    k.buffers.push(BufferArg {
        name: "x".into(),
        len: total.clone(),
        value: x,
        output: false,
        inputs: None,
    });
    side_buffers(cx, &mut k, &[(&g.chain, &dims)]);
    let y_len = if softmax { total.clone() } else { rows.clone() };
    k.buffers.push(BufferArg {
        name: "y".into(),
        len: y_len,
        value: g.output,
        output: true,
        inputs: None,
    });
    k.bytes = super::compulsory_bytes(&k);
    k.flops = format!("{} * {total}", if softmax { 4 } else { 1 });
    let rfull: usize = real.iter().map(|&a| xs[a]).product();
    k.atol = match kind {
        None if scan => (2.5e-7 * rfull as f64).max(1e-5),
        None => 1e-6,
        Some(ReduceKind::ArgMax { .. } | ReduceKind::ArgMin { .. }) => 0.0,
        _ => (2.5e-7 * rfull as f64).max(1e-5),
    };
    if arg {
        k.rtol = 0.0;
    }

    let (what, body) = match (kind, &g.anchor) {
        (
            None,
            Anchor::Scan {
                exclusive, reverse, ..
            },
        ) => ("running sum", scan_body(cx, &k, *exclusive, *reverse)),
        _ => match kind {
            None => (
                "softmax",
                softmax_body(
                    cx,
                    &k,
                    matches!(g.anchor, Anchor::Softmax { log: true, .. }),
                ),
            ),
            Some(ReduceKind::ArgMax { last }) => ("arg max", arg_body(cx, &k, true, last)),
            Some(ReduceKind::ArgMin { last }) => ("arg min", arg_body(cx, &k, false, last)),
            Some(ReduceKind::LogSumExp) => ("log-sum-exp", log_sum_exp_body(cx, &k)),
            Some(kind) => ("reduction", reduce_body(cx, &k, kind)),
        },
    };
    let mut s = prelude(&k, what);
    s += &format!("#define KF_ROWS {rows}\n#define KF_R {r}\n#define KF_BASE(i) ({base})\n#define KF_AT(j) ({at})\n");
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &dims);
    let args = super::arguments(
        cx,
        &k,
        &["__global const float* restrict x"],
        "__global float* restrict y",
    );
    s += &format!("\n__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\nvoid {}({args})\n{{\n{body}}}\n", k.entry);
    k.source = s;
    k
}

/// A fold of `map(x)` with `combine`, from `init`, then `finish(acc)`.
fn reduce_body(cx: &Cx, k: &Kernel, kind: ReduceKind) -> String {
    type Combine = fn(&str, &str) -> String;
    let (init, map, combine, finish): (&str, &str, Combine, &str) = match kind {
        ReduceKind::Sum => ("0.0f", "x[{e}]", add_fn, "acc"),
        ReduceKind::Mean => ("0.0f", "x[{e}]", add_fn, "acc / (float)(KF_R)"),
        ReduceKind::Max => (
            "-INFINITY",
            "x[{e}]",
            |a, b| format!("fmax({a}, {b})"),
            "acc",
        ),
        ReduceKind::Min => (
            "INFINITY",
            "x[{e}]",
            |a, b| format!("fmin({a}, {b})"),
            "acc",
        ),
        ReduceKind::Prod => ("1.0f", "x[{e}]", |a, b| format!("{a} * {b}"), "acc"),
        ReduceKind::L1 => ("0.0f", "fabs(x[{e}])", add_fn, "acc"),
        ReduceKind::L2 => ("0.0f", "(x[{e}] * x[{e}])", add_fn, "sqrt(acc)"),
        ReduceKind::SumSquare => ("0.0f", "(x[{e}] * x[{e}])", add_fn, "acc"),
        ReduceKind::LogSum => ("0.0f", "x[{e}]", add_fn, "log(acc)"),
        ReduceKind::LogSumExp | ReduceKind::ArgMax { .. } | ReduceKind::ArgMin { .. } => {
            unreachable!("bodies of their own")
        }
    };
    let load = map.replace("{e}", "base + KF_AT({j})");
    let fold_wg = strided_fold("acc", init, "lid", "WG", "KF_R", &load, combine);
    let fold_item = strided_fold("acc", init, "0", "1", "KF_R", &load, combine);
    let call = chain_call(cx, k, "kf_chain", "v", "i");
    let tree = tree(&combine("buf[lid]", "buf[lid + s]"));
    per_row(
        "",
        &format!("{fold_wg}    buf[lid] = acc;\n{tree}    if (lid == 0) {{\n        acc = buf[0];\n        const float v = {finish};\n        y[i] = {call};\n    }}\n"),
        &format!("{fold_item}    const float v = {finish};\n    y[i] = {call};\n"),
    )
}

/// A kernel body over rows: with MODE 0 a work-group per row (`buf` of WG floats in local
/// memory, and `locals`), with MODE 1 an item per row; `i` is the row, `base` its start.
fn per_row(locals: &str, group: &str, item: &str) -> String {
    format!(
        "#if MODE == 0\n    __local float buf[WG];\n{locals}    const int lid = get_local_id(0);\n    const int i = get_group_id(0);\n    const int base = KF_BASE(i);\n{group}#else\n    const int i = get_global_id(0);\n    if (i >= KF_ROWS) return;\n    const int base = KF_BASE(i);\n{item}#endif\n"
    )
}

fn add_fn(a: &str, b: &str) -> String {
    format!("{a} + {b}")
}

/// max + log(sum exp(x - max)): two passes over the row (a max that is infinite is the result).
fn log_sum_exp_body(cx: &Cx, k: &Kernel) -> String {
    let call = chain_call(cx, k, "kf_chain", "v", "i");
    let max = |start: &str, step: &str| {
        strided_fold(
            "m",
            "-INFINITY",
            start,
            step,
            "KF_R",
            "x[base + KF_AT({j})]",
            |a, b| format!("fmax({a}, {b})"),
        )
    };
    let sum = |start: &str, step: &str| {
        strided_fold(
            "sum",
            "0.0f",
            start,
            step,
            "KF_R",
            "exp(x[base + KF_AT({j})] - m)",
            add_fn,
        )
    };
    let finish = format!("const float v = isinf(m) ? m : m + log(sum);\n    y[i] = {call};\n");
    let group = format!(
        "{max_wg}    buf[lid] = m;\n{tree_max}    m = buf[0];\n{sum_wg}    barrier(CLK_LOCAL_MEM_FENCE);\n    buf[lid] = sum;\n{tree_sum}    if (lid == 0) {{\n        sum = buf[0];\n    {}    }}\n",
        finish.replace("\n    y", "\n        y"),
        max_wg = max("lid", "WG"),
        sum_wg = sum("lid", "WG"),
        tree_max = tree("fmax(buf[lid], buf[lid + s])"),
        tree_sum = tree("buf[lid] + buf[lid + s]"),
    );
    per_row(
        "",
        &group,
        &format!("{}{}    {finish}", max("0", "1"), sum("0", "1")),
    )
}

/// The index of the largest (`max`) or smallest element of the row, the first of equals (or
/// the last); NaN is never chosen. An item's candidate is (value, index), index -1 for none.
fn arg_body(cx: &Cx, k: &Kernel, max: bool, last: bool) -> String {
    let call = chain_call(cx, k, "kf_chain", "v", "i");
    let cmp = if max { ">" } else { "<" };
    let tie = if last { ">" } else { "<" };
    // Does (v, j) replace (bv, bj)?
    let better = |v: &str, j: &str, bv: &str, bj: &str| {
        format!("({j} >= 0 && !isnan({v}) && ({bj} < 0 || {v} {cmp} {bv} || ({v} == {bv} && {j} {tie} {bj})))")
    };
    let scan = |start: &str, step: &str| {
        format!(
            "    float bv = 0.0f;\n    int bj = -1;\n    for (int j = {start}; j < KF_R; j += {step}) {{\n        const float xv = x[base + KF_AT(j)];\n        if ({}) {{ bv = xv; bj = j; }}\n    }}\n",
            better("xv", "j", "bv", "bj")
        )
    };
    let group = format!(
        "{scan}    buf[lid] = bv;\n    ibuf[lid] = bj;\n    for (int s = WG / 2; s > 0; s >>= 1) {{\n        barrier(CLK_LOCAL_MEM_FENCE);\n        if (lid < s && {tree_better}) {{ buf[lid] = buf[lid + s]; ibuf[lid] = ibuf[lid + s]; }}\n    }}\n    barrier(CLK_LOCAL_MEM_FENCE);\n    if (lid == 0) {{\n        const float v = (float)max(ibuf[0], (int)0);\n        y[i] = {call};\n    }}\n",
        scan = scan("lid", "WG"),
        tree_better = better("buf[lid + s]", "ibuf[lid + s]", "buf[lid]", "ibuf[lid]"),
    );
    per_row(
        "    __local int ibuf[WG];\n",
        &group,
        &format!(
            "{}    const float v = (float)max(bj, (int)0);\n    y[i] = {call};\n",
            scan("0", "1")
        ),
    )
}

/// Running sums along the row. With MODE 0 each item of the row's work-group sums a
/// contiguous chunk, the chunks' sums are scanned in local memory, and each item writes its
/// chunk from its offset; with MODE 1 an item walks its row.
fn scan_body(cx: &Cx, k: &Kernel, exclusive: bool, reverse: bool) -> String {
    let call = chain_call(cx, k, "kf_chain", "v", "i");
    let at = if reverse {
        "KF_AT(KF_R - 1 - (j))"
    } else {
        "KF_AT(j)"
    };
    let step = if exclusive {
        "const float v = run;\n        run += xv;"
    } else {
        "run += xv;\n        const float v = run;"
    };
    let write = |lo: &str, hi: &str| {
        format!("    for (int j = {lo}; j < {hi}; j++) {{\n        const int i = base + {at};\n        const float xv = x[i];\n        {step}\n        y[i] = {call};\n    }}\n")
    };
    let group = format!(
        "    const int per = (KF_R + WG - 1) / WG;\n    const int lo = min(lid * per, (int)(KF_R)), hi = min(lo + per, (int)(KF_R));\n    float run = 0.0f;\n    for (int j = lo; j < hi; j++) run += x[base + {at}];\n    buf[lid] = run;\n    for (int s = 1; s < WG; s <<= 1) {{\n        barrier(CLK_LOCAL_MEM_FENCE);\n        const float t = lid >= s ? buf[lid - s] : 0.0f;\n        barrier(CLK_LOCAL_MEM_FENCE);\n        buf[lid] += t;\n    }}\n    barrier(CLK_LOCAL_MEM_FENCE);\n    run = lid > 0 ? buf[lid - 1] : 0.0f;\n{}",
        write("lo", "hi")
    );
    per_row(
        "",
        &group,
        &format!("    float run = 0.0f;\n{}", write("0", "KF_R")),
    )
}

fn softmax_body(cx: &Cx, k: &Kernel, log: bool) -> String {
    let call = chain_call(cx, k, "kf_chain", "v", "i");
    let value = if log {
        "xv - m - log(sum)"
    } else {
        "exp(xv - m) / sum"
    };
    format!(
        r#"    __local float buf[WG];
    const int lid = get_local_id(0);
    const int row = get_group_id(0);
    const int base = KF_BASE(row);
{max_fold}    buf[lid] = m;
{tree_max}    m = buf[0];
{sum_fold}    barrier(CLK_LOCAL_MEM_FENCE);
    buf[lid] = sum;
{tree_sum}    sum = buf[0];
    for (int j = lid; j < KF_R; j += WG) {{
        const int i = base + KF_AT(j);
        const float xv = x[i];
        const float v = {value};
        y[i] = {call};
    }}
"#,
        tree_max = tree("fmax(buf[lid], buf[lid + s])"),
        tree_sum = tree("buf[lid] + buf[lid + s]"),
        max_fold = strided_fold(
            "m",
            "-INFINITY",
            "lid",
            "WG",
            "KF_R",
            "x[base + KF_AT({j})]",
            |a, b| format!("fmax({a}, {b})")
        ),
        sum_fold = strided_fold(
            "sum",
            "0.0f",
            "lid",
            "WG",
            "KF_R",
            "exp(x[base + KF_AT({j})] - m)",
            add_fn
        ),
    )
}
