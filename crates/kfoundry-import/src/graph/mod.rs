//! The graph kfoundry imports: an ONNX model read into operators with checked attributes and
//! static shapes, in topological order. Every node of the file maps to one operator here (a few
//! to several: `Gemm`'s scaling and `BatchNormalization` become element-wise operators with
//! constants), and every value has a shape; the fusion pass works on this alone.

use std::collections::BTreeMap;

mod fold;
mod nodes;
mod patterns;

pub use fold::SliceAxis;
pub use nodes::{BINARY, UNARY};

use crate::error::ImportError;
use crate::onnx::{self, attribute_type, data_type, AttributeProto, NodeProto, TensorProto};

/// The ONNX operators kfoundry imports (default domain, opset 13 and later); `Shape`, `Size`,
/// `Range` and `ConstantOfShape` (and the others, on constants) are computed at import.
pub const SUPPORTED: &[&str] = &[
    "Abs",
    "Acos",
    "Add",
    "And",
    "ArgMax",
    "ArgMin",
    "Asin",
    "Atan",
    "AveragePool",
    "BatchNormalization",
    "Cast",
    "Ceil",
    "Celu",
    "Clip",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "ConvTranspose",
    "Cos",
    "Cosh",
    "CumSum",
    "DepthToSpace",
    "Div",
    "Dropout",
    "Einsum",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "Flatten",
    "Floor",
    "Gather",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Greater",
    "GreaterOrEqual",
    "GroupNormalization",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "InstanceNormalization",
    "IsInf",
    "IsNaN",
    "LayerNormalization",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "MatMul",
    "Max",
    "MaxPool",
    "Mean",
    "Min",
    "Mish",
    "Mod",
    "Mul",
    "Neg",
    "Not",
    "Or",
    "PRelu",
    "Pad",
    "Pow",
    "Range",
    "Reciprocal",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
    "Resize",
    "Relu",
    "Reshape",
    "Round",
    "Selu",
    "Shape",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Size",
    "Slice",
    "Softmax",
    "Softplus",
    "Softsign",
    "SpaceToDepth",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Sum",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Tile",
    "Transpose",
    "Trilu",
    "Unsqueeze",
    "Where",
    "Xor",
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
    Log,
    Sqrt,
    Reciprocal,
    Neg,
    Abs,
    Sign,
    Floor,
    Ceil,
    /// Half to even.
    Round,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Softsign,
    Softplus,
    HardSigmoid(f32, f32),
    HardSwish,
    Clip(f32, f32),
    Mish,
    Gelu {
        tanh: bool,
    },
    Elu(f32),
    Celu(f32),
    /// alpha, gamma
    Selu(f32, f32),
    ThresholdedRelu(f32),
    /// bias, lambd
    Shrink(f32, f32),
    /// Booleans are 1.0 and 0.0.
    Not,
    IsNaN,
    IsInf {
        negative: bool,
        positive: bool,
    },
    /// A cast to an integer type (toward zero), the value kept as a float.
    Trunc,
    /// A cast to bool.
    Bool,
    /// Elements outside the upper (lower) triangle of the last two dimensions, shifted by `k`
    /// diagonals, set to 0.
    Trilu {
        upper: bool,
        k: i32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
    Mod {
        fmod: bool,
    },
    /// x < 0 ? slope * x : x
    PRelu,
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    And,
    Or,
    Xor,
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
    Prod,
    /// sum |x|
    L1,
    /// sqrt(sum x²)
    L2,
    SumSquare,
    /// log(sum x)
    LogSum,
    /// log(sum exp x), computed as max + log(sum exp(x - max))
    LogSumExp,
    /// The index of the largest (smallest) element along one axis, first or last of equals,
    /// as a float (exact below 2^24).
    ArgMax {
        last: bool,
    },
    ArgMin {
        last: bool,
    },
}

/// The geometry of a window operator (convolution, pooling) over 1, 2 or 3 spatial
/// dimensions. The arrays hold depth, height and width; an operator of fewer dimensions has
/// the leading ones at extent 1 (a 1-D operator is a width, a 2-D one a height and a width).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The operator's spatial dimensions: 1, 2 or 3.
    pub rank: usize,
    pub kernel: [usize; 3],
    pub strides: [usize; 3],
    pub dilations: [usize; 3],
    /// front, top, left, then back, bottom, right
    pub pads: [usize; 6],
    /// ConvTranspose's `output_padding`: extra outputs at the end of each dimension.
    pub output_padding: [usize; 3],
    /// Pooling's `ceil_mode`: the last window may run past the padded input.
    pub ceil: bool,
}

