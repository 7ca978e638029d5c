//! Every supported operator, alone and in fused chains, imported and run on the default OpenCL
//! device (PoCL in CI) against tract-onnx: the reference configuration of every kernel and
//! drawn valid configurations of its tunable space.

mod common;

use common::{af, ai, astr, check, check_with, ints, G};

/// Configurations that reach each template's every path (local memory, unrolled loops with
/// tails), set over the reference where a kernel has the parameter.
const PATHS: &[&[(&str, i64)]] = &[
    &[("WLOCAL", 1), ("ICU", 4), ("OCB", 2), ("PX", 2), ("UNROLL", 4), ("USE_LOCAL", 1), ("TK", 16), ("TM", 2), ("TN", 4), ("MODE", 1)],
    &[("WLOCAL", 1), ("ICU", 2), ("WG", 32), ("UNROLL", 8), ("ITEMS", 4), ("MODE", 0)],
    &[("WLOCAL", 1), ("ICU", 4), ("OCB", 1), ("PX", 4)],
];
use kfoundry_import::fuse::Anchor;

const CONFIGS: u64 = 3;

fn anchors(i: &kfoundry_import::Imported) -> Vec<String> {
    i.kernels.iter().map(|k| k.struct_name.clone()).collect()
}

#[test]
fn linear_gelu_softmax_is_two_kernels() {
    // KernelBench level 2: Linear + GELU (the erf form PyTorch exports) + softmax(dim 1).
    let g = G::new()
        .input("x", &[6, 40])
        .weight("w", &[24, 40], 1)
        .weight("b", &[24], 2)
        .init("sqrt2", &[], vec![std::f32::consts::SQRT_2])
        .init("one", &[], vec![1.0])
        .init("half", &[], vec![0.5])
        .node("Gemm", &["x", "w", "b"], &["lin"], vec![ai("transB", 1)])
        .node("Div", &["lin", "sqrt2"], &["d"], vec![])
        .node("Erf", &["d"], &["e"], vec![])
        .node("Add", &["e", "one"], &["e1"], vec![])
        .node("Mul", &["lin", "e1"], &["m"], vec![])
        .node("Mul", &["m", "half"], &["gelu"], vec![])
        .node("Softmax", &["gelu"], &["y"], vec![ai("axis", 1)])
        .output("y");
    let i = check("linear + gelu + softmax", &g, CONFIGS);
    assert_eq!(anchors(&i), ["K00Matmul", "K01Softmax"], "the GELU chain fuses into the matrix product");
    assert_eq!(i.fused.groups[0].chain.steps.len(), 6, "bias, div, erf, add, mul, mul");
}

#[test]
fn gemm_scalings_transposes_and_broadcast_bias() {
    let g = G::new()
        .input("a", &[7, 5])
        .weight("bt", &[9, 7], 3)
        .weight("c", &[1, 9], 4)
        .node("Gemm", &["a", "bt", "c"], &["y0"], vec![ai("transA", 1), ai("transB", 1), af("alpha", 0.5), af("beta", 2.0)])
        .node("Relu", &["y0"], &["y"], vec![])
        .output("y");
    let i = check("gemm transA transB alpha beta", &g, CONFIGS);
    assert_eq!(i.kernels.len(), 1);
}

#[test]
fn matmul_batches_and_vectors() {
    let g = G::new()
        .input("x", &[2, 3, 5, 4])
        .input("z", &[2, 3, 4, 6])
        .weight("w", &[4, 7], 5)
        .weight("bias", &[7], 6)
        .node("MatMul", &["x", "z"], &["p"], vec![])
        .node("MatMul", &["x", "w"], &["q"], vec![])
        .node("Add", &["q", "bias"], &["q1"], vec![])
        .node("Tanh", &["q1"], &["y2"], vec![])
        .output("p")
        .output("y2");
    check("batched matmuls", &g, CONFIGS);
    let v = G::new().input("v", &[4]).weight("m", &[4, 3], 7).node("MatMul", &["v", "m"], &["y"], vec![]).output("y");
    check("vector x matrix", &v, CONFIGS);
}

