//! Code generation: each fused group becomes an OpenCL C reference kernel with a tunable space,
//! described by a [`Kernel`] from which the crate writer renders the annotation.
//!
//! Every kernel takes its sizes as `const int` arguments (the annotation's workloads bind them:
//! the graph's shapes, and smaller ones for CPU devices), then its buffers, then its output `y`.
//! Every configuration its constraints allow is correct at every size they allow (each access is
//! bounds-checked), so the annotation says `extrapolate = true`.
//!
//! One module per kind of anchor; this one holds what they share: sizes, element-wise chains
//! (with operands read by numpy broadcasting), literals.

mod attention;
mod conv;
mod gemm;
mod map;
mod norm;
mod pool;
mod reduce;
mod tensor_core;

use crate::fuse::{Anchor, Chain, Fused, Group, Src};
use crate::graph::{Binary, Op, Unary, ValueId};

/// A problem size of a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Size {
    pub name: String,
    /// Its value in the graph.
    pub full: usize,
    /// Its value in the `small` workload (CPU devices).
    pub small: usize,
}

/// A buffer argument.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferArg {
    pub name: String,
    /// Length in elements, an expression of the sizes.
    pub len: String,
    /// The graph value it holds.
    pub value: ValueId,
    /// The kernel's output.
    pub output: bool,
    /// How the tuner draws it, when not `uniform(-1, 1)`.
    pub inputs: Option<String>,
}

/// One generated kernel and its tunable space.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// The OpenCL entry point, also the source file's stem.
    pub entry: String,
    /// The struct the annotation goes on.
    pub struct_name: String,
    pub source: String,
    /// What it computes, for its doc comment: the graph nodes it fuses.
    pub doc: String,
    /// `(name, domain)`, the domain in annotation syntax (`[1, 2, 4]`, `pow2(32..=256)`).
    pub params: Vec<(String, String)>,
    pub reference: Vec<(String, i64)>,
    pub require: Vec<String>,
    pub global: Vec<String>,
    pub local: Vec<String>,
    pub sizes: Vec<Size>,
    /// In the kernel's argument order, after the sizes.
    pub buffers: Vec<BufferArg>,
    /// `__local` arguments after them: name and length in elements (the launcher allocates them).
    pub locals: Vec<(String, String)>,
    /// Scratch buffers after those (`scratch(...)`: the launcher's, all zero at each launch and
    /// left so): name and length in elements.
    pub scratch: Vec<(String, String)>,
    pub rtol: f64,
    pub atol: f64,
    /// The proof's edge values are finite ones only (`edges = finite`): a path of the space
    /// turns infinities into NaN (the TF32 split).
    pub edges_finite: bool,
    /// A comment the annotation's `check` gets (what its tolerance is for).
    pub check_note: Option<&'static str>,
    pub bytes: String,
    pub flops: String,
}

/// Generates one kernel per group.
pub fn generate(fused: &Fused, index64: bool, precision: Precision) -> Vec<Kernel> {
    fused
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| generate_one(fused, i, g, index64, precision))
        .collect()
}

/// The bound `fits_int` states for `int` indices, and the one for `long` indices.
/// (2^31 - 2^24: a launch's last work-group may compute indices a few thousand past the
/// tensor's end before its bounds check, which must not wrap.)
const INT_BOUND: &str = "<= 2130706431";
const LONG_BOUND: &str = "<= 4611686018427387903";

/// The kernel with 64-bit indices: every `int` of its source becomes `long` (the sizes it
/// takes, the indices it computes, its loop counters), and its bounds are those of `long`.
/// `int` is matched as a whole token, so `uint`, `int4` and `convert_int` stay as they are.
fn widen(k: &mut Kernel) {
    let src = &k.source;
    let mut out = String::with_capacity(src.len() + src.len() / 16);
    let bytes = src.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if src[i..].starts_with("int")
            && (i == 0 || !word(bytes[i - 1]))
            && bytes.get(i + 3).is_none_or(|&c| !word(c))
        {
            out.push_str("long");
            i += 3;
        } else {
            let c = src[i..].chars().next().expect("a character");
            out.push(c);
            i += c.len_utf8();
        }
    }
    k.source = out;
    for r in &mut k.require {
        *r = r.replace(INT_BOUND, LONG_BOUND);
    }
}

