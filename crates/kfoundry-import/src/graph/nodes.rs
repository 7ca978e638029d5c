//! One reader per ONNX operator: attributes checked, the output's static shape computed, and
//! the node pushed as one or more [`Op`]s.

use super::*;

/// The ONNX operators imported as one element-wise [`Unary`] ([`Builder::unary`]): the
/// node dispatch routes exactly these there, and a test imports each.
pub const UNARY: &[&str] = &[
    "Relu",
    "Sigmoid",
    "Tanh",
    "Erf",
    "Exp",
    "Log",
    "Sqrt",
    "Reciprocal",
    "Neg",
    "Abs",
    "Sign",
    "Floor",
    "Ceil",
    "Round",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Softsign",
    "Softplus",
    "HardSwish",
    "Mish",
    "Not",
    "IsNaN",
    "IsInf",
    "LeakyRelu",
    "HardSigmoid",
    "Elu",
    "Celu",
    "Selu",
    "ThresholdedRelu",
    "Shrink",
    "Cast",
    "Gelu",
    "Clip",
    "Trilu",
];

/// The ONNX operators imported as one element-wise [`Binary`] ([`Builder::binary`]), as
/// [`UNARY`].
pub const BINARY: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Pow",
    "Mod",
    "PRelu",
    "Equal",
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
];

impl Builder {
    pub(super) fn constant_node(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let name = cx.node.output.first().cloned().unwrap_or_default();
        let a = cx
            .node
            .attribute
            .first()
            .ok_or_else(|| cx.err("no value attribute"))?;
        let mut t = match a.name.as_str() {
            "value" => {
                a.t.clone()
                    .ok_or_else(|| cx.err("`value` holds no tensor"))?
            }
            "value_float" => TensorProto {
                data_type: data_type::FLOAT,
                float_data: vec![a.f],
                ..Default::default()
            },
            "value_floats" => TensorProto {
                data_type: data_type::FLOAT,
                dims: vec![a.floats.len() as i64],
                float_data: a.floats.clone(),
                ..Default::default()
            },
            "value_int" => TensorProto {
                data_type: data_type::INT64,
                int64_data: vec![a.i],
                ..Default::default()
            },
            "value_ints" => TensorProto {
                data_type: data_type::INT64,
                dims: vec![a.ints.len() as i64],
                int64_data: a.ints.clone(),
                ..Default::default()
            },
            other => return Err(cx.err(format!("attribute `{other}` is not supported"))),
        };
        t.name = name;
        self.constant(&t, &format!("node `{}` (Constant)", cx.name))?;
        Ok(())
    }

    pub(super) fn unary(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let plain = |u: Unary| -> Result<Unary, ImportError> {
            cx.only(&[])?;
            Ok(u)
        };
        let op = match cx.node.op_type.as_str() {
            "Relu" => plain(Unary::Relu)?,
            "Sigmoid" => plain(Unary::Sigmoid)?,
            "Tanh" => plain(Unary::Tanh)?,
            "Erf" => plain(Unary::Erf)?,
            "Exp" => plain(Unary::Exp)?,
            "Log" => plain(Unary::Log)?,
            "Sqrt" => plain(Unary::Sqrt)?,
            "Reciprocal" => plain(Unary::Reciprocal)?,
            "Neg" => plain(Unary::Neg)?,
            "Abs" => plain(Unary::Abs)?,
            "Sign" => plain(Unary::Sign)?,
            "Floor" => plain(Unary::Floor)?,
            "Ceil" => plain(Unary::Ceil)?,
            "Round" => plain(Unary::Round)?,
            "Sin" => plain(Unary::Sin)?,
            "Cos" => plain(Unary::Cos)?,
            "Tan" => plain(Unary::Tan)?,
            "Asin" => plain(Unary::Asin)?,
            "Acos" => plain(Unary::Acos)?,
            "Atan" => plain(Unary::Atan)?,
            "Sinh" => plain(Unary::Sinh)?,
            "Cosh" => plain(Unary::Cosh)?,
            "Softsign" => plain(Unary::Softsign)?,
            "Softplus" => plain(Unary::Softplus)?,
            "HardSwish" => plain(Unary::HardSwish)?,
            "Mish" => plain(Unary::Mish)?,
            "Not" => plain(Unary::Not)?,
            "IsNaN" => plain(Unary::IsNaN)?,
            "LeakyRelu" => {
                cx.only(&["alpha"])?;
                Unary::LeakyRelu(cx.float("alpha", 0.01)?)
            }
            "HardSigmoid" => {
                cx.only(&["alpha", "beta"])?;
                Unary::HardSigmoid(cx.float("alpha", 0.2)?, cx.float("beta", 0.5)?)
            }
            "Elu" => {
                cx.only(&["alpha"])?;
                Unary::Elu(cx.float("alpha", 1.0)?)
            }
            "Celu" => {
                cx.only(&["alpha"])?;
                let alpha = cx.float("alpha", 1.0)?;
                if alpha == 0.0 {
                    return Err(cx.err("alpha = 0"));
                }
                Unary::Celu(alpha)
            }
            "Selu" => {
                cx.only(&["alpha", "gamma"])?;
                Unary::Selu(
                    cx.float("alpha", 1.673_263_2)?,
                    cx.float("gamma", 1.050_701)?,
                )
            }
            "ThresholdedRelu" => {
                cx.only(&["alpha"])?;
                Unary::ThresholdedRelu(cx.float("alpha", 1.0)?)
            }
            "Shrink" => {
                cx.only(&["bias", "lambd"])?;
                Unary::Shrink(cx.float("bias", 0.0)?, cx.float("lambd", 0.5)?)
            }
            "IsInf" => {
                cx.only(&["detect_negative", "detect_positive"])?;
                Unary::IsInf {
                    negative: cx.int("detect_negative", 1)? != 0,
                    positive: cx.int("detect_positive", 1)? != 0,
                }
            }
            "Cast" => {
                cx.only(&["to", "saturate"])?;
                match cx.int("to", 0)? as i32 {
                    data_type::FLOAT | data_type::DOUBLE => {
                        let x = self.tensor(cx, 0)?;
                        let y = self.output(cx, self.shape(x))?;
                        self.push(cx, Op::View, vec![x], y);
                        return Ok(());
                    }
                    data_type::BOOL => Unary::Bool,
                    t if data_type::is_integer(t) => Unary::Trunc,
                    t => {
                        return Err(cx.err(format!(
                            "casting to {} is not supported",
                            data_type::name(t)
                        )))
                    }
                }
            }
            "Gelu" => {
                cx.only(&["approximate"])?;
                match cx.string("approximate")?.as_deref() {
                    None | Some("none") => Unary::Gelu { tanh: false },
                    Some("tanh") => Unary::Gelu { tanh: true },
                    Some(other) => {
                        return Err(cx.err(format!(
                            "approximate = \"{other}\" is not one of \"none\", \"tanh\""
                        )))
                    }
                }
            }
            "Clip" => {
                cx.only(&["min", "max"])?;
                let bound =
                    |b: &Builder, i: usize, attr: &str, default: f32| -> Result<f32, ImportError> {
                        match b.input(cx, i)? {
                            None => cx.float(attr, default),
                            Some(v) => b.g.scalar(v).ok_or_else(|| {
                                cx.err(format!(
                                    "input {i} (a bound) must be a one-element constant"
                                ))
                            }),
                        }
                    };
                Unary::Clip(
                    bound(self, 1, "min", f32::NEG_INFINITY)?,
                    bound(self, 2, "max", f32::INFINITY)?,
                )
            }
            "Trilu" => {
                cx.only(&["upper"])?;
                let k = match self.const_ints(cx, 1)? {
                    None => 0,
                    Some(v) if v.len() == 1 => v[0],
                    Some(v) => return Err(cx.err(format!("k = {v:?}: one value expected"))),
                };
                let x = self.tensor(cx, 0)?;
                if self.shape(x).len() < 2 {
                    return Err(cx.err("the input must have at least 2 dimensions"));
                }
                let k = i32::try_from(k).map_err(|_| cx.err(format!("k = {k}")))?;
                Unary::Trilu {
                    upper: cx.int("upper", 1)? != 0,
                    k,
                }
            }
            _ => unreachable!("dispatched by Builder::node"),
        };
        let x = self.tensor(cx, 0)?;
        let y = self.output(cx, self.shape(x))?;
        self.push(cx, Op::Unary(op), vec![x], y);
        Ok(())
    }