impl Window {
    /// The window's extent along dimension `i` (dilation included).
    pub fn extent(&self, i: usize) -> usize {
        (self.kernel[i] - 1) * self.dilations[i] + 1
    }

    /// Whether dimension `i` (0 depth, 1 height, 2 width) is one of the operator's.
    pub fn present(&self, i: usize) -> bool {
        i + self.rank >= 3
    }

    /// The spatial extents of a tensor of shape (N, C, spatial...), as depth, height, width.
    pub fn spatial(&self, shape: &[usize]) -> [usize; 3] {
        let mut out = [1; 3];
        for i in 0..self.rank {
            out[3 - self.rank + i] = shape[shape.len() - self.rank + i];
        }
        out
    }

    /// The output extent along dimension `i` for an input extent `input`: of a convolution or
    /// pooling, or of a transposed convolution. `None` when the window does not fit.
    pub fn output(&self, i: usize, input: usize, transposed: bool) -> Option<usize> {
        let (stride, pads) = (self.strides[i], self.pads[i] + self.pads[i + 3]);
        if transposed {
            return ((input - 1) * stride + self.extent(i) + self.output_padding[i])
                .checked_sub(pads)
                .filter(|&s| s > 0);
        }
        let span = (input + pads).checked_sub(self.extent(i))?;
        let mut out = span / stride + 1;
        if self.ceil && span % stride != 0 {
            out += 1;
            // The last window must start inside the input or its leading padding.
            if (out - 1) * stride >= input + self.pads[i] {
                out -= 1;
            }
        }
        Some(out)
    }
}

/// How a data-movement operator picks each output element.
#[derive(Debug, Clone, PartialEq)]
pub enum Move {
    /// Output dimension j is input dimension `perm[j]`.
    Transpose(Vec<usize>),
    /// Per dimension: the first index, the step and the count taken.
    Slice(Vec<SliceAxis>),
    /// Per dimension: elements before and after; what the new elements hold.
    Pad {
        begins: Vec<usize>,
        ends: Vec<usize>,
        mode: PadMode,
    },
    /// The inputs one after the other along `axis`.
    Concat { axis: usize },
    /// numpy broadcasting to the output's shape.
    Expand,
    /// The input repeated along each dimension.
    Tile,
    /// Along `axis`, the input's elements at `indices` (constant, of shape `shape`).
    Gather {
        axis: usize,
        indices: Vec<usize>,
        shape: Vec<usize>,
    },
    /// Resize: per dimension, the input coordinate of each output coordinate; the nearest
    /// element, or the (multi)linear interpolation of its neighbours.
    Resize {
        axes: Vec<ResizeAxis>,
        linear: bool,
        nearest: NearestMode,
    },
}

/// One dimension of a Resize: `scale` (output over input extent, as the operator defines it)
/// and how an output coordinate maps to the input's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResizeAxis {
    pub input: usize,
    pub output: usize,
    pub scale: f32,
    pub transform: CoordinateTransform,
}

/// ONNX's `coordinate_transformation_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinateTransform {
    HalfPixel,
    PytorchHalfPixel,
    Asymmetric,
    AlignCorners,
}

