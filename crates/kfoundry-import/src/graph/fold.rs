//! Constant folding. A node whose inputs are all constants is evaluated here, at import, and
//! its outputs become constants. `Shape` and `Size` are folded too, because every shape is
//! static. This is where the exporters' shape machinery goes away
//! (`Shape → Gather → Unsqueeze → Concat → Reshape`, `Identity` of an initializer, a weight
//! transposed or cast inside the graph): none of it reaches a kernel.
//!
//! Integer tensors (shapes, axes, indices, booleans as 0/1) and float tensors are kept apart,
//! as ONNX keeps them. Integer arithmetic is checked: an overflow or a division by zero is an
//! error that names the node, never a wrapped value.

use super::{axis, broadcast, expand, gather_indices, shape_of, Builder, NodeCx};
use crate::error::ImportError;
use crate::onnx::data_type;

/// The most elements folding makes. A larger result (a big `ConstantOfShape` or `Expand`) is
/// left to the operator's kernel, if it has one.
pub(super) const MAX_FOLDED: usize = 1 << 24;

/// The operators folded when all their inputs are constants.
const FOLDABLE: &[&str] = &[
    "Identity",
    "Dropout",
    "Cast",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Transpose",
    "Gather",
    "Slice",
    "Concat",
    "Split",
    "Range",
    "ConstantOfShape",
    "Expand",
    "Tile",
    "Where",
    "Equal",
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Mod",
    "Pow",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Neg",
    "Abs",
    "Sign",
    "Relu",
    "Sqrt",
    "Reciprocal",
    "Exp",
    "Log",
    "Floor",
    "Ceil",
    "Round",
    "Sigmoid",
    "Tanh",
    "Sin",
    "Cos",
    "ReduceSum",
    "ReduceProd",
    "ReduceMax",
    "ReduceMin",
    "ReduceMean",
];

/// The data of a constant: float (float32, and float64 read as float32) or integer (every
/// integer type, and booleans as 0 and 1).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Data {
    F(Vec<f32>),
    I(Vec<i64>),
}

impl Data {
    fn len(&self) -> usize {
        match self {
            Data::F(v) => v.len(),
            Data::I(v) => v.len(),
        }
    }

    fn floats(&self) -> Vec<f32> {
        match self {
            Data::F(v) => v.clone(),
            Data::I(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }

    /// Elements picked by index (a gather of any kind).
    fn pick(&self, at: impl Iterator<Item = usize>) -> Data {
        match self {
            Data::F(v) => Data::F(at.map(|i| v[i]).collect()),
            Data::I(v) => Data::I(at.map(|i| v[i]).collect()),
        }
    }
}

/// A constant tensor.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    fn ints(shape: Vec<usize>, v: Vec<i64>) -> Tensor {
        Tensor {
            shape,
            data: Data::I(v),
        }
    }

    fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The integer values, or an error naming the input.
    fn as_ints(&self, cx: &NodeCx, what: &str) -> Result<Vec<i64>, ImportError> {
        match &self.data {
            Data::I(v) => Ok(v.clone()),
            Data::F(_) => Err(cx.err(format!("{what} must be an integer tensor"))),
        }
    }

    fn scalar_int(&self, cx: &NodeCx, what: &str) -> Result<i64, ImportError> {
        match self.as_ints(cx, what)?.as_slice() {
            [v] => Ok(*v),
            _ => Err(cx.err(format!("{what} must hold one value"))),
        }
    }
}

/// Row-major strides of `shape`.
pub(super) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// One axis of a `Slice`, resolved as ONNX defines it: the first index, the step and the
/// count of elements taken (clamped into the dimension, negative values counted from its end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceAxis {
    pub start: i64,
    pub step: i64,
    pub count: usize,
}