fn generate_one(
    fused: &Fused,
    index: usize,
    g: &Group,
    index64: bool,
    precision: Precision,
) -> Kernel {
    let cx = Cx {
        fused,
        group: g,
        entry: format!("k{index:02}_{}", kind_name(&g.anchor)),
        precision,
    };
    let mut k = match &g.anchor {
        Anchor::Map | Anchor::Move { .. } => map::generate(&cx),
        Anchor::MatMul { .. } => gemm::generate(&cx),
        Anchor::Conv { .. } | Anchor::ConvTranspose { .. } => conv::generate(&cx),
        Anchor::Pool { .. } => pool::generate(&cx),
        Anchor::Reduce { .. } | Anchor::Softmax { .. } | Anchor::Scan { .. } => {
            reduce::generate(&cx)
        }
        Anchor::LayerNorm { .. } | Anchor::GroupNorm { .. } => norm::generate(&cx),
        Anchor::Attention { .. } => attention::generate(&cx),
    };
    // 64-bit indices where a tensor it touches (or the group's own result, a convolution's
    // before its pooling) passes what `int` indexes.
    let big = |n: usize| n > (1 << 31) - (1 << 24);
    if index64
        || big(g.shape.iter().product())
        || k.buffers
            .iter()
            .any(|b| big(fused.graph.values[b.value].numel()))
    {
        widen(&mut k);
    }
    k.struct_name = format!("K{index:02}{}", camel(kind_name(&g.anchor)));
    k
}

fn kind_name(a: &Anchor) -> &'static str {
    match a {
        Anchor::Map => "map",
        Anchor::Move { kind, .. } => match kind {
            crate::graph::Move::Transpose(_) => "transpose",
            crate::graph::Move::Slice(_) => "slice",
            crate::graph::Move::Pad { .. } => "pad",
            crate::graph::Move::Concat { .. } => "concat",
            crate::graph::Move::Expand => "expand",
            crate::graph::Move::Tile => "tile",
            crate::graph::Move::Gather { .. } => "gather",
            crate::graph::Move::Resize { .. } => "resize",
        },
        Anchor::MatMul { .. } => "matmul",
        Anchor::Conv { .. } => "conv",
        Anchor::ConvTranspose { .. } => "conv_transpose",
        Anchor::Pool { .. } => "pool",
        Anchor::Reduce { .. } => "reduce",
        Anchor::Softmax { .. } => "softmax",
        Anchor::Scan { .. } => "cum_sum",
        Anchor::LayerNorm { .. } => "layer_norm",
        Anchor::GroupNorm { .. } => "group_norm",
        Anchor::Attention { .. } => "attention",
    }
}

fn camel(s: &str) -> String {
    s.split('_')
        .map(|w| w[..1].to_uppercase() + &w[1..])
        .collect()
}

/// What a kind's generator reads.
pub(crate) struct Cx<'a> {
    pub fused: &'a Fused,
    pub group: &'a Group,
    pub entry: String,
    pub precision: Precision,
}

/// What the generated matrix products' tensor-core path computes (`import --precision`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Precision {
    /// FP32-accurate: 3xTF32 (each operand split into two TF32 parts, three products).
    #[default]
    Fp32,
    /// One TF32 product per step (10-bit mantissas, FP32 sums): about 3x the tensor-core
    /// rate, with the tolerance of TF32 in the annotation's `check` (the user's choice).
    Tf32,
}

impl Cx<'_> {
    pub fn shape(&self, v: ValueId) -> &[usize] {
        &self.fused.graph.values[v].shape
    }

    /// The kernel skeleton every kind fills in: sizes, the chains' side buffers and output.
    pub fn kernel(&self) -> Kernel {
        Kernel {
            entry: self.entry.clone(),
            struct_name: String::new(),
            source: String::new(),
            // The graph nodes it fuses (the source's header names them too).
            doc: self
                .group
                .nodes
                .iter()
                .map(|n| crate::text::printable(n, 80))
                .collect::<Vec<_>>()
                .join(", "),
            params: Vec::new(),
            reference: Vec::new(),
            require: Vec::new(),
            global: Vec::new(),
            local: Vec::new(),
            sizes: Vec::new(),
            buffers: Vec::new(),
            locals: Vec::new(),
            scratch: Vec::new(),
            rtol: 1e-4,
            atol: 1e-5,
            edges_finite: false,
            check_note: None,
            bytes: String::new(),
            flops: String::new(),
        }
    }
}

