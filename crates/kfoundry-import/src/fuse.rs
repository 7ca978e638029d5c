//! Fusion: the graph cut into groups, each one kernel.
//!
//! 1. **Folding.** A convolution followed by a multiplication and/or addition by per-channel
//!    constants (what `BatchNormalization` becomes) takes them into its weights and bias.
//! 2. **Views.** Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout and transposes that
//!    keep the element order share their input's buffer: no kernel.
//! 3. **Groups.** In topological order, each node not yet in a group starts one: an *anchor*
//!    (MatMul/Gemm, Conv, ConvTranspose, pooling, a reduction, Softmax, LayerNormalization,
//!    GroupNormalization, data movement) or, for an element-wise node, a *map*. The group then
//!    takes element-wise nodes that read its values, have its output's shape, and whose other
//!    operands are already computed (graph inputs, constants, earlier groups' outputs: those are
//!    read with broadcasting). A convolution also takes a pooling whose windows tile its output
//!    (kernel = stride, no padding) and the element-wise nodes after it. The group keeps the
//!    largest such chain after which exactly one of its values is read outside it: that value is
//!    the kernel's output, all others stay in registers.
//! 4. **Attention.** A matrix product with its chain (the scores: a scale, a mask added), a
//!    Softmax of the scores along their last axis and a matrix product of the probabilities
//!    by a third tensor, where each result is read only by the next, become one group: the
//!    scores and probabilities never reach memory ([`Anchor::Attention`]).

use std::collections::BTreeSet;

use crate::graph::{Binary, Graph, Node, Op, PoolKind, ValueId, Window};

/// An element-wise operand: where a value of the chain comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Src {
    /// The anchor's result at this element.
    Main,
    /// An earlier step of the chain.
    Step(usize),
    /// A one-element constant, written into the source.
    Literal(f32),
    /// A tensor read with broadcasting (index into the group's `sides`).
    Side(usize),
}

/// One element-wise step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub op: Op,
    pub args: Vec<Src>,
    /// The graph value it computes.
    pub value: ValueId,
}

/// A chain of element-wise steps over one shape; its result is the last step's (or the
/// anchor's, when there are no steps).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chain {
    pub steps: Vec<Step>,
}

impl Chain {
    pub fn result(&self) -> Src {
        if self.steps.is_empty() {
            Src::Main
        } else {
            Src::Step(self.steps.len() - 1)
        }
    }
}

/// What a group computes before its element-wise chain.
#[derive(Debug, Clone, PartialEq)]
pub enum Anchor {
    /// No anchor: the chain reads its operands directly (the main value is unused).
    Map,
    /// Data movement (transposes, slices, pads, concatenations, broadcasts, gathers).
    Move {
        inputs: Vec<ValueId>,
        kind: crate::graph::Move,
    },
    MatMul {
        a: ValueId,
        b: ValueId,
        trans_a: bool,
        trans_b: bool,
    },
    Conv {
        x: ValueId,
        w: ValueId,
        bias: Option<ValueId>,
        window: Window,
        groups: usize,
    },
    ConvTranspose {
        x: ValueId,
        w: ValueId,
        bias: Option<ValueId>,
        window: Window,
        groups: usize,
    },
    Pool {
        x: ValueId,
        kind: PoolKind,
        window: Window,
        count_include_pad: bool,
    },
    Reduce {
        x: ValueId,
        kind: crate::graph::ReduceKind,
        axes: Vec<usize>,
    },
    Softmax {
        x: ValueId,
        axis: usize,
        log: bool,
    },
    Scan {
        x: ValueId,
        axis: usize,
        exclusive: bool,
        reverse: bool,
    },
    LayerNorm {
        x: ValueId,
        scale: ValueId,
        bias: ValueId,
        axis: usize,
        eps: f32,
    },
    GroupNorm {
        x: ValueId,
        scale: ValueId,
        bias: ValueId,
        groups: usize,
        eps: f32,
    },
    /// `softmax(scores(q k)) v` along the keys: q is (batch..., queries, d), k (batch..., d,
    /// keys) or, with `trans_k`, (batch..., keys, d), v (batch..., keys, dv) or, with
    /// `trans_v`, (batch..., dv, keys); each operand's batch is the scores' or all ones. The
    /// group's chain follows the product by v.
    Attention {
        q: ValueId,
        k: ValueId,
        v: ValueId,
        trans_k: bool,
        trans_v: bool,
        /// The chain on the scores (its sides are the group's first ones).
        scores: Chain,
        /// The scores' shape: (batch..., queries, keys).
        score_shape: Vec<usize>,
    },
}