    /// Two-input element-wise operators, and the variadic Sum, Mean, Max and Min as a chain of
    /// them.
    pub(super) fn binary(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let op_type = cx.node.op_type.as_str();
        if op_type == "Mod" {
            cx.only(&["fmod"])?;
        } else {
            cx.only(&[])?;
        }
        let op = match op_type {
            "Add" | "Sum" | "Mean" => Binary::Add,
            "Sub" => Binary::Sub,
            "Mul" => Binary::Mul,
            "Div" => Binary::Div,
            "Max" => Binary::Max,
            "Min" => Binary::Min,
            "Pow" => Binary::Pow,
            "Mod" => Binary::Mod {
                fmod: cx.int("fmod", 0)? != 0,
            },
            "PRelu" => Binary::PRelu,
            "Equal" => Binary::Equal,
            "Less" => Binary::Less,
            "LessOrEqual" => Binary::LessOrEqual,
            "Greater" => Binary::Greater,
            "GreaterOrEqual" => Binary::GreaterOrEqual,
            "And" => Binary::And,
            "Or" => Binary::Or,
            "Xor" => Binary::Xor,
            _ => unreachable!("dispatched by Builder::node"),
        };
        let variadic = matches!(op_type, "Sum" | "Mean" | "Max" | "Min");
        let n = cx.node.input.len();
        if n == 0 || (!variadic && n != 2) {
            return Err(cx.err(format!("{n} inputs; two expected")));
        }
        let mut acc = self.tensor(cx, 0)?;
        if n == 1 && op_type != "Mean" {
            let y = self.output(cx, self.shape(acc))?;
            self.push(cx, Op::View, vec![acc], y);
            return Ok(());
        }
        let last = cx.node.output.first().cloned().unwrap_or_default();
        for i in 1..n {
            let b = self.tensor(cx, i)?;
            let shape = broadcast(&self.shape(acc), &self.shape(b)).ok_or_else(|| {
                cx.err(format!(
                    "shapes {:?} and {:?} do not broadcast",
                    self.shape(acc),
                    self.shape(b)
                ))
            })?;
            let out = if i + 1 == n && op_type != "Mean" {
                self.output(cx, shape)?
            } else {
                self.synthetic(&format!("{last}.{i}"), shape, None)
            };
            self.push(cx, Op::Binary(op), vec![acc, b], out);
            acc = out;
        }
        if op_type == "Mean" {
            let k = self.synthetic("1/n", vec![], Some(vec![1.0 / n as f32]));
            let y = self.output(cx, self.shape(acc))?;
            self.push(cx, Op::Binary(Binary::Mul), vec![acc, k], y);
        }
        Ok(())
    }