/// An index space: a shape whose dimensions are expressions of the kernel's sizes.
#[derive(Debug, Clone)]
pub(crate) struct Dims {
    pub exprs: Vec<String>,
    pub full: Vec<usize>,
}

impl Dims {
    /// Dimension `i` of `shape` is size `{prefix}{i}`, or the literal 1 where the graph has 1.
    pub fn named(prefix: &str, shape: &[usize], sizes: &mut Vec<Size>, small_cap: usize) -> Dims {
        let exprs = shape
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if d == 1 {
                    "1".to_string()
                } else {
                    let name = format!("{prefix}{i}");
                    sizes.push(Size {
                        name: name.clone(),
                        full: d,
                        small: d.min(small_cap),
                    });
                    name
                }
            })
            .collect();
        Dims {
            exprs,
            full: shape.to_vec(),
        }
    }

    pub fn product(&self, range: std::ops::Range<usize>) -> String {
        product(&self.exprs[range])
    }

    pub fn total(&self) -> String {
        self.product(0..self.exprs.len())
    }
}

/// `a * b * c` of expressions (literal 1s dropped), parenthesised.
pub(crate) fn product(exprs: &[String]) -> String {
    let parts: Vec<&str> = exprs
        .iter()
        .map(|s| s.as_str())
        .filter(|s| *s != "1")
        .collect();
    match parts.len() {
        0 => "1".into(),
        1 => parts[0].into(),
        _ => format!("({})", parts.join(" * ")),
    }
}

/// `size + c` as an expression (`size`, `(size + 2)`, `(size - 2)`).
pub(crate) fn plus(size: &str, c: i64) -> String {
    match c {
        0 => size.to_string(),
        c if c > 0 => format!("({size} + {c})"),
        c => format!("({size} - {})", -c),
    }
}

/// A float literal of OpenCL C that is exactly `v`.
pub(crate) fn lit(v: f32) -> String {
    if v.is_nan() {
        "NAN".into()
    } else if v == f32::INFINITY {
        "INFINITY".into()
    } else if v == f32::NEG_INFINITY {
        "(-INFINITY)".into()
    } else {
        format!("({v:e}f)")
    }
}

/// The C offset of element `i` of an index space in a tensor of shape `shape` read with numpy
/// broadcasting, and the tensor's length as an expression. Index variables `q{j}` (the
/// coordinates of `i`) must be declared by the caller for the dimensions in `needs`.
pub(crate) fn broadcast_offset(dims: &Dims, shape: &[usize]) -> (String, String, Vec<usize>) {
    let r = dims.exprs.len();
    let off = r - shape.len();
    let indexed: Vec<usize> = (0..shape.len())
        .filter(|&j| shape[j] != 1 && dims.full[j + off] != 1)
        .map(|j| j + off)
        .collect();
    let mut terms = Vec::new();
    for (pos, &d) in indexed.iter().enumerate() {
        let stride = product(
            &indexed[pos + 1..]
                .iter()
                .map(|&e| dims.exprs[e].clone())
                .collect::<Vec<_>>(),
        );
        terms.push(if stride == "1" {
            format!("q{d}")
        } else {
            format!("q{d} * {stride}")
        });
    }
    let offset = if terms.is_empty() {
        "0".to_string()
    } else {
        terms.join(" + ")
    };
    let len = product(
        &indexed
            .iter()
            .map(|&e| dims.exprs[e].clone())
            .collect::<Vec<_>>(),
    );
    (offset, len, indexed)
}