/// A pooling fused after a convolution: windows tile the convolution's output.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedPool {
    pub kind: PoolKind,
    /// Depth, height, width.
    pub kernel: [usize; 3],
    /// The chain after the pooling, at the pooled shape.
    pub chain: Chain,
    /// The pooled shape.
    pub shape: Vec<usize>,
}

/// One fused kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub anchor: Anchor,
    /// The anchor's output shape, which its chain keeps.
    pub shape: Vec<usize>,
    pub chain: Chain,
    pub pool: Option<FusedPool>,
    /// Tensors the chains read with broadcasting.
    pub sides: Vec<ValueId>,
    /// The shape each side is read as: its own (broadcast against the chain's shape), or the
    /// chain's (a tensor of a view's shape, read element by element).
    pub side_shapes: Vec<Vec<usize>>,
    /// The value the kernel writes.
    pub output: ValueId,
    /// The graph nodes it covers, `name (Op)`.
    pub nodes: Vec<String>,
}

/// The graph as kernels.
#[derive(Debug, Clone)]
pub struct Fused {
    pub graph: Graph,
    pub groups: Vec<Group>,
    /// For every value, the value whose buffer holds it (itself, or what it is a view of).
    pub storage: Vec<ValueId>,
}

pub fn fuse(mut graph: Graph) -> Fused {
    fold_into_convolutions(&mut graph);
    let n = graph.values.len();
    let mut storage: Vec<ValueId> = (0..n).collect();
    let mut done = vec![false; graph.nodes.len()];
    // Views first: they only rename buffers.
    for (i, node) in graph.nodes.iter().enumerate() {
        if node.op == Op::View {
            storage[node.output] = storage[node.inputs[0]];
            done[i] = true;
        }
    }
    let consumers = graph.consumers();
    let mut computed: Vec<bool> = (0..n)
        .map(|v| {
            graph.values[v].data.is_some()
                || graph.values[v].ints.is_some()
                || graph.inputs.contains(&v)
        })
        .collect();
    propagate_views(&graph, &mut computed);
    let mut groups = Vec::new();
    for start in 0..graph.nodes.len() {
        if done[start] {
            continue;
        }
        let group = grow(&graph, &consumers, start, &mut done, &computed);
        computed[group.output] = true;
        propagate_views(&graph, &mut computed);
        groups.push(group);
    }
    let groups = fuse_attention(&graph, &consumers, groups);
    Fused {
        graph,
        groups,
        storage,
    }
}

/// The largest head dimensions fused (an item keeps a query row and an output row in
/// registers).
const ATTENTION_MAX_HEAD: usize = 128;

