//! Element-wise groups without an anchor, and data movement (transposes, slices, pads,
//! concatenations, broadcasts, tiles, gathers with constant indices): one output element per
//! item step, its input element found by index arithmetic.
//!
//!   WG     items per work-group     pow2(32..=512)   ref 64
//!   ITEMS  elements per item        [1, 2, 4, 8]     ref 1
//!
//! An item's elements are WG apart, so a work-group's accesses stay contiguous.
//!
//! Sizes: an output dimension that is an input dimension unchanged is a size (`d{j}`); one the
//! operator changes (a sliced, padded or concatenated axis) is written as its number, as are
//! the input's extents there.

use super::{
    chain_call, chain_function, fits_int, params, prelude, product, side_buffers, BufferArg, Cx,
    Dims, Kernel, Size,
};
use crate::fuse::Anchor;
use crate::graph::{CoordinateTransform, Move, NearestMode, PadMode, ResizeAxis};

/// The index arithmetic of one movement: the output's dimensions, each input's, and the C
/// expression of the value at output coordinates `q0, q1, ...`.
struct Plan {
    out: Vec<String>,
    /// Per input: its dimensions as expressions.
    ins: Vec<Vec<String>>,
    value: String,
    /// C declarations at program scope (a gather's index table).
    globals: String,
}

/// `Σ coords[j] * stride(j)` over dimensions not of extent "1", for a tensor of dimensions
/// `dims`.
fn offset(dims: &[String], coords: &[String]) -> String {
    let terms: Vec<String> = (0..dims.len())
        .filter(|&j| dims[j] != "1")
        .map(|j| {
            let stride = product(&dims[j + 1..]);
            if stride == "1" {
                coords[j].clone()
            } else {
                format!("({}) * {stride}", coords[j])
            }
        })
        .collect();
    if terms.is_empty() {
        "0".into()
    } else {
        terms.join(" + ")
    }
}