/// Declarations of the coordinates `q{j}` of linear index `i` in `dims`.
pub(crate) fn coordinates(dims: &Dims, needs: &[usize]) -> String {
    let r = dims.exprs.len();
    let mut out = String::new();
    let mut needs = needs.to_vec();
    needs.sort_unstable();
    needs.dedup();
    for j in needs {
        let inner = dims.product(j + 1..r);
        let q = if inner == "1" {
            "i".to_string()
        } else {
            format!("(i / {inner})")
        };
        let q = if j == 0 {
            q
        } else {
            format!("{q} % {}", dims.exprs[j])
        };
        out += &format!("    const int q{j} = {q};\n");
    }
    out
}

/// The group's side tensors as buffers, with their lengths read against `dims` (they are read
/// with broadcasting against the chain's shape). A side read by both chains of a pooled
/// convolution is read against the shape of the first chain that reads it.
pub(crate) fn side_buffers(cx: &Cx, k: &mut Kernel, spaces: &[(&Chain, &Dims)]) {
    for (s, &v) in cx.group.sides.iter().enumerate() {
        let dims = spaces
            .iter()
            .find(|(c, _)| reads_side(c, s))
            .map(|(_, d)| *d)
            .unwrap_or(spaces[0].1);
        let (_, len, _) = broadcast_offset(dims, &cx.group.side_shapes[s]);
        let divisor = spaces.iter().any(|(c, _)| {
            c.steps
                .iter()
                .any(|st| st.op == Op::Binary(Binary::Div) && st.args.get(1) == Some(&Src::Side(s)))
        });
        k.buffers.push(BufferArg {
            name: format!("s{s}"),
            len,
            value: v,
            output: false,
            inputs: divisor.then(|| "uniform(0.5, 2.0)".to_string()),
        });
    }
}

fn reads_side(c: &Chain, s: usize) -> bool {
    c.steps.iter().any(|st| st.args.contains(&Src::Side(s)))
}

/// `const int a, const int b` of the kernel's sizes, and the call's `a, b`.
pub(crate) fn size_params(k: &Kernel) -> (String, String) {
    let decl = k
        .sizes
        .iter()
        .map(|s| format!("const int {}", s.name))
        .collect::<Vec<_>>()
        .join(", ");
    let call = k
        .sizes
        .iter()
        .map(|s| s.name.clone())
        .collect::<Vec<_>>()
        .join(", ");
    (decl, call)
}

/// The side buffers' declarations and the call's names.
pub(crate) fn side_params(cx: &Cx) -> (String, String) {
    let decl = (0..cx.group.sides.len())
        .map(|s| format!("__global const float* restrict s{s}"))
        .collect::<Vec<_>>()
        .join(", ");
    let call = (0..cx.group.sides.len())
        .map(|s| format!("s{s}"))
        .collect::<Vec<_>>()
        .join(", ");
    (decl, call)
}