/// Step 4: each MatMul -> Softmax(last axis) -> MatMul of groups, each result read only by
/// the next, becomes one attention group in the place of the last (whose inputs all exist
/// by then).
fn fuse_attention(graph: &Graph, consumers: &[Vec<usize>], mut groups: Vec<Group>) -> Vec<Group> {
    // The only node that reads `v`, where `v` is no graph output.
    let sole_reader = |v: ValueId| -> Option<usize> {
        (consumers[v].len() == 1 && !graph.outputs.contains(&v)).then(|| consumers[v][0])
    };
    let producer = |v: ValueId| groups.iter().position(|g| g.output == v);
    // The three groups (scores, softmax, product) found, and the operands of the attention.
    struct Found {
        groups: [usize; 3],
        q: ValueId,
        k: ValueId,
        v: ValueId,
        trans_k: bool,
        trans_v: bool,
    }
    let mut merged: Vec<Found> = Vec::new();
    for (i3, g3) in groups.iter().enumerate() {
        let Anchor::MatMul {
            a: p,
            b: v,
            trans_a: false,
            trans_b: trans_v,
        } = g3.anchor
        else {
            continue;
        };
        let Some(i2) = producer(p) else { continue };
        let g2 = &groups[i2];
        let Anchor::Softmax {
            x: s,
            axis,
            log: false,
        } = g2.anchor
        else {
            continue;
        };
        if !g2.chain.steps.is_empty() || g2.pool.is_some() || axis + 1 != g2.shape.len() {
            continue;
        }
        let Some(i1) = producer(s) else { continue };
        let g1 = &groups[i1];
        let Anchor::MatMul {
            a: q,
            b: k,
            trans_a: false,
            trans_b: trans_k,
        } = g1.anchor
        else {
            continue;
        };
        // The scores and probabilities are read by the softmax and the product alone.
        let read_by = |v: ValueId, reader: fn(&Op) -> bool| {
            sole_reader(v).is_some_and(|n| reader(&graph.nodes[n].op))
        };
        if g1.pool.is_some()
            || !read_by(s, |op| matches!(op, Op::Softmax { .. }))
            || !read_by(p, |op| matches!(op, Op::MatMul { .. }))
        {
            continue;
        }
        let shape = |v: ValueId| &graph.values[v].shape;
        let (sq, sk, sv, ss, so) = (shape(q), shape(k), shape(v), &g1.shape, &g3.shape);
        let r = ss.len();
        if r < 2 || sq.len() != r || sk.len() != r || sv.len() != r || so.len() != r {
            continue;
        }
        let (d, dv) = (sq[r - 1], if trans_v { sv[r - 2] } else { sv[r - 1] });
        let keys = if trans_k { sk[r - 2] } else { sk[r - 1] };
        let batch_ok =
            |t: &[usize]| t[..r - 2] == ss[..r - 2] || t[..r - 2].iter().all(|&x| x == 1);
        if !(batch_ok(sq) && batch_ok(sk) && batch_ok(sv))
            || so[..r - 2] != ss[..r - 2]
            || keys != ss[r - 1]
        {
            continue;
        }
        if d > ATTENTION_MAX_HEAD
            || dv > ATTENTION_MAX_HEAD
            || merged
                .iter()
                .any(|f| f.groups.iter().any(|x| [i1, i2, i3].contains(x)))
        {
            continue;
        }
        merged.push(Found {
            groups: [i1, i2, i3],
            q,
            k,
            v,
            trans_k,
            trans_v,
        });
    }
    for f in &merged {
        let [i1, i2, i3] = f.groups;
        let (g1, g2) = (groups[i1].clone(), groups[i2].clone());
        let g3 = &mut groups[i3];
        let offset = g1.sides.len();
        for step in &mut g3.chain.steps {
            for arg in &mut step.args {
                if let Src::Side(s) = arg {
                    *s += offset;
                }
            }
        }
        g3.anchor = Anchor::Attention {
            q: f.q,
            k: f.k,
            v: f.v,
            trans_k: f.trans_k,
            trans_v: f.trans_v,
            scores: g1.chain,
            score_shape: g1.shape,
        };
        g3.sides = [g1.sides, std::mem::take(&mut g3.sides)].concat();
        g3.side_shapes = [g1.side_shapes, std::mem::take(&mut g3.side_shapes)].concat();
        g3.nodes = [g1.nodes, g2.nodes, std::mem::take(&mut g3.nodes)].concat();
    }
    let gone: BTreeSet<usize> = merged
        .iter()
        .flat_map(|f| [f.groups[0], f.groups[1]])
        .collect();
    groups
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !gone.contains(i))
        .map(|(_, g)| g)
        .collect()
}