/// ONNX's `nearest_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadMode {
    Constant(f32),
    /// The border element repeated.
    Edge,
    /// Mirrored without repeating the border element.
    Reflect,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Unary(Unary),
    Binary(Binary),
    /// `condition ? a : b`, element-wise.
    Where,
    /// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: the same elements, another shape.
    View,
    /// Data movement: each output element is an input element (or a constant), chosen by
    /// index arithmetic alone.
    Move(Move),
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
    /// CumSum: running sums along `axis`, from the end when `reverse`, each element left out of
    /// its own sum when `exclusive`.
    Scan {
        axis: usize,
        exclusive: bool,
        reverse: bool,
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
        matches!(self, Op::Unary(_) | Op::Binary(_) | Op::Where)
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
        self.values[v]
            .data
            .as_ref()
            .filter(|d| d.len() == 1)
            .map(|d| d[0])
    }

    /// A constant that multiplies or adds one value per channel (dimension 1) of `shape`: its
    /// values, one per channel.
    pub fn per_channel(&self, v: ValueId, shape: &[usize]) -> Option<Vec<f32>> {
        let data = self.values[v].data.as_ref()?;
        let s = &self.values[v].shape;
        let c = shape[1];
        // Right-aligned against (N, C, H, W): only the channel dimension may differ from 1 (a
        // constant of higher rank would broadcast the output to another shape).
        let r = shape.len();
        if s.len() > r {
            return None;
        }
        if data.len() == 1 {
            return Some(vec![data[0]; c]);
        }
        if s.len() < r - 1 {
            return None;
        }
        let offset = r - s.len();
        let ok = s
            .iter()
            .enumerate()
            .all(|(i, &d)| if i + offset == 1 { d == c } else { d == 1 });
        ok.then(|| data.clone())
    }

    /// A new constant no file names.
    pub fn add_constant(&mut self, hint: &str, shape: Vec<usize>, data: Vec<f32>) -> ValueId {
        let id = self.values.len();
        self.values.push(Value {
            name: format!("{hint}#{id}"),
            shape,
            data: Some(data),
            ints: None,
        });
        id
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
pub fn read(bytes: &[u8], options: &crate::Options) -> Result<Graph, ImportError> {
    let model = onnx::decode(bytes).map_err(|e| ImportError::Decode(e.to_string()))?;
    from_model(model, options)
}

/// The graph of a decoded model (its external data already read, if it had any).
pub fn from_model(model: onnx::ModelProto, options: &crate::Options) -> Result<Graph, ImportError> {
    let dims = &options.dims;
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .ok_or_else(|| {
            ImportError::Model("the model imports no opset of the default ONNX domain".into())
        })?;
    if opset < 13 {
        return Err(ImportError::Model(format!(
            "the model uses opset {opset}; kfoundry imports opset 13 and later (convert it with onnx.version_converter)"
        )));
    }
    let graph = model
        .graph
        .ok_or_else(|| ImportError::Model("the model has no graph".into()))?;
    let mut b = Builder {
        g: Graph {
            values: Vec::new(),
            nodes: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            opset,
        },
        by_name: BTreeMap::new(),
    };
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
        return Err(ImportError::Model(
            "the model has no input that is not an initializer".into(),
        ));
    }
    for (index, node) in graph.node.iter().enumerate() {
        b.node(index, node)?;
    }
    for output in &graph.output {
        let id = *b.by_name.get(&output.name).ok_or_else(|| {
            ImportError::Model(format!(
                "graph output `{}` is computed by no node",
                output.name
            ))
        })?;
        if b.g.values[id].ints.is_some() {
            return Err(ImportError::Model(format!(
                "graph output `{}` is an integer tensor; kfoundry computes float32 outputs",
                output.name
            )));
        }
        if b.g.is_constant(id) || b.g.inputs.contains(&id) {
            return Err(ImportError::Model(format!(
                "graph output `{}` is a constant or an input: nothing computes it",
                output.name
            )));
        }
        b.g.outputs.push(id);
    }
    if b.g.outputs.is_empty() {
        return Err(ImportError::Model("the model has no output".into()));
    }
    patterns::rewrite(&mut b.g);
    Ok(b.g)
}

fn input_shape(
    input: &onnx::ValueInfoProto,
    dims: &BTreeMap<String, usize>,
) -> Result<Vec<usize>, ImportError> {
    let what = |m: String| ImportError::Model(format!("graph input `{}`: {m}", input.name));
    let tensor = input
        .r#type
        .as_ref()
        .and_then(|t| t.tensor_type.as_ref())
        .ok_or_else(|| what("not a tensor".into()))?;
    if tensor.elem_type != data_type::FLOAT {
        return Err(what(format!(
            "its type is {}; kfoundry imports float32 graphs",
            data_type::name(tensor.elem_type)
        )));
    }
    let shape = tensor
        .shape
        .as_ref()
        .ok_or_else(|| what("its shape is not given".into()))?;
    let mut out = Vec::new();
    for (i, d) in shape.dim.iter().enumerate() {
        match (d.dim_value, &d.dim_param) {
            (Some(v), _) if v > 0 => out.push(v as usize),
            (_, Some(p)) if !p.is_empty() => match dims.get(p) {
                Some(&v) if v > 0 => out.push(v),
                _ => {
                    return Err(what(format!(
                        "dimension {i} is the symbol `{p}`; give it a value with `--dim {p}=N`"
                    )))
                }
            },
            _ => {
                return Err(what(format!(
                    "dimension {i} has no value; kfoundry imports static shapes"
                )))
            }
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
            Some(a) if a.r#type == attribute_type::INTS || a.r#type == 0 => {
                Ok(Some(a.ints.clone()))
            }
            Some(_) => Err(self.err(format!("attribute `{name}` is not a list of integers"))),
        }
    }

    fn string(&self, name: &str) -> Result<Option<String>, ImportError> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type == attribute_type::STRING || a.r#type == 0 => {
                Ok(Some(String::from_utf8_lossy(&a.s).into_owned()))
            }
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

