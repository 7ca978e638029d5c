//! The graph kfoundry imports: an ONNX model read into operators with checked attributes and
//! static shapes, in topological order. Every node of the file maps to one operator here (a few
//! to several: `Gemm`'s scaling and `BatchNormalization` become element-wise operators with
//! constants), and every value has a shape; the fusion pass works on this alone.

use std::collections::BTreeMap;

use crate::error::ImportError;
use crate::onnx::{self, attribute_type, data_type, AttributeProto, NodeProto, TensorProto};

/// The ONNX operators kfoundry imports (default domain, opset 13 and later).
pub const SUPPORTED: &[&str] = &[
    "Abs",
    "Add",
    "AveragePool",
    "BatchNormalization",
    "Clip",
    "Constant",
    "Conv",
    "ConvTranspose",
    "Div",
    "Dropout",
    "Elu",
    "Erf",
    "Exp",
    "Flatten",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "GroupNormalization",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "InstanceNormalization",
    "LayerNormalization",
    "LeakyRelu",
    "LogSoftmax",
    "MatMul",
    "Max",
    "MaxPool",
    "Min",
    "Mish",
    "Mul",
    "Neg",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceSum",
    "Relu",
    "Reshape",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Squeeze",
    "Sub",
    "Tanh",
    "Transpose",
    "Unsqueeze",
];

pub type ValueId = usize;

/// A tensor of the graph: float32 with a static shape (shape-only int64 constants are kept
/// apart, in `ints`).
#[derive(Debug, Clone)]
pub struct Value {
    pub name: String,
    pub shape: Vec<usize>,
    /// The data of an initializer or a `Constant`.
    pub data: Option<Vec<f32>>,
    /// The data of an int64/int32 constant (shapes, axes); such values never reach a kernel.
    pub ints: Option<Vec<i64>>,
}

impl Value {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unary {
    Relu,
    LeakyRelu(f32),
    Sigmoid,
    Tanh,
    Erf,
    Exp,
    Neg,
    Abs,
    Softplus,
    HardSigmoid(f32, f32),
    HardSwish,
    Clip(f32, f32),
    Mish,
    Gelu { tanh: bool },
    Elu(f32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    Avg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
    Min,
}

/// 2-D window geometry (a 1-D operator is read as 2-D with a height of 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// top, left, bottom, right
    pub pads: [usize; 4],
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Unary(Unary),
    Binary(Binary),
    /// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: the same elements, another shape.
    View,
    Transpose {
        perm: Vec<usize>,
    },
    /// `[.., m, k] x [.., k, n]`, the operands' last two dimensions optionally transposed.
    MatMul {
        trans_a: bool,
        trans_b: bool,
    },
    Conv {
        window: Window,
        groups: usize,
    },
    ConvTranspose {
        window: Window,
        groups: usize,
    },
    Pool {
        kind: PoolKind,
        window: Window,
        count_include_pad: bool,
    },
    Reduce {
        kind: ReduceKind,
        axes: Vec<usize>,
    },
    Softmax {
        axis: usize,
        log: bool,
    },
    LayerNorm {
        axis: usize,
        eps: f32,
    },
    /// GroupNormalization and InstanceNormalization (groups = channels); scale and bias per channel.
    GroupNorm {
        groups: usize,
        eps: f32,
    },
}

impl Op {
    pub fn is_elementwise(&self) -> bool {
        matches!(self, Op::Unary(_) | Op::Binary(_))
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    /// The node's name in the file, or `#index` when it has none.
    pub name: String,
    /// The ONNX operator it came from.
    pub op_type: String,
    pub op: Op,
    pub inputs: Vec<ValueId>,
    pub output: ValueId,
}

#[derive(Debug, Clone)]
pub struct Graph {
    pub values: Vec<Value>,
    pub nodes: Vec<Node>,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    pub opset: i64,
}

impl Graph {
    pub fn is_constant(&self, v: ValueId) -> bool {
        self.values[v].data.is_some()
    }

    /// A constant with one element, as a number.
    pub fn scalar(&self, v: ValueId) -> Option<f32> {
        self.values[v].data.as_ref().filter(|d| d.len() == 1).map(|d| d[0])
    }

