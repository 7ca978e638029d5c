//! LayerNormalization (rows = the dimensions before `axis`) and GroupNormalization /
//! InstanceNormalization (rows = (sample, group)): one work-group per row computes the mean,
//! then the variance around it (a second read, for accuracy), then writes
//! `(x - mean) / sqrt(var + eps) * scale + bias` through the chain.
//!
//!   WG      items per work-group                         pow2(32..=1024)  ref 256
//!   UNROLL  independent partial sums per item (loads in flight)  [1, 2, 4, 8]  ref 1

use super::{
    chain_call, chain_function, fits_int, lit, params, prelude, side_buffers, BufferArg, Cx, Dims,
    Kernel,
};
use super::{strided_fold, tree};
use crate::fuse::Anchor;

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let (x, scale, bias, eps) = match &g.anchor {
        Anchor::LayerNorm {
            x,
            scale,
            bias,
            eps,
            ..
        }
        | Anchor::GroupNorm {
            x,
            scale,
            bias,
            eps,
            ..
        } => (*x, *scale, *bias, *eps),
        _ => unreachable!("norm::generate on a normalisation"),
    };
    let xs = cx.shape(x).to_vec();
    let mut k = cx.kernel();
    let dims = Dims::named("d", &xs, &mut k.sizes, 16);
    if matches!(g.anchor, Anchor::GroupNorm { .. }) {
        // The channels keep their count in the small workload: the groups must divide them.
        if let Some(c) = k.sizes.iter_mut().find(|s| s.name == "d1") {
            c.small = c.full;
        }
    }
    let total = dims.total();
    // Row length, parameter index of element j of a row, and the row count.
    let (cols, param_index, param_len, rows, what) = match &g.anchor {
        Anchor::LayerNorm { axis, .. } => {
            let cols = dims.product(*axis..xs.len());
            (
                cols.clone(),
                "j".to_string(),
                cols,
                dims.product(0..*axis),
                "layer normalisation",
            )
        }
        Anchor::GroupNorm { groups, .. } => {
            let spatial = dims.product(2..xs.len());
            let c = dims.exprs[1].clone();
            if c != "1" {
                k.require.push(format!("{c} % {groups} == 0"));
            }
            let cols = super::product(&[format!("({c} / {groups})"), spatial.clone()]);
            // Channel of element j of row (sample, group).
            let index = format!("(row % {groups}) * ({c} / {groups}) + j / {spatial}");
            (
                cols,
                index,
                c.clone(),
                super::product(&[dims.exprs[0].clone(), groups.to_string()]),
                "group normalisation",
            )
        }
        _ => unreachable!(),
    };
    fits_int(&mut k, std::slice::from_ref(&total));
    params(
        &mut k,
        &[
            ("WG", "pow2(32..=1024)", 256),
            ("UNROLL", "[1, 2, 4, 8]", 1),
        ],
    );
    k.global = vec![format!("WG * {rows}")];
    k.local = vec!["WG".into()];
    k.buffers.push(BufferArg {
        name: "x".into(),
        len: total.clone(),
        value: x,
        output: false,
        inputs: None,
    });
    k.buffers.push(BufferArg {
        name: "scale".into(),
        len: param_len.clone(),
        value: scale,
        output: false,
        inputs: None,
    });
    k.buffers.push(BufferArg {
        name: "bias".into(),
        len: param_len,
        value: bias,
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
    k.bytes = super::compulsory_bytes(&k);
    k.flops = format!("8 * {total}");

    let mut s = prelude(&k, what);
    s += &format!("#define KF_COLS {cols}\n");
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &dims);
    let args = super::arguments(
        cx,
        &k,
        &["__global const float* restrict x, __global const float* restrict scale, __global const float* restrict bias"],
        "__global float* restrict y",
    );
    let call = chain_call(cx, &k, "kf_chain", "v", "i");
    s += &format!(
        r#"
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void {entry}({args})
{{
    __local float buf[WG];
    const int lid = get_local_id(0);
    const int row = get_group_id(0);
    const int base = row * KF_COLS;
{sum}    buf[lid] = sum;
{tree}    const float mean = buf[0] / (float)(KF_COLS);
{sq}    barrier(CLK_LOCAL_MEM_FENCE);
    buf[lid] = sq;
{tree}    const float rstd = 1.0f / sqrt(buf[0] / (float)(KF_COLS) + {eps});
    for (int j = lid; j < KF_COLS; j += WG) {{
        const int i = base + j;
        const int p = {param_index};
        const float v = (x[i] - mean) * rstd * scale[p] + bias[p];
        y[i] = {call};
    }}
}}
"#,
        entry = k.entry,
        tree = tree("buf[lid] + buf[lid + s]"),
        eps = lit(eps),
        sum = strided_fold(
            "sum",
            "0.0f",
            "lid",
            "WG",
            "KF_COLS",
            "x[base + {j}]",
            |a, b| format!("{a} + {b}")
        ),
        sq = strided_fold(
            "sq",
            "0.0f",
            "lid",
            "WG",
            "KF_COLS",
            "(x[base + {j}] - mean)",
            |a, b| if b.starts_with("(x") {
                format!("fma({b}, {b}, {a})")
            } else {
                format!("{a} + {b}")
            }
        )
    );
    k.source = s;
    k
}