/// Gather's indices (negative ones count from the end) checked against a dimension of `d`.
fn gather_indices(cx: &NodeCx, indices: &[i64], d: usize) -> Result<Vec<usize>, ImportError> {
    let d = d as i64;
    indices
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + d } else { i };
            usize::try_from(j)
                .ok()
                .filter(|&j| (j as i64) < d)
                .ok_or_else(|| cx.err(format!("index {i} is outside a dimension of {d}")))
        })
        .collect()
}

/// A shape given as an integer tensor (Expand's, ConstantOfShape's), checked.
fn shape_of(cx: &NodeCx, dims: &[i64]) -> Result<Vec<usize>, ImportError> {
    dims.iter()
        .map(|&d| usize::try_from(d).map_err(|_| cx.err(format!("shape {dims:?}"))))
        .collect()
}

/// The largest tensor kfoundry imports (2^40 elements). Kernels that touch a tensor of more
/// than 2^31 - 2^24 elements index with `long` (see `kernels::widen`).
pub const MAX_ELEMENTS: usize = 1 << 40;
/// The largest rank, window extent, stride, dilation or padding it imports.
pub const MAX_RANK: usize = 8;
const MAX_WINDOW: i64 = 1 << 16;

fn check_size(shape: &[usize]) -> Result<(), String> {
    if shape.len() > MAX_RANK {
        return Err(format!(
            "rank {} (at most {MAX_RANK} is supported)",
            shape.len()
        ));
    }
    match shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) {
        Some(n) if n <= MAX_ELEMENTS => Ok(()),
        _ => Err(format!(
            "shape {shape:?} has more than {MAX_ELEMENTS} elements"
        )),
    }
}