/// Views of computed values are computed (one pass: nodes are in topological order).
fn propagate_views(graph: &Graph, computed: &mut [bool]) {
    for node in &graph.nodes {
        if node.op == Op::View && computed[node.inputs[0]] {
            computed[node.output] = true;
        }
    }
}

/// The working state of a growing group. Everything is appended to, so a state to return to
/// is a [`Mark`] of lengths, not a copy (chains of thousands of nodes stay linear).
struct Grow {
    members: Vec<usize>,
    member: Vec<bool>,
    chain: Chain,
    pool: Option<FusedPool>,
    sides: Vec<ValueId>,
    side_shapes: Vec<Vec<usize>>,
    /// The anchor's output shape.
    shape: Vec<usize>,
    /// Values of the chain at the current shape (the pooled value and after, once a pooling is
    /// in), and where each comes from.
    current: Vec<Option<Src>>,
    last: Option<ValueId>,
    /// All values the group computes, in order, and as a set.
    all: Vec<ValueId>,
    in_all: Vec<bool>,
    /// Nodes that read a value of the group and are not in it (to consider, lowest first).
    frontier: BTreeSet<usize>,
    /// Values of `all` read outside the group or by nobody, or graph outputs: how many.
    escaping: usize,
}

/// Lengths of a [`Grow`] to truncate back to.
struct Mark {
    members: usize,
    steps: usize,
    pool: Option<usize>,
    sides: usize,
    all: usize,
}

impl Grow {
    fn mark(&self) -> Mark {
        Mark {
            members: self.members.len(),
            steps: self.chain.steps.len(),
            pool: self.pool.as_ref().map(|p| p.chain.steps.len()),
            sides: self.sides.len(),
            all: self.all.len(),
        }
    }

    fn truncate(&mut self, m: &Mark) {
        self.members.truncate(m.members);
        self.chain.steps.truncate(m.steps);
        match m.pool {
            Some(n) => {
                if let Some(p) = self.pool.as_mut() {
                    p.chain.steps.truncate(n);
                }
            }
            None => self.pool = None,
        }
        self.sides.truncate(m.sides);
        self.side_shapes.truncate(m.sides);
        self.all.truncate(m.all);
    }

    fn src(&self, v: ValueId) -> Option<Src> {
        self.current[v]
    }
}