/// Resolves `Slice`'s inputs for a tensor of shape `shape`: one entry per dimension
/// (untouched dimensions start at 0 with step 1).
pub(super) fn slice_axes(
    cx: &NodeCx,
    shape: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Result<Vec<SliceAxis>, ImportError> {
    let r = shape.len();
    let mut out: Vec<SliceAxis> = shape
        .iter()
        .map(|&d| SliceAxis {
            start: 0,
            step: 1,
            count: d,
        })
        .collect();
    if starts.len() != ends.len() {
        return Err(cx.err(format!("{} starts and {} ends", starts.len(), ends.len())));
    }
    let axes: Vec<usize> = match axes {
        Some(a) if a.len() == starts.len() => a
            .iter()
            .map(|&a| axis(cx, a, r))
            .collect::<Result<_, _>>()?,
        Some(a) => return Err(cx.err(format!("{} axes for {} starts", a.len(), starts.len()))),
        None => (0..starts.len()).collect(),
    };
    if axes.iter().any(|&a| a >= r) {
        return Err(cx.err(format!("more starts than the input's {r} dimensions")));
    }
    let mut seen = axes.clone();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != axes.len() {
        return Err(cx.err("repeated axes"));
    }
    for (i, &a) in axes.iter().enumerate() {
        let d = shape[a] as i64;
        let step = steps.map(|s| s.get(i).copied().unwrap_or(1)).unwrap_or(1);
        if step == 0 {
            return Err(cx.err("a step of 0"));
        }
        let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let (start, end) = (norm(starts[i]), norm(ends[i]));
        let (start, count) = if step > 0 {
            let (s, e) = (start.clamp(0, d), end.clamp(0, d));
            (s, if e > s { (e - s + step - 1) / step } else { 0 })
        } else {
            let (s, e) = (start.clamp(0, d - 1), end.clamp(-1, d - 1));
            (
                s,
                if s > e {
                    (s - e + (-step) - 1) / (-step)
                } else {
                    0
                },
            )
        };
        out[a] = SliceAxis {
            start,
            step,
            count: count as usize,
        };
    }
    Ok(out)
}

/// The constant `v` holds, if it is one.
fn constant(b: &Builder, v: super::ValueId) -> Option<Tensor> {
    let value = &b.g.values[v];
    if let Some(i) = &value.ints {
        return Some(Tensor::ints(value.shape.clone(), i.clone()));
    }
    value.data.as_ref().map(|d| Tensor {
        shape: value.shape.clone(),
        data: Data::F(d.clone()),
    })
}

/// Folds the node if it can: `Ok(true)` when its outputs are now constants.
pub(super) fn fold(b: &mut Builder, cx: &NodeCx) -> Result<bool, ImportError> {
    let op = cx.node.op_type.as_str();
    let outputs = match op {
        "Shape" => {
            cx.only(&["start", "end"])?;
            let x = b.required(cx, 0)?;
            let shape = b.shape(x);
            let r = shape.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let start = clamp(cx.int("start", 0)?);
            let end = clamp(cx.int("end", r)?);
            let dims: Vec<i64> = shape
                .get(start..end.max(start))
                .unwrap_or_default()
                .iter()
                .map(|&d| d as i64)
                .collect();
            vec![Tensor::ints(vec![dims.len()], dims)]
        }
        "Size" => {
            cx.only(&[])?;
            let x = b.required(cx, 0)?;
            vec![Tensor::ints(vec![], vec![b.g.values[x].numel() as i64])]
        }
        _ if FOLDABLE.contains(&op) => {
            let mut inputs = Vec::new();
            for (i, name) in cx.node.input.iter().enumerate() {
                if name.is_empty() {
                    inputs.push(None);
                    continue;
                }
                match constant(b, b.required(cx, i)?) {
                    Some(t) => inputs.push(Some(t)),
                    None => return Ok(false),
                }
            }
            match evaluate(b, cx, op, &inputs)? {
                Some(outs) => outs,
                None => return Ok(false),
            }
        }
        _ => return Ok(false),
    };
    for (i, t) in outputs.into_iter().enumerate() {
        let Some(name) = cx.node.output.get(i).filter(|n| !n.is_empty()) else {
            continue;
        };
        if b.by_name.contains_key(name) {
            return Err(cx.err(format!("output `{name}` is already defined")));
        }
        if t.data.len() != t.numel() {
            return Err(cx.err(format!(
                "folding made {} values for shape {:?}",
                t.data.len(),
                t.shape
            )));
        }
        match t.data {
            Data::I(v) => b.add_value(name, t.shape, None, Some(v)),
            Data::F(v) => b.add_value(name, t.shape, Some(v), None),
        };
    }
    Ok(true)
}

/// An input that must be present.
fn arg<'a>(cx: &NodeCx, inputs: &'a [Option<Tensor>], i: usize) -> Result<&'a Tensor, ImportError> {
    inputs
        .get(i)
        .and_then(|t| t.as_ref())
        .ok_or_else(|| cx.err(format!("input {i} is missing")))
}