    /// The nodes that read each value.
    pub fn consumers(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.values.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &v in &n.inputs {
                if !out[v].contains(&i) {
                    out[v].push(i);
                }
            }
        }
        out
    }
}

/// Reads `bytes` (an ONNX model) into a graph. `dims` gives values to symbolic input
/// dimensions (`batch = 1`).
pub fn read(bytes: &[u8], dims: &BTreeMap<String, usize>) -> Result<Graph, ImportError> {
    let model = onnx::decode(bytes).map_err(|e| ImportError::Decode(e.to_string()))?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .ok_or_else(|| ImportError::Model("the model imports no opset of the default ONNX domain".into()))?;
    if opset < 13 {
        return Err(ImportError::Model(format!(
            "the model uses opset {opset}; kfoundry imports opset 13 and later (convert it with onnx.version_converter)"
        )));
    }
    let graph = model.graph.ok_or_else(|| ImportError::Model("the model has no graph".into()))?;
    let mut b =
        Builder { g: Graph { values: Vec::new(), nodes: Vec::new(), inputs: Vec::new(), outputs: Vec::new(), opset }, by_name: BTreeMap::new() };
    for t in &graph.initializer {
        b.constant(t, &format!("initializer `{}`", t.name))?;
    }
    for input in &graph.input {
        if b.by_name.contains_key(&input.name) {
            continue; // an initializer also listed as an input (older exporters)
        }
        let shape = input_shape(input, dims)?;
        let id = b.add_value(&input.name, shape, None, None);
        b.g.inputs.push(id);
    }
    if b.g.inputs.is_empty() {
        return Err(ImportError::Model("the model has no input that is not an initializer".into()));
    }
    for (index, node) in graph.node.iter().enumerate() {
        b.node(index, node)?;
    }
    for output in &graph.output {
        let id = *b.by_name.get(&output.name).ok_or_else(|| ImportError::Model(format!("graph output `{}` is computed by no node", output.name)))?;
        if b.g.values[id].ints.is_some() {
            return Err(ImportError::Model(format!("graph output `{}` is an integer tensor; kfoundry computes float32 outputs", output.name)));
        }
        if b.g.is_constant(id) || b.g.inputs.contains(&id) {
            return Err(ImportError::Model(format!("graph output `{}` is a constant or an input: nothing computes it", output.name)));
        }
        b.g.outputs.push(id);
    }
    if b.g.outputs.is_empty() {
        return Err(ImportError::Model("the model has no output".into()));
    }
    Ok(b.g)
}

fn input_shape(input: &onnx::ValueInfoProto, dims: &BTreeMap<String, usize>) -> Result<Vec<usize>, ImportError> {
    let what = |m: String| ImportError::Model(format!("graph input `{}`: {m}", input.name));
    let tensor = input.r#type.as_ref().and_then(|t| t.tensor_type.as_ref()).ok_or_else(|| what("not a tensor".into()))?;
    if tensor.elem_type != data_type::FLOAT {
        return Err(what(format!("its type is {}; kfoundry imports float32 graphs", data_type::name(tensor.elem_type))));
    }
    let shape = tensor.shape.as_ref().ok_or_else(|| what("its shape is not given".into()))?;
    let mut out = Vec::new();
    for (i, d) in shape.dim.iter().enumerate() {
        match (d.dim_value, &d.dim_param) {
            (Some(v), _) if v > 0 => out.push(v as usize),
            (_, Some(p)) if !p.is_empty() => match dims.get(p) {
                Some(&v) if v > 0 => out.push(v),
                _ => return Err(what(format!("dimension {i} is the symbol `{p}`; give it a value with `--dim {p}=N`"))),
            },
            _ => return Err(what(format!("dimension {i} has no value; kfoundry imports static shapes"))),
        }
    }
    check_size(&out).map_err(what)?;
    Ok(out)
}

struct Builder {
    g: Graph,
    by_name: BTreeMap<String, ValueId>,
}

/// What a node's attributes and inputs are read through.
struct NodeCx<'a> {
    node: &'a NodeProto,
    name: String,
}

impl NodeCx<'_> {
    fn err(&self, message: impl Into<String>) -> ImportError {
        ImportError::node(&self.name, &self.node.op_type, message)
    }

    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == name)
    }

    fn int(&self, name: &str, default: i64) -> Result<i64, ImportError> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) if a.r#type == attribute_type::INT || a.r#type == 0 => Ok(a.i),
            Some(_) => Err(self.err(format!("attribute `{name}` is not an integer"))),
        }
    }

    fn float(&self, name: &str, default: f32) -> Result<f32, ImportError> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) if a.r#type == attribute_type::FLOAT || a.r#type == 0 => Ok(a.f),
            Some(_) => Err(self.err(format!("attribute `{name}` is not a float"))),
        }
    }

    fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, ImportError> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type == attribute_type::INTS || a.r#type == 0 => Ok(Some(a.ints.clone())),
            Some(_) => Err(self.err(format!("attribute `{name}` is not a list of integers"))),
        }
    }

    fn string(&self, name: &str) -> Result<Option<String>, ImportError> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type == attribute_type::STRING || a.r#type == 0 => Ok(Some(String::from_utf8_lossy(&a.s).into_owned())),
            Some(_) => Err(self.err(format!("attribute `{name}` is not a string"))),
        }
    }

    /// Refuses attributes kfoundry does not read with a value other than their default.
    fn only(&self, known: &[&str]) -> Result<(), ImportError> {
        for a in &self.node.attribute {
            if !known.contains(&a.name.as_str()) {
                return Err(self.err(format!("attribute `{}` is not supported", a.name)));
            }
        }
        Ok(())
    }
}

/// Normalises an axis in `-rank..rank`.
fn axis(cx: &NodeCx, a: i64, rank: usize) -> Result<usize, ImportError> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(cx.err(format!("axis {a} is outside a rank-{rank} tensor")));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// The largest tensor kfoundry imports: generated kernels index with `int`.
pub const MAX_ELEMENTS: usize = i32::MAX as usize;
/// The largest rank, window extent, stride, dilation or padding it imports.
pub const MAX_RANK: usize = 8;
const MAX_WINDOW: i64 = 1 << 16;

