//! Element-wise groups without an anchor, and transposes: one output element per item step.
//!
//!   WG     items per work-group     pow2(32..=512)   ref 64
//!   ITEMS  elements per item        [1, 2, 4, 8]     ref 1
//!
//! An item's elements are WG apart, so a work-group's accesses stay contiguous.

use super::{chain_call, chain_function, fits_int, params, prelude, side_buffers, BufferArg, Cx, Dims, Kernel};
use crate::fuse::Anchor;

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let mut k = cx.kernel();
    let dims = Dims::named("d", &g.shape, &mut k.sizes, 16);
    let total = dims.total();
    params(&mut k, &[("WG", "pow2(32..=512)", 64), ("ITEMS", "[1, 2, 4, 8]", 1)]);
    fits_int(&mut k, std::slice::from_ref(&total));
    let mut main = String::from("0.0f");
    let mut main_setup = String::new();
    if let Anchor::Transpose { x, perm } = &g.anchor {
        // Input dimension perm[j] is output dimension j: the input's strides, permuted.
        let r = perm.len();
        let mut inv = vec![0; r];
        for (j, &p) in perm.iter().enumerate() {
            inv[p] = j;
        }
        let in_exprs: Vec<String> = (0..r).map(|l| dims.exprs[inv[l]].clone()).collect();
        let mut terms = Vec::new();
        for (j, &p) in perm.iter().enumerate() {
            if dims.full[j] == 1 {
                continue;
            }
            let stride = super::product(&in_exprs[p + 1..]);
            terms.push(if stride == "1" { format!("q{j}") } else { format!("q{j} * {stride}") });
        }
        let needs: Vec<usize> = (0..r).filter(|&j| dims.full[j] != 1).collect();
        main_setup = super::coordinates(&dims, &needs).replace("    ", "            ");
        main = format!("x[{}]", if terms.is_empty() { "0".into() } else { terms.join(" + ") });
        k.buffers.push(BufferArg { name: "x".into(), len: total.clone(), value: *x, output: false, inputs: None });
    }
    side_buffers(cx, &mut k, &[(&g.chain, &dims)]);
    k.buffers.push(BufferArg { name: "y".into(), len: total.clone(), value: g.output, output: true, inputs: None });
    k.global = vec![format!("ceil_div({total}, WG * ITEMS) * WG")];
    k.local = vec!["WG".into()];
    k.bytes = super::compulsory_bytes(&k);
    k.flops = format!("{} * {total}", g.chain.steps.len().max(1));

    let what = if main_setup.is_empty() { "element-wise map" } else { "transpose" };
    let mut s = prelude(&k, what);
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &dims);
    let x = if main_setup.is_empty() { String::new() } else { "__global const float* restrict x".into() };
    let args = super::arguments(cx, &k, &[&x], "__global float* restrict y");
    let call = chain_call(cx, &k, "kf_chain", "v", "i");
    s += &format!(
        r#"
__kernel void {entry}({args})
{{
    const int total = {total};
    const int base = get_group_id(0) * (WG * ITEMS) + get_local_id(0);
    for (int e = 0; e < ITEMS; e++) {{
        const int i = base + e * WG;
        if (i < total) {{
{main_setup}            const float v = {main};
            y[i] = {call};
        }}
    }}
}}
"#,
        entry = k.entry
    );
    k.source = s;
    k
}