fn grow(
    graph: &Graph,
    consumers: &[Vec<usize>],
    start: usize,
    done: &mut [bool],
    computed: &[bool],
) -> Group {
    let node = &graph.nodes[start];
    let (anchor, main_value) = anchor_of(node);
    let shape = graph.values[node.output].shape.clone();
    let mut g = Grow {
        members: vec![start],
        member: vec![false; graph.nodes.len()],
        chain: Chain::default(),
        pool: None,
        sides: Vec::new(),
        side_shapes: Vec::new(),
        shape: shape.clone(),
        current: vec![None; graph.values.len()],
        last: None,
        all: Vec::new(),
        in_all: vec![false; graph.values.len()],
        frontier: BTreeSet::new(),
        escaping: 0,
    };
    g.member[start] = true;
    match main_value {
        Some(v) => add_value(graph, consumers, &mut g, v, Src::Main),
        // A map starts with its first element-wise node as a step.
        None => push_step(graph, consumers, &mut g, node),
    }
    let is_conv = matches!(anchor, Anchor::Conv { .. });
    let mut best = g.mark();
    loop {
        let cur_shape = g
            .pool
            .as_ref()
            .map(|p| p.shape.clone())
            .unwrap_or_else(|| shape.clone());
        let candidate = g.frontier.iter().copied().find(|&i| {
            if done[i] || g.member[i] || i < start {
                return false;
            }
            let n = &graph.nodes[i];
            // Its other operands must exist before the kernel runs.
            if !n.inputs.iter().all(|&v| g.src(v).is_some() || computed[v]) {
                return false;
            }
            if !n.inputs.iter().any(|&v| g.src(v).is_some()) {
                return false;
            }
            if n.op.is_elementwise() {
                return elementwise_fits(graph, &g, n, &cur_shape);
            }
            // A pooling may read only the chain's last value: it is what the windows reduce.
            is_conv
                && g.pool.is_none()
                && g.last == Some(n.inputs[0])
                && pool_tiles(n, &graph.values[n.inputs[0]].shape)
        });
        let Some(i) = candidate else { break };
        let n = &graph.nodes[i];
        g.frontier.remove(&i);
        // The node now reads inside the group: values of the group it reads may no longer escape.
        let mut read: Vec<ValueId> = n
            .inputs
            .iter()
            .copied()
            .filter(|&v| g.in_all[v] && escapes_now(graph, consumers, &g.member, v))
            .collect();
        read.sort_unstable();
        read.dedup();
        g.members.push(i);
        g.member[i] = true;
        g.escaping -= read
            .iter()
            .filter(|&&v| !escapes_now(graph, consumers, &g.member, v))
            .count();
        if let Op::Pool { kind, window, .. } = &n.op {
            g.pool = Some(FusedPool {
                kind: *kind,
                kernel: window.kernel,
                chain: Chain::default(),
                shape: graph.values[n.output].shape.clone(),
            });
            // Values before the pooling can no longer be read by what follows.
            for &v in &g.all {
                g.current[v] = None;
            }
            add_value(graph, consumers, &mut g, n.output, Src::Main);
        } else {
            push_step(graph, consumers, &mut g, n);
        }
        if g.escaping == 1 {
            best = g.mark();
        }
    }
    g.truncate(&best);
    let mut member = vec![false; graph.nodes.len()];
    for &m in &g.members {
        member[m] = true;
    }
    let output = g
        .all
        .iter()
        .copied()
        .rfind(|&v| escapes_now(graph, consumers, &member, v))
        .unwrap_or(graph.nodes[start].output);
    for &m in &g.members {
        done[m] = true;
    }
    // Nodes named once even where one node of the file became several here (Gemm, BatchNorm).
    let mut nodes: Vec<String> = Vec::new();
    for &m in &g.members {
        let n = format!("{} ({})", graph.nodes[m].name, graph.nodes[m].op_type);
        if !nodes.contains(&n) {
            nodes.push(n);
        }
    }
    Group {
        anchor,
        shape,
        chain: g.chain,
        pool: g.pool,
        sides: g.sides,
        side_shapes: g.side_shapes,
        output,
        nodes,
    }
}

/// Is `v` read outside the group (members as given), read by nobody, or a graph output?
fn escapes_now(graph: &Graph, consumers: &[Vec<usize>], member: &[bool], v: ValueId) -> bool {
    graph.outputs.contains(&v)
        || consumers[v].is_empty()
        || consumers[v].iter().any(|&c| !member[c])
}

/// Can element-wise node `n` join, the chain being at shape `cur`? Its operands from the group
/// must have its shape (they are read at the element's own index). At the chain's shape it
/// reads other tensors with broadcasting; at another shape (after a view) only whole tensors of
/// its shape, or one-element constants.
fn elementwise_fits(graph: &Graph, g: &Grow, n: &Node, cur: &[usize]) -> bool {
    let shape = &graph.values[n.output].shape;
    let numel = |s: &[usize]| s.iter().product::<usize>();
    if numel(shape) != numel(cur) {
        return false;
    }
    n.inputs.iter().all(|&v| {
        let vs = &graph.values[v].shape;
        if g.src(v).is_some() {
            vs == shape
        } else {
            shape == cur || graph.scalar(v).is_some() || vs == shape
        }
    })
}