/// Evaluates `op`; `None` when the result would be too large to fold (a kernel computes it).
fn evaluate(
    b: &Builder,
    cx: &NodeCx,
    op: &str,
    inputs: &[Option<Tensor>],
) -> Result<Option<Vec<Tensor>>, ImportError> {
    let x = || arg(cx, inputs, 0);
    let one = |t: Tensor| -> Result<Option<Vec<Tensor>>, ImportError> {
        Ok((t.numel() <= MAX_FOLDED).then(|| vec![t]))
    };
    match op {
        "Identity" => one(x()?.clone()),
        "Dropout" => {
            if cx.node.output.get(1).is_some_and(|o| !o.is_empty()) {
                return Err(cx.err("the mask output is not supported (inference only)"));
            }
            one(x()?.clone())
        }
        "Cast" => {
            cx.only(&["to", "saturate"])?;
            let t = x()?;
            let to = cx.int("to", 0)? as i32;
            let data = match to {
                data_type::FLOAT | data_type::DOUBLE => Data::F(t.data.floats()),
                data_type::BOOL => Data::I(match &t.data {
                    Data::F(v) => v.iter().map(|&x| i64::from(x != 0.0)).collect(),
                    Data::I(v) => v.iter().map(|&x| i64::from(x != 0)).collect(),
                }),
                2..=7 | 12 | 13 => Data::I(match &t.data {
                    Data::I(v) => v.clone(),
                    Data::F(v) => v
                        .iter()
                        .map(|&x| {
                            if x.is_finite() && x.abs() < 9.2e18 {
                                Ok(x.trunc() as i64)
                            } else {
                                Err(cx.err(format!("{x} does not fit an integer")))
                            }
                        })
                        .collect::<Result<_, _>>()?,
                }),
                other => {
                    return Err(cx.err(format!(
                        "casting to {} is not supported",
                        data_type::name(other)
                    )))
                }
            };
            one(Tensor {
                shape: t.shape.clone(),
                data,
            })
        }
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" => {
            let t = x()?;
            let shape = b.view_shape(cx, &t.shape)?;
            one(Tensor {
                shape,
                data: t.data.clone(),
            })
        }
        "Transpose" => {
            let t = x()?;
            let perm = b.transpose_perm(cx, &t.shape)?;
            let shape: Vec<usize> = perm.iter().map(|&p| t.shape[p]).collect();
            let from = strides(&t.shape);
            let to = strides(&shape);
            let n = t.numel();
            let at = (0..n).map(|lin| {
                perm.iter()
                    .enumerate()
                    .map(|(j, &p)| (lin / to[j]) % shape[j] * from[p])
                    .sum()
            });
            one(Tensor {
                data: t.data.pick(at),
                shape,
            })
        }
        "Gather" => {
            cx.only(&["axis"])?;
            let t = x()?;
            let idx = arg(cx, inputs, 1)?;
            let indices = idx.as_ints(cx, "the indices")?;
            let a = axis(cx, cx.int("axis", 0)?, t.shape.len())?;
            let indices = gather_indices(cx, &indices, t.shape[a])?;
            let outer: usize = t.shape[..a].iter().product();
            let inner: usize = t.shape[a + 1..].iter().product();
            let mut shape = t.shape[..a].to_vec();
            shape.extend(&idx.shape);
            shape.extend(&t.shape[a + 1..]);
            if shape.iter().product::<usize>() > MAX_FOLDED {
                return Ok(None);
            }
            let at = (0..outer).flat_map(|o| {
                indices
                    .iter()
                    .flat_map(move |&i| (0..inner).map(move |e| (o * t.shape[a] + i) * inner + e))
            });
            one(Tensor {
                data: t.data.pick(at),
                shape,
            })
        }
        "Slice" => {
            cx.only(&[])?;
            let t = x()?;
            let get = |i: usize, what: &str| -> Result<Option<Vec<i64>>, ImportError> {
                inputs
                    .get(i)
                    .and_then(|v| v.as_ref())
                    .map(|v| v.as_ints(cx, what))
                    .transpose()
            };
            let starts = get(1, "starts")?.ok_or_else(|| cx.err("starts are missing"))?;
            let ends = get(2, "ends")?.ok_or_else(|| cx.err("ends are missing"))?;
            let axes = slice_axes(
                cx,
                &t.shape,
                &starts,
                &ends,
                get(3, "axes")?.as_deref(),
                get(4, "steps")?.as_deref(),
            )?;
            let shape: Vec<usize> = axes.iter().map(|a| a.count).collect();
            let from = strides(&t.shape);
            let to = strides(&shape);
            let at = (0..shape.iter().product::<usize>()).map(|lin| {
                axes.iter()
                    .enumerate()
                    .map(|(j, s)| {
                        (s.start + ((lin / to[j]) % shape[j]) as i64 * s.step) as usize * from[j]
                    })
                    .sum()
            });
            one(Tensor {
                data: t.data.pick(at),
                shape,
            })
        }
        "Concat" => {
            cx.only(&["axis"])?;
            let parts: Vec<&Tensor> = inputs.iter().flatten().collect();
            let first = parts.first().ok_or_else(|| cx.err("no inputs"))?;
            let a = axis(cx, cx.int("axis", 0)?, first.shape.len().max(1))?;
            for p in &parts {
                let mut s = p.shape.clone();
                let mut f = first.shape.clone();
                if s.len() != f.len() || a >= s.len() {
                    return Err(cx.err(format!(
                        "shapes {:?} and {:?} do not concatenate on axis {a}",
                        p.shape, first.shape
                    )));
                }
                s[a] = 0;
                f[a] = 0;
                if s != f {
                    return Err(cx.err(format!(
                        "shapes {:?} and {:?} do not concatenate on axis {a}",
                        p.shape, first.shape
                    )));
                }
            }
            let mut shape = first.shape.clone();
            shape[a] = parts.iter().map(|p| p.shape[a]).sum();
            let outer: usize = shape[..a].iter().product();
            let int = parts.iter().all(|p| matches!(p.data, Data::I(_)));
            let mut f = Vec::new();
            let mut i = Vec::new();
            for o in 0..outer {
                for p in &parts {
                    let chunk: usize = p.shape[a..].iter().product();
                    match &p.data {
                        Data::I(v) if int => i.extend_from_slice(&v[o * chunk..(o + 1) * chunk]),
                        d => f.extend(d.floats()[o * chunk..(o + 1) * chunk].iter()),
                    }
                }
            }
            one(Tensor {
                shape,
                data: if int { Data::I(i) } else { Data::F(f) },
            })
        }
        "Split" => {
            let t = x()?;
            let parts = b.split_sizes(
                cx,
                &t.shape,
                inputs
                    .get(1)
                    .and_then(|s| s.as_ref())
                    .map(|s| s.as_ints(cx, "split"))
                    .transpose()?,
            )?;
            let a = axis(cx, cx.int("axis", 0)?, t.shape.len())?;
            let mut out = Vec::new();
            let mut start = 0;
            for len in parts {
                let mut shape = t.shape.clone();
                shape[a] = len;
                let inner: usize = t.shape[a + 1..].iter().product();
                let outer: usize = t.shape[..a].iter().product();
                let d = t.shape[a];
                let at = (0..outer).flat_map(move |o| {
                    (start..start + len)
                        .flat_map(move |i| (0..inner).map(move |e| (o * d + i) * inner + e))
                });
                out.push(Tensor {
                    data: t.data.pick(at),
                    shape,
                });
                start += len;
            }
            Ok(Some(out))
        }
        "Range" => {
            cx.only(&[])?;
            let (s, l, d) = (
                arg(cx, inputs, 0)?,
                arg(cx, inputs, 1)?,
                arg(cx, inputs, 2)?,
            );
            match (&s.data, &l.data, &d.data) {
                (Data::I(_), Data::I(_), Data::I(_)) => {
                    let (s, l, d) = (
                        s.scalar_int(cx, "start")?,
                        l.scalar_int(cx, "limit")?,
                        d.scalar_int(cx, "delta")?,
                    );
                    if d == 0 {
                        return Err(cx.err("delta is 0"));
                    }
                    let n = ((l as i128 - s as i128) as f64 / d as f64).ceil().max(0.0) as usize;
                    if n > MAX_FOLDED {
                        return Ok(None);
                    }
                    one(Tensor::ints(
                        vec![n],
                        (0..n as i64).map(|i| s + i * d).collect(),
                    ))
                }
                _ => {
                    let f = |t: &Tensor| {
                        t.data
                            .floats()
                            .first()
                            .copied()
                            .ok_or_else(|| cx.err("an empty scalar"))
                    };
                    let (s, l, d) = (f(s)?, f(l)?, f(d)?);
                    if d == 0.0 || !d.is_finite() {
                        return Err(cx.err("delta is 0 or not finite"));
                    }
                    let n = ((l - s) / d).ceil().max(0.0) as usize;
                    if n > MAX_FOLDED {
                        return Ok(None);
                    }
                    one(Tensor {
                        shape: vec![n],
                        data: Data::F((0..n).map(|i| s + i as f32 * d).collect()),
                    })
                }
            }
        }
        "ConstantOfShape" => {
            cx.only(&["value"])?;
            let dims = x()?.as_ints(cx, "the shape")?;
            let shape: Vec<usize> = shape_of(cx, &dims)?;
            let n = shape
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .unwrap_or(usize::MAX);
            if n > MAX_FOLDED {
                return Ok(None);
            }
            let data = match cx.attr("value").and_then(|a| a.t.as_ref()) {
                None => Data::F(vec![0.0; n]),
                Some(v) if matches!(v.data_type, data_type::FLOAT | data_type::DOUBLE) => {
                    Data::F(vec![
                        *v.floats()
                            .map_err(|m| cx.err(m))?
                            .first()
                            .ok_or_else(|| cx.err("`value` is empty"))?;
                        n
                    ])
                }
                Some(v) => Data::I(vec![
                    *v.ints()
                        .map_err(|m| cx.err(m))?
                        .first()
                        .ok_or_else(|| cx.err("`value` is empty"))?;
                    n
                ]),
            };
            one(Tensor { shape, data })
        }
        "Expand" => {
            cx.only(&[])?;
            let t = x()?;
            let dims = arg(cx, inputs, 1)?.as_ints(cx, "the shape")?;
            let target: Vec<usize> = shape_of(cx, &dims)?;
            let shape = broadcast(&t.shape, &target)
                .ok_or_else(|| cx.err(format!("{:?} does not expand to {target:?}", t.shape)))?;
            if shape.iter().product::<usize>() > MAX_FOLDED {
                return Ok(None);
            }
            one(broadcast_to(t, &shape))
        }
        "Tile" => {
            cx.only(&[])?;
            let t = x()?;
            let reps = arg(cx, inputs, 1)?.as_ints(cx, "repeats")?;
            if reps.len() != t.shape.len() || reps.iter().any(|&r| r < 0) {
                return Err(cx.err(format!("repeats {reps:?} for shape {:?}", t.shape)));
            }
            let shape: Vec<usize> = t
                .shape
                .iter()
                .zip(&reps)
                .map(|(&d, &r)| d * r as usize)
                .collect();
            if shape.iter().product::<usize>() > MAX_FOLDED {
                return Ok(None);
            }
            let (from, to) = (strides(&t.shape), strides(&shape));
            let at = (0..shape.iter().product::<usize>()).map(|lin| {
                (0..shape.len())
                    .map(|j| (lin / to[j]) % shape[j] % t.shape[j] * from[j])
                    .sum()
            });
            one(Tensor {
                data: t.data.pick(at),
                shape,
            })
        }
        "Where" => {
            cx.only(&[])?;
            let (c, a, bb) = (
                arg(cx, inputs, 0)?,
                arg(cx, inputs, 1)?,
                arg(cx, inputs, 2)?,
            );
            let shape = broadcast(&c.shape, &a.shape)
                .and_then(|s| broadcast(&s, &bb.shape))
                .ok_or_else(|| {
                    cx.err(format!(
                        "shapes {:?}, {:?} and {:?} do not broadcast",
                        c.shape, a.shape, bb.shape
                    ))
                })?;
            if shape.iter().product::<usize>() > MAX_FOLDED {
                return Ok(None);
            }
            let cond: Vec<bool> = broadcast_to(c, &shape)
                .data
                .floats()
                .iter()
                .map(|&v| v != 0.0)
                .collect();
            let (a, bb) = (broadcast_to(a, &shape), broadcast_to(bb, &shape));
            let data = match (&a.data, &bb.data) {
                (Data::I(x), Data::I(y)) => Data::I(
                    cond.iter()
                        .enumerate()
                        .map(|(i, &c)| if c { x[i] } else { y[i] })
                        .collect(),
                ),
                _ => {
                    let (x, y) = (a.data.floats(), bb.data.floats());
                    Data::F(
                        cond.iter()
                            .enumerate()
                            .map(|(i, &c)| if c { x[i] } else { y[i] })
                            .collect(),
                    )
                }
            };
            one(Tensor { shape, data })
        }
        "Not" => {
            let t = x()?;
            one(Tensor {
                shape: t.shape.clone(),
                data: Data::I(
                    t.as_ints(cx, "the input")?
                        .iter()
                        .map(|&v| i64::from(v == 0))
                        .collect(),
                ),
            })
        }
        "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "And" | "Or" | "Xor"
        | "Add" | "Sub" | "Mul" | "Div" | "Mod" | "Pow" | "Max" | "Min" | "Sum" | "Mean" => {
            if op != "Mod" {
                cx.only(&[])?;
            }
            let fmod = cx.int("fmod", 0)? != 0;
            let parts: Vec<&Tensor> = inputs.iter().flatten().collect();
            let mut acc = (*parts.first().ok_or_else(|| cx.err("no inputs"))?).clone();
            if parts.len() == 1 && matches!(op, "Max" | "Min" | "Sum" | "Mean") {
                return one(acc);
            }
            if parts.len() != 2 && !matches!(op, "Max" | "Min" | "Sum" | "Mean") {
                return Err(cx.err(format!("{} inputs, 2 expected", parts.len())));
            }
            let combine = if op == "Mean" { "Sum" } else { op };
            for p in &parts[1..] {
                acc = match binary(cx, combine, &acc, p, fmod)? {
                    Some(t) => t,
                    None => return Ok(None),
                };
            }
            if op == "Mean" {
                let n = parts.len() as f32;
                acc = Tensor {
                    shape: acc.shape.clone(),
                    data: Data::F(acc.data.floats().iter().map(|v| v / n).collect()),
                };
            }
            one(acc)
        }
        "Neg" | "Abs" | "Sign" | "Relu" => {
            cx.only(&[])?;
            let t = x()?;
            let data = match &t.data {
                Data::I(v) => Data::I(
                    v.iter()
                        .map(|&x| match op {
                            "Neg" => x.checked_neg(),
                            "Abs" => x.checked_abs(),
                            "Sign" => Some(x.signum()),
                            _ => Some(x.max(0)),
                        })
                        .collect::<Option<_>>()
                        .ok_or_else(|| cx.err("integer overflow"))?,
                ),
                Data::F(v) => Data::F(
                    v.iter()
                        .map(|&x| match op {
                            "Neg" => -x,
                            "Abs" => x.abs(),
                            "Sign" if x.is_nan() => x,
                            "Sign" if x == 0.0 => 0.0,
                            "Sign" => x.signum(),
                            _ => x.max(0.0),
                        })
                        .collect(),
                ),
            };
            one(Tensor {
                shape: t.shape.clone(),
                data,
            })
        }
        "Sqrt" | "Reciprocal" | "Exp" | "Log" | "Floor" | "Ceil" | "Round" | "Sigmoid" | "Tanh"
        | "Sin" | "Cos" => {
            cx.only(&[])?;
            let t = x()?;
            let Data::F(v) = &t.data else {
                return Err(cx.err("an integer input"));
            };
            let f: fn(f32) -> f32 = match op {
                "Sqrt" => f32::sqrt,
                "Reciprocal" => f32::recip,
                "Exp" => f32::exp,
                "Log" => f32::ln,
                "Floor" => f32::floor,
                "Ceil" => f32::ceil,
                "Round" => f32::round_ties_even,
                "Sigmoid" => |x| 1.0 / (1.0 + (-x).exp()),
                "Tanh" => f32::tanh,
                "Sin" => f32::sin,
                _ => f32::cos,
            };
            one(Tensor {
                shape: t.shape.clone(),
                data: Data::F(v.iter().map(|&x| f(x)).collect()),
            })
        }
        "ReduceSum" | "ReduceProd" | "ReduceMax" | "ReduceMin" | "ReduceMean" => {
            cx.only(&["axes", "keepdims", "noop_with_empty_axes"])?;
            let t = x()?;
            let axes = match (cx.ints("axes")?, inputs.get(1).and_then(|a| a.as_ref())) {
                (Some(a), None) => a,
                (None, Some(a)) => a.as_ints(cx, "axes")?,
                (None, None) => vec![],
                (Some(_), Some(_)) => {
                    return Err(cx.err("axes given both as an attribute and as an input"))
                }
            };
            if axes.is_empty() && cx.int("noop_with_empty_axes", 0)? != 0 {
                return one(t.clone());
            }
            let r = t.shape.len();
            let axes: Vec<usize> = if axes.is_empty() {
                (0..r).collect()
            } else {
                axes.iter()
                    .map(|&a| axis(cx, a, r))
                    .collect::<Result<_, _>>()?
            };
            one(reduce(cx, op, t, &axes, cx.int("keepdims", 1)? != 0)?)
        }
        _ => Ok(None),
    }
}