/// The kernel's parameter list: its sizes, the anchor's `inputs` (declarations), the side
/// buffers, then `outputs`.
pub(crate) fn arguments(cx: &Cx, k: &Kernel, inputs: &[&str], outputs: &str) -> String {
    let (sizes, _) = size_params(k);
    let (sides, _) = side_params(cx);
    let mut parts = vec![sizes];
    parts.extend(inputs.iter().map(|s| s.to_string()));
    parts.extend([sides, outputs.to_string()]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The compulsory traffic: every caller buffer read or written once, in bytes.
pub(crate) fn compulsory_bytes(k: &Kernel) -> String {
    format!(
        "4 * {}",
        k.buffers
            .iter()
            .map(|b| b.len.clone())
            .collect::<Vec<_>>()
            .join(" + 4 * ")
    )
}

/// A C function `float name(float v, int i, sizes..., sides...)` that applies `chain` to the
/// value `v` at linear index `i` of `dims`.
pub(crate) fn chain_function(
    cx: &Cx,
    k: &Kernel,
    name: &str,
    chain: &Chain,
    dims: &Dims,
) -> String {
    let mut body = String::new();
    let mut needs = Vec::new();
    let mut loads = String::new();
    for s in 0..cx.group.sides.len() {
        if !reads_side(chain, s) {
            continue;
        }
        let (offset, _, idx) = broadcast_offset(dims, &cx.group.side_shapes[s]);
        needs.extend(idx);
        loads += &format!("    const float l{s} = s{s}[{offset}];\n");
    }
    // Trilu reads the coordinates of the last two dimensions.
    let r = dims.exprs.len();
    let triangle = (r >= 2).then(|| (format!("q{}", r - 2), format!("q{}", r - 1)));
    if chain
        .steps
        .iter()
        .any(|st| matches!(st.op, Op::Unary(Unary::Trilu { .. })))
    {
        needs.extend([r - 2, r - 1]);
    }
    body += &coordinates(dims, &needs);
    body += &loads;
    for (n, step) in chain.steps.iter().enumerate() {
        let args: Vec<String> = step.args.iter().map(src).collect();
        body += &format!(
            "    const float t{n} = {};\n",
            expression(&step.op, &args, &step.args, triangle.as_ref())
        );
    }
    let (sizes, _) = size_params(k);
    let (sides, _) = side_params(cx);
    let params = ["const float v, const int i".to_string(), sizes, sides]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "static inline float {name}({params})\n{{\n{body}    return {};\n}}\n",
        src(&chain.result())
    )
}

/// The call of a chain function on value `v` at index `i`.
pub(crate) fn chain_call(cx: &Cx, k: &Kernel, name: &str, v: &str, i: &str) -> String {
    let (_, sizes) = size_params(k);
    let (_, sides) = side_params(cx);
    let args = [v.to_string(), i.to_string(), sizes, sides]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(", ");
    format!("{name}({args})")
}

fn src(s: &Src) -> String {
    match s {
        Src::Main => "v".into(),
        Src::Step(n) => format!("t{n}"),
        Src::Literal(x) => lit(*x),
        Src::Side(s) => format!("l{s}"),
    }
}

/// A boolean condition as the float ONNX's booleans are here (1 or 0).
fn boolean(cond: String) -> String {
    format!("(({cond}) ? 1.0f : 0.0f)")
}

/// One element-wise operator in C (every function is OpenCL's full-precision one). `srcs` are
/// the operands' sources (a literal exponent is computed exactly); `triangle` the coordinates
/// of the last two dimensions, for Trilu.
fn expression(op: &Op, a: &[String], srcs: &[Src], triangle: Option<&(String, String)>) -> String {
    let x = a.first().cloned().unwrap_or_default();
    match op {
        Op::Where => format!("({x} != 0.0f ? {} : {})", a[1], a[2]),
        Op::Binary(b) => {
            let y = &a[1];
            match b {
                Binary::Add => format!("{x} + {y}"),
                Binary::Sub => format!("{x} - {y}"),
                Binary::Mul => format!("{x} * {y}"),
                Binary::Div => format!("{x} / {y}"),
                Binary::Max => format!("fmax({x}, {y})"),
                Binary::Min => format!("fmin({x}, {y})"),
                Binary::Pow => match srcs.get(1) {
                    Some(Src::Literal(e)) if *e == 1.0 => x,
                    Some(Src::Literal(e)) if *e == 2.0 => format!("({x} * {x})"),
                    Some(Src::Literal(e)) if e.fract() == 0.0 && e.abs() <= 64.0 => {
                        format!("pown({x}, {})", *e as i32)
                    }
                    Some(Src::Literal(e)) if *e == 0.5 => format!("sqrt({x})"),
                    _ => format!("pow({x}, {y})"),
                },
                Binary::Mod { fmod: true } => format!("fmod({x}, {y})"),
                // the sign of the divisor, as Python's %
                Binary::Mod { fmod: false } => format!("({x} - {y} * floor({x} / {y}))"),
                Binary::PRelu => format!("({x} < 0.0f ? {y} * {x} : {x})"),
                Binary::Equal => boolean(format!("{x} == {y}")),
                Binary::Less => boolean(format!("{x} < {y}")),
                Binary::LessOrEqual => boolean(format!("{x} <= {y}")),
                Binary::Greater => boolean(format!("{x} > {y}")),
                Binary::GreaterOrEqual => boolean(format!("{x} >= {y}")),
                Binary::And => boolean(format!("{x} != 0.0f && {y} != 0.0f")),
                Binary::Or => boolean(format!("{x} != 0.0f || {y} != 0.0f")),
                Binary::Xor => boolean(format!("({x} != 0.0f) != ({y} != 0.0f)")),
            }
        }
        Op::Unary(u) => match u {
            Unary::Relu => format!("fmax({x}, 0.0f)"),
            Unary::LeakyRelu(al) => format!("({x} >= 0.0f ? {x} : {} * {x})", lit(*al)),
            Unary::Sigmoid => format!("1.0f / (1.0f + exp(-{x}))"),
            Unary::Tanh => format!("tanh({x})"),
            Unary::Erf => format!("erf({x})"),
            Unary::Exp => format!("exp({x})"),
            Unary::Log => format!("log({x})"),
            Unary::Sqrt => format!("sqrt({x})"),
            Unary::Reciprocal => format!("1.0f / {x}"),
            Unary::Neg => format!("-{x}"),
            Unary::Abs => format!("fabs({x})"),
            Unary::Sign => format!("({x} > 0.0f ? 1.0f : ({x} < 0.0f ? -1.0f : {x}))"),
            Unary::Floor => format!("floor({x})"),
            Unary::Ceil => format!("ceil({x})"),
            Unary::Round => format!("rint({x})"),
            Unary::Sin => format!("sin({x})"),
            Unary::Cos => format!("cos({x})"),
            Unary::Tan => format!("tan({x})"),
            Unary::Asin => format!("asin({x})"),
            Unary::Acos => format!("acos({x})"),
            Unary::Atan => format!("atan({x})"),
            Unary::Sinh => format!("sinh({x})"),
            Unary::Cosh => format!("cosh({x})"),
            Unary::Softsign => format!("{x} / (1.0f + fabs({x}))"),
            Unary::Softplus => format!("kf_softplus({x})"),
            Unary::HardSigmoid(al, be) => {
                format!("fmax(0.0f, fmin(1.0f, {} * {x} + {}))", lit(*al), lit(*be))
            }
            Unary::HardSwish => format!("{x} * fmax(0.0f, fmin(1.0f, {x} / 6.0f + 0.5f))"),
            Unary::Clip(lo, hi) => format!("fmin(fmax({x}, {}), {})", lit(*lo), lit(*hi)),
            Unary::Mish => format!("{x} * tanh(kf_softplus({x}))"),
            Unary::Gelu { tanh: false } => {
                format!("0.5f * {x} * (1.0f + erf({x} * 0.70710678118654752f))")
            }
            Unary::Gelu { tanh: true } => {
                format!("0.5f * {x} * (1.0f + tanh(0.79788456080286536f * ({x} + 0.044715f * {x} * {x} * {x})))")
            }
            Unary::Elu(al) => format!("({x} >= 0.0f ? {x} : {} * (exp({x}) - 1.0f))", lit(*al)),
            Unary::Celu(al) => format!(
                "(fmax(0.0f, {x}) + fmin(0.0f, {a} * (exp({x} / {a}) - 1.0f)))",
                a = lit(*al)
            ),
            Unary::Selu(al, ga) => format!(
                "{} * ({x} > 0.0f ? {x} : {} * (exp({x}) - 1.0f))",
                lit(*ga),
                lit(*al)
            ),
            Unary::ThresholdedRelu(al) => format!("({x} > {} ? {x} : 0.0f)", lit(*al)),
            Unary::Shrink(bias, lambd) => {
                format!(
                    "({x} < -{l} ? {x} + {b} : ({x} > {l} ? {x} - {b} : 0.0f))",
                    l = lit(*lambd),
                    b = lit(*bias)
                )
            }
            Unary::Not => boolean(format!("{x} == 0.0f")),
            Unary::IsNaN => boolean(format!("isnan({x})")),
            Unary::IsInf { negative, positive } => match (negative, positive) {
                (true, true) => boolean(format!("isinf({x})")),
                (false, true) => boolean(format!("{x} == INFINITY")),
                (true, false) => boolean(format!("{x} == -INFINITY")),
                (false, false) => "0.0f".into(),
            },
            Unary::Trunc => format!("trunc({x})"),
            Unary::Bool => boolean(format!("{x} != 0.0f")),
            Unary::Trilu { upper, k } => {
                let (row, col) = triangle.expect("Trilu has two dimensions (checked when read)");
                let keep = if *upper {
                    format!("{col} - {row} >= {k}")
                } else {
                    format!("{col} - {row} <= {k}")
                };
                format!("(({keep}) ? {x} : 0.0f)")
            }
        },
        other => unreachable!("not element-wise: {other:?}"),
    }
}

/// The prelude of every generated source: the tunable parameters' reference values as
/// defaults, and helpers.
/// A file of kfoundry's template library (`kfoundry_tooling::library`, its own includes
/// expanded) as a generated kernel takes it: without its `#error` guards (the annotation's
/// `require` states the same conditions, and generated sources carry no directive beyond the
/// allow-list).
pub(crate) fn library_part(name: &str) -> String {
    kfoundry_tooling::library::file(name)
        .expect("a file of kfoundry's template library")
        .lines()
        .filter(|l| !l.trim_start().starts_with("#error"))
        .map(|l| format!("{l}\n"))
        .collect()
}

pub(crate) fn prelude(k: &Kernel, what: &str) -> String {
    let mut s = format!(
        "/*\n * {}: {what}.\n * Generated by `cargo kfoundry import`; re-import rather than edit.\n * Fuses: {}.\n */\n\n",
        k.entry,
        k.doc.replace("*/", "* /")
    );
    for (name, value) in &k.reference {
        s += &format!("#ifndef {name}\n#define {name} {value}\n#endif\n");
    }
    s += "\nstatic inline float kf_softplus(const float x) { return x > 20.0f ? x : log1p(exp(x)); }\n";
    s
}

/// C code that folds `load` (an expression of the index `j`) over `j = start, start + step, ...`
/// below `len` into `float {acc}`, with UNROLL independent partial results (loads in flight)
/// combined by `combine` at the end; `init` is the fold's identity.
pub(crate) fn strided_fold(
    acc: &str,
    init: &str,
    start: &str,
    step: &str,
    len: &str,
    load: &str,
    combine: impl Fn(&str, &str) -> String,
) -> String {
    let at = |j: &str| load.replace("{j}", j);
    format!(
        r#"    float {acc}_p[UNROLL];
    for (int u = 0; u < UNROLL; u++) {acc}_p[u] = {init};
    int {acc}_j = {start};
    for (; {acc}_j + (UNROLL - 1) * ({step}) < ({len}); {acc}_j += UNROLL * ({step}))
        for (int u = 0; u < UNROLL; u++) {acc}_p[u] = {fold_u};
    for (; {acc}_j < ({len}); {acc}_j += {step}) {acc}_p[0] = {fold_0};
    float {acc} = {acc}_p[0];
    for (int u = 1; u < UNROLL; u++) {acc} = {merge};
"#,
        fold_u = combine(
            &format!("{acc}_p[u]"),
            &at(&format!("({acc}_j + u * ({step}))"))
        ),
        fold_0 = combine(&format!("{acc}_p[0]"), &at(&format!("{acc}_j"))),
        merge = combine(acc, &format!("{acc}_p[u]")),
    )
}

/// A tree over the work-group's `buf[WG]` (items indexed by `lid`) leaving the `op`-combined
/// result in `buf[0]`, visible to every item (every item must run it).
pub(crate) fn tree(op: &str) -> String {
    format!(
        "    for (int s = WG / 2; s > 0; s >>= 1) {{\n        barrier(CLK_LOCAL_MEM_FENCE);\n        if (lid < s) buf[lid] = {op};\n    }}\n    barrier(CLK_LOCAL_MEM_FENCE);\n"
    )
}

/// Sets the tunable space: parameters, their reference values.
pub(crate) fn params(k: &mut Kernel, list: &[(&str, &str, i64)]) {
    for (name, domain, reference) in list {
        k.params.push((name.to_string(), domain.to_string()));
        k.reference.push((name.to_string(), *reference));
    }
}

/// The sizes' products stay within `int`: every index in the generated code is an `int`.
pub(crate) fn fits_int(k: &mut Kernel, exprs: &[String]) {
    for e in exprs {
        if e != "1" && !k.require.contains(&format!("{e} {INT_BOUND}")) {
            k.require.push(format!("{e} {INT_BOUND}"));
        }
    }
}