fn check_size(shape: &[usize]) -> Result<(), String> {
    if shape.len() > MAX_RANK {
        return Err(format!("rank {} (at most {MAX_RANK} is supported)", shape.len()));
    }
    match shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) {
        Some(n) if n <= MAX_ELEMENTS => Ok(()),
        _ => Err(format!("shape {shape:?} has more than {MAX_ELEMENTS} elements")),
    }
}

/// numpy broadcasting of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let x = if i + a.len() >= r { a[i + a.len() - r] } else { 1 };
        let y = if i + b.len() >= r { b[i + b.len() - r] } else { 1 };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

impl Builder {
    fn add_value(&mut self, name: &str, shape: Vec<usize>, data: Option<Vec<f32>>, ints: Option<Vec<i64>>) -> ValueId {
        let id = self.g.values.len();
        self.g.values.push(Value { name: name.to_string(), shape, data, ints });
        if !name.is_empty() {
            self.by_name.insert(name.to_string(), id);
        }
        id
    }

    /// A value no file names (a constant or intermediate the importer makes).
    fn synthetic(&mut self, hint: &str, shape: Vec<usize>, data: Option<Vec<f32>>) -> ValueId {
        let id = self.g.values.len();
        self.g.values.push(Value { name: format!("{hint}#{id}"), shape, data, ints: None });
        id
    }

    fn constant(&mut self, t: &TensorProto, what: &str) -> Result<ValueId, ImportError> {
        let shape: Vec<usize> = t
            .dims
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<_, _>>()
            .map_err(|_| ImportError::Model(format!("{what}: negative dimension in {:?}", t.dims)))?;
        match t.data_type {
            data_type::INT64 | data_type::INT32 => {
                let ints = t.ints().map_err(|m| ImportError::Model(format!("{what}: {m}")))?;
                Ok(self.add_value(&t.name, shape, None, Some(ints)))
            }
            _ => {
                let data = t.floats().map_err(|m| ImportError::Model(format!("{what}: {m}")))?;
                Ok(self.add_value(&t.name, shape, Some(data), None))
            }
        }
    }

    fn push(&mut self, cx: &NodeCx, op: Op, inputs: Vec<ValueId>, output: ValueId) {
        self.g.nodes.push(Node { name: cx.name.clone(), op_type: cx.node.op_type.clone(), op, inputs, output });
    }

    /// The node's input `i` (None when absent or empty).
    fn input(&self, cx: &NodeCx, i: usize) -> Result<Option<ValueId>, ImportError> {
        match cx.node.input.get(i) {
            None => Ok(None),
            Some(n) if n.is_empty() => Ok(None),
            Some(n) => self
                .by_name
                .get(n)
                .copied()
                .map(Some)
                .ok_or_else(|| cx.err(format!("input `{n}` is not computed before this node (the graph must be in topological order)"))),
        }
    }

    fn required(&self, cx: &NodeCx, i: usize) -> Result<ValueId, ImportError> {
        self.input(cx, i)?.ok_or_else(|| cx.err(format!("input {i} is missing")))
    }

    /// A float input that kernels read (not an integer constant).
    fn tensor(&self, cx: &NodeCx, i: usize) -> Result<ValueId, ImportError> {
        let v = self.required(cx, i)?;
        if self.g.values[v].ints.is_some() {
            return Err(cx.err(format!("input `{}` is an integer tensor; kfoundry computes float32 only", self.g.values[v].name)));
        }
        Ok(v)
    }

    fn const_ints(&self, cx: &NodeCx, i: usize) -> Result<Option<Vec<i64>>, ImportError> {
        match self.input(cx, i)? {
            None => Ok(None),
            Some(v) => self.g.values[v].ints.clone().map(Some).ok_or_else(|| {
                cx.err(format!(
                    "input `{}` must be an int64 constant (an initializer or a Constant node); shapes computed at run time are not supported",
                    self.g.values[v].name
                ))
            }),
        }
    }

    fn shape(&self, v: ValueId) -> Vec<usize> {
        self.g.values[v].shape.clone()
    }

    fn output(&mut self, cx: &NodeCx, shape: Vec<usize>) -> Result<ValueId, ImportError> {
        let name = cx.node.output.first().filter(|n| !n.is_empty()).ok_or_else(|| cx.err("the node has no output"))?;
        if self.by_name.contains_key(name) {
            return Err(cx.err(format!("output `{name}` is already defined")));
        }
        if shape.contains(&0) {
            return Err(cx.err(format!("output `{name}` would be empty (shape {shape:?})")));
        }
        check_size(&shape).map_err(|m| cx.err(format!("output `{name}`: {m}")))?;
        Ok(self.add_value(name, shape, None, None))
    }

