//! Operators that exporters write as several nodes, recognised and put back together so that
//! each becomes one kernel.
//!
//! - **GroupNorm at opset < 18.** PyTorch writes `GroupNorm(G)` of x (N, C, ...) as
//!   `Reshape(N, G, -1) → InstanceNormalization(scale 1, bias 0) → Reshape(x's shape) →
//!   Mul(weight) → Add(bias)`, the weight and bias per channel. That is
//!   `GroupNormalization(G)` of x with that weight and bias.

use super::{Binary, Graph, Op, ValueId};

pub(super) fn rewrite(g: &mut Graph) {
    while let Some(found) = find_group_norm(g) {
        apply(g, found);
    }
}

/// A GroupNorm written out: the nodes to remove, and the one to put at the first's place.
struct GroupNorm {
    nodes: Vec<usize>,
    x: ValueId,
    output: ValueId,
    groups: usize,
    eps: f32,
    scale: Vec<f32>,
    bias: Vec<f32>,
}

/// The single node reading `v`, if exactly one does and `v` is not a graph output.
fn only_reader(g: &Graph, consumers: &[Vec<usize>], v: ValueId) -> Option<usize> {
    match consumers[v].as_slice() {
        [one] if !g.outputs.contains(&v) => Some(*one),
        _ => None,
    }
}

fn find_group_norm(g: &Graph) -> Option<GroupNorm> {
    let consumers = g.consumers();
    for (ni, norm) in g.nodes.iter().enumerate() {
        let Op::GroupNorm { groups, eps } = norm.op else {
            continue;
        };
        // An instance norm (one group per channel of its input) with scale 1 and bias 0.
        let r = norm.inputs[0];
        let rs = &g.values[r].shape;
        if rs.len() != 3 || groups != rs[1] {
            continue;
        }
        let is = |v: ValueId, k: f32| {
            g.values[v]
                .data
                .as_ref()
                .is_some_and(|d| d.iter().all(|&x| x == k))
        };
        if !is(norm.inputs[1], 1.0) || !is(norm.inputs[2], 0.0) {
            continue;
        }
        // r is a view of x (N, C, ...), with G dividing C; the result is viewed back to x's shape.
        let Some(view_in) = g
            .nodes
            .iter()
            .position(|n| n.output == r && n.op == Op::View)
        else {
            continue;
        };
        let x = g.nodes[view_in].inputs[0];
        let xs = g.values[x].shape.clone();
        if xs.len() < 2
            || xs[0] != rs[0]
            || !xs[1].is_multiple_of(groups)
            || only_reader(g, &consumers, r) != Some(ni)
        {
            continue;
        }
        let Some(view_out) = only_reader(g, &consumers, norm.output) else {
            continue;
        };
        if g.nodes[view_out].op != Op::View || g.values[g.nodes[view_out].output].shape != xs {
            continue;
        }
        let c = xs[1];
        let mut nodes = vec![view_in, ni, view_out];
        let mut output = g.nodes[view_out].output;
        let (mut scale, mut bias) = (vec![1.0; c], vec![0.0; c]);
        // Then, optionally, a multiplication and an addition by values per channel.
        for (op, target) in [(Binary::Mul, &mut scale), (Binary::Add, &mut bias)] {
            let Some(next) = only_reader(g, &consumers, output) else {
                break;
            };
            let n = &g.nodes[next];
            if n.op != Op::Binary(op) || g.values[n.output].shape != xs {
                break;
            }
            let other = if n.inputs[0] == output {
                n.inputs[1]
            } else {
                n.inputs[0]
            };
            let Some(values) = g.per_channel(other, &xs) else {
                break;
            };
            *target = values;
            nodes.push(next);
            output = n.output;
        }
        return Some(GroupNorm {
            nodes,
            x,
            output,
            groups,
            eps,
            scale,
            bias,
        });
    }
    None
}

fn apply(g: &mut Graph, f: GroupNorm) {
    let c = f.scale.len();
    let scale = g.add_constant("groupnorm.scale", vec![c], f.scale);
    let bias = g.add_constant("groupnorm.bias", vec![c], f.bias);
    let first = f.nodes[0];
    let names: Vec<String> = f.nodes.iter().map(|&i| g.nodes[i].name.clone()).collect();
    let node = &mut g.nodes[first];
    node.op = Op::GroupNorm {
        groups: f.groups,
        eps: f.eps,
    };
    node.op_type = "GroupNormalization".into();
    node.inputs = vec![f.x, scale, bias];
    node.output = f.output;
    node.name = names.join(" + ");
    let mut remove: Vec<usize> = f.nodes[1..].to_vec();
    remove.sort_unstable();
    for i in remove.into_iter().rev() {
        g.nodes.remove(i);
    }
}