/// `t` broadcast to `shape` (which `broadcast` checked).
fn broadcast_to(t: &Tensor, shape: &[usize]) -> Tensor {
    let data = match &t.data {
        Data::F(v) => Data::F(expand(v, &t.shape, shape)),
        Data::I(v) => Data::I(expand(v, &t.shape, shape)),
    };
    Tensor {
        shape: shape.to_vec(),
        data,
    }
}

/// A binary operator with broadcasting; integers stay integers (checked), comparisons and
/// logic give booleans.
fn binary(
    cx: &NodeCx,
    op: &str,
    a: &Tensor,
    b: &Tensor,
    fmod: bool,
) -> Result<Option<Tensor>, ImportError> {
    let shape = broadcast(&a.shape, &b.shape).ok_or_else(|| {
        cx.err(format!(
            "shapes {:?} and {:?} do not broadcast",
            a.shape, b.shape
        ))
    })?;
    if shape.iter().product::<usize>() > MAX_FOLDED {
        return Ok(None);
    }
    let (a, b) = (broadcast_to(a, &shape), broadcast_to(b, &shape));
    let overflow = || cx.err("integer overflow or division by zero");
    let data = match (&a.data, &b.data) {
        (Data::I(x), Data::I(y)) => {
            let f = |p: i64, q: i64| -> Option<i64> {
                Some(match op {
                    "Equal" => i64::from(p == q),
                    "Less" => i64::from(p < q),
                    "LessOrEqual" => i64::from(p <= q),
                    "Greater" => i64::from(p > q),
                    "GreaterOrEqual" => i64::from(p >= q),
                    "And" => i64::from(p != 0 && q != 0),
                    "Or" => i64::from(p != 0 || q != 0),
                    "Xor" => i64::from((p != 0) != (q != 0)),
                    "Add" | "Sum" => p.checked_add(q)?,
                    "Sub" => p.checked_sub(q)?,
                    "Mul" => p.checked_mul(q)?,
                    "Div" => p.checked_div(q)?,
                    "Mod" if fmod => p.checked_rem(q)?,
                    "Mod" => {
                        p.checked_rem_euclid(q)
                            .map(|m| if m != 0 && q < 0 { m + q } else { m })?
                    }
                    "Pow" => p.checked_pow(u32::try_from(q).ok()?)?,
                    "Max" => p.max(q),
                    _ => p.min(q),
                })
            };
            Data::I(
                x.iter()
                    .zip(y)
                    .map(|(&p, &q)| f(p, q))
                    .collect::<Option<_>>()
                    .ok_or_else(overflow)?,
            )
        }
        _ => {
            let (x, y) = (a.data.floats(), b.data.floats());
            let cmp = matches!(
                op,
                "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual"
            );
            if matches!(op, "And" | "Or" | "Xor") {
                return Err(cx.err("logic on float tensors"));
            }
            if cmp {
                Data::I(
                    x.iter()
                        .zip(&y)
                        .map(|(&p, &q)| {
                            i64::from(match op {
                                "Equal" => p == q,
                                "Less" => p < q,
                                "LessOrEqual" => p <= q,
                                "Greater" => p > q,
                                _ => p >= q,
                            })
                        })
                        .collect(),
                )
            } else {
                Data::F(
                    x.iter()
                        .zip(&y)
                        .map(|(&p, &q)| match op {
                            "Add" | "Sum" => p + q,
                            "Sub" => p - q,
                            "Mul" => p * q,
                            "Div" => p / q,
                            "Mod" if fmod => p % q,
                            "Mod" => p - q * (p / q).floor(),
                            "Pow" => p.powf(q),
                            "Max" => p.max(q),
                            _ => p.min(q),
                        })
                        .collect(),
                )
            }
        }
    };
    Ok(Some(Tensor { shape, data }))
}