    fn node(&mut self, index: usize, node: &NodeProto) -> Result<(), ImportError> {
        // Names and operator types are shown in errors: printable text only (no terminal escapes).
        let cx = NodeCx { node, name: if node.name.is_empty() { format!("#{index}") } else { crate::kernels::printable(&node.name, 80) } };
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            return Err(ImportError::Unsupported {
                node: cx.name.clone(),
                op: crate::kernels::printable(&format!("{}.{}", node.domain, node.op_type), 80),
            });
        }
        // Extra outputs are allowed only where nothing may read them (Dropout's mask).
        let used_outputs = node.output.iter().filter(|o| !o.is_empty()).count();
        let op = node.op_type.as_str();
        if used_outputs > 1 && (op != "Dropout") {
            return Err(cx.err("only the first output is supported (the others must be left unnamed)"));
        }
        match op {
            "Constant" => self.constant_node(&cx),
            "Relu" | "Sigmoid" | "Tanh" | "Erf" | "Exp" | "Neg" | "Abs" | "Softplus" | "HardSwish" | "Mish" | "LeakyRelu" | "HardSigmoid" | "Elu"
            | "Gelu" | "Clip" => self.unary(&cx),
            "Add" | "Sub" | "Mul" | "Div" | "Max" | "Min" => self.binary(&cx),
            "Identity" | "Dropout" => {
                if op == "Dropout" && node.output.get(1).is_some_and(|o| !o.is_empty()) {
                    return Err(cx.err("the mask output is not supported (inference only)"));
                }
                let x = self.tensor(&cx, 0)?;
                let y = self.output(&cx, self.shape(x))?;
                self.push(&cx, Op::View, vec![x], y);
                Ok(())
            }
            "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" => self.view(&cx),
            "Transpose" => self.transpose(&cx),
            "MatMul" => self.matmul(&cx),
            "Gemm" => self.gemm(&cx),
            "Conv" | "ConvTranspose" => self.conv(&cx),
            "BatchNormalization" => self.batch_norm(&cx),
            "MaxPool" | "AveragePool" => self.pool(&cx),
            "GlobalAveragePool" | "GlobalMaxPool" => {
                cx.only(&[])?;
                let x = self.tensor(&cx, 0)?;
                let mut shape = self.shape(x);
                if shape.len() < 3 {
                    return Err(cx.err(format!("input shape {shape:?}: expected (N, C, spatial...)")));
                }
                let axes: Vec<usize> = (2..shape.len()).collect();
                for &a in &axes {
                    shape[a] = 1;
                }
                let kind = if op == "GlobalMaxPool" { ReduceKind::Max } else { ReduceKind::Mean };
                let y = self.output(&cx, shape)?;
                self.push(&cx, Op::Reduce { kind, axes }, vec![x], y);
                Ok(())
            }
            "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" => self.reduce(&cx),
            "Softmax" | "LogSoftmax" => {
                cx.only(&["axis"])?;
                let x = self.tensor(&cx, 0)?;
                let shape = self.shape(x);
                let axis = axis(&cx, cx.int("axis", -1)?, shape.len())?;
                let y = self.output(&cx, shape)?;
                self.push(&cx, Op::Softmax { axis, log: op == "LogSoftmax" }, vec![x], y);
                Ok(())
            }
            "LayerNormalization" => self.layer_norm(&cx),
            "GroupNormalization" | "InstanceNormalization" => self.group_norm(&cx),
            _ => Err(ImportError::Unsupported { node: cx.name.clone(), op: crate::kernels::printable(op, 80) }),
        }
    }

    fn constant_node(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let name = cx.node.output.first().cloned().unwrap_or_default();
        let a = cx.node.attribute.first().ok_or_else(|| cx.err("no value attribute"))?;
        let mut t = match a.name.as_str() {
            "value" => a.t.clone().ok_or_else(|| cx.err("`value` holds no tensor"))?,
            "value_float" => TensorProto { data_type: data_type::FLOAT, float_data: vec![a.f], ..Default::default() },
            "value_floats" => {
                TensorProto { data_type: data_type::FLOAT, dims: vec![a.floats.len() as i64], float_data: a.floats.clone(), ..Default::default() }
            }
            "value_int" => TensorProto { data_type: data_type::INT64, int64_data: vec![a.i], ..Default::default() },
            "value_ints" => {
                TensorProto { data_type: data_type::INT64, dims: vec![a.ints.len() as i64], int64_data: a.ints.clone(), ..Default::default() }
            }
            other => return Err(cx.err(format!("attribute `{other}` is not supported"))),
        };
        t.name = name;
        self.constant(&t, &format!("node `{}` (Constant)", cx.name))?;
        Ok(())
    }

    fn unary(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let op = match cx.node.op_type.as_str() {
            "Relu" => Unary::Relu,
            "Sigmoid" => Unary::Sigmoid,
            "Tanh" => Unary::Tanh,
            "Erf" => Unary::Erf,
            "Exp" => Unary::Exp,
            "Neg" => Unary::Neg,
            "Abs" => Unary::Abs,
            "Softplus" => Unary::Softplus,
            "HardSwish" => Unary::HardSwish,
            "Mish" => Unary::Mish,
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
            "Gelu" => {
                cx.only(&["approximate"])?;
                match cx.string("approximate")?.as_deref() {
                    None | Some("none") => Unary::Gelu { tanh: false },
                    Some("tanh") => Unary::Gelu { tanh: true },
                    Some(other) => return Err(cx.err(format!("approximate = \"{other}\" is not one of \"none\", \"tanh\""))),
                }
            }
            "Clip" => {
                cx.only(&[])?;
                let bound = |b: &Builder, i: usize, default: f32| -> Result<f32, ImportError> {
                    match b.input(cx, i)? {
                        None => Ok(default),
                        Some(v) => b.g.scalar(v).ok_or_else(|| cx.err(format!("input {i} (a bound) must be a one-element float constant"))),
                    }
                };
                Unary::Clip(bound(self, 1, f32::NEG_INFINITY)?, bound(self, 2, f32::INFINITY)?)
            }
            _ => unreachable!("dispatched by Builder::node"),
        };
        if !matches!(op, Unary::LeakyRelu(_) | Unary::HardSigmoid(..) | Unary::Elu(_) | Unary::Gelu { .. } | Unary::Clip(..)) {
            cx.only(&[])?;
        }
        let x = self.tensor(cx, 0)?;
        let y = self.output(cx, self.shape(x))?;
        self.push(cx, Op::Unary(op), vec![x], y);
        Ok(())
    }

    fn binary(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&[])?;
        let op = match cx.node.op_type.as_str() {
            "Add" => Binary::Add,
            "Sub" => Binary::Sub,
            "Mul" => Binary::Mul,
            "Div" => Binary::Div,
            "Max" => Binary::Max,
            "Min" => Binary::Min,
            _ => unreachable!("dispatched by Builder::node"),
        };
        if cx.node.input.len() != 2 {
            return Err(cx.err(format!("{} inputs; kfoundry imports the two-input form", cx.node.input.len())));
        }
        let a = self.tensor(cx, 0)?;
        let b = self.tensor(cx, 1)?;
        let shape = broadcast(&self.shape(a), &self.shape(b))
            .ok_or_else(|| cx.err(format!("shapes {:?} and {:?} do not broadcast", self.shape(a), self.shape(b))))?;
        let y = self.output(cx, shape)?;
        self.push(cx, Op::Binary(op), vec![a, b], y);
        Ok(())
    }

    fn view(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let x = self.tensor(cx, 0)?;
        let input = self.shape(x);
        let numel: usize = input.iter().product();
        let shape = match cx.node.op_type.as_str() {
            "Reshape" => {
                cx.only(&["allowzero"])?;
                let allowzero = cx.int("allowzero", 0)? != 0;
                let target = self.const_ints(cx, 1)?.ok_or_else(|| cx.err("the shape input is missing"))?;
                let mut out = Vec::new();
                let mut infer = None;
                for (i, &d) in target.iter().enumerate() {
                    match d {
                        -1 if infer.is_none() => {
                            infer = Some(i);
                            out.push(1);
                        }
                        0 if !allowzero => {
                            out.push(*input.get(i).ok_or_else(|| cx.err(format!("shape entry {i} copies a dimension the input does not have")))?)
                        }
                        d if d > 0 => out.push(d as usize),
                        _ => return Err(cx.err(format!("shape {target:?} is not supported"))),
                    }
                }
                let known = out.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| cx.err(format!("shape {target:?} is too large")))?;
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
                let a = if a == input.len() as i64 { input.len() } else { axis(cx, a, input.len().max(1))? };
                let outer: usize = input[..a].iter().product();
                vec![outer, numel / outer.max(1)]
            }
            "Squeeze" => {
                cx.only(&[])?;
                match self.const_ints(cx, 1)? {
                    None => input.iter().copied().filter(|&d| d != 1).collect(),
                    Some(axes) => {
                        let axes: Vec<usize> = axes.iter().map(|&a| axis(cx, a, input.len())).collect::<Result<_, _>>()?;
                        if let Some(&a) = axes.iter().find(|&&a| input[a] != 1) {
                            return Err(cx.err(format!("axis {a} of {input:?} is not 1")));
                        }
                        input.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect()
                    }
                }
            }
            "Unsqueeze" => {
                cx.only(&[])?;
                let axes = self.const_ints(cx, 1)?.ok_or_else(|| cx.err("the axes input is missing"))?;
                let rank = input.len() + axes.len();
                let mut axes: Vec<usize> = axes.iter().map(|&a| axis(cx, a, rank)).collect::<Result<_, _>>()?;
                axes.sort_unstable();
                axes.dedup();
                if axes.len() + input.len() != rank {
                    return Err(cx.err("repeated axes"));
                }
                let mut rest = input.iter();
                (0..rank).map(|i| if axes.contains(&i) { 1 } else { *rest.next().expect("rank counted") }).collect()
            }
            _ => unreachable!("dispatched by Builder::node"),
        };
        if shape.iter().product::<usize>() != numel {
            return Err(cx.err(format!("cannot view {input:?} as {shape:?}")));
        }
        let y = self.output(cx, shape)?;
        self.push(cx, Op::View, vec![x], y);
        Ok(())
    }

    fn transpose(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&["perm"])?;
        let x = self.tensor(cx, 0)?;
        let input = self.shape(x);
        let perm: Vec<usize> = match cx.ints("perm")? {
            None => (0..input.len()).rev().collect(),
            Some(p) => p.iter().map(|&a| axis(cx, a, input.len())).collect::<Result<_, _>>()?,
        };
        let mut seen = perm.clone();
        seen.sort_unstable();
        if seen != (0..input.len()).collect::<Vec<_>>() {
            return Err(cx.err(format!("perm {perm:?} is not a permutation of the input's {} axes", input.len())));
        }
        let shape = perm.iter().map(|&p| input[p]).collect();
        let y = self.output(cx, shape)?;
        // A transpose that moves only dimensions of size 1 keeps the element order: a view.
        let moved: Vec<usize> = perm.iter().copied().filter(|&p| input[p] != 1).collect();
        let op = if moved.windows(2).all(|w| w[0] < w[1]) { Op::View } else { Op::Transpose { perm } };
        self.push(cx, op, vec![x], y);
        Ok(())
    }

    fn matmul_shape(&self, cx: &NodeCx, a: &[usize], b: &[usize], trans_a: bool, trans_b: bool) -> Result<Vec<usize>, ImportError> {
        if a.is_empty() || b.is_empty() {
            return Err(cx.err("scalar operands are not supported"));
        }
        let (a2, b2): (Vec<usize>, Vec<usize>) =
            (if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() }, if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() });
        let (m, ka) = if trans_a { (a2[a2.len() - 1], a2[a2.len() - 2]) } else { (a2[a2.len() - 2], a2[a2.len() - 1]) };
        let (kb, n) = if trans_b { (b2[b2.len() - 1], b2[b2.len() - 2]) } else { (b2[b2.len() - 2], b2[b2.len() - 1]) };
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

    fn matmul(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&[])?;
        let a = self.tensor(cx, 0)?;
        let b = self.tensor(cx, 1)?;
        let shape = self.matmul_shape(cx, &self.shape(a), &self.shape(b), false, false)?;
        let y = self.output(cx, shape)?;
        self.push(cx, Op::MatMul { trans_a: false, trans_b: false }, vec![a, b], y);
        Ok(())
    }

    /// `alpha * A' B' + beta * C` as a MatMul followed by element-wise operators (which fusion
    /// puts back into one kernel); a constant C is scaled here.
    fn gemm(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&["alpha", "beta", "transA", "transB"])?;
        let alpha = cx.float("alpha", 1.0)?;
        let beta = cx.float("beta", 1.0)?;
        let (trans_a, trans_b) = (cx.int("transA", 0)? != 0, cx.int("transB", 0)? != 0);
        let a = self.tensor(cx, 0)?;
        let b = self.tensor(cx, 1)?;
        if self.shape(a).len() != 2 || self.shape(b).len() != 2 {
            return Err(cx.err(format!("Gemm operands must be matrices, given {:?} and {:?}", self.shape(a), self.shape(b))));
        }
        let shape = self.matmul_shape(cx, &self.shape(a), &self.shape(b), trans_a, trans_b)?;
        let c = match self.input(cx, 2)? {
            Some(_) => {
                let c = self.tensor(cx, 2)?;
                let cs = self.shape(c);
                if broadcast(&cs, &shape).as_deref() != Some(&shape[..]) {
                    return Err(cx.err(format!("C of shape {cs:?} does not broadcast to {shape:?}")));
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
            let next = if c.is_none() { self.output(cx, shape.clone())? } else { self.synthetic(&format!("{last}.alpha"), shape.clone(), None) };
            self.push(cx, Op::Binary(Binary::Mul), vec![cur, k], next);
            cur = next;
        }
        if let Some(c) = c {
            let term = if beta == 1.0 {
                c
            } else if let Some(data) = self.g.values[c].data.clone() {
                let shape = self.shape(c);
                self.synthetic("beta*C", shape, Some(data.iter().map(|v| v * beta).collect()))
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

    /// Kernel, strides, dilations and pads of a window operator over the input's spatial dims.
    fn window(&self, cx: &NodeCx, spatial: &[usize], kernel: Vec<usize>, transposed: bool) -> Result<Window, ImportError> {
        let r = spatial.len();
        let list = |name: &str, default: usize| -> Result<Vec<usize>, ImportError> {
            match cx.ints(name)? {
                None => Ok(vec![default; r]),
                Some(v) if v.len() == r && v.iter().all(|&x| (1..=MAX_WINDOW).contains(&x)) => Ok(v.iter().map(|&x| x as usize).collect()),
                Some(v) => Err(cx.err(format!("`{name}` = {v:?}: expected {r} values in 1..={MAX_WINDOW}"))),
            }
        };
        let strides = list("strides", 1)?;
        let dilations = list("dilations", 1)?;
        let mut pads = match cx.ints("pads")? {
            None => vec![0; 2 * r],
            Some(v) if v.len() == 2 * r && v.iter().all(|&x| (0..=MAX_WINDOW).contains(&x)) => v.iter().map(|&x| x as usize).collect(),
            Some(v) => return Err(cx.err(format!("`pads` = {v:?}: expected {} values in 0..={MAX_WINDOW}", 2 * r))),
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
                    (pads[i], pads[i + r]) = if mode == "SAME_UPPER" { (small, big) } else { (big, small) };
                }
            }
            Some(other) => return Err(cx.err(format!("auto_pad = \"{other}\" is not supported here"))),
        }
        if r == 1 {
            Ok(Window { kernel: [1, kernel[0]], strides: [1, strides[0]], dilations: [1, dilations[0]], pads: [0, pads[0], 0, pads[1]] })
        } else {
            Ok(Window {
                kernel: [kernel[0], kernel[1]],
                strides: [strides[0], strides[1]],
                dilations: [dilations[0], dilations[1]],
                pads: [pads[0], pads[1], pads[2], pads[3]],
            })
        }
    }

    fn conv(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let transposed = cx.node.op_type == "ConvTranspose";
        cx.only(&["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", "output_padding"])?;
        let x = self.tensor(cx, 0)?;
        let w = self.tensor(cx, 1)?;
        let (xs, ws) = (self.shape(x), self.shape(w));
        if ws.contains(&0) || ws.iter().skip(2).any(|&k| k as i64 > MAX_WINDOW) {
            return Err(cx.err(format!("weight of shape {ws:?}")));
        }
        if !(xs.len() == 3 || xs.len() == 4) || ws.len() != xs.len() {
            return Err(cx.err(format!("input {xs:?} and weight {ws:?}: 1-D and 2-D convolutions (N, C, [H,] W) are supported")));
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
                return Err(cx.err(format!("kernel_shape {k:?} differs from the weight's {kernel:?}")));
            }
        }
        let window = self.window(cx, spatial, kernel.clone(), transposed)?;
        let cin = xs[1];
        let (cout, cin_per_group) = if transposed { (ws[1] * groups, ws[0]) } else { (ws[0], ws[1]) };
        if transposed {
            if cin != ws[0] || cin % groups != 0 {
                return Err(cx.err(format!("input channels {cin} and weight {ws:?} with group = {groups} do not agree")));
            }
        } else if cin % groups != 0 || cout % groups != 0 || cin / groups != cin_per_group {
            return Err(cx.err(format!("input channels {cin}, weight {ws:?} and group = {groups} do not agree")));
        }
        let mut out = vec![xs[0], cout];
        let sp2 = if spatial.len() == 1 { [1, spatial[0]] } else { [spatial[0], spatial[1]] };
        // ConvTranspose's output_padding: only zeros (the output size below assumes none).
        if let Some(p) = cx.ints("output_padding")? {
            if !transposed {
                return Err(cx.err("attribute `output_padding` is not supported"));
            }
            if p.len() != spatial.len() || p.iter().any(|&v| v != 0) {
                return Err(cx.err(format!("output_padding {p:?}: only zeros are supported")));
            }
        }
        for (i, &input) in sp2.iter().enumerate() {
            let extent = (window.kernel[i] - 1) * window.dilations[i] + 1;
            let size = if transposed {
                let full = (input - 1) * window.strides[i] + extent;
                full.checked_sub(window.pads[i] + window.pads[i + 2]).filter(|&s| s > 0)
            } else {
                (input + window.pads[i] + window.pads[i + 2]).checked_sub(extent).map(|s| s / window.strides[i] + 1)
            };
            let size = size.ok_or_else(|| cx.err(format!("the window does not fit the input {xs:?}")))?;
            if spatial.len() == 2 || i == 1 {
                out.push(size);
            }
        }
        let mut inputs = vec![x, w];
        if self.input(cx, 2)?.is_some() {
            let b = self.tensor(cx, 2)?;
            if self.shape(b) != [cout] {
                return Err(cx.err(format!("bias of shape {:?}, expected [{cout}]", self.shape(b))));
            }
            inputs.push(b);
        }
        let y = self.output(cx, out)?;
        let op = if transposed { Op::ConvTranspose { window, groups } } else { Op::Conv { window, groups } };
        self.push(cx, op, inputs, y);
        Ok(())
    }

    /// Inference batch normalization as `x * s + t` with per-channel constants
    /// (s = scale / sqrt(var + eps), t = bias - mean * s); fusion folds them into a preceding
    /// convolution's weights.
    fn batch_norm(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
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
            let data = self.g.values[v].data.clone().ok_or_else(|| cx.err(format!("`{what}` must be a constant (an initializer)")))?;
            if data.len() != c {
                return Err(cx.err(format!("`{what}` has {} values for {c} channels", data.len())));
            }
            params.push(data);
        }
        let s: Vec<f32> = (0..c).map(|i| (params[0][i] as f64 / (params[3][i] as f64 + eps as f64).sqrt()) as f32).collect();
        let t: Vec<f32> = (0..c).map(|i| (params[1][i] as f64 - params[2][i] as f64 * s[i] as f64) as f32).collect();
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

    fn pool(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        let max = cx.node.op_type == "MaxPool";
        cx.only(&["auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides", "storage_order"])?;
        let x = self.tensor(cx, 0)?;
        let xs = self.shape(x);
        if !(xs.len() == 3 || xs.len() == 4) {
            return Err(cx.err(format!("input {xs:?}: 1-D and 2-D pooling (N, C, [H,] W) are supported")));
        }
        let kernel = cx.ints("kernel_shape")?.ok_or_else(|| cx.err("`kernel_shape` is required"))?;
        if kernel.iter().any(|&v| !(1..=MAX_WINDOW).contains(&v)) {
            return Err(cx.err(format!("kernel_shape {kernel:?}: values in 1..={MAX_WINDOW} expected")));
        }
        let kernel: Vec<usize> = kernel.iter().map(|&v| v as usize).collect();
        if kernel.len() != xs.len() - 2 {
            return Err(cx.err(format!("kernel_shape {kernel:?} for input {xs:?}")));
        }
        if !max && cx.ints("dilations")?.is_some_and(|d| d.iter().any(|&v| v != 1)) {
            return Err(cx.err("dilations other than 1 are not supported for AveragePool"));
        }
        let window = self.window(cx, &xs[2..], kernel, false)?;
        let ceil = cx.int("ceil_mode", 0)? != 0;
        let sp2 = if xs.len() == 3 { [1, xs[2]] } else { [xs[2], xs[3]] };
        let mut out = vec![xs[0], xs[1]];
        for (i, &input) in sp2.iter().enumerate() {
            let extent = (window.kernel[i] - 1) * window.dilations[i] + 1;
            let span = (input + window.pads[i] + window.pads[i + 2])
                .checked_sub(extent)
                .ok_or_else(|| cx.err(format!("the window does not fit the input {xs:?}")))?;
            let floor = span / window.strides[i] + 1;
            if ceil && span % window.strides[i] != 0 {
                return Err(cx.err("ceil_mode = 1 with a window that does not end on the input's edge is not supported"));
            }
            if xs.len() == 4 || i == 1 {
                out.push(floor);
            }
        }
        let y = self.output(cx, out)?;
        let count_include_pad = cx.int("count_include_pad", 0)? != 0;
        self.push(cx, Op::Pool { kind: if max { PoolKind::Max } else { PoolKind::Avg }, window, count_include_pad }, vec![x], y);
        Ok(())
    }

    fn reduce(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
        cx.only(&["axes", "keepdims", "noop_with_empty_axes"])?;
        let kind = match cx.node.op_type.as_str() {
            "ReduceSum" => ReduceKind::Sum,
            "ReduceMean" => ReduceKind::Mean,
            "ReduceMax" => ReduceKind::Max,
            _ => ReduceKind::Min,
        };
        let x = self.tensor(cx, 0)?;
        let xs = self.shape(x);
        if xs.is_empty() {
            return Err(cx.err("reducing a scalar is not supported"));
        }
        // Axes are an attribute before opset 18 (13 for ReduceSum) and an input after.
        let axes = match (cx.ints("axes")?, self.const_ints(cx, 1)?) {
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => vec![],
            (Some(_), Some(_)) => return Err(cx.err("axes given both as an attribute and as an input")),
        };
        let mut axes: Vec<usize> = axes.iter().map(|&a| axis(cx, a, xs.len())).collect::<Result<_, _>>()?;
        if axes.is_empty() {
            if cx.int("noop_with_empty_axes", 0)? != 0 {
                return Err(cx.err("noop_with_empty_axes = 1 with no axes (an identity) is not supported"));
            }
            axes = (0..xs.len()).collect();
        }
        axes.sort_unstable();
        axes.dedup();
        let real: Vec<usize> = axes.iter().copied().filter(|&a| xs[a] != 1).collect();
        if let (Some(&first), Some(&last)) = (real.first(), real.last()) {
            if (first..=last).any(|j| xs[j] != 1 && !axes.contains(&j)) {
                return Err(cx.err(format!("axes {axes:?} of {xs:?} are not adjacent; kfoundry reduces adjacent axes")));
            }
        }
        let keep = cx.int("keepdims", 1)? != 0;
        let shape: Vec<usize> = xs.iter().enumerate().filter_map(|(i, &d)| if axes.contains(&i) { keep.then_some(1) } else { Some(d) }).collect();
        let y = self.output(cx, shape)?;
        self.push(cx, Op::Reduce { kind, axes }, vec![x], y);
        Ok(())
    }

    fn layer_norm(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
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
                let data =
                    self.g.values[v].data.clone().ok_or_else(|| cx.err(format!("{what} of shape {vs:?} broadcasts: it must be a constant")))?;
                self.synthetic(what, norm.clone(), Some(expand(&data, &vs, &norm)))
            } else {
                return Err(cx.err(format!("{what} of shape {vs:?} does not broadcast to {norm:?}")));
            };
            inputs.push(v);
        }
        let y = self.output(cx, xs)?;
        self.push(cx, Op::LayerNorm { axis, eps }, inputs, y);
        Ok(())
    }

    fn group_norm(&mut self, cx: &NodeCx) -> Result<(), ImportError> {
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
                let data = self.g.values[v].data.clone().ok_or_else(|| cx.err(format!("`{what}` per group must be a constant")))?;
                let per = c / groups;
                self.synthetic(what, vec![c], Some((0..c).map(|ch| data[ch / per]).collect()))
            } else {
                let expected = if per_group { format!("{groups} (one per group before opset 21)") } else { format!("{c} (one per channel)") };
                return Err(cx.err(format!("`{what}` has {n} values, expected {expected}")));
            };
            inputs.push(v);
        }
        let y = self.output(cx, xs)?;
        self.push(cx, Op::GroupNorm { groups, eps }, inputs, y);
        Ok(())
    }
}

/// `data` of shape `from` broadcast to shape `to` (row-major).
pub fn expand(data: &[f32], from: &[usize], to: &[usize]) -> Vec<f32> {
    let n: usize = to.iter().product();
    let r = to.len();
    let mut strides = vec![0usize; r];
    let mut s = 1;
    for i in (0..from.len()).rev() {
        let j = i + r - from.len();
        strides[j] = if from[i] == 1 { 0 } else { s };
        s *= from[i];
    }
    (0..n)
        .map(|mut lin| {
            let mut off = 0;
            for j in (0..r).rev() {
                off += (lin % to[j]) * strides[j];
                lin /= to[j];
            }
            data[off]
        })
        .collect()
}