#[test]
fn conv_padding_strides_dilations_groups_and_folded_scale() {
    let g = G::new()
        .input("x", &[2, 4, 11, 9])
        .weight("w", &[6, 2, 3, 2], 8)
        .weight("b", &[6], 9)
        .weight("k", &[6, 1, 1], 10)
        .weight("side", &[1, 6, 1, 1], 11)
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            vec![ai("group", 2), ints("pads", &[1, 0, 2, 1]), ints("strides", &[2, 1]), ints("dilations", &[1, 2])],
        )
        .node("Mul", &["c", "k"], &["c1"], vec![])
        .node("Sigmoid", &["c1"], &["s"], vec![])
        .node("Div", &["s", "side"], &["y"], vec![])
        .output("y");
    let i = check_with("conv with everything", &g, CONFIGS, PATHS);
    assert_eq!(i.kernels.len(), 1);
    assert_eq!(i.fused.groups[0].chain.steps.len(), 2, "the scale is folded into the weights");
}

#[test]
fn conv_batchnorm_relu_maxpool_flatten_gemm() {
    // A small CNN block: Conv-BN-ReLU-MaxPool (one kernel), Flatten (a view), Linear.
    let c = 8;
    let g = G::new()
        .input("x", &[2, 3, 12, 12])
        .weight("w", &[c, 3, 3, 3], 12)
        .init("scale", &[c], common::random(c, 13).iter().map(|v| 1.0 + 0.5 * v).collect())
        .weight("bias", &[c], 14)
        .weight("mean", &[c], 15)
        .init("var", &[c], common::random(c, 16).iter().map(|v| 1.0 + 0.5 * v).collect())
        .weight("fc", &[5, c * 36], 17)
        .weight("fcb", &[5], 18)
        .node("Conv", &["x", "w"], &["c"], vec![ints("pads", &[1, 1, 1, 1]), ints("kernel_shape", &[3, 3])])
        .node("BatchNormalization", &["c", "scale", "bias", "mean", "var"], &["bn"], vec![af("epsilon", 1e-3)])
        .node("Relu", &["bn"], &["r"], vec![])
        .node("MaxPool", &["r"], &["p"], vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])])
        .node("Flatten", &["p"], &["f"], vec![ai("axis", 1)])
        .node("Gemm", &["f", "fc", "fcb"], &["y"], vec![ai("transB", 1)])
        .output("y");
    let i = check_with("conv-bn-relu-pool-linear", &g, CONFIGS, PATHS);
    assert_eq!(anchors(&i), ["K00Conv", "K01Matmul"]);
    assert!(i.fused.groups[0].pool.is_some(), "the pooling fuses into the convolution");
}

#[test]
fn conv_average_pool_fused_and_standalone_pools() {
    let g = G::new()
        .input("x", &[1, 2, 8, 12])
        .weight("w", &[4, 2, 1, 1], 19)
        .node("Conv", &["x", "w"], &["c"], vec![])
        .node("AveragePool", &["c"], &["p"], vec![ints("kernel_shape", &[2, 3]), ints("strides", &[2, 3])])
        .node("HardSwish", &["p"], &["y"], vec![])
        .output("y");
    let i = check("conv + average pool + hardswish", &g, CONFIGS);
    assert_eq!(i.kernels.len(), 1);
    let g = G::new()
        .input("x", &[2, 3, 9, 10])
        .node("MaxPool", &["x"], &["m"], vec![ints("kernel_shape", &[3, 3]), ints("strides", &[2, 2]), ints("pads", &[1, 1, 1, 1])])
        .node("AveragePool", &["x"], &["a"], vec![ints("kernel_shape", &[3, 2]), ints("pads", &[1, 0, 1, 1]), ai("count_include_pad", 1)])
        .node("AveragePool", &["x"], &["b"], vec![ints("kernel_shape", &[2, 2]), ints("pads", &[1, 1, 0, 0])])
        .node("MaxPool", &["x"], &["d"], vec![ints("kernel_shape", &[2, 2]), ints("dilations", &[2, 2])])
        .output("m")
        .output("a")
        .output("b")
        .output("d");
    check("standalone pools with padding", &g, CONFIGS);
}

#[test]
fn conv_1d_and_transposed() {
    let g = G::new()
        .input("x", &[2, 4, 17])
        .weight("w", &[6, 4, 3], 20)
        .weight("b", &[6], 21)
        .node("Conv", &["x", "w", "b"], &["y"], vec![ints("pads", &[2, 1]), ints("strides", &[2])])
        .output("y");
    check("conv 1-D", &g, CONFIGS);
    let g = G::new()
        .input("x", &[2, 4, 5, 6])
        .weight("w", &[4, 3, 3, 3], 22)
        .weight("b", &[6], 23)
        .node("ConvTranspose", &["x", "w", "b"], &["t"], vec![ai("group", 2), ints("strides", &[2, 2]), ints("pads", &[1, 0, 0, 1])])
        .node("LeakyRelu", &["t"], &["y"], vec![af("alpha", 0.1)])
        .output("y");
    let i = check_with("conv transpose", &g, CONFIGS, PATHS);
    assert!(matches!(i.fused.groups[0].anchor, Anchor::ConvTranspose { .. }));
}