/// numpy broadcasting of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let x = if i + a.len() >= r {
            a[i + a.len() - r]
        } else {
            1
        };
        let y = if i + b.len() >= r {
            b[i + b.len() - r]
        } else {
            1
        };
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
    fn add_value(
        &mut self,
        name: &str,
        shape: Vec<usize>,
        data: Option<Vec<f32>>,
        ints: Option<Vec<i64>>,
    ) -> ValueId {
        let id = self.g.values.len();
        // An integer constant a kernel reads (a mask, a table) is read as floats.
        let data = data.or_else(|| {
            ints.as_ref()
                .filter(|i| i.len() <= fold::MAX_FOLDED)
                .map(|i| i.iter().map(|&v| v as f32).collect())
        });
        self.g.values.push(Value {
            name: name.to_string(),
            shape,
            data,
            ints,
        });
        if !name.is_empty() {
            self.by_name.insert(name.to_string(), id);
        }
        id
    }

    /// A value no file names (a constant or intermediate the importer makes).
    fn synthetic(&mut self, hint: &str, shape: Vec<usize>, data: Option<Vec<f32>>) -> ValueId {
        let id = self.g.values.len();
        self.g.values.push(Value {
            name: format!("{hint}#{id}"),
            shape,
            data,
            ints: None,
        });
        id
    }

    fn constant(&mut self, t: &TensorProto, what: &str) -> Result<ValueId, ImportError> {
        let shape: Vec<usize> = t
            .dims
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<_, _>>()
            .map_err(|_| {
                ImportError::Model(format!("{what}: negative dimension in {:?}", t.dims))
            })?;
        match t.data_type {
            d if data_type::is_integer(d) => {
                let ints = t
                    .ints()
                    .map_err(|m| ImportError::Model(format!("{what}: {m}")))?;
                Ok(self.add_value(&t.name, shape, None, Some(ints)))
            }
            _ => {
                let data = t
                    .floats()
                    .map_err(|m| ImportError::Model(format!("{what}: {m}")))?;
                Ok(self.add_value(&t.name, shape, Some(data), None))
            }
        }
    }

    fn push(&mut self, cx: &NodeCx, op: Op, inputs: Vec<ValueId>, output: ValueId) {
        self.g.nodes.push(Node {
            name: cx.name.clone(),
            op_type: cx.node.op_type.clone(),
            op,
            inputs,
            output,
        });
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
        self.input(cx, i)?
            .ok_or_else(|| cx.err(format!("input {i} is missing")))
    }

    /// A float input that kernels read (not an integer constant).
    fn tensor(&self, cx: &NodeCx, i: usize) -> Result<ValueId, ImportError> {
        let v = self.required(cx, i)?;
        if self.g.values[v].ints.is_some() && self.g.values[v].data.is_none() {
            return Err(cx.err(format!(
                "input `{}` is an integer tensor too large to read as floats",
                self.g.values[v].name
            )));
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
        let name = cx
            .node
            .output
            .first()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| cx.err("the node has no output"))?;
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
        let cx = NodeCx {
            node,
            name: if node.name.is_empty() {
                format!("#{index}")
            } else {
                crate::text::printable(&node.name, 80)
            },
        };
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            return Err(ImportError::Unsupported {
                node: cx.name.clone(),
                op: crate::text::printable(&format!("{}.{}", node.domain, node.op_type), 80),
                supported: SUPPORTED,
            });
        }
        // Extra outputs are allowed only where nothing may read them (Dropout's mask).
        let used_outputs = node.output.iter().filter(|o| !o.is_empty()).count();
        let op = node.op_type.as_str();
        if op != "Constant" && fold::fold(self, &cx)? {
            return Ok(());
        }
        if used_outputs > 1 && !matches!(op, "Dropout" | "Split") {
            return Err(
                cx.err("only the first output is supported (the others must be left unnamed)")
            );
        }
        match op {
            "Constant" => self.constant_node(&cx),
            _ if nodes::UNARY.contains(&op) => self.unary(&cx),
            _ if nodes::BINARY.contains(&op) => self.binary(&cx),
            "Where" => self.select(&cx),
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
            "Slice" | "Pad" | "Concat" | "Split" | "Expand" | "Tile" | "Gather" => {
                self.movement(&cx)
            }
            "DepthToSpace" | "SpaceToDepth" => self.depth_space(&cx),
            "Resize" => self.resize(&cx),
            "MatMul" => self.matmul(&cx),
            "Einsum" => self.einsum(&cx),
            "Gemm" => self.gemm(&cx),
            "Conv" | "ConvTranspose" => self.conv(&cx),
            "BatchNormalization" => self.batch_norm(&cx),
            "MaxPool" | "AveragePool" => self.pool(&cx),
            "GlobalAveragePool" | "GlobalMaxPool" => {
                cx.only(&[])?;
                let x = self.tensor(&cx, 0)?;
                let mut shape = self.shape(x);
                if shape.len() < 3 {
                    return Err(cx.err(format!(
                        "input shape {shape:?}: expected (N, C, spatial...)"
                    )));
                }
                let axes: Vec<usize> = (2..shape.len()).collect();
                for &a in &axes {
                    shape[a] = 1;
                }
                let kind = if op == "GlobalMaxPool" {
                    ReduceKind::Max
                } else {
                    ReduceKind::Mean
                };
                let y = self.output(&cx, shape)?;
                self.push(&cx, Op::Reduce { kind, axes }, vec![x], y);
                Ok(())
            }
            "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
            | "ReduceL2" | "ReduceSumSquare" | "ReduceLogSum" | "ReduceLogSumExp" | "ArgMax"
            | "ArgMin" => self.reduce(&cx),
            "Softmax" | "LogSoftmax" => {
                cx.only(&["axis"])?;
                let x = self.tensor(&cx, 0)?;
                let shape = self.shape(x);
                let axis = axis(&cx, cx.int("axis", -1)?, shape.len())?;
                let y = self.output(&cx, shape)?;
                self.push(
                    &cx,
                    Op::Softmax {
                        axis,
                        log: op == "LogSoftmax",
                    },
                    vec![x],
                    y,
                );
                Ok(())
            }
            "CumSum" => self.cumsum(&cx),
            "LayerNormalization" => self.layer_norm(&cx),
            "GroupNormalization" | "InstanceNormalization" => self.group_norm(&cx),
            _ => Err(ImportError::Unsupported {
                node: cx.name.clone(),
                op: crate::text::printable(op, 80),
                supported: SUPPORTED,
            }),
        }
    }
}
/// `data` of shape `from` broadcast to shape `to` (row-major).
pub fn expand<T: Copy>(data: &[T], from: &[usize], to: &[usize]) -> Vec<T> {
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