    /// `Where(condition, a, b)`, element-wise with broadcasting.
    pub(super) fn select(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&[])?;
        let (c, a, b) = (
            self.tensor(cx, 0)?,
            self.tensor(cx, 1)?,
            self.tensor(cx, 2)?,
        );
        let shape = broadcast(&self.shape(c), &self.shape(a))
            .and_then(|s| broadcast(&s, &self.shape(b)))
            .ok_or_else(|| {
                cx.err(format!(
                    "shapes {:?}, {:?} and {:?} do not broadcast",
                    self.shape(c),
                    self.shape(a),
                    self.shape(b)
                ))
            })?;
        let y = self.output(cx, shape)?;
        self.push(cx, Op::Where, vec![c, a, b], y);
        Ok(())
    }

    pub(super) fn view(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let x = self.tensor(cx, 0)?;
        let shape = self.view_shape(cx, &self.shape(x))?;
        let y = self.output(cx, shape)?;
        self.push(cx, Op::View, vec![x], y);
        Ok(())
    }

    /// The shape Reshape, Flatten, Squeeze or Unsqueeze gives a tensor of shape `input`.
    pub(super) fn view_shape(
        &self,
        cx: &NodeCx,
        input: &[usize],
    ) -> Result<Vec<usize>, ImportError> {
        let numel: usize = input.iter().product();
        let shape: Vec<usize> = match cx.node.op_type.as_str() {
            "Reshape" => {
                cx.only(&["allowzero"])?;
                let allowzero = cx.int("allowzero", 0)? != 0;
                let target = self
                    .const_ints(cx, 1)?
                    .ok_or_else(|| cx.err("the shape input is missing"))?;
                let mut out = Vec::new();
                let mut infer = None;
                for (i, &d) in target.iter().enumerate() {
                    match d {
                        -1 if infer.is_none() => {
                            infer = Some(i);
                            out.push(1);
                        }
                        0 if !allowzero => out.push(*input.get(i).ok_or_else(|| {
                            cx.err(format!(
                                "shape entry {i} copies a dimension the input does not have"
                            ))
                        })?),
                        d if d > 0 => out.push(d as usize),
                        _ => return Err(cx.err(format!("shape {target:?} is not supported"))),
                    }
                }
                let known = out
                    .iter()
                    .try_fold(1usize, |a, &d| a.checked_mul(d))
                    .ok_or_else(|| cx.err(format!("shape {target:?} is too large")))?;
                if let Some(i) = infer {
                    if known == 0 || !numel.is_multiple_of(known) {
                        return Err(cx.err(format!("cannot reshape {input:?} to {target:?}")));
                    }
                    out[i] = numel / known;
                }
                out
            }
            "Flatten" => {
                cx.only(&["axis"])?;
                let a = cx.int("axis", 1)?;
                let a = if a == input.len() as i64 {
                    input.len()
                } else {
                    axis(cx, a, input.len().max(1))?
                };
                let outer: usize = input[..a].iter().product();
                vec![outer, numel / outer.max(1)]
            }
            "Squeeze" => {
                cx.only(&[])?;
                match self.const_ints(cx, 1)? {
                    None => input.iter().copied().filter(|&d| d != 1).collect(),
                    Some(axes) => {
                        let axes: Vec<usize> = axes
                            .iter()
                            .map(|&a| axis(cx, a, input.len()))
                            .collect::<Result<_, _>>()?;
                        if let Some(&a) = axes.iter().find(|&&a| input[a] != 1) {
                            return Err(cx.err(format!("axis {a} of {input:?} is not 1")));
                        }
                        input
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| !axes.contains(i))
                            .map(|(_, &d)| d)
                            .collect()
                    }
                }
            }
            "Unsqueeze" => {
                cx.only(&[])?;
                let axes = self
                    .const_ints(cx, 1)?
                    .ok_or_else(|| cx.err("the axes input is missing"))?;
                let rank = input.len() + axes.len();
                let mut axes: Vec<usize> = axes
                    .iter()
                    .map(|&a| axis(cx, a, rank))
                    .collect::<Result<_, _>>()?;
                axes.sort_unstable();
                axes.dedup();
                if axes.len() + input.len() != rank {
                    return Err(cx.err("repeated axes"));
                }
                let mut rest = input.iter();
                (0..rank)
                    .map(|i| {
                        if axes.contains(&i) {
                            1
                        } else {
                            *rest.next().expect("rank counted")
                        }
                    })
                    .collect()
            }
            _ => unreachable!("dispatched by Builder::node"),
        };
        if shape.iter().product::<usize>() != numel {
            return Err(cx.err(format!("cannot view {input:?} as {shape:?}")));
        }
        Ok(shape)
    }

    pub(super) fn transpose(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&["perm"])?;
        let x = self.tensor(cx, 0)?;
        let input = self.shape(x);
        let perm = self.transpose_perm(cx, &input)?;
        let shape = perm.iter().map(|&p| input[p]).collect();
        let y = self.output(cx, shape)?;
        // A transpose that moves only dimensions of size 1 keeps the element order: a view.
        let moved: Vec<usize> = perm.iter().copied().filter(|&p| input[p] != 1).collect();
        let op = if moved.windows(2).all(|w| w[0] < w[1]) {
            Op::View
        } else {
            Op::Move(Move::Transpose(perm))
        };
        self.push(cx, op, vec![x], y);
        Ok(())
    }

    /// Slice, Pad, Concat, Split, Expand, Tile and Gather of a tensor a kernel computes (of
    /// constants, they are folded): their index inputs must be constants.
    pub(super) fn movement(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let op = cx.node.op_type.as_str();
        let x = self.tensor(cx, 0)?;
        let xs = self.shape(x);
        let ints = |b: &Builder, i: usize, what: &str| -> Result<Option<Vec<i64>>, ImportError> {
            b.const_ints(cx, i).map_err(|_| {
                cx.err(format!(
                    "{what} must be an integer constant (computed at import)"
                ))
            })
        };
        let (kind, inputs, shape) = match op {
            "Slice" => {
                cx.only(&[])?;
                let starts =
                    ints(self, 1, "starts")?.ok_or_else(|| cx.err("starts are missing"))?;
                let ends = ints(self, 2, "ends")?.ok_or_else(|| cx.err("ends are missing"))?;
                let axes = fold::slice_axes(
                    cx,
                    &xs,
                    &starts,
                    &ends,
                    ints(self, 3, "axes")?.as_deref(),
                    ints(self, 4, "steps")?.as_deref(),
                )?;
                let shape = axes.iter().map(|a| a.count).collect();
                (Move::Slice(axes), vec![x], shape)
            }
            "Split" => {
                let sizes = self.split_sizes(cx, &xs, ints(self, 1, "split")?)?;
                let a = axis(cx, cx.int("axis", 0)?, xs.len())?;
                let mut start = 0;
                for (o, len) in sizes.into_iter().enumerate() {
                    let mut axes: Vec<SliceAxis> = xs
                        .iter()
                        .map(|&d| SliceAxis {
                            start: 0,
                            step: 1,
                            count: d,
                        })
                        .collect();
                    axes[a] = SliceAxis {
                        start: start as i64,
                        step: 1,
                        count: len,
                    };
                    start += len;
                    let mut shape = xs.clone();
                    shape[a] = len;
                    let Some(name) = cx.node.output.get(o).filter(|n| !n.is_empty()) else {
                        continue;
                    };
                    if self.by_name.contains_key(name) {
                        return Err(cx.err(format!("output `{name}` is already defined")));
                    }
                    if len == 0 {
                        return Err(cx.err(format!("output `{name}` would be empty")));
                    }
                    let y = self.add_value(name, shape, None, None);
                    self.push(cx, Op::Move(Move::Slice(axes)), vec![x], y);
                }
                return Ok(());
            }
            "Pad" => {
                cx.only(&["mode", "pads", "value"])?;
                let r = xs.len();
                let pads = match (ints(self, 1, "pads")?, cx.ints("pads")?) {
                    (Some(p), _) | (None, Some(p)) => p,
                    (None, None) => return Err(cx.err("pads are missing")),
                };
                let axes: Vec<usize> = match ints(self, 3, "axes")? {
                    None => (0..r).collect(),
                    Some(a) => a
                        .iter()
                        .map(|&v| axis(cx, v, r))
                        .collect::<Result<_, _>>()?,
                };
                if pads.len() != 2 * axes.len() {
                    return Err(cx.err(format!("{} pads for {} axes", pads.len(), axes.len())));
                }
                if pads.iter().any(|&p| p < 0) {
                    return Err(
                        cx.err(format!("negative pads {pads:?} (a crop) are not supported"))
                    );
                }
                let (mut begins, mut ends) = (vec![0; r], vec![0; r]);
                for (i, &a) in axes.iter().enumerate() {
                    begins[a] = pads[i] as usize;
                    ends[a] = pads[i + axes.len()] as usize;
                }
                let value = match self.input(cx, 2)? {
                    None => cx.float("value", 0.0)?,
                    Some(v) => self
                        .g
                        .scalar(v)
                        .ok_or_else(|| cx.err("constant_value must be a one-element constant"))?,
                };
                let mode = match cx.string("mode")?.as_deref() {
                    None | Some("constant") => PadMode::Constant(value),
                    Some("edge") => PadMode::Edge,
                    Some("reflect") => {
                        if (0..r).any(|a| begins[a].max(ends[a]) >= xs[a]) {
                            return Err(cx.err(format!(
                                "reflect pads {pads:?} must be smaller than the dimensions {xs:?}"
                            )));
                        }
                        PadMode::Reflect
                    }
                    Some(other) => {
                        return Err(cx.err(format!("mode = \"{other}\" is not supported")))
                    }
                };
                let shape = (0..r).map(|a| xs[a] + begins[a] + ends[a]).collect();
                (Move::Pad { begins, ends, mode }, vec![x], shape)
            }
            "Concat" => {
                cx.only(&["axis"])?;
                let a = axis(cx, cx.int("axis", 0)?, xs.len())?;
                let mut inputs = Vec::new();
                let mut shape = xs.clone();
                shape[a] = 0;
                for i in 0..cx.node.input.len() {
                    let v = self.tensor(cx, i)?;
                    let vs = self.shape(v);
                    if vs.len() != xs.len() || (0..xs.len()).any(|j| j != a && vs[j] != xs[j]) {
                        return Err(cx.err(format!(
                            "shapes {xs:?} and {vs:?} do not concatenate on axis {a}"
                        )));
                    }
                    shape[a] += vs[a];
                    inputs.push(v);
                }
                if inputs.len() == 1 {
                    let y = self.output(cx, xs)?;
                    self.push(cx, Op::View, inputs, y);
                    return Ok(());
                }
                (Move::Concat { axis: a }, inputs, shape)
            }
            "Expand" => {
                cx.only(&[])?;
                let target =
                    ints(self, 1, "the shape")?.ok_or_else(|| cx.err("the shape is missing"))?;
                let target: Vec<usize> = shape_of(cx, &target)?;
                let shape = broadcast(&xs, &target)
                    .ok_or_else(|| cx.err(format!("{xs:?} does not expand to {target:?}")))?;
                if shape == xs {
                    let y = self.output(cx, xs)?;
                    self.push(cx, Op::View, vec![x], y);
                    return Ok(());
                }
                (Move::Expand, vec![x], shape)
            }
            "Tile" => {
                cx.only(&[])?;
                let reps =
                    ints(self, 1, "repeats")?.ok_or_else(|| cx.err("repeats are missing"))?;
                if reps.len() != xs.len() || reps.iter().any(|&r| r < 1) {
                    return Err(cx.err(format!("repeats {reps:?} for shape {xs:?}")));
                }
                let shape = xs
                    .iter()
                    .zip(&reps)
                    .map(|(&d, &r)| d * r as usize)
                    .collect();
                (Move::Tile, vec![x], shape)
            }
            _ => {
                // Gather with constant indices.
                cx.only(&["axis"])?;
                let a = axis(cx, cx.int("axis", 0)?, xs.len())?;
                let iv = self.required(cx, 1)?;
                let indices = self.g.values[iv]
                    .ints
                    .clone()
                    .ok_or_else(|| cx.err("the indices must be an integer constant; indices computed at run time are not supported"))?;
                let ishape = self.shape(iv);
                let indices = gather_indices(cx, &indices, xs[a])?;
                if indices.len() > 1 << 16 {
                    return Err(cx.err(format!(
                        "{} indices (at most 65536 are written into a kernel)",
                        indices.len()
                    )));
                }
                let mut shape = xs[..a].to_vec();
                shape.extend(&ishape);
                shape.extend(&xs[a + 1..]);
                (
                    Move::Gather {
                        axis: a,
                        indices,
                        shape: ishape,
                    },
                    vec![x],
                    shape,
                )
            }
        };
        let y = self.output(cx, shape)?;
        self.push(cx, Op::Move(kind), inputs, y);
        Ok(())
    }

    /// Resize with mode `nearest` or `linear`, the output's extents from `scales` or `sizes`.
    pub(super) fn resize(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&[
            "mode",
            "coordinate_transformation_mode",
            "nearest_mode",
            "cubic_coeff_a",
            "exclude_outside",
            "extrapolation_value",
            "antialias",
        ])?;
        if cx.int("antialias", 0)? != 0 || cx.int("exclude_outside", 0)? != 0 {
            return Err(cx.err("`antialias` and `exclude_outside` are not supported"));
        }
        let x = self.tensor(cx, 0)?;
        let xs = self.shape(x);
        let linear = match cx.string("mode")?.as_deref().unwrap_or("nearest") {
            "nearest" => false,
            "linear" => true,
            m => return Err(cx.err(format!("mode `{m}` is not supported (nearest, linear)"))),
        };
        let transform = match cx
            .string("coordinate_transformation_mode")?
            .as_deref()
            .unwrap_or("half_pixel")
        {
            "half_pixel" => CoordinateTransform::HalfPixel,
            "pytorch_half_pixel" => CoordinateTransform::PytorchHalfPixel,
            "asymmetric" => CoordinateTransform::Asymmetric,
            "align_corners" => CoordinateTransform::AlignCorners,
            m => {
                return Err(cx.err(format!(
                    "coordinate_transformation_mode `{m}` is not supported"
                )))
            }
        };
        let nearest = match cx
            .string("nearest_mode")?
            .as_deref()
            .unwrap_or("round_prefer_floor")
        {
            "round_prefer_floor" => NearestMode::RoundPreferFloor,
            "round_prefer_ceil" => NearestMode::RoundPreferCeil,
            "floor" => NearestMode::Floor,
            "ceil" => NearestMode::Ceil,
            m => return Err(cx.err(format!("nearest_mode `{m}` is not supported"))),
        };
        // Scales (input 2, floats) or sizes (input 3, integers), constants; an empty tensor is none.
        let scales = match self.input(cx, 2)? {
            Some(v) => self.g.values[v]
                .data
                .clone()
                .ok_or_else(|| cx.err("the scales must be a constant"))?,
            None => vec![],
        };
        let sizes = self.const_ints(cx, 3)?.unwrap_or_default();
        let axes: Vec<ResizeAxis> = match (scales.is_empty(), sizes.is_empty()) {
            (false, true) if scales.len() == xs.len() => xs
                .iter()
                .zip(&scales)
                .map(|(&d, &s)| {
                    let out = (d as f64 * f64::from(s)).floor();
                    if !(s > 0.0 && s.is_finite()) || out < 1.0 || out > super::MAX_ELEMENTS as f64
                    {
                        return Err(cx.err(format!("scale {s} for extent {d}")));
                    }
                    Ok(ResizeAxis {
                        input: d,
                        output: out as usize,
                        scale: s,
                        transform,
                    })
                })
                .collect::<Result<_, _>>()?,
            (true, false) if sizes.len() == xs.len() => xs
                .iter()
                .zip(&sizes)
                .map(|(&d, &n)| {
                    let out = usize::try_from(n)
                        .ok()
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| cx.err(format!("size {n}")))?;
                    Ok(ResizeAxis {
                        input: d,
                        output: out,
                        scale: out as f32 / d as f32,
                        transform,
                    })
                })
                .collect::<Result<_, ImportError>>()?,
            _ => {
                return Err(cx.err(format!(
                "exactly one of scales and sizes must be given, one value per dimension of {xs:?}"
            )))
            }
        };
        if linear
            && axes
                .iter()
                .filter(|a| a.input != a.output || a.scale != 1.0)
                .count()
                > 3
        {
            return Err(
                cx.err("linear interpolation along more than 3 dimensions is not supported")
            );
        }
        let shape: Vec<usize> = axes.iter().map(|a| a.output).collect();
        super::check_size(&shape).map_err(|e| cx.err(e))?;
        let y = self.output(cx, shape)?;
        self.push(
            cx,
            Op::Move(Move::Resize {
                axes,
                linear,
                nearest,
            }),
            vec![x],
            y,
        );
        Ok(())
    }

    /// Einsum of two operands as far as it is a (batched) matrix product: every index is a
    /// batch index (in both operands and the output), a row or column index (in one operand and
    /// the output) or a contracted one (in both operands, not the output). The operands are
    /// transposed where their indices are not already in that order (or read transposed), viewed
    /// as (batch, rows, k) and (batch, k, columns), multiplied, viewed back and transposed into
    /// the output's order. `...` stands for the same leading dimensions in both.
    pub(super) fn einsum(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&["equation"])?;
        let equation: String = cx
            .string("equation")?
            .ok_or_else(|| cx.err("the equation is missing"))?
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let unsupported = |why: &str| {
            cx.err(format!(
                "equation `{}`: {why}",
                crate::text::printable(&equation, 80)
            ))
        };
        if cx.node.input.len() != 2 {
            return Err(unsupported("only two operands are supported"));
        }
        let (a, b) = (self.tensor(cx, 0)?, self.tensor(cx, 1)?);
        let (sa, sb) = (self.shape(a), self.shape(b));
        let (lhs, rhs) = match equation.split_once("->") {
            Some((l, r)) => (l.to_string(), Some(r.to_string())),
            None => (equation.clone(), None),
        };
        let terms: Vec<&str> = lhs.split(',').collect();
        let [ta, tb] = terms[..] else {
            return Err(unsupported(&format!(
                "{} operand term(s); two operands expected",
                terms.len()
            )));
        };
        // `...` becomes the same fresh labels in each term (the leading dimensions): characters
        // from U+0100 on, which no label the user writes (ASCII letters) can be.
        let expand = |term: &str, rank: usize| -> Result<Vec<char>, ImportError> {
            let explicit = term.replacen("...", "", 1);
            if explicit.chars().any(|c| !c.is_ascii_alphabetic()) {
                return Err(unsupported(
                    "indices are ASCII letters, with at most one `...` a term",
                ));
            }
            let count = explicit.chars().count();
            let dots = if term.contains("...") {
                rank.checked_sub(count)
                    .ok_or_else(|| unsupported("more indices than dimensions"))?
            } else {
                0
            };
            if dots > super::MAX_RANK {
                return Err(unsupported("`...` stands for too many dimensions"));
            }
            let fresh: String = (0..dots)
                .filter_map(|i| char::from_u32(0x100 + i as u32))
                .collect();
            Ok(term.replacen("...", &fresh, 1).chars().collect())
        };
        let (la, lb) = (expand(ta, sa.len())?, expand(tb, sb.len())?);
        let placeholder = |c: &char| !c.is_ascii();
        let dots = |l: &[char]| l.iter().filter(|c| placeholder(c)).count();
        if ta.contains("...") && tb.contains("...") && dots(&la) != dots(&lb) {
            return Err(unsupported(
                "`...` stands for different numbers of dimensions in the two operands",
            ));
        }
        if la.len() != sa.len() || lb.len() != sb.len() {
            return Err(unsupported(&format!(
                "the operands have shapes {sa:?} and {sb:?}"
            )));
        }
        let lo: Vec<char> = match &rhs {
            Some(r) => expand(
                r,
                dots(&la).max(dots(&lb)) + r.replace("...", "").chars().count(),
            )?,
            None => {
                // Implicit output: the leading dimensions, then the indices seen once, sorted.
                let mut once: Vec<char> = la
                    .iter()
                    .chain(&lb)
                    .copied()
                    .filter(|c| {
                        !placeholder(c) && la.iter().chain(&lb).filter(|d| *d == c).count() == 1
                    })
                    .collect();
                once.sort_unstable();
                let lead = if dots(&la) >= dots(&lb) { &la } else { &lb };
                lead.iter()
                    .copied()
                    .filter(|c| placeholder(c))
                    .chain(once)
                    .collect()
            }
        };
        for (what, l) in [
            ("first operand", &la),
            ("second operand", &lb),
            ("output", &lo),
        ] {
            if (1..l.len()).any(|i| l[..i].contains(&l[i])) {
                return Err(unsupported(&format!(
                    "an index repeated in the {what} (a diagonal) is not supported"
                )));
            }
        }
        let size = |c: char| -> Option<usize> {
            la.iter()
                .position(|&d| d == c)
                .map(|i| sa[i])
                .or_else(|| lb.iter().position(|&d| d == c).map(|i| sb[i]))
        };
        for (i, &c) in la.iter().enumerate() {
            if let Some(j) = lb.iter().position(|&d| d == c) {
                if sa[i] != sb[j] {
                    return Err(unsupported(&format!(
                        "index `{c}` is {} in one operand and {} in the other",
                        sa[i], sb[j]
                    )));
                }
            }
        }
        let in_a = |c: &char| la.contains(c);
        let in_b = |c: &char| lb.contains(c);
        let in_o = |c: &char| lo.contains(c);
        if let Some(c) = lo.iter().find(|c| !in_a(c) && !in_b(c)) {
            return Err(unsupported(&format!("output index `{c}` is in no operand")));
        }
        if let Some(c) = la
            .iter()
            .chain(&lb)
            .find(|c| in_a(c) != in_b(c) && !in_o(c))
        {
            return Err(unsupported(&format!(
                "index `{c}` is summed within one operand (a reduction, not a product)"
            )));
        }
        // Batch, rows, columns and contracted indices, in the output's order (k in A's).
        let batch: Vec<char> = lo.iter().copied().filter(|c| in_a(c) && in_b(c)).collect();
        let rows: Vec<char> = lo.iter().copied().filter(|c| in_a(c) && !in_b(c)).collect();
        let cols: Vec<char> = lo.iter().copied().filter(|c| in_b(c) && !in_a(c)).collect();
        let ks: Vec<char> = la.iter().copied().filter(|c| in_b(c) && !in_o(c)).collect();
        let prod = |l: &[char]| -> usize { l.iter().map(|&c| size(c).unwrap_or(1)).product() };
        let (bt, m, n, k) = (prod(&batch), prod(&rows), prod(&cols), prod(&ks));
        let name = cx.node.output.first().cloned().unwrap_or_default();
        // An operand arranged as `order` (its letters), read transposed when `alt` is its order.
        let arrange = |b: &mut Self,
                       v: ValueId,
                       letters: &[char],
                       order: Vec<char>,
                       alt: Vec<char>,
                       shape: Vec<usize>,
                       tag: &str|
         -> (ValueId, bool) {
            let (target, trans) = if letters == alt.as_slice() && letters != order.as_slice() {
                (alt, true)
            } else {
                (order, false)
            };
            let mut v = v;
            if letters != target.as_slice() {
                let perm: Vec<usize> = target
                    .iter()
                    .map(|c| {
                        letters
                            .iter()
                            .position(|d| d == c)
                            .expect("an index of the operand")
                    })
                    .collect();
                let moved = b.synthetic(
                    &format!("{name}.{tag}"),
                    target.iter().map(|&c| size(c).unwrap_or(1)).collect(),
                    None,
                );
                b.push(cx, Op::Move(Move::Transpose(perm)), vec![v], moved);
                v = moved;
            }
            let shape = if trans {
                [shape[0], shape[2], shape[1]].to_vec()
            } else {
                shape
            };
            let shape: Vec<usize> = if bt == 1 { shape[1..].to_vec() } else { shape };
            let viewed = b.synthetic(&format!("{name}.{tag}.view"), shape, None);
            b.push(cx, Op::View, vec![v], viewed);
            (viewed, trans)
        };
        let cat = |p: &[&[char]]| -> Vec<char> { p.concat() };
        let (a2, trans_a) = arrange(
            self,
            a,
            &la,
            cat(&[&batch, &rows, &ks]),
            cat(&[&batch, &ks, &rows]),
            vec![bt, m, k],
            "a",
        );
        let (b2, trans_b) = arrange(
            self,
            b,
            &lb,
            cat(&[&batch, &ks, &cols]),
            cat(&[&batch, &cols, &ks]),
            vec![bt, k, n],
            "b",
        );
        let product_shape = if bt == 1 { vec![m, n] } else { vec![bt, m, n] };
        let p = self.synthetic(&format!("{name}.product"), product_shape, None);
        self.push(cx, Op::MatMul { trans_a, trans_b }, vec![a2, b2], p);
        let natural = cat(&[&batch, &rows, &cols]);
        let natural_shape: Vec<usize> = natural.iter().map(|&c| size(c).unwrap_or(1)).collect();
        let out_shape: Vec<usize> = lo.iter().map(|&c| size(c).unwrap_or(1)).collect();
        if natural == lo {
            let y = self.output(cx, out_shape)?;
            self.push(cx, Op::View, vec![p], y);
        } else {
            let unflat = self.synthetic(&format!("{name}.unflat"), natural_shape, None);
            self.push(cx, Op::View, vec![p], unflat);
            let perm: Vec<usize> = lo
                .iter()
                .map(|c| {
                    natural
                        .iter()
                        .position(|d| d == c)
                        .expect("an output index")
                })
                .collect();
            let y = self.output(cx, out_shape)?;
            self.push(cx, Op::Move(Move::Transpose(perm)), vec![unflat], y);
        }
        Ok(())
    }

    /// DepthToSpace and SpaceToDepth: a view, a transpose and a view.
    pub(super) fn depth_space(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&["blocksize", "mode"])?;
        let x = self.tensor(cx, 0)?;
        let xs = self.shape(x);
        let b = usize::try_from(cx.int("blocksize", 0)?)
            .ok()
            .filter(|&b| b >= 1)
            .ok_or_else(|| cx.err("blocksize must be positive"))?;
        let [n, c, h, w] = xs[..] else {
            return Err(cx.err(format!("input {xs:?}: (N, C, H, W) expected")));
        };
        let to_space = cx.node.op_type == "DepthToSpace";
        let crd = cx.string("mode")?.as_deref() == Some("CRD");
        let (split, perm, out) = if to_space {
            if c % (b * b) != 0 {
                return Err(cx.err(format!(
                    "{c} channels are not a multiple of blocksize² = {}",
                    b * b
                )));
            }
            if crd {
                (
                    vec![n, c / (b * b), b, b, h, w],
                    vec![0, 1, 4, 2, 5, 3],
                    vec![n, c / (b * b), h * b, w * b],
                )
            } else {
                (
                    vec![n, b, b, c / (b * b), h, w],
                    vec![0, 3, 4, 1, 5, 2],
                    vec![n, c / (b * b), h * b, w * b],
                )
            }
        } else {
            if h % b != 0 || w % b != 0 {
                return Err(cx.err(format!("{h} x {w} is not a multiple of blocksize {b}")));
            }
            (
                vec![n, c, h / b, b, w / b, b],
                vec![0, 3, 5, 1, 2, 4],
                vec![n, c * b * b, h / b, w / b],
            )
        };
        let last = cx.node.output.first().cloned().unwrap_or_default();
        let viewed = self.synthetic(&format!("{last}.split"), split.clone(), None);
        self.push(cx, Op::View, vec![x], viewed);
        let moved = self.synthetic(
            &format!("{last}.moved"),
            perm.iter().map(|&p| split[p]).collect(),
            None,
        );
        self.push(cx, Op::Move(Move::Transpose(perm)), vec![viewed], moved);
        let y = self.output(cx, out)?;
        self.push(cx, Op::View, vec![moved], y);
        Ok(())
    }

    /// Transpose's `perm` for a tensor of shape `input`, checked.
    pub(super) fn transpose_perm(
        &self,
        cx: &NodeCx,
        input: &[usize],
    ) -> Result<Vec<usize>, ImportError> {
        cx.only(&["perm"])?;
        let perm: Vec<usize> = match cx.ints("perm")? {
            None => (0..input.len()).rev().collect(),
            Some(p) => p
                .iter()
                .map(|&a| axis(cx, a, input.len()))
                .collect::<Result<_, _>>()?,
        };
        let mut seen = perm.clone();
        seen.sort_unstable();
        if seen != (0..input.len()).collect::<Vec<_>>() {
            return Err(cx.err(format!(
                "perm {perm:?} is not a permutation of the input's {} axes",
                input.len()
            )));
        }
        Ok(perm)
    }

    /// The lengths Split cuts axis `axis` of `input` into: the `split` input, or
    /// `num_outputs` (opset 18) or the number of outputs in equal parts (the last smaller).
    pub(super) fn split_sizes(
        &self,
        cx: &NodeCx,
        input: &[usize],
        split: Option<Vec<i64>>,
    ) -> Result<Vec<usize>, ImportError> {
        cx.only(&["axis", "num_outputs", "split"])?;
        let a = axis(cx, cx.int("axis", 0)?, input.len())?;
        let d = input[a];
        let split = split.or(cx.ints("split")?);
        let sizes: Vec<usize> = match split {
            Some(s) => {
                let sizes: Vec<usize> = s
                    .iter()
                    .map(|&v| usize::try_from(v).map_err(|_| cx.err(format!("split {s:?}"))))
                    .collect::<Result<_, _>>()?;
                if sizes.iter().sum::<usize>() != d {
                    return Err(cx.err(format!("split {s:?} does not add up to the dimension {d}")));
                }
                sizes
            }
            None => {
                let n = match cx.int("num_outputs", 0)? {
                    0 => cx.node.output.len(),
                    n => usize::try_from(n).map_err(|_| cx.err(format!("num_outputs = {n}")))?,
                };
                if n == 0 || n > d {
                    return Err(cx.err(format!("{n} outputs for a dimension of {d}")));
                }
                let part = d.div_ceil(n);
                (0..n)
                    .map(|i| part.min(d.saturating_sub(i * part)))
                    .collect()
            }
        };
        if sizes.len() != cx.node.output.len() {
            return Err(cx.err(format!(
                "{} parts for {} outputs",
                sizes.len(),
                cx.node.output.len()
            )));
        }
        Ok(sizes)
    }

    pub(super) fn matmul_shape(
        &self,
        cx: &NodeCx,
        a: &[usize],
        b: &[usize],
        trans_a: bool,
        trans_b: bool,
    ) -> Result<Vec<usize>, ImportError> {
        if a.is_empty() || b.is_empty() {
            return Err(cx.err("scalar operands are not supported"));
        }
        let (a2, b2): (Vec<usize>, Vec<usize>) = (
            if a.len() == 1 {
                vec![1, a[0]]
            } else {
                a.to_vec()
            },
            if b.len() == 1 {
                vec![b[0], 1]
            } else {
                b.to_vec()
            },
        );
        let (m, ka) = if trans_a {
            (a2[a2.len() - 1], a2[a2.len() - 2])
        } else {
            (a2[a2.len() - 2], a2[a2.len() - 1])
        };
        let (kb, n) = if trans_b {
            (b2[b2.len() - 1], b2[b2.len() - 2])
        } else {
            (b2[b2.len() - 2], b2[b2.len() - 1])
        };
        if ka != kb {
            return Err(cx.err(format!("inner dimensions differ: {a:?} x {b:?}")));
        }
        let (ba, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
        // Batches: equal, or one side without batch dimensions (all 1: a weight matrix).
        let batch = if ba == bb || ba.iter().all(|&d| d == 1) || bb.iter().all(|&d| d == 1) {
            broadcast(ba, bb).expect("equal or all-ones batches broadcast")
        } else {
            return Err(cx.err(format!("batch dimensions {ba:?} and {bb:?}: only equal batches, or one operand without batch, are supported")));
        };
        let mut out = batch;
        if a.len() > 1 {
            out.push(m);
        }
        if b.len() > 1 {
            out.push(n);
        }
        Ok(out)
    }

    pub(super) fn matmul(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&[])?;
        let a = self.tensor(cx, 0)?;
        let b = self.tensor(cx, 1)?;
        let shape = self.matmul_shape(cx, &self.shape(a), &self.shape(b), false, false)?;
        let y = self.output(cx, shape)?;
        self.push(
            cx,
            Op::MatMul {
                trans_a: false,
                trans_b: false,
            },
            vec![a, b],
            y,
        );
        Ok(())
    }

    /// `alpha * A' B' + beta * C` as a MatMul followed by element-wise operators (which fusion
    /// puts back into one kernel); a constant C is scaled here.
    pub(super) fn gemm(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&["alpha", "beta", "transA", "transB"])?;
        let alpha = cx.float("alpha", 1.0)?;
        let beta = cx.float("beta", 1.0)?;
        let (trans_a, trans_b) = (cx.int("transA", 0)? != 0, cx.int("transB", 0)? != 0);
        let a = self.tensor(cx, 0)?;
        let b = self.tensor(cx, 1)?;
        if self.shape(a).len() != 2 || self.shape(b).len() != 2 {
            return Err(cx.err(format!(
                "Gemm operands must be matrices, given {:?} and {:?}",
                self.shape(a),
                self.shape(b)
            )));
        }
        let shape = self.matmul_shape(cx, &self.shape(a), &self.shape(b), trans_a, trans_b)?;
        let c = match self.input(cx, 2)? {
            Some(_) => {
                let c = self.tensor(cx, 2)?;
                let cs = self.shape(c);
                if broadcast(&cs, &shape).as_deref() != Some(&shape[..]) {
                    return Err(
                        cx.err(format!("C of shape {cs:?} does not broadcast to {shape:?}"))
                    );
                }
                Some(c)
            }
            None => None,
        };
        let last = cx.node.output.first().cloned().unwrap_or_default();
        let mut cur = if alpha == 1.0 && c.is_none() {
            self.output(cx, shape.clone())?
        } else {
            self.synthetic(&format!("{last}.matmul"), shape.clone(), None)
        };
        self.push(cx, Op::MatMul { trans_a, trans_b }, vec![a, b], cur);
        if alpha != 1.0 {
            let k = self.synthetic("alpha", vec![], Some(vec![alpha]));
            let next = if c.is_none() {
                self.output(cx, shape.clone())?
            } else {
                self.synthetic(&format!("{last}.alpha"), shape.clone(), None)
            };
            self.push(cx, Op::Binary(Binary::Mul), vec![cur, k], next);
            cur = next;
        }
        if let Some(c) = c {
            let term = if beta == 1.0 {
                c
            } else if let Some(data) = self.g.values[c].data.clone() {
                let shape = self.shape(c);
                self.synthetic(
                    "beta*C",
                    shape,
                    Some(data.iter().map(|v| v * beta).collect()),
                )
            } else {
                let k = self.synthetic("beta", vec![], Some(vec![beta]));
                let scaled = self.synthetic("beta*C", self.shape(c), None);
                self.push(cx, Op::Binary(Binary::Mul), vec![c, k], scaled);
                scaled
            };
            let out = self.output(cx, shape)?;
            self.push(cx, Op::Binary(Binary::Add), vec![cur, term], out);
        }
        Ok(())
    }

    /// Kernel, strides, dilations and pads of a window operator over the input's `spatial`
    /// dimensions (1 to 3), as a [`Window`].
    pub(super) fn window(
        &self,
        cx: &NodeCx,
        spatial: &[usize],
        kernel: Vec<usize>,
        transposed: bool,
    ) -> Result<Window, ImportError> {
        let r = spatial.len();
        let list = |name: &str, default: usize, min: i64| -> Result<Vec<usize>, ImportError> {
            match cx.ints(name)? {
                None => Ok(vec![default; r]),
                Some(v) if v.len() == r && v.iter().all(|&x| (min..=MAX_WINDOW).contains(&x)) => {
                    Ok(v.iter().map(|&x| x as usize).collect())
                }
                Some(v) => Err(cx.err(format!(
                    "`{name}` = {v:?}: expected {r} values in {min}..={MAX_WINDOW}"
                ))),
            }
        };
        let strides = list("strides", 1, 1)?;
        let dilations = list("dilations", 1, 1)?;
        let output_padding = if transposed {
            list("output_padding", 0, 0)?
        } else {
            vec![0; r]
        };
        for i in 0..r {
            if output_padding[i] >= strides[i].max(dilations[i]) {
                return Err(cx.err(format!("output_padding {output_padding:?} must be smaller than the stride or the dilation")));
            }
        }
        let mut pads = match cx.ints("pads")? {
            None => vec![0; 2 * r],
            Some(v) if v.len() == 2 * r && v.iter().all(|&x| (0..=MAX_WINDOW).contains(&x)) => {
                v.iter().map(|&x| x as usize).collect()
            }
            Some(v) => {
                return Err(cx.err(format!(
                    "`pads` = {v:?}: expected {} values in 0..={MAX_WINDOW}",
                    2 * r
                )))
            }
        };
        match cx.string("auto_pad")?.as_deref() {
            None | Some("NOTSET") => {}
            Some("VALID") => pads = vec![0; 2 * r],
            Some(mode @ ("SAME_UPPER" | "SAME_LOWER")) if !transposed => {
                for i in 0..r {
                    let out = spatial[i].div_ceil(strides[i]);
                    let extent = (kernel[i] - 1) * dilations[i] + 1;
                    let total = ((out - 1) * strides[i] + extent).saturating_sub(spatial[i]);
                    let (small, big) = (total / 2, total - total / 2);
                    (pads[i], pads[i + r]) = if mode == "SAME_UPPER" {
                        (small, big)
                    } else {
                        (big, small)
                    };
                }
            }
            Some(other) => {
                return Err(cx.err(format!("auto_pad = \"{other}\" is not supported here")))
            }
        }
        let mut w = Window {
            rank: r,
            kernel: [1; 3],
            strides: [1; 3],
            dilations: [1; 3],
            pads: [0; 6],
            output_padding: [0; 3],
            ceil: false,
        };
        for i in 0..r {
            let j = 3 - r + i;
            w.kernel[j] = kernel[i];
            w.strides[j] = strides[i];
            w.dilations[j] = dilations[i];
            w.pads[j] = pads[i];
            w.pads[j + 3] = pads[i + r];
            w.output_padding[j] = output_padding[i];
        }
        Ok(w)
    }

    pub(super) fn conv(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let transposed = cx.node.op_type == "ConvTranspose";
        cx.only(&[
            "auto_pad",
            "dilations",
            "group",
            "kernel_shape",
            "pads",
            "strides",
            "output_padding",
        ])?;
        if !transposed && cx.attr("output_padding").is_some() {
            return Err(cx.err("attribute `output_padding` is not supported"));
        }
        let x = self.tensor(cx, 0)?;
        let w = self.tensor(cx, 1)?;
        let (xs, ws) = (self.shape(x), self.shape(w));
        if ws.contains(&0) || ws.iter().skip(2).any(|&k| k as i64 > MAX_WINDOW) {
            return Err(cx.err(format!("weight of shape {ws:?}")));
        }
        if !(3..=5).contains(&xs.len()) || ws.len() != xs.len() {
            return Err(cx.err(format!("input {xs:?} and weight {ws:?}: 1-D, 2-D and 3-D convolutions (N, C, [[D,] H,] W) are supported")));
        }
        let groups = cx.int("group", 1)?;
        let groups = usize::try_from(groups)
            .ok()
            .filter(|&g| g >= 1 && g <= xs[1])
            .ok_or_else(|| cx.err(format!("group = {groups} for {} input channels", xs[1])))?;
        let spatial = &xs[2..];
        let kernel = ws[2..].to_vec();
        if let Some(k) = cx.ints("kernel_shape")? {
            if k.iter().map(|&v| v as usize).collect::<Vec<_>>() != kernel {
                return Err(cx.err(format!(
                    "kernel_shape {k:?} differs from the weight's {kernel:?}"
                )));
            }
        }
        let window = self.window(cx, spatial, kernel.clone(), transposed)?;
        let cin = xs[1];
        let (cout, cin_per_group) = if transposed {
            (ws[1] * groups, ws[0])
        } else {
            (ws[0], ws[1])
        };
        if transposed {
            if cin != ws[0] || cin % groups != 0 {
                return Err(cx.err(format!(
                    "input channels {cin} and weight {ws:?} with group = {groups} do not agree"
                )));
            }
        } else if cin % groups != 0 || cout % groups != 0 || cin / groups != cin_per_group {
            return Err(cx.err(format!(
                "input channels {cin}, weight {ws:?} and group = {groups} do not agree"
            )));
        }
        let mut out = vec![xs[0], cout];
        let input = window.spatial(&xs);
        for (i, &extent) in input.iter().enumerate() {
            if window.present(i) {
                out.push(
                    window.output(i, extent, transposed).ok_or_else(|| {
                        cx.err(format!("the window does not fit the input {xs:?}"))
                    })?,
                );
            }
        }
        let mut inputs = vec![x, w];
        if self.input(cx, 2)?.is_some() {
            let b = self.tensor(cx, 2)?;
            if self.shape(b) != [cout] {
                return Err(cx.err(format!(
                    "bias of shape {:?}, expected [{cout}]",
                    self.shape(b)
                )));
            }
            inputs.push(b);
        }
        let y = self.output(cx, out)?;
        let op = if transposed {
            Op::ConvTranspose { window, groups }
        } else {
            Op::Conv { window, groups }
        };
        self.push(cx, op, inputs, y);
        Ok(())
    }

    /// Inference batch normalization as `x * s + t` with per-channel constants
    /// (s = scale / sqrt(var + eps), t = bias - mean * s); fusion folds them into a preceding
    /// convolution's weights.
    pub(super) fn batch_norm(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&["epsilon", "momentum", "training_mode"])?;
        if cx.int("training_mode", 0)? != 0 {
            return Err(cx.err("training_mode = 1 is not supported (inference only)"));
        }
        let eps = cx.float("epsilon", 1e-5)?;
        let x = self.tensor(cx, 0)?;
        let xs = self.shape(x);
        if xs.len() < 2 {
            return Err(cx.err(format!("input {xs:?}: expected (N, C, ...)")));
        }
        let c = xs[1];
        let mut params = Vec::new();
        for (i, what) in ["scale", "B", "input_mean", "input_var"].iter().enumerate() {
            let v = self.tensor(cx, i + 1)?;
            let data = self.g.values[v]
                .data
                .clone()
                .ok_or_else(|| cx.err(format!("`{what}` must be a constant (an initializer)")))?;
            if data.len() != c {
                return Err(cx.err(format!(
                    "`{what}` has {} values for {c} channels",
                    data.len()
                )));
            }
            params.push(data);
        }
        let s: Vec<f32> = (0..c)
            .map(|i| (params[0][i] as f64 / (params[3][i] as f64 + eps as f64).sqrt()) as f32)
            .collect();
        let t: Vec<f32> = (0..c)
            .map(|i| (params[1][i] as f64 - params[2][i] as f64 * s[i] as f64) as f32)
            .collect();
        let mut cshape = vec![c];
        cshape.extend(std::iter::repeat_n(1, xs.len() - 2));
        let sv = self.synthetic("bn.scale", cshape.clone(), Some(s));
        let tv = self.synthetic("bn.shift", cshape, Some(t));
        let last = cx.node.output.first().cloned().unwrap_or_default();
        let mid = self.synthetic(&format!("{last}.scaled"), xs.clone(), None);
        self.push(cx, Op::Binary(Binary::Mul), vec![x, sv], mid);
        let y = self.output(cx, xs)?;
        self.push(cx, Op::Binary(Binary::Add), vec![mid, tv], y);
        Ok(())
    }

    pub(super) fn pool(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let max = cx.node.op_type == "MaxPool";
        cx.only(&[
            "auto_pad",
            "ceil_mode",
            "count_include_pad",
            "dilations",
            "kernel_shape",
            "pads",
            "strides",
            "storage_order",
        ])?;
        if cx.node.output.get(1).is_some_and(|o| !o.is_empty()) {
            return Err(cx.err("the Indices output is not supported"));
        }
        let x = self.tensor(cx, 0)?;
        let xs = self.shape(x);
        if !(3..=5).contains(&xs.len()) {
            return Err(cx.err(format!(
                "input {xs:?}: 1-D, 2-D and 3-D pooling (N, C, [[D,] H,] W) are supported"
            )));
        }
        let kernel = cx
            .ints("kernel_shape")?
            .ok_or_else(|| cx.err("`kernel_shape` is required"))?;
        if kernel.iter().any(|&v| !(1..=MAX_WINDOW).contains(&v)) {
            return Err(cx.err(format!(
                "kernel_shape {kernel:?}: values in 1..={MAX_WINDOW} expected"
            )));
        }
        let kernel: Vec<usize> = kernel.iter().map(|&v| v as usize).collect();
        if kernel.len() != xs.len() - 2 {
            return Err(cx.err(format!("kernel_shape {kernel:?} for input {xs:?}")));
        }
        if !max
            && cx
                .ints("dilations")?
                .is_some_and(|d| d.iter().any(|&v| v != 1))
        {
            return Err(cx.err("dilations other than 1 are not supported for AveragePool"));
        }
        let mut window = self.window(cx, &xs[2..], kernel, false)?;
        window.ceil = cx.int("ceil_mode", 0)? != 0;
        let input = window.spatial(&xs);
        let mut out = vec![xs[0], xs[1]];
        for (i, &extent) in input.iter().enumerate() {
            if window.present(i) {
                out.push(
                    window.output(i, extent, false).ok_or_else(|| {
                        cx.err(format!("the window does not fit the input {xs:?}"))
                    })?,
                );
            }
            // A padding as large as the window would leave windows of padding only.
            if window.pads[i].max(window.pads[i + 3]) >= window.extent(i) {
                return Err(cx.err("pads as large as the window are not supported"));
            }
        }
        let y = self.output(cx, out)?;
        let count_include_pad = cx.int("count_include_pad", 0)? != 0;
        self.push(
            cx,
            Op::Pool {
                kind: if max { PoolKind::Max } else { PoolKind::Avg },
                window,
                count_include_pad,
            },
            vec![x],
            y,
        );
        Ok(())
    }

    pub(super) fn reduce(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let arg = matches!(cx.node.op_type.as_str(), "ArgMax" | "ArgMin");
        if arg {
            cx.only(&["axis", "keepdims", "select_last_index"])?;
        } else {
            cx.only(&["axes", "keepdims", "noop_with_empty_axes"])?;
        }
        let last = cx.int("select_last_index", 0)? != 0;
        let kind = match cx.node.op_type.as_str() {
            "ReduceSum" => ReduceKind::Sum,
            "ReduceMean" => ReduceKind::Mean,
            "ReduceMax" => ReduceKind::Max,
            "ReduceMin" => ReduceKind::Min,
            "ReduceProd" => ReduceKind::Prod,
            "ReduceL1" => ReduceKind::L1,
            "ReduceL2" => ReduceKind::L2,
            "ReduceSumSquare" => ReduceKind::SumSquare,
            "ReduceLogSum" => ReduceKind::LogSum,
            "ReduceLogSumExp" => ReduceKind::LogSumExp,
            "ArgMax" => ReduceKind::ArgMax { last },
            _ => ReduceKind::ArgMin { last },
        };
        let x = self.tensor(cx, 0)?;
        let xs = self.shape(x);
        if xs.is_empty() {
            return Err(cx.err("reducing a scalar is not supported"));
        }
        let mut axes: Vec<usize> = if arg {
            vec![axis(cx, cx.int("axis", 0)?, xs.len())?]
        } else {
            // Axes are an attribute before opset 18 (13 for ReduceSum) and an input after.
            let axes = match (cx.ints("axes")?, self.const_ints(cx, 1)?) {
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => vec![],
                (Some(_), Some(_)) => {
                    return Err(cx.err("axes given both as an attribute and as an input"))
                }
            };
            axes.iter()
                .map(|&a| axis(cx, a, xs.len()))
                .collect::<Result<_, _>>()?
        };
        if axes.is_empty() {
            if cx.int("noop_with_empty_axes", 0)? != 0 {
                // An identity.
                let y = self.output(cx, xs)?;
                self.push(cx, Op::View, vec![x], y);
                return Ok(());
            }
            axes = (0..xs.len()).collect();
        }
        axes.sort_unstable();
        axes.dedup();
        let keep = cx.int("keepdims", 1)? != 0;
        let shape: Vec<usize> = xs
            .iter()
            .enumerate()
            .filter_map(|(i, &d)| {
                if axes.contains(&i) {
                    keep.then_some(1)
                } else {
                    Some(d)
                }
            })
            .collect();
        let y = self.output(cx, shape)?;
        self.push(cx, Op::Reduce { kind, axes }, vec![x], y);
        Ok(())
    }

    pub(super) fn cumsum(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&["exclusive", "reverse"])?;
        let x = self.tensor(cx, 0)?;
        let shape = self.shape(x);
        let a = match self.const_ints(cx, 1)?.as_deref() {
            Some([a]) => *a,
            Some(_) => return Err(cx.err("the axis must be one integer")),
            None => return Err(cx.err("the axis must be an integer constant")),
        };
        if shape.is_empty() {
            return Err(cx.err("a running sum of a scalar is not supported"));
        }
        let axis = axis(cx, a, shape.len())?;
        let (exclusive, reverse) = (cx.int("exclusive", 0)? != 0, cx.int("reverse", 0)? != 0);
        let y = self.output(cx, shape)?;
        self.push(
            cx,
            Op::Scan {
                axis,
                exclusive,
                reverse,
            },
            vec![x],
            y,
        );
        Ok(())
    }

    pub(super) fn layer_norm(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&["axis", "epsilon", "stash_type"])?;
        if cx.node.output.iter().skip(1).any(|o| !o.is_empty()) {
            return Err(cx.err("the Mean and InvStdDev outputs are not supported"));
        }
        let x = self.tensor(cx, 0)?;
        let xs = self.shape(x);
        let axis = axis(cx, cx.int("axis", -1)?, xs.len())?;
        let eps = cx.float("epsilon", 1e-5)?;
        let norm: Vec<usize> = xs[axis..].to_vec();
        let cols: usize = norm.iter().product();
        let mut inputs = vec![x];
        for (i, what) in [(1, "Scale"), (2, "B")] {
            let v = match self.input(cx, i)? {
                Some(_) => self.tensor(cx, i)?,
                None if i == 2 => self.synthetic("ln.bias", vec![cols], Some(vec![0.0; cols])),
                None => return Err(cx.err("Scale is missing")),
            };
            let vs = self.shape(v);
            let v = if self.shape(v).iter().product::<usize>() == cols {
                v
            } else if broadcast(&vs, &norm).as_deref() == Some(&norm[..]) {
                // A broadcast constant is expanded to the normalised shape.
                let data = self.g.values[v].data.clone().ok_or_else(|| {
                    cx.err(format!(
                        "{what} of shape {vs:?} broadcasts: it must be a constant"
                    ))
                })?;
                self.synthetic(what, norm.clone(), Some(expand(&data, &vs, &norm)))
            } else {
                return Err(cx.err(format!(
                    "{what} of shape {vs:?} does not broadcast to {norm:?}"
                )));
            };
            inputs.push(v);
        }
        let y = self.output(cx, xs)?;
        self.push(cx, Op::LayerNorm { axis, eps }, inputs, y);
        Ok(())
    }

    pub(super) fn group_norm(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let instance = cx.node.op_type == "InstanceNormalization";
        cx.only(&["epsilon", "num_groups", "stash_type"])?;
        let eps = cx.float("epsilon", 1e-5)?;
        let x = self.tensor(cx, 0)?;
        let xs = self.shape(x);
        if xs.len() < 3 {
            return Err(cx.err(format!("input {xs:?}: expected (N, C, spatial...)")));
        }
        let c = xs[1];
        let groups = if instance {
            c
        } else {
            let g = cx.int("num_groups", 0)?;
            usize::try_from(g)
                .ok()
                .filter(|&g| g >= 1 && c.is_multiple_of(g))
                .ok_or_else(|| cx.err(format!("num_groups = {g} does not divide {c} channels")))?
        };
        let mut inputs = vec![x];
        // Scale and bias: one value per channel (InstanceNormalization; GroupNormalization from
        // opset 21), or per group (GroupNormalization before opset 21), expanded to channels.
        let per_group = !instance && self.g.opset < 21;
        for (i, what) in [(1, "scale"), (2, "bias")] {
            let v = self.tensor(cx, i)?;
            let n = self.g.values[v].numel();
            let v = if !per_group && n == c {
                v
            } else if per_group && n == groups {
                let data = self.g.values[v]
                    .data
                    .clone()
                    .ok_or_else(|| cx.err(format!("`{what}` per group must be a constant")))?;
                let per = c / groups;
                self.synthetic(
                    what,
                    vec![c],
                    Some((0..c).map(|ch| data[ch / per]).collect()),
                )
            } else {
                let expected = if per_group {
                    format!("{groups} (one per group before opset 21)")
                } else {
                    format!("{c} (one per channel)")
                };
                return Err(cx.err(format!("`{what}` has {n} values, expected {expected}")));
            };
            inputs.push(v);
        }
        let y = self.output(cx, xs)?;
        self.push(cx, Op::GroupNorm { groups, eps }, inputs, y);
        Ok(())
    }
}