#[test]
fn reductions_and_global_pools() {
    let g = G::new()
        .input("x", &[3, 5, 4, 6])
        .int64s("axes", &[2, 3])
        .int64s("ax1", &[1])
        .node("ReduceMean", &["x", "axes"], &["mean"], vec![ai("keepdims", 1)])
        .node("ReduceSum", &["x", "ax1"], &["sum"], vec![ai("keepdims", 0)])
        .node("ReduceMax", &["x", "ax1"], &["max"], vec![])
        .node("ReduceMin", &["x"], &["min"], vec![ai("keepdims", 0)])
        .node("GlobalAveragePool", &["x"], &["gap"], vec![])
        .node("GlobalMaxPool", &["x"], &["gmp"], vec![])
        .node("Exp", &["gmp"], &["egmp"], vec![])
        .output("mean")
        .output("sum")
        .output("max")
        .output("min")
        .output("gap")
        .output("egmp");
    check_with("reductions", &g, CONFIGS, PATHS);
}

#[test]
fn softmax_on_inner_axes_and_log_softmax() {
    let g = G::new()
        .input("x", &[3, 7, 5])
        .node("Softmax", &["x"], &["s"], vec![ai("axis", 1)])
        .node("LogSoftmax", &["x"], &["l"], vec![])
        .output("s")
        .output("l");
    check_with("softmax axis 1, log-softmax", &g, CONFIGS, PATHS);
}

#[test]
fn layer_group_and_instance_norms_with_activations() {
    let g = G::new()
        .input("x", &[2, 6, 5, 4])
        .weight("ls", &[5, 4], 24)
        .weight("lb", &[4], 25)
        .weight("gs", &[3], 26)
        .weight("gb", &[3], 27)
        .weight("is", &[6], 28)
        .weight("ib", &[6], 29)
        .node("LayerNormalization", &["x", "ls", "lb"], &["ln"], vec![ai("axis", 2), af("epsilon", 1e-5)])
        .node("Mish", &["ln"], &["y1"], vec![])
        .node("GroupNormalization", &["x", "gs", "gb"], &["gn"], vec![ai("num_groups", 3)])
        .node("Softplus", &["gn"], &["y2"], vec![])
        .node("InstanceNormalization", &["x", "is", "ib"], &["in"], vec![af("epsilon", 1e-4)])
        .node("Elu", &["in"], &["e"], vec![af("alpha", 0.7)])
        .node("HardSigmoid", &["e"], &["y3"], vec![])
        .output("y1")
        .output("y2")
        .output("y3");
    let i = check_with("norms", &g, CONFIGS, PATHS);
    assert_eq!(i.kernels.len(), 3, "each norm takes its activations");
}

#[test]
fn group_norm_per_channel_from_opset_21() {
    let g = G::opset(21)
        .input("x", &[2, 6, 3, 5])
        .weight("s", &[6], 40)
        .weight("b", &[6], 41)
        .node("GroupNormalization", &["x", "s", "b"], &["y"], vec![ai("num_groups", 2), af("epsilon", 1e-3)])
        .output("y");
    check("group norm, opset 21", &g, CONFIGS);
}

#[test]
fn element_wise_broadcasting_and_views() {
    let g = G::opset(13)
        .input("a", &[4, 1, 5])
        .input("b", &[3, 1])
        .weight("c", &[5], 30)
        .int64s("shape", &[2, -1])
        .int64s("ax", &[0])
        .init("lo", &[], vec![-0.3])
        .init("hi", &[], vec![0.4])
        .node("Add", &["a", "b"], &["s"], vec![])
        .node("Mul", &["s", "c"], &["m"], vec![])
        .node("Max", &["m", "a"], &["mx"], vec![])
        .node("Min", &["mx", "c"], &["mn"], vec![])
        .node("Neg", &["mn"], &["ng"], vec![])
        .node("Abs", &["ng"], &["ab"], vec![])
        .node("Sub", &["ab", "b"], &["sb"], vec![])
        .node("Clip", &["sb", "lo", "hi"], &["cl"], vec![])
        .node("Reshape", &["cl", "shape"], &["r"], vec![])
        .node("Unsqueeze", &["r", "ax"], &["u"], vec![])
        .node("Squeeze", &["u", "ax"], &["q"], vec![])
        .node("Identity", &["q"], &["y"], vec![])
        .output("y");
    let i = check("broadcasting chain and views", &g, CONFIGS);
    assert_eq!(i.kernels.len(), 1, "one map; the views take no kernel");
}