/// A value the group now computes: it can be read by later steps, and it escapes until every
/// reader has joined. Views of it join with it (they are the same elements, in the same order).
fn add_value(graph: &Graph, consumers: &[Vec<usize>], g: &mut Grow, v: ValueId, src: Src) {
    g.current[v] = Some(src);
    g.last = Some(v);
    g.all.push(v);
    g.in_all[v] = true;
    let mut views = Vec::new();
    for &c in &consumers[v] {
        if g.member[c] {
            continue;
        }
        if graph.nodes[c].op == Op::View {
            g.members.push(c);
            g.member[c] = true;
            views.push(graph.nodes[c].output);
        } else {
            g.frontier.insert(c);
        }
    }
    if escapes_now(graph, consumers, &g.member, v) {
        g.escaping += 1;
    }
    for view in views {
        add_value(graph, consumers, g, view, src);
    }
    // What a pooling may reduce is the value itself, not a view of it.
    g.last = Some(v);
}

fn push_step(graph: &Graph, consumers: &[Vec<usize>], g: &mut Grow, n: &Node) {
    let args = n
        .inputs
        .iter()
        .map(|&v| {
            if let Some(src) = g.src(v) {
                src
            } else if let Some(k) = graph.scalar(v) {
                Src::Literal(k)
            } else {
                // Read with broadcasting at the chain's shape; after a view, the whole tensor
                // element by element, which is reading it as if it had the chain's shape.
                let base = g.pool.as_ref().map(|p| &p.shape).unwrap_or(&g.shape);
                let read = if graph.values[n.output].shape == *base {
                    graph.values[v].shape.clone()
                } else {
                    base.clone()
                };
                let index = g
                    .sides
                    .iter()
                    .zip(&g.side_shapes)
                    .position(|(&s, r)| s == v && *r == read)
                    .unwrap_or_else(|| {
                        g.sides.push(v);
                        g.side_shapes.push(read);
                        g.sides.len() - 1
                    });
                Src::Side(index)
            }
        })
        .collect();
    let chain = match g.pool.as_mut() {
        Some(p) => &mut p.chain,
        None => &mut g.chain,
    };
    chain.steps.push(Step {
        op: n.op.clone(),
        args,
        value: n.output,
    });
    let src = Src::Step(chain.steps.len() - 1);
    add_value(graph, consumers, g, n.output, src);
}

/// A pooling a convolution can take: windows that tile the input, without padding.
fn pool_tiles(n: &Node, input: &[usize]) -> bool {
    match &n.op {
        Op::Pool { window, .. } => {
            let spatial = window.spatial(input);
            window.kernel == window.strides
                && window.pads == [0; 6]
                && window.dilations == [1; 3]
                && !window.ceil
                && input.len() == 2 + window.rank
                && (0..3).all(|i| spatial[i].is_multiple_of(window.kernel[i]))
        }
        _ => false,
    }
}