fn plan(cx: &Cx, k: &mut Kernel, inputs: &[usize], kind: &Move) -> Plan {
    let out_shape = cx.group.shape.clone();
    let xs = cx.shape(inputs[0]).to_vec();
    let r = out_shape.len();
    let q: Vec<String> = (0..r).map(|j| format!("q{j}")).collect();
    // Output dimension j as a size of the kernel (an input dimension that passes through).
    let mut name = |j: usize, full: usize| -> String {
        if full == 1 {
            "1".into()
        } else {
            let n = format!("d{j}");
            k.sizes.push(Size {
                name: n.clone(),
                full,
                small: full.min(16),
            });
            n
        }
    };
    let mut globals = String::new();
    let (out, ins, value) = match kind {
        Move::Transpose(perm) => {
            let out: Vec<String> = (0..r).map(|j| name(j, out_shape[j])).collect();
            let mut input = vec![String::new(); r];
            let mut coords = vec![String::new(); r];
            for (j, &p) in perm.iter().enumerate() {
                input[p] = out[j].clone();
                coords[p] = q[j].clone();
            }
            let value = format!("x0[{}]", offset(&input, &coords));
            (out, vec![input], value)
        }
        Move::Slice(axes) => {
            let mut out = Vec::new();
            let mut input = Vec::new();
            let mut coords = Vec::new();
            for (j, a) in axes.iter().enumerate() {
                if a.start == 0 && a.step == 1 && a.count == xs[j] {
                    let n = name(j, xs[j]);
                    out.push(n.clone());
                    input.push(n);
                    coords.push(q[j].clone());
                } else {
                    out.push(a.count.to_string());
                    input.push(xs[j].to_string());
                    coords.push(format!("{} + q{j} * {}", a.start, a.step));
                }
            }
            let value = format!("x0[{}]", offset(&input, &coords));
            (out, vec![input], value)
        }
        Move::Pad { begins, ends, mode } => {
            let mut out = Vec::new();
            let mut input = Vec::new();
            let mut coords = Vec::new();
            let mut inside = Vec::new();
            for j in 0..r {
                if begins[j] == 0 && ends[j] == 0 {
                    let n = name(j, xs[j]);
                    out.push(n.clone());
                    input.push(n);
                    coords.push(q[j].clone());
                    continue;
                }
                out.push(out_shape[j].to_string());
                input.push(xs[j].to_string());
                let (b, d) = (begins[j], xs[j]);
                let c = format!("(q{j} - {b})");
                match mode {
                    PadMode::Constant(_) => {
                        inside.push(format!("{c} >= 0 && {c} < {d}"));
                        coords.push(c);
                    }
                    PadMode::Edge => coords.push(format!("clamp({c}, (int)0, (int){})", d - 1)),
                    PadMode::Reflect => coords.push(format!("kf_reflect({c}, {d})")),
                }
            }
            if *mode == PadMode::Reflect {
                // -c before the start, 2 (d - 1) - c past the end (pads are smaller than d)
                globals = "static inline int kf_reflect(int c, const int d) { c = c < 0 ? -c : c; return c >= d ? 2 * (d - 1) - c : c; }\n".into();
            }
            let read = format!("x0[{}]", offset(&input, &coords));
            let value = match mode {
                PadMode::Constant(v) if !inside.is_empty() => {
                    format!("(({}) ? {read} : {})", inside.join(" && "), super::lit(*v))
                }
                _ => read,
            };
            (out, vec![input], value)
        }
        Move::Concat { axis } => {
            let a = *axis;
            let shared: Vec<String> = (0..r)
                .map(|j| {
                    if j == a {
                        out_shape[j].to_string()
                    } else {
                        name(j, out_shape[j])
                    }
                })
                .collect();
            let mut ins = Vec::new();
            let mut reads = Vec::new();
            let mut starts = Vec::new();
            let mut start = 0;
            for (i, &v) in inputs.iter().enumerate() {
                let mut dims = shared.clone();
                dims[a] = cx.shape(v)[a].to_string();
                let mut coords = q.clone();
                coords[a] = if start == 0 {
                    q[a].clone()
                } else {
                    format!("q{a} - {start}")
                };
                reads.push(format!("x{i}[{}]", offset(&dims, &coords)));
                ins.push(dims);
                starts.push(start);
                start += cx.shape(v)[a];
            }
            // The last input's read, preceded by a select for each earlier one.
            let mut value = reads.pop().unwrap_or_default();
            for i in (0..reads.len()).rev() {
                value = format!("(q{a} < {} ? {} : {value})", starts[i + 1], reads[i]);
            }
            (shared, ins, value)
        }
        Move::Expand => {
            let off = r - xs.len();
            let out: Vec<String> = (0..r).map(|j| name(j, out_shape[j])).collect();
            let input: Vec<String> = (0..xs.len())
                .map(|i| {
                    if xs[i] == 1 {
                        "1".into()
                    } else {
                        out[i + off].clone()
                    }
                })
                .collect();
            let coords: Vec<String> = (0..xs.len()).map(|i| q[i + off].clone()).collect();
            let value = format!("x0[{}]", offset(&input, &coords));
            (out, vec![input], value)
        }
        Move::Tile => {
            let mut out = Vec::new();
            let mut input = Vec::new();
            let mut coords = Vec::new();
            for j in 0..r {
                if out_shape[j] == xs[j] {
                    let n = name(j, xs[j]);
                    out.push(n.clone());
                    input.push(n);
                    coords.push(q[j].clone());
                } else {
                    out.push(out_shape[j].to_string());
                    input.push(xs[j].to_string());
                    coords.push(format!("q{j} % {}", xs[j]));
                }
            }
            let value = format!("x0[{}]", offset(&input, &coords));
            (out, vec![input], value)
        }
        Move::Gather {
            axis,
            indices,
            shape,
        } => {
            let (a, m) = (*axis, shape.len());
            let mut out = Vec::new();
            let mut input = Vec::new();
            let mut coords = Vec::new();
            for j in 0..a {
                let n = name(j, xs[j]);
                out.push(n.clone());
                input.push(n);
                coords.push(q[j].clone());
            }
            let table: Vec<String> = (0..m).map(|t| shape[t].to_string()).collect();
            out.extend(table.iter().cloned());
            input.push(xs[a].to_string());
            coords.push(format!("kf_gather[{}]", offset(&table, &q[a..a + m])));
            for j in a + 1..xs.len() {
                let n = name(j + m - 1, xs[j]);
                out.push(n.clone());
                input.push(n);
                coords.push(q[j + m - 1].clone());
            }
            globals = format!(
                "__constant uint kf_gather[{}] = {{{}}};\n",
                indices.len(),
                indices
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let value = format!("x0[{}]", offset(&input, &coords));
            (out, vec![input], value)
        }
        Move::Resize {
            axes,
            linear,
            nearest,
        } => {
            let mut out = Vec::new();
            let mut input = Vec::new();
            // Per dimension: its coordinate in the input, or for a linear one the two
            // neighbours' coordinates and the second one's weight.
            let mut corners: Vec<Vec<(String, String)>> = Vec::new();
            for (j, a) in axes.iter().enumerate() {
                if a.input == a.output && a.scale == 1.0 {
                    let n = name(j, a.input);
                    out.push(n.clone());
                    input.push(n);
                    corners.push(vec![(q[j].clone(), String::new())]);
                    continue;
                }
                out.push(a.output.to_string());
                input.push(a.input.to_string());
                globals += &resize_axis(j, a, *nearest, *linear);
                corners.push(if *linear {
                    vec![
                        (
                            format!("kf_i{j}(q{j}, 0)"),
                            format!("(1.0f - kf_f{j}(q{j}))"),
                        ),
                        (format!("kf_i{j}(q{j}, 1)"), format!("kf_f{j}(q{j})")),
                    ]
                } else {
                    vec![(format!("kf_n{j}(q{j})"), String::new())]
                });
            }
            // The sum over the corners of the weights' product times the input there.
            let mut terms = vec![(Vec::new(), Vec::new())];
            for c in &corners {
                terms = terms
                    .into_iter()
                    .flat_map(|(coords, weights): (Vec<String>, Vec<String>)| {
                        c.iter().map(move |(at, w)| {
                            let mut coords = coords.clone();
                            coords.push(at.clone());
                            let mut weights = weights.clone();
                            if !w.is_empty() {
                                weights.push(w.clone());
                            }
                            (coords, weights)
                        })
                    })
                    .collect();
            }
            let value = terms
                .iter()
                .map(|(coords, weights)| {
                    let read = format!("x0[{}]", offset(&input, coords));
                    if weights.is_empty() {
                        read
                    } else {
                        format!("{} * {read}", weights.join(" * "))
                    }
                })
                .collect::<Vec<_>>()
                .join(" + ");
            (out, vec![input], format!("({value})"))
        }
    };
    Plan {
        out,
        ins,
        value,
        globals,
    }
}

/// The C helpers of a resized dimension `j`: `kf_x{j}(q)`, the input coordinate of output
/// coordinate q; then `kf_n{j}(q)`, the nearest element's index, or `kf_i{j}(q, c)`, the lower
/// (c = 0) and upper (c = 1) neighbours' indices and `kf_f{j}(q)`, the upper one's weight.
/// Indices are clamped to the input, as ONNX's reference pads with the edge.
fn resize_axis(j: usize, a: &ResizeAxis, nearest: NearestMode, linear: bool) -> String {
    let (d, o) = (a.input, a.output);
    let half = format!("((float)q + 0.5f) / {} - 0.5f", super::lit(a.scale));
    let x = match a.transform {
        CoordinateTransform::HalfPixel => half,
        CoordinateTransform::PytorchHalfPixel if o > 1 => half,
        CoordinateTransform::PytorchHalfPixel => "0.0f".into(),
        CoordinateTransform::Asymmetric => format!("(float)q / {}", super::lit(a.scale)),
        CoordinateTransform::AlignCorners if o > 1 => {
            format!("(float)q * (float){} / (float){}", d - 1, o - 1)
        }
        CoordinateTransform::AlignCorners => "0.0f".into(),
    };
    let mut s = format!("static inline float kf_x{j}(const int q) {{ return {x}; }}\n");
    if linear {
        s +=
            &format!("static inline int kf_i{j}(const int q, const int c) {{ return clamp((int)floor(kf_x{j}(q)) + c, (int)0, (int){}); }}\n", d - 1);
        s += &format!("static inline float kf_f{j}(const int q) {{ const float x = kf_x{j}(q); return x - floor(x); }}\n");
    } else {
        let round = match nearest {
            NearestMode::RoundPreferFloor => format!("ceil(kf_x{j}(q) - 0.5f)"),
            NearestMode::RoundPreferCeil => format!("floor(kf_x{j}(q) + 0.5f)"),
            NearestMode::Floor => format!("floor(kf_x{j}(q))"),
            NearestMode::Ceil => format!("ceil(kf_x{j}(q))"),
        };
        s += &format!("static inline int kf_n{j}(const int q) {{ return clamp((int){round}, (int)0, (int){}); }}\n", d - 1);
    }
    s
}

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let mut k = cx.kernel();
    let (dims, mut main, mut main_setup, globals, mover) = match &g.anchor {
        Anchor::Move { inputs, kind } => {
            let p = plan(cx, &mut k, inputs, kind);
            for (i, (&v, dims)) in inputs.iter().zip(&p.ins).enumerate() {
                let len = product(dims);
                k.buffers.push(BufferArg {
                    name: format!("x{i}"),
                    len,
                    value: v,
                    output: false,
                    inputs: None,
                });
            }
            let dims = Dims {
                exprs: p.out.clone(),
                full: g.shape.clone(),
            };
            (dims, p.value, String::new(), p.globals, true)
        }
        _ => (
            Dims::named("d", &g.shape, &mut k.sizes, 16),
            "0.0f".to_string(),
            String::new(),
            String::new(),
            false,
        ),
    };
    if mover {
        let needs: Vec<usize> = (0..dims.exprs.len())
            .filter(|&j| main.contains(&format!("q{j}")))
            .collect();
        main_setup = super::coordinates(&dims, &needs).replace("    ", "            ");
    }
    if main.is_empty() {
        main = "0.0f".into();
    }
    let total = dims.total();
    params(
        &mut k,
        &[("WG", "pow2(32..=512)", 64), ("ITEMS", "[1, 2, 4, 8]", 1)],
    );
    let mut lens: Vec<String> = k.buffers.iter().map(|b| b.len.clone()).collect();
    lens.push(total.clone());
    fits_int(&mut k, &lens);
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
    k.flops = format!("{} * {total}", g.chain.steps.len().max(1));

    let what = match &g.anchor {
        Anchor::Move {
            kind: Move::Transpose(_),
            ..
        } => "transpose",
        Anchor::Move { .. } => "data movement",
        _ => "element-wise map",
    };
    let mut s = prelude(&k, what);
    s += &globals;
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &dims);
    let x: Vec<String> = k
        .buffers
        .iter()
        .filter(|b| b.name.starts_with('x'))
        .map(|b| format!("__global const float* restrict {}", b.name))
        .collect();
    let x = x.join(", ");
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