/// Constant nodes (as operands), Dropout (inference: an identity) and Gelu's exact form.
#[test]
fn constants_dropout_and_exact_gelu() {
    let value = kfoundry_import::onnx::TensorProto {
        dims: vec![3],
        data_type: kfoundry_import::onnx::data_type::FLOAT,
        float_data: vec![0.5, -1.25, 2.0],
        ..Default::default()
    };
    let constant = kfoundry_import::onnx::AttributeProto {
        name: "value".into(),
        r#type: kfoundry_import::onnx::attribute_type::TENSOR,
        t: Some(value),
        ..Default::default()
    };
    let g = G::opset(20)
        .input("x", &[2, 3])
        .node("Constant", &[], &["k"], vec![constant])
        .node("Constant", &[], &["s"], vec![af("value_float", 0.75)])
        .node("Mul", &["x", "k"], &["m"], vec![])
        .node("Dropout", &["m"], &["d"], vec![])
        .node("Add", &["d", "s"], &["a"], vec![])
        .node("Gelu", &["a"], &["y"], vec![])
        .output("y");
    let i = check("constants, dropout, gelu", &g, CONFIGS);
    assert_eq!(i.kernels.len(), 2, "the map before the view, the map after it");
}

#[test]
fn transposes_real_and_views() {
    let g = G::new()
        .input("x", &[3, 4, 5])
        .input("z", &[1, 4, 3])
        .node("Transpose", &["x"], &["t"], vec![ints("perm", &[2, 0, 1])])
        .node("Gelu", &["t"], &["g"], vec![astr("approximate", "tanh")])
        .node("Transpose", &["z"], &["v"], vec![ints("perm", &[1, 0, 2])])
        .node("Sigmoid", &["v"], &["w"], vec![])
        .output("g")
        .output("w");
    let i = check("transposes", &g, CONFIGS);
    assert_eq!(i.kernels.len(), 2);
    assert!(matches!(i.fused.groups[0].anchor, Anchor::Transpose { .. }));
    assert!(matches!(i.fused.groups[1].anchor, Anchor::Map), "moving a dimension of 1 is a view");
}

/// Found by review: a constant of higher rank broadcasts the convolution's output to another
/// shape, so it must not be folded into the weights; a full reduction without keepdims is a
/// scalar (rank 0), and what follows sees rank 0.
#[test]
fn broadcasts_that_change_the_rank() {
    let g = G::new()
        .input("x", &[1, 4, 8, 8])
        .weight("w", &[4, 4, 3, 3], 50)
        .init("k", &[1, 1, 1, 1, 1], vec![2.0])
        .node("Conv", &["x", "w"], &["c"], vec![])
        .node("Mul", &["c", "k"], &["y"], vec![])
        .output("y");
    let i = check("conv times a rank-5 constant", &g, CONFIGS);
    assert_eq!(i.fused.graph.values[i.fused.graph.outputs[0]].shape, [1, 1, 4, 6, 6]);
    let g = G::new()
        .input("x", &[4, 3])
        .input("z", &[4])
        .int64s("ax", &[0])
        .node("ReduceSum", &["x"], &["s"], vec![ai("keepdims", 0)])
        .node("Unsqueeze", &["s", "ax"], &["u"], vec![])
        .node("Add", &["u", "z"], &["a"], vec![])
        .node("Softmax", &["a"], &["y"], vec![ai("axis", 0)])
        .output("y");
    let i = check("a full reduction is a scalar", &g, CONFIGS);
    assert_eq!(i.fused.graph.values[i.fused.graph.outputs[0]].shape, [4]);
}

#[test]
fn a_value_read_twice_ends_the_chain() {
    // `r` is read by the Add and by the graph's output: it must be written.
    let g = G::new()
        .input("x", &[4, 6])
        .weight("w", &[6, 6], 31)
        .node("MatMul", &["x", "w"], &["p"], vec![])
        .node("Relu", &["p"], &["r"], vec![])
        .node("Exp", &["r"], &["e"], vec![])
        .node("Add", &["e", "r"], &["y"], vec![])
        .output("y")
        .output("r");
    let i = check("escaping value", &g, CONFIGS);
    assert_eq!(i.kernels.len(), 2);
}