fn anchor_of(node: &Node) -> (Anchor, Option<ValueId>) {
    let i = &node.inputs;
    let anchor = match &node.op {
        Op::Unary(_) | Op::Binary(_) | Op::Where | Op::View => return (Anchor::Map, None),
        Op::Move(kind) => Anchor::Move {
            inputs: i.clone(),
            kind: kind.clone(),
        },
        Op::MatMul { trans_a, trans_b } => Anchor::MatMul {
            a: i[0],
            b: i[1],
            trans_a: *trans_a,
            trans_b: *trans_b,
        },
        Op::Conv { window, groups } => Anchor::Conv {
            x: i[0],
            w: i[1],
            bias: i.get(2).copied(),
            window: window.clone(),
            groups: *groups,
        },
        Op::ConvTranspose { window, groups } => Anchor::ConvTranspose {
            x: i[0],
            w: i[1],
            bias: i.get(2).copied(),
            window: window.clone(),
            groups: *groups,
        },
        Op::Pool {
            kind,
            window,
            count_include_pad,
        } => Anchor::Pool {
            x: i[0],
            kind: *kind,
            window: window.clone(),
            count_include_pad: *count_include_pad,
        },
        Op::Reduce { kind, axes } => Anchor::Reduce {
            x: i[0],
            kind: *kind,
            axes: axes.clone(),
        },
        Op::Softmax { axis, log } => Anchor::Softmax {
            x: i[0],
            axis: *axis,
            log: *log,
        },
        Op::Scan {
            axis,
            exclusive,
            reverse,
        } => Anchor::Scan {
            x: i[0],
            axis: *axis,
            exclusive: *exclusive,
            reverse: *reverse,
        },
        Op::LayerNorm { axis, eps } => Anchor::LayerNorm {
            x: i[0],
            scale: i[1],
            bias: i[2],
            axis: *axis,
            eps: *eps,
        },
        Op::GroupNorm { groups, eps } => Anchor::GroupNorm {
            x: i[0],
            scale: i[1],
            bias: i[2],
            groups: *groups,
            eps: *eps,
        },
    };
    (anchor, Some(node.output))
}

/// Folds `Conv -> Mul(k) -> Add(t)` with per-output-channel constants into the convolution.
fn fold_into_convolutions(graph: &mut Graph) {
    loop {
        let consumers = graph.consumers();
        let mut changed = false;
        for ci in 0..graph.nodes.len() {
            let conv = &graph.nodes[ci];
            let Op::Conv { .. } = conv.op else { continue };
            let out = conv.output;
            if graph.outputs.contains(&out) || consumers[out].len() != 1 {
                continue;
            }
            let ni = consumers[out][0];
            let next = &graph.nodes[ni];
            let Op::Binary(op @ (Binary::Mul | Binary::Add)) = next.op else {
                continue;
            };
            if graph.values[next.output].shape != graph.values[out].shape {
                continue;
            }
            let other = if next.inputs[0] == out {
                next.inputs[1]
            } else {
                next.inputs[0]
            };
            if other == out {
                continue;
            }
            let cout = graph.values[out].shape[1];
            let Some(k) = graph.per_channel(other, &graph.values[out].shape) else {
                continue;
            };
            let w = conv.inputs[1];
            let Some(wdata) = graph.values[w].data.clone() else {
                continue;
            };
            let bias = conv.inputs.get(2).copied();
            let bdata = match bias {
                Some(b) => match graph.values[b].data.clone() {
                    Some(d) => d,
                    None => continue,
                },
                None => vec![0.0; cout],
            };
            let per = wdata.len() / cout;
            let (new_w, new_b): (Vec<f32>, Vec<f32>) = match op {
                Binary::Mul => (
                    wdata
                        .iter()
                        .enumerate()
                        .map(|(i, v)| v * k[i / per])
                        .collect(),
                    bdata.iter().zip(&k).map(|(b, k)| b * k).collect(),
                ),
                _ => (wdata, bdata.iter().zip(&k).map(|(b, k)| b + k).collect()),
            };
            let w_shape = graph.values[w].shape.clone();
            let wv = graph.add_constant("folded.weight", w_shape, new_w);
            let bv = graph.add_constant("folded.bias", vec![cout], new_b);
            let next_out = graph.nodes[ni].output;
            let (a, b) = (&graph.nodes[ci].name, &graph.nodes[ni].name);
            let name = if a == b || a.ends_with(&format!(" + {b}")) {
                a.clone()
            } else {
                format!("{a} + {b}")
            };
            let conv = &mut graph.nodes[ci];
            conv.inputs.truncate(1);
            conv.inputs.push(wv);
            conv.inputs.push(bv);
            conv.output = next_out;
            conv.name = name;
            graph.nodes.remove(ni);
            changed = true;
            break;
        }
        if !changed {
            return;
        }
    }
}