/// A reduction of a constant over `axes`.
fn reduce(
    cx: &NodeCx,
    op: &str,
    t: &Tensor,
    axes: &[usize],
    keep: bool,
) -> Result<Tensor, ImportError> {
    let r = t.shape.len();
    let out_full: Vec<usize> = (0..r)
        .map(|j| if axes.contains(&j) { 1 } else { t.shape[j] })
        .collect();
    let n: usize = out_full.iter().product();
    let (from, to) = (strides(&t.shape), strides(&out_full));
    // Each input element's output index.
    let target = |lin: usize| -> usize {
        (0..r)
            .filter(|j| !axes.contains(j))
            .map(|j| (lin / from[j]) % t.shape[j] * to[j])
            .sum()
    };
    let count = (t.numel() / n.max(1)).max(1);
    let data = match &t.data {
        Data::I(v) if op != "ReduceMean" => {
            let init = match op {
                "ReduceSum" => 0,
                "ReduceProd" => 1,
                "ReduceMax" => i64::MIN,
                _ => i64::MAX,
            };
            let mut out = vec![init; n];
            for (lin, &x) in v.iter().enumerate() {
                let o = &mut out[target(lin)];
                *o = match op {
                    "ReduceSum" => o.checked_add(x),
                    "ReduceProd" => o.checked_mul(x),
                    "ReduceMax" => Some((*o).max(x)),
                    _ => Some((*o).min(x)),
                }
                .ok_or_else(|| cx.err("integer overflow"))?;
            }
            Data::I(out)
        }
        d => {
            let v = d.floats();
            let init = match op {
                "ReduceSum" | "ReduceMean" => 0.0,
                "ReduceProd" => 1.0,
                "ReduceMax" => f32::NEG_INFINITY,
                _ => f32::INFINITY,
            };
            let mut out = vec![init; n];
            for (lin, &x) in v.iter().enumerate() {
                let o = &mut out[target(lin)];
                *o = match op {
                    "ReduceSum" | "ReduceMean" => *o + x,
                    "ReduceProd" => *o * x,
                    "ReduceMax" => o.max(x),
                    _ => o.min(x),
                };
            }
            if op == "ReduceMean" {
                out.iter_mut().for_each(|o| *o /= count as f32);
            }
            Data::F(out)
        }
    };
    let shape = if keep {
        out_full
    } else {
        (0..r)
            .filter(|j| !axes.contains(j))
            .map(|j| t.shape[j])
            .collect()
    };
    Ok(Tensor { shape, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_row_major() {
        assert_eq!(strides(&[2, 3, 4]), [12, 4, 1]);
        assert_eq!(strides(&[]), Vec::<usize>::new());
    }
}
