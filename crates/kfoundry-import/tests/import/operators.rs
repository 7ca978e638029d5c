//! Every supported operator, alone and in fused chains, imported and run on the default OpenCL
//! device (PoCL in CI) against tract-onnx: the reference configuration of every kernel and
//! drawn valid configurations of its tunable space.

use crate::common;

use common::{af, ai, astr, check, check_configs, check_imported, check_with, ints, Config, G};

/// Configurations that reach each template's every path (local memory, unrolled loops with
/// tails), set over the reference where a kernel has the parameter.
const PATHS: &[&[(&str, i64)]] = &[
    &[
        ("WLOCAL", 1),
        ("ICU", 4),
        ("OCB", 2),
        ("PX", 2),
        ("UNROLL", 4),
        ("USE_LOCAL", 1),
        ("TK", 16),
        ("TM", 2),
        ("TN", 4),
        ("MODE", 1),
    ],
    &[
        ("WLOCAL", 1),
        ("ICU", 2),
        ("WG", 32),
        ("UNROLL", 8),
        ("ITEMS", 4),
        ("MODE", 0),
    ],
    &[("WLOCAL", 1), ("ICU", 4), ("OCB", 1), ("PX", 4)],
    // Convolutions' register tiles: pixels x channels, with and without local weights.
    &[
        ("TILE", 1),
        ("WLOCAL", 0),
        ("ICU", 2),
        ("OCB", 2),
        ("PX", 4),
        ("WG", 32),
    ],
    &[
        ("TILE", 1),
        ("WLOCAL", 1),
        ("ICU", 1),
        ("OCB", 4),
        ("PX", 2),
    ],
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
    assert_eq!(
        anchors(&i),
        ["K00Matmul", "K01Softmax"],
        "the GELU chain fuses into the matrix product"
    );
    assert_eq!(
        i.fused.groups[0].chain.steps.len(),
        6,
        "bias, div, erf, add, mul, mul"
    );
}

#[test]
fn gemm_scalings_transposes_and_broadcast_bias() {
    let g = G::new()
        .input("a", &[7, 5])
        .weight("bt", &[9, 7], 3)
        .weight("c", &[1, 9], 4)
        .node(
            "Gemm",
            &["a", "bt", "c"],
            &["y0"],
            vec![
                ai("transA", 1),
                ai("transB", 1),
                af("alpha", 0.5),
                af("beta", 2.0),
            ],
        )
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
    let v = G::new()
        .input("v", &[4])
        .weight("m", &[4, 3], 7)
        .node("MatMul", &["v", "m"], &["y"], vec![])
        .output("y");
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
            vec![
                ai("group", 2),
                ints("pads", &[1, 0, 2, 1]),
                ints("strides", &[2, 1]),
                ints("dilations", &[1, 2]),
            ],
        )
        .node("Mul", &["c", "k"], &["c1"], vec![])
        .node("Sigmoid", &["c1"], &["s"], vec![])
        .node("Div", &["s", "side"], &["y"], vec![])
        .output("y");
    let i = check_with("conv with everything", &g, CONFIGS, PATHS);
    assert_eq!(i.kernels.len(), 1);
    assert_eq!(
        i.fused.groups[0].chain.steps.len(),
        2,
        "the scale is folded into the weights"
    );
}

#[test]
fn conv_batchnorm_relu_maxpool_flatten_gemm() {
    // A small CNN block: Conv-BN-ReLU-MaxPool (one kernel), Flatten (a view), Linear.
    let c = 8;
    let g = G::new()
        .input("x", &[2, 3, 12, 12])
        .weight("w", &[c, 3, 3, 3], 12)
        .init(
            "scale",
            &[c],
            common::random(c, 13)
                .iter()
                .map(|v| 1.0 + 0.5 * v)
                .collect(),
        )
        .weight("bias", &[c], 14)
        .weight("mean", &[c], 15)
        .init(
            "var",
            &[c],
            common::random(c, 16)
                .iter()
                .map(|v| 1.0 + 0.5 * v)
                .collect(),
        )
        .weight("fc", &[5, c * 36], 17)
        .weight("fcb", &[5], 18)
        .node(
            "Conv",
            &["x", "w"],
            &["c"],
            vec![ints("pads", &[1, 1, 1, 1]), ints("kernel_shape", &[3, 3])],
        )
        .node(
            "BatchNormalization",
            &["c", "scale", "bias", "mean", "var"],
            &["bn"],
            vec![af("epsilon", 1e-3)],
        )
        .node("Relu", &["bn"], &["r"], vec![])
        .node(
            "MaxPool",
            &["r"],
            &["p"],
            vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
        )
        .node("Flatten", &["p"], &["f"], vec![ai("axis", 1)])
        .node("Gemm", &["f", "fc", "fcb"], &["y"], vec![ai("transB", 1)])
        .output("y");
    let i = check_with("conv-bn-relu-pool-linear", &g, CONFIGS, PATHS);
    assert_eq!(anchors(&i), ["K00Conv", "K01Matmul"]);
    assert!(
        i.fused.groups[0].pool.is_some(),
        "the pooling fuses into the convolution"
    );
}

#[test]
fn conv_average_pool_fused_and_standalone_pools() {
    let g = G::new()
        .input("x", &[1, 2, 8, 12])
        .weight("w", &[4, 2, 1, 1], 19)
        .node("Conv", &["x", "w"], &["c"], vec![])
        .node(
            "AveragePool",
            &["c"],
            &["p"],
            vec![ints("kernel_shape", &[2, 3]), ints("strides", &[2, 3])],
        )
        .node("HardSwish", &["p"], &["y"], vec![])
        .output("y");
    let i = check("conv + average pool + hardswish", &g, CONFIGS);
    assert_eq!(i.kernels.len(), 1);
    let g = G::new()
        .input("x", &[2, 3, 9, 10])
        .node(
            "MaxPool",
            &["x"],
            &["m"],
            vec![
                ints("kernel_shape", &[3, 3]),
                ints("strides", &[2, 2]),
                ints("pads", &[1, 1, 1, 1]),
            ],
        )
        .node(
            "AveragePool",
            &["x"],
            &["a"],
            vec![
                ints("kernel_shape", &[3, 2]),
                ints("pads", &[1, 0, 1, 1]),
                ai("count_include_pad", 1),
            ],
        )
        .node(
            "AveragePool",
            &["x"],
            &["b"],
            vec![ints("kernel_shape", &[2, 2]), ints("pads", &[1, 1, 0, 0])],
        )
        .node(
            "MaxPool",
            &["x"],
            &["d"],
            vec![ints("kernel_shape", &[2, 2]), ints("dilations", &[2, 2])],
        )
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
        .node(
            "Conv",
            &["x", "w", "b"],
            &["y"],
            vec![ints("pads", &[2, 1]), ints("strides", &[2])],
        )
        .output("y");
    check("conv 1-D", &g, CONFIGS);
    let g = G::new()
        .input("x", &[2, 4, 5, 6])
        .weight("w", &[4, 3, 3, 3], 22)
        .weight("b", &[6], 23)
        .node(
            "ConvTranspose",
            &["x", "w", "b"],
            &["t"],
            vec![
                ai("group", 2),
                ints("strides", &[2, 2]),
                ints("pads", &[1, 0, 0, 1]),
            ],
        )
        .node("LeakyRelu", &["t"], &["y"], vec![af("alpha", 0.1)])
        .output("y");
    let i = check_with("conv transpose", &g, CONFIGS, PATHS);
    assert!(matches!(
        i.fused.groups[0].anchor,
        Anchor::ConvTranspose { .. }
    ));
}

#[test]
fn reductions_and_global_pools() {
    let g = G::new()
        .input("x", &[3, 5, 4, 6])
        .int64s("axes", &[2, 3])
        .int64s("ax1", &[1])
        .node(
            "ReduceMean",
            &["x", "axes"],
            &["mean"],
            vec![ai("keepdims", 1)],
        )
        .node(
            "ReduceSum",
            &["x", "ax1"],
            &["sum"],
            vec![ai("keepdims", 0)],
        )
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
        .node(
            "LayerNormalization",
            &["x", "ls", "lb"],
            &["ln"],
            vec![ai("axis", 2), af("epsilon", 1e-5)],
        )
        .node("Mish", &["ln"], &["y1"], vec![])
        .node(
            "GroupNormalization",
            &["x", "gs", "gb"],
            &["gn"],
            vec![ai("num_groups", 3)],
        )
        .node("Softplus", &["gn"], &["y2"], vec![])
        .node(
            "InstanceNormalization",
            &["x", "is", "ib"],
            &["in"],
            vec![af("epsilon", 1e-4)],
        )
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
        .node(
            "GroupNormalization",
            &["x", "s", "b"],
            &["y"],
            vec![ai("num_groups", 2), af("epsilon", 1e-3)],
        )
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
    assert_eq!(i.kernels.len(), 1, "one map, through the view Dropout is");
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
    assert!(matches!(
        i.fused.groups[0].anchor,
        Anchor::Move {
            kind: kfoundry_import::graph::Move::Transpose(_),
            ..
        }
    ));
    assert!(
        matches!(i.fused.groups[1].anchor, Anchor::Map),
        "moving a dimension of 1 is a view"
    );
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
    assert_eq!(
        i.fused.graph.values[i.fused.graph.outputs[0]].shape,
        [1, 1, 4, 6, 6]
    );
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

#[test]
fn conv_3d_with_everything_and_a_fused_3d_pool() {
    // Padding, strides, dilations and groups on three dimensions; then a batch normalisation
    // whose statistics reach it through Identity nodes (as PyTorch exports them); then a max
    // pool whose windows tile the output.
    let c = 4;
    let g = G::new()
        .input("x", &[2, 4, 7, 8, 9])
        .weight("w", &[c, 2, 3, 2, 3], 60)
        .weight("b", &[c], 61)
        .init(
            "scale",
            &[c],
            common::random(c, 62)
                .iter()
                .map(|v| 1.0 + 0.5 * v)
                .collect(),
        )
        .weight("shift", &[c], 63)
        .weight("mean", &[c], 64)
        .init(
            "var",
            &[c],
            common::random(c, 65)
                .iter()
                .map(|v| 1.0 + 0.5 * v)
                .collect(),
        )
        .node("Identity", &["mean"], &["running_mean"], vec![])
        .node("Identity", &["var"], &["running_var"], vec![])
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            vec![
                ai("group", 2),
                ints("pads", &[1, 0, 1, 1, 1, 2]),
                ints("strides", &[1, 2, 1]),
                ints("dilations", &[2, 1, 1]),
            ],
        )
        .node(
            "BatchNormalization",
            &["c", "scale", "shift", "running_mean", "running_var"],
            &["bn"],
            vec![],
        )
        .node("Relu", &["bn"], &["r"], vec![])
        .output("r");
    let i = check_with("conv 3-D", &g, CONFIGS, PATHS);
    assert_eq!(i.kernels.len(), 1, "batch norm folded, relu fused");
    let g = G::new()
        .input("x", &[1, 3, 6, 8, 4])
        .weight("w", &[5, 3, 3, 3, 3], 66)
        .node(
            "Conv",
            &["x", "w"],
            &["c"],
            vec![ints("pads", &[1, 1, 1, 1, 1, 1])],
        )
        .node("Tanh", &["c"], &["t"], vec![])
        .node(
            "MaxPool",
            &["t"],
            &["p"],
            vec![
                ints("kernel_shape", &[2, 2, 2]),
                ints("strides", &[2, 2, 2]),
            ],
        )
        .node("Sigmoid", &["p"], &["y"], vec![])
        .output("y");
    let i = check_with("conv 3-D + max pool 3-D", &g, CONFIGS, PATHS);
    assert_eq!(
        i.kernels.len(),
        1,
        "the pool tiles the convolution's output"
    );
}

#[test]
fn transposed_convolutions_with_output_padding_in_two_and_three_dimensions() {
    let g = G::new()
        .input("x", &[2, 4, 5, 6])
        .weight("w", &[4, 3, 3, 3], 70)
        .weight("b", &[6], 71)
        .node(
            "ConvTranspose",
            &["x", "w", "b"],
            &["t"],
            vec![
                ai("group", 2),
                ints("strides", &[2, 3]),
                ints("pads", &[1, 0, 1, 1]),
                ints("output_padding", &[1, 2]),
            ],
        )
        .node("Mish", &["t"], &["y"], vec![])
        .output("y");
    let i = check_with("conv transpose 2-D, output padding", &g, CONFIGS, PATHS);
    assert_eq!(
        i.fused.graph.values[i.fused.graph.outputs[0]].shape,
        [2, 6, 10, 19]
    );
    let g = G::new()
        .input("x", &[1, 2, 3, 4, 5])
        .weight("w", &[2, 3, 3, 2, 3], 72)
        .node(
            "ConvTranspose",
            &["x", "w"],
            &["t"],
            vec![
                ints("strides", &[2, 2, 1]),
                ints("pads", &[1, 0, 1, 1, 0, 1]),
                ints("output_padding", &[1, 1, 0]),
                ints("dilations", &[1, 2, 1]),
            ],
        )
        .node("HardSwish", &["t"], &["y"], vec![])
        .output("y");
    check_with(
        "conv transpose 3-D, output padding, dilation",
        &g,
        CONFIGS,
        PATHS,
    );
}

#[test]
fn pools_in_three_dimensions_and_ceil_mode() {
    let g = G::new()
        .input("x", &[2, 3, 6, 7, 8])
        .node(
            "MaxPool",
            &["x"],
            &["m"],
            vec![
                ints("kernel_shape", &[3, 2, 3]),
                ints("strides", &[2, 2, 2]),
                ints("pads", &[1, 0, 1, 1, 1, 0]),
            ],
        )
        .node(
            "AveragePool",
            &["x"],
            &["a"],
            vec![
                ints("kernel_shape", &[2, 3, 3]),
                ints("strides", &[2, 1, 2]),
                ints("pads", &[0, 1, 1, 1, 1, 1]),
                ai("count_include_pad", 1),
            ],
        )
        .node(
            "AveragePool",
            &["x"],
            &["b"],
            vec![
                ints("kernel_shape", &[2, 2, 2]),
                ints("strides", &[2, 2, 2]),
            ],
        )
        .output("m")
        .output("a")
        .output("b");
    check_with("pools 3-D", &g, CONFIGS, PATHS);
    // ceil_mode: the last window runs past the input (and its padding)
    let g = G::new()
        .input("x", &[1, 2, 7, 8])
        .node(
            "MaxPool",
            &["x"],
            &["m"],
            vec![
                ints("kernel_shape", &[3, 3]),
                ints("strides", &[2, 2]),
                ai("ceil_mode", 1),
            ],
        )
        .node(
            "AveragePool",
            &["x"],
            &["a"],
            vec![
                ints("kernel_shape", &[3, 2]),
                ints("strides", &[2, 3]),
                ints("pads", &[1, 1, 1, 1]),
                ai("ceil_mode", 1),
                ai("count_include_pad", 1),
            ],
        )
        .node(
            "AveragePool",
            &["x"],
            &["b"],
            vec![
                ints("kernel_shape", &[2, 3]),
                ints("strides", &[3, 2]),
                ai("ceil_mode", 1),
            ],
        )
        .output("m")
        .output("a")
        .output("b");
    let i = check_with("ceil mode", &g, CONFIGS, PATHS);
    assert_eq!(
        i.fused.graph.values[i.fused.graph.outputs[0]].shape,
        [1, 2, 3, 4]
    );
    let g = G::new()
        .input("x", &[2, 3, 11])
        .node(
            "AveragePool",
            &["x"],
            &["y"],
            vec![
                ints("kernel_shape", &[4]),
                ints("strides", &[3]),
                ints("pads", &[2, 1]),
                ai("ceil_mode", 1),
            ],
        )
        .output("y");
    check("average pool 1-D, ceil mode", &g, CONFIGS);
}

/// What exporters emit around the operators: shapes read with `Shape`, cut with `Gather` and
/// `Slice`, put together with `Unsqueeze` and `Concat`, cast; all folded at import, so the
/// graph is the kernels' alone (PyTorch's GroupNorm at opset 17 is exactly this).
#[test]
fn the_exporters_shape_machinery_is_folded() {
    let g = G::opset(17)
        .input("x", &[4, 24])
        .weight("w", &[24], 80)
        .weight("bias", &[24], 81)
        .int64s("grouped", &[0, 6, -1])
        .init("ones", &[6], vec![1.0; 6])
        .init("zeros", &[6], vec![0.0; 6])
        .node("Reshape", &["x", "grouped"], &["r"], vec![])
        .node(
            "InstanceNormalization",
            &["r", "ones", "zeros"],
            &["n"],
            vec![af("epsilon", 1e-5)],
        )
        .node("Shape", &["x"], &["s"], vec![])
        .node("Reshape", &["n", "s"], &["back"], vec![])
        .node("Mul", &["back", "w"], &["m"], vec![])
        .node("Add", &["m", "bias"], &["y"], vec![])
        .output("y");
    let i = check("group norm as exported at opset 17", &g, CONFIGS);
    assert_eq!(
        i.kernels.len(),
        1,
        "the reshapes are views and the affine part joins the norm's chain"
    );
    let g = G::opset(17)
        .input("x", &[2, 3, 4, 5])
        .int64s("zero", &[0])
        .int64s("one", &[1])
        .int64s("minus1", &[-1])
        .int64s("starts", &[2])
        .int64s("ends", &[i64::MAX])
        .node("Shape", &["x"], &["s"], vec![])
        .node("Gather", &["s", "zero"], &["n"], vec![ai("axis", 0)])
        .node("Slice", &["s", "starts", "ends"], &["hw"], vec![])
        .node("ReduceProd", &["hw"], &["p"], vec![ai("keepdims", 1)])
        .node("Gather", &["s", "one"], &["c"], vec![ai("axis", 0)])
        .node("Mul", &["c", "p"], &["cp"], vec![])
        .node("Concat", &["n", "cp"], &["shape"], vec![ai("axis", 0)])
        .node("Reshape", &["x", "shape"], &["flat"], vec![])
        .node("Cast", &["p"], &["pf"], vec![ai("to", 1)])
        .node("Div", &["flat", "pf"], &["d"], vec![])
        .node("Concat", &["n", "minus1"], &["shape2"], vec![ai("axis", 0)])
        .node("Reshape", &["d", "shape2"], &["y0"], vec![])
        .node("ConstantOfShape", &["shape"], &["z"], vec![])
        .node("Add", &["y0", "z"], &["y"], vec![])
        .output("y");
    let i = check("shape arithmetic", &g, CONFIGS);
    assert_eq!(
        i.fused.graph.values[i.fused.graph.outputs[0]].shape,
        [2, 60]
    );
    assert_eq!(i.kernels.len(), 1);
}

/// Element-wise operators beyond the activations: powers, logs, trigonometry, rounding,
/// comparisons and logic as 0/1 floats, Where, Trilu, the variadic Sum/Mean/Max/Min.
#[test]
fn more_element_wise_operators() {
    let g = G::new()
        .input("x", &[3, 4, 5])
        .input("z", &[4, 5])
        .init("two", &[], vec![2.0])
        .init("three", &[], vec![3.0])
        .init("half", &[], vec![0.5])
        .init("one", &[], vec![1.0])
        .init("slope", &[5], vec![0.1, 0.2, 0.3, 0.4, 0.5])
        .node("Pow", &["x", "two"], &["sq"], vec![])
        .node("Pow", &["x", "three"], &["cube"], vec![])
        .node("Abs", &["z"], &["az"], vec![])
        .node("Add", &["az", "one"], &["az1"], vec![])
        .node("Pow", &["az1", "half"], &["rt"], vec![])
        .node("Log", &["az1"], &["lg"], vec![])
        .node("Sqrt", &["az1"], &["sr"], vec![])
        .node("Reciprocal", &["az1"], &["rc"], vec![])
        .node("Pow", &["az1", "x"], &["pw"], vec![])
        .node("Sum", &["sq", "cube", "rt", "lg"], &["s1"], vec![])
        .node("Add", &["sr", "rc"], &["src"], vec![])
        .node("Mean", &["sq", "cube", "pw"], &["s2m"], vec![])
        .node("Add", &["s2m", "src"], &["s2"], vec![])
        .node("Max", &["s1", "s2", "x"], &["s3"], vec![])
        .node("Min", &["s3", "two"], &["s4"], vec![])
        .node("Sin", &["s4"], &["a1"], vec![])
        .node("Cos", &["a1"], &["a2"], vec![])
        .node("Atan", &["a2"], &["a3"], vec![])
        .node("Softsign", &["a3"], &["a4"], vec![])
        .node("Selu", &["x"], &["b1"], vec![])
        .node("Celu", &["b1"], &["b2"], vec![af("alpha", 0.5)])
        .node("ThresholdedRelu", &["b2"], &["b3"], vec![af("alpha", 0.1)])
        .node(
            "Shrink",
            &["b3"],
            &["b4"],
            vec![af("bias", 0.1), af("lambd", 0.2)],
        )
        .node("PRelu", &["x", "slope"], &["b5"], vec![])
        .node("Mul", &["x", "three"], &["x3"], vec![])
        .node("Floor", &["x3"], &["fl"], vec![])
        .node("Ceil", &["x3"], &["ce"], vec![])
        .node("Round", &["x3"], &["ro"], vec![])
        .node("Sign", &["fl"], &["sg"], vec![])
        .node("Greater", &["x", "z"], &["gt"], vec![])
        .node("Less", &["x", "half"], &["lt"], vec![])
        .node("Equal", &["fl", "ce"], &["eq"], vec![])
        .node("Or", &["gt", "eq"], &["or"], vec![])
        .node("Not", &["lt"], &["nt"], vec![])
        .node("Xor", &["or", "nt"], &["xo"], vec![])
        .node("Where", &["xo", "a4", "b4"], &["w"], vec![])
        .node("Cast", &["xo"], &["xf"], vec![ai("to", 1)])
        .node("Sum", &["w", "xf", "b5", "sg", "ro"], &["y"], vec![])
        .node("Trilu", &["y"], &["up"], vec![ai("upper", 1)])
        .node("Trilu", &["y", "kk"], &["low"], vec![ai("upper", 0)])
        .init_ints("kk", &[], &[-1])
        .node("Mod", &["x3", "two"], &["md"], vec![ai("fmod", 1)])
        .node("Mod", &["x3", "two"], &["mp"], vec![ai("fmod", 0)])
        .output("up")
        .output("low")
        .output("md")
        .output("mp");
    check("more element-wise operators", &g, CONFIGS);
}

/// Every reduction, over adjacent and separated axes; ArgMax and ArgMin with ties (the first,
/// or with select_last_index the last, of equal values).
#[test]
fn every_reduction_over_any_axes() {
    let mut g = G::new()
        .input("x", &[3, 4, 5, 6])
        .int64s("a02", &[0, 2])
        .int64s("a13", &[1, 3])
        .int64s("a3", &[3])
        .int64s("a12", &[1, 2]);
    let mut outs = Vec::new();
    for (i, op) in [
        "ReduceSum",
        "ReduceMean",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceSumSquare",
        "ReduceLogSumExp",
    ]
    .iter()
    .enumerate()
    {
        let axes = ["a02", "a13", "a3", "a12"][i % 4];
        let keep = (i % 2) as i64;
        let y = format!("y{i}");
        g = g.node(op, &["x", axes], &[&y], vec![ai("keepdims", keep)]);
        outs.push(y);
    }
    g = g.node("Abs", &["x"], &["ax"], vec![]).node(
        "ReduceLogSum",
        &["ax", "a13"],
        &["ls"],
        vec![],
    );
    outs.push("ls".into());
    // Ties: values rounded to a few levels.
    g = g
        .init("four", &[], vec![4.0])
        .node("Mul", &["x", "four"], &["x4"], vec![])
        .node("Floor", &["x4"], &["steps"], vec![])
        .node(
            "ArgMax",
            &["steps"],
            &["am"],
            vec![ai("axis", 1), ai("keepdims", 0)],
        )
        .node(
            "ArgMax",
            &["steps"],
            &["aml"],
            vec![ai("axis", 3), ai("select_last_index", 1)],
        )
        .node("ArgMin", &["steps"], &["an"], vec![ai("axis", 2)])
        .node(
            "ArgMin",
            &["steps"],
            &["anl"],
            vec![ai("axis", 0), ai("select_last_index", 1), ai("keepdims", 0)],
        );
    outs.extend(["am", "aml", "an", "anl"].map(String::from));
    for o in &outs {
        g = g.output(o);
    }
    check_with("reductions", &g, CONFIGS, PATHS);
}

/// Data movement as kernels: slices (steps, negative steps, from the end), pads in the three
/// modes, concatenation of three tensors, split, expand, tile, gather with constant indices,
/// depth-to-space both ways.
#[test]
fn data_movement_operators() {
    let g = G::new()
        .input("x", &[2, 6, 5, 4])
        .input("z", &[2, 3, 5, 4])
        .int64s("st", &[1, -1])
        .int64s("en", &[6, -6])
        .int64s("ax", &[1, 2])
        .int64s("sp", &[2, -2])
        .node("Slice", &["x", "st", "en", "ax", "sp"], &["sl"], vec![])
        .node("Relu", &["sl"], &["sl1"], vec![])
        .int64s("pads", &[0, 1, 2, 0, 0, 0, 1, 3])
        .init("pv", &[], vec![-0.5])
        .node("Pad", &["x", "pads", "pv"], &["pc"], vec![])
        .int64s("pads2", &[0, 0, 2, 1, 0, 0, 1, 3])
        .node("Pad", &["x", "pads2"], &["pe"], vec![astr("mode", "edge")])
        .node(
            "Pad",
            &["x", "pads2"],
            &["pr"],
            vec![astr("mode", "reflect")],
        )
        .node("Concat", &["x", "z", "x"], &["cc"], vec![ai("axis", 1)])
        .node("Tanh", &["cc"], &["cc1"], vec![])
        .int64s("parts", &[1, 2, 3])
        .node(
            "Split",
            &["x", "parts"],
            &["p0", "p1", "p2"],
            vec![ai("axis", 1)],
        )
        .node("Add", &["p1", "p1"], &["p11"], vec![])
        .int64s("shape", &[3, 2, 6, 5, 4])
        .node("Expand", &["x", "shape"], &["ex"], vec![])
        .int64s("reps", &[1, 2, 1, 3])
        .node("Tile", &["z", "reps"], &["ti"], vec![])
        .node("Gather", &["x", "idx"], &["ga"], vec![ai("axis", 2)])
        .init_ints("idx", &[2, 2], &[4, 0, -1, 2])
        .node("DepthToSpace", &["x"], &["ds"], vec![ai("blocksize", 1)])
        .node(
            "Transpose",
            &["x"],
            &["xt"],
            vec![ints("perm", &[0, 2, 3, 1])],
        )
        .node("Reshape", &["xt", "ns"], &["x8"], vec![])
        .int64s("ns", &[2, 8, 5, 3])
        .node(
            "DepthToSpace",
            &["x8"],
            &["d2s"],
            vec![ai("blocksize", 2), astr("mode", "CRD")],
        )
        .node("DepthToSpace", &["x8"], &["d2d"], vec![ai("blocksize", 2)])
        .node("SpaceToDepth", &["d2d"], &["s2d"], vec![ai("blocksize", 2)])
        .output("sl1")
        .output("pc")
        .output("pe")
        .output("pr")
        .output("cc1")
        .output("p0")
        .output("p11")
        .output("p2")
        .output("ex")
        .output("ti")
        .output("ga")
        .output("ds")
        .output("d2s")
        .output("s2d");
    check("data movement", &g, CONFIGS);
}

/// A chain goes on through views: after a view, whole tensors of the view's shape are read
/// element by element (what PyTorch's InstanceNorm1d of a matrix exports to).
#[test]
fn chains_go_on_through_views() {
    let g = G::opset(17)
        .input("x", &[6, 10])
        .input("res", &[6, 10])
        .weight("w", &[10, 10], 90)
        .int64s("one", &[1])
        .init("s", &[1], vec![1.0])
        .init("b", &[1], vec![0.0])
        .init("k", &[], vec![0.5])
        .node("MatMul", &["x", "w"], &["m"], vec![])
        .node("Unsqueeze", &["m", "one"], &["u"], vec![])
        .node("InstanceNormalization", &["u", "s", "b"], &["n"], vec![])
        .node("Squeeze", &["n", "one"], &["q"], vec![])
        .node("Add", &["q", "res"], &["a"], vec![])
        .node("Mul", &["a", "k"], &["am"], vec![])
        .node("Mul", &["am", "res"], &["y"], vec![])
        .output("y");
    let i = check("instance norm of a matrix, then a residual", &g, CONFIGS);
    assert_eq!(
        i.kernels.len(),
        2,
        "the product, then the norm with the rest as its chain"
    );
}

#[test]
fn running_sums_forward_reverse_exclusive_and_fused() {
    // Over the middle axis and the last, each flag both ways, and a chain after the scan.
    let g = G::new()
        .input("x", &[3, 37, 5])
        // tract reads the axis as a scalar, as the operator's definition has it.
        .init_ints("a1", &[], &[1])
        .init_ints("a2", &[], &[-1])
        .node("CumSum", &["x", "a1"], &["c1"], vec![])
        .node("CumSum", &["x", "a2"], &["c2"], vec![ai("exclusive", 1)])
        .node(
            "CumSum",
            &["x", "a1"],
            &["c3"],
            vec![ai("reverse", 1), ai("exclusive", 1)],
        )
        .node("CumSum", &["x", "a2"], &["c4"], vec![ai("reverse", 1)])
        .node("Relu", &["c4"], &["r4"], vec![])
        .output("c1")
        .output("c2")
        .output("c3")
        .output("r4");
    // Both paths: a work-group per row (chunks of 37 / 32 elements) and an item per row.
    let i = check_with("running sums", &g, CONFIGS, PATHS);
    assert_eq!(
        anchors(&i),
        ["K00CumSum", "K01CumSum", "K02CumSum", "K03CumSum"]
    );
}

/// The suite's 3xTF32 tensor-core path (NVIDIA only), its warp-wide instructions emulated on
/// this device: plain and transposed B (Linear), batched, with a fused bias and GELU; and it
/// is offered only where it can run.
#[test]
fn matmul_tensor_core_path_emulated() {
    const MMA: &[(&str, i64)] = &[
        ("MMA", 1),
        ("WGX", 16),
        ("WGY", 8),
        ("TM", 4),
        ("TN", 4),
        ("WM", 2),
        ("TK", 16),
        ("STAGES", 3),
        ("FLUSH", 2),
    ];
    const MMA_2: &[(&str, i64)] = &[
        ("MMA", 1),
        ("WGX", 8),
        ("WGY", 8),
        ("TM", 2),
        ("TN", 4),
        ("WM", 1),
        ("TK", 8),
        ("STAGES", 2),
        ("FLUSH", 1),
    ];
    let g = G::new()
        .input("x", &[64, 48])
        .weight("w", &[128, 48], 1)
        .weight("bias", &[128], 2)
        .node("Gemm", &["x", "w", "bias"], &["h"], vec![ai("transB", 1)])
        .node("Gelu", &["h"], &["y"], vec![])
        .input("p", &[2, 32, 48])
        .weight("q", &[2, 48, 64], 3)
        .node("MatMul", &["p", "q"], &["z"], vec![])
        .output("y")
        .output("z");
    let i = check_configs(
        "tensor cores, emulated",
        &g,
        0,
        &[Config::Emulated(MMA), Config::Emulated(MMA_2)],
    );
    let matmul = &i.kernels[0];
    assert!(
        matmul.source.contains("mma.sync.aligned.m16n8k8")
            && matmul.source.contains("#define KM_B_KMAJOR 1"),
        "the template is in"
    );
    assert!(
        !matmul.source.contains("#error"),
        "no directive beyond the allow-list"
    );
    assert!(matmul
        .require
        .iter()
        .any(|r| r == "MMA == 0 || device_nvidia && device_sm >= 80"));
}

/// A skinny product (few outputs, a long k) gets split-K from the template library, on scratch
/// buffers the launcher owns: slices of whole k-tiles summed by the last work-group to arrive,
/// then the fused chain; the portable path with and without local tiles, and the tensor-core
/// path emulated, match tract-onnx. A product with many outputs keeps its text without it.
#[test]
fn skinny_matmul_gets_split_k() {
    const SPLIT: &[(&str, i64)] = &[("SPLITK", 8), ("TM", 2), ("TN", 2)];
    const SPLIT_LOCAL: &[(&str, i64)] = &[("SPLITK", 3), ("USE_LOCAL", 1), ("TK", 16)];
    const SPLIT_MMA: &[(&str, i64)] = &[
        ("SPLITK", 16),
        ("MMA", 1),
        ("WGX", 8),
        ("WGY", 4),
        ("TM", 4),
        ("TN", 1),
        ("WM", 1),
        ("TK", 8),
        ("STAGES", 2),
        ("FLUSH", 1),
    ];
    let g = G::new()
        .input("x", &[16, 4096])
        .weight("w", &[4096, 16], 1)
        .weight("bias", &[16], 2)
        .node("MatMul", &["x", "w"], &["h"], vec![])
        .node("Add", &["h", "bias"], &["h1"], vec![])
        .node("Relu", &["h1"], &["y"], vec![])
        .output("y");
    let i = check_configs(
        "skinny matmul, split-K",
        &g,
        2,
        &[
            Config::With(SPLIT),
            Config::With(SPLIT_LOCAL),
            Config::Emulated(SPLIT_MMA),
        ],
    );
    let k = &i.kernels[0];
    assert!(
        k.params.iter().any(|(p, _)| p == "SPLITK"),
        "{:?}",
        k.params
    );
    assert_eq!(
        k.scratch
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["ws", "arrivals"]
    );
    assert!(k.source.contains("ks_take(") && !k.source.contains("#error"));
    // A short k: no split-K.
    let short = G::new()
        .input("x", &[16, 1024])
        .weight("w", &[1024, 16], 3)
        .node("MatMul", &["x", "w"], &["y"], vec![])
        .output("y");
    let plain = kfoundry_import::import(&short.bytes(), &Default::default()).unwrap();
    assert!(plain.kernels[0].scratch.is_empty() && !plain.kernels[0].source.contains("ks_take("));
}

/// 64-bit indices (what a tensor of more than 2^31 - 1 elements gets), forced on small graphs
/// of every kind of kernel: the same results as tract-onnx, every fixed path included.
#[test]
fn sixty_four_bit_indices_in_every_kind_of_kernel() {
    let wide = kfoundry_import::Options {
        index64: true,
        ..Default::default()
    };
    let g = G::new()
        .input("x", &[2, 4, 9, 8])
        .weight("w", &[6, 4, 3, 3], 1)
        .weight("b", &[6], 2)
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            vec![ints("pads", &[1, 1, 1, 1])],
        )
        .node("Relu", &["c"], &["r"], vec![])
        .node(
            "MaxPool",
            &["r"],
            &["p"],
            vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
        )
        .node(
            "Transpose",
            &["x"],
            &["t"],
            vec![ints("perm", &[0, 2, 3, 1])],
        )
        .node("ArgMax", &["t"], &["am"], vec![ai("axis", 3)])
        .node("Softmax", &["t"], &["sm"], vec![ai("axis", 1)])
        .init_ints("ax", &[], &[2])
        .node("CumSum", &["t", "ax"], &["cs"], vec![])
        .weight("scale", &[4], 3)
        .weight("bias", &[4], 4)
        .node(
            "InstanceNormalization",
            &["x", "scale", "bias"],
            &["n"],
            vec![],
        )
        .node(
            "ConvTranspose",
            &["p", "w"],
            &["ct"],
            vec![ints("strides", &[2, 2])],
        )
        .node(
            "AveragePool",
            &["x"],
            &["ap"],
            vec![
                ints("kernel_shape", &[3, 3]),
                ints("pads", &[1, 1, 1, 1]),
                ai("ceil_mode", 1),
            ],
        )
        .int64s("pads", &[0, 0, 1, 2, 0, 0, 2, 1])
        .node(
            "Pad",
            &["x", "pads"],
            &["pd"],
            vec![astr("mode", "reflect")],
        )
        .node("Concat", &["x", "x"], &["cc"], vec![ai("axis", 2)])
        .node("Pad", &["x", "pads"], &["pe"], vec![astr("mode", "edge")])
        .init("roi", &[0], vec![])
        .init("scales", &[4], vec![1.0, 1.0, 1.5, 2.0])
        .node(
            "Resize",
            &["x", "roi", "scales"],
            &["rs"],
            vec![astr("mode", "linear")],
        )
        .node("Resize", &["x", "roi", "scales"], &["rn"], vec![])
        .output("pe")
        .output("rs")
        .output("rn")
        .output("ap")
        .output("pd")
        .output("cc")
        .output("p")
        .output("am")
        .output("sm")
        .output("cs")
        .output("n")
        .output("ct");
    let i = check_imported(
        "64-bit indices",
        &g,
        &wide,
        2,
        &PATHS.iter().map(|&f| Config::With(f)).collect::<Vec<_>>(),
    );
    for k in &i.kernels {
        assert!(
            !k.source.contains("int ") && k.source.contains("long "),
            "{}: every int widened",
            k.entry
        );
        assert!(
            k.require.iter().all(|r| !r.contains("2147483647")),
            "{}: {:?}",
            k.entry,
            k.require
        );
    }
    let m = G::new()
        .input("a", &[32, 48])
        .weight("bw", &[48, 64], 5)
        .node("MatMul", &["a", "bw"], &["y"], vec![])
        .output("y");
    const MMA: &[(&str, i64)] = &[
        ("MMA", 1),
        ("WGX", 16),
        ("WGY", 8),
        ("TM", 4),
        ("TN", 4),
        ("WM", 2),
        ("TK", 16),
        ("STAGES", 3),
        ("FLUSH", 2),
    ];
    check_imported(
        "64-bit indices, matrix product",
        &m,
        &wide,
        2,
        &[Config::Emulated(MMA), Config::With(PATHS[0])],
    );
}

/// Resize, nearest and linear, up and down, from scales and from sizes, in each coordinate
/// transformation and nearest mode tract-onnx reads.
#[test]
fn resize_nearest_and_linear() {
    let empty: &[f32] = &[];
    let mut g = G::new()
        .input("x", &[1, 2, 5, 7])
        .init("roi", &[0], empty.to_vec());
    // mode, coordinate transformation, nearest mode, scales or sizes.
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        &'static [f32],
        &'static [i64],
    );
    let cases: &[Case] = &[
        ("nearest", "asymmetric", "floor", &[1.0, 1.0, 2.0, 2.0], &[]),
        (
            "nearest",
            "half_pixel",
            "round_prefer_floor",
            &[1.0, 1.0, 1.5, 0.5],
            &[],
        ),
        (
            "nearest",
            "align_corners",
            "round_prefer_ceil",
            &[],
            &[1, 2, 9, 4],
        ),
        ("nearest", "pytorch_half_pixel", "ceil", &[], &[1, 2, 3, 11]),
        (
            "linear",
            "half_pixel",
            "round_prefer_floor",
            &[1.0, 1.0, 2.0, 2.0],
            &[],
        ),
        (
            "linear",
            "align_corners",
            "round_prefer_floor",
            &[],
            &[1, 2, 8, 3],
        ),
        (
            "linear",
            "asymmetric",
            "round_prefer_floor",
            &[1.0, 1.0, 0.6, 1.7],
            &[],
        ),
        (
            "linear",
            "pytorch_half_pixel",
            "round_prefer_floor",
            &[],
            &[1, 2, 1, 13],
        ),
        // floor(5 * 1.1) = 5 and floor(7 * 1.1) = 7: the same extents, resampled all the same.
        (
            "linear",
            "half_pixel",
            "round_prefer_floor",
            &[1.0, 1.0, 1.1, 1.1],
            &[],
        ),
        ("nearest", "asymmetric", "floor", &[1.0, 1.0, 1.1, 1.1], &[]),
    ];
    for (i, (mode, transform, nearest, scales, sizes)) in cases.iter().enumerate() {
        let (s, z) = (format!("scales{i}"), format!("sizes{i}"));
        g = if scales.is_empty() {
            g.init(&s, &[0], vec![]).int64s(&z, sizes)
        } else {
            g.init(&s, &[4], scales.to_vec())
        };
        let inputs: Vec<&str> = if sizes.is_empty() {
            vec!["x", "roi", &s]
        } else {
            vec!["x", "roi", &s, &z]
        };
        let out = format!("y{i}");
        g = g
            .node(
                "Resize",
                &inputs,
                &[&out],
                vec![
                    astr("mode", mode),
                    astr("coordinate_transformation_mode", transform),
                    astr("nearest_mode", nearest),
                ],
            )
            .output(&out);
    }
    let i = check_with("resize", &g, CONFIGS, PATHS);
    assert!(
        i.kernels.iter().all(|k| k.struct_name.ends_with("Resize")),
        "{:?}",
        i.kernels.iter().map(|k| &k.struct_name).collect::<Vec<_>>()
    );
}

/// A kernel that touches a tensor of more than 2^31 - 1 elements indexes with `long` without
/// being asked; one beside it on small tensors keeps `int`.
#[test]
fn tensors_past_two_to_the_31_get_long_indices() {
    let g = G::new()
        .input("x", &[1 << 16, 1 << 16])
        .node("Relu", &["x"], &["y"], vec![])
        .input("s", &[8, 8])
        .node("Softmax", &["s"], &["z"], vec![])
        .output("y")
        .output("z");
    let i = kfoundry_import::import(&g.bytes(), &Default::default()).unwrap();
    let (big, small) = (&i.kernels[0], &i.kernels[1]);
    assert!(
        big.source.contains("const long ") && !big.source.contains("int "),
        "{}",
        big.source
    );
    assert!(
        big.require
            .iter()
            .any(|r| r.ends_with("<= 4611686018427387903")),
        "{:?}",
        big.require
    );
    assert!(small.source.contains("const int "), "{}", small.source);
}

/// Einsum as (batched) matrix products: plain, with an operand read transposed or moved into
/// place, batch indices, a weight without batch, `...`, an implicit output, an output in
/// another order; what is not a product is an error that says why.
#[test]
fn einsum_as_matrix_products() {
    let cases: &[(&str, &[usize], &[usize])] = &[
        ("bij,bjk->bik", &[2, 3, 5], &[2, 5, 4]),
        ("ij,kj->ik", &[3, 5], &[4, 5]),
        ("ji,jk->ik", &[5, 3], &[5, 4]),
        ("bijl,lk->bijk", &[2, 3, 4, 5], &[5, 6]),
        ("bhqd,bhkd->bhqk", &[2, 2, 3, 4], &[2, 2, 5, 4]),
        ("...ij,...jk->...ik", &[2, 3, 4], &[2, 4, 5]),
        ("ik,kj", &[3, 4], &[4, 5]),
        ("abc,cd->dba", &[2, 3, 4], &[4, 5]),
        ("ibj,bjk->kbi", &[3, 2, 4], &[2, 4, 5]),
        // Uppercase labels are labels (implicit output: `bc`), not `...`.
        ("bA,Ac", &[3, 4], &[4, 5]),
    ];
    let mut g = G::new();
    for (i, (eq, a, b)) in cases.iter().enumerate() {
        let (x, w, y) = (format!("a{i}"), format!("b{i}"), format!("y{i}"));
        g = g
            .input(&x, a)
            .weight(&w, b, i as u64)
            .node("Einsum", &[&x, &w], &[&y], vec![astr("equation", eq)])
            .output(&y);
    }
    let i = check("einsum", &g, CONFIGS);
    assert!(i.kernels.iter().any(|k| k.struct_name.ends_with("Matmul")));
    for (eq, why) in [
        (
            "ii,ij->j",
            "an index repeated in the first operand (a diagonal) is not supported",
        ),
        ("ij,jk->i", "index `k` is summed within one operand"),
        ("ij,jk->iz", "output index `z` is in no operand"),
    ] {
        let g = G::new()
            .input("a", &[3, 3])
            .input("b", &[3, 4])
            .node("Einsum", &["a", "b"], &["y"], vec![astr("equation", eq)])
            .output("y");
        let e = kfoundry_import::import(&g.bytes(), &Default::default())
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{eq}: {e}");
    }
}

/// `--precision tf32`: one TF32 product per step on the tensor cores (emulated here), the
/// annotation's tolerance TF32's and said so; the FP32 path (three products) is closer to
/// tract-onnx than the TF32 one, which is within TF32's error.
#[test]
fn tf32_precision_is_one_product_with_its_tolerance() {
    use kfoundry_import::kernels::Precision;
    const MMA: &[(&str, i64)] = &[
        ("MMA", 1),
        ("WGX", 16),
        ("WGY", 8),
        ("TM", 4),
        ("TN", 4),
        ("WM", 2),
        ("TK", 16),
        ("STAGES", 3),
        ("FLUSH", 2),
    ];
    let g = G::new()
        .input("x", &[64, 256])
        .weight("w", &[128, 256], 1)
        .node("Gemm", &["x", "w"], &["y"], vec![ai("transB", 1)])
        .output("y");
    let bytes = g.bytes();
    let inputs = vec![common::random(64 * 256, 7)];
    let theirs = common::tract(&bytes, &g.input_shapes(), &inputs);
    let mut errors = Vec::new();
    for precision in [Precision::Fp32, Precision::Tf32] {
        let imported = kfoundry_import::import(
            &bytes,
            &kfoundry_import::Options {
                precision,
                ..Default::default()
            },
        )
        .unwrap();
        let k = &imported.kernels[0];
        // The template's switch: one product of the TF32 parts instead of three.
        assert_eq!(
            k.source.contains("#define KM_SPLITS 1\n"),
            precision == Precision::Tf32,
            "{precision:?}"
        );
        assert_eq!(k.check_note.is_some(), precision == Precision::Tf32);
        let dir = tempfile::tempdir().unwrap();
        let specs = common::specs(&imported, dir.path());
        let lib = std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap();
        assert_eq!(
            lib.contains("TF32's tolerance"),
            precision == Precision::Tf32
        );
        let ours = common::run(&imported, &specs, &inputs, Config::Emulated(MMA));
        let scale = theirs[0].iter().fold(0f32, |m, v| m.max(v.abs()));
        let worst = ours[0]
            .iter()
            .zip(&theirs[0])
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max)
            / scale;
        errors.push(worst);
    }
    // FP32-accurate: a few ulps of the largest output; TF32: about 1e-3 of it, not more.
    assert!(errors[0] < 1e-5, "3xTF32 error {:e}", errors[0]);
    assert!(
        errors[1] > 10.0 * errors[0] && errors[1] < 5e-3,
        "TF32 error {:e} (3xTF32 {:e})",
        errors[1],
        errors[0]
    );
}

/// The implicit-GEMM convolution on the tensor cores (warp instructions emulated here): 2-D
/// with stride, asymmetric padding, dilation and two groups, a bias and a chain after it; 1-D
/// and 3-D; pixel counts and k = channels x taps that are no multiple of the tiles (the gather
/// pads them with zeros). Offered only without a fused pooling and with whole n8 pieces of
/// channels per group.
#[test]
fn convolution_tensor_core_path_emulated() {
    const WIDE: &[(&str, i64)] = &[
        ("MMA", 1),
        ("WG", 64),
        ("PX", 2),
        ("OCB", 16),
        ("WM", 2),
        ("TK", 16),
        ("STAGES", 3),
        ("FLUSH", 2),
    ];
    const NARROW: &[(&str, i64)] = &[
        ("MMA", 1),
        ("WG", 32),
        ("PX", 1),
        ("OCB", 8),
        ("WM", 1),
        ("TK", 8),
        ("STAGES", 2),
        ("FLUSH", 1),
    ];
    let g = G::new()
        .input("x", &[2, 6, 13, 11])
        .weight("w", &[32, 3, 3, 2], 1)
        .weight("b", &[32], 2)
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            vec![
                ints("pads", &[1, 0, 2, 1]),
                ints("strides", &[2, 1]),
                ints("dilations", &[1, 2]),
                ai("group", 2),
            ],
        )
        .node("Tanh", &["c"], &["y"], vec![])
        .input("s", &[3, 5, 37])
        .weight("w1", &[16, 5, 3], 3)
        .node("Conv", &["s", "w1"], &["z"], vec![ints("pads", &[1, 1])])
        .input("v", &[1, 3, 5, 6, 7])
        .weight("w3", &[16, 3, 2, 3, 2], 4)
        .weight("b3", &[16], 5)
        .node(
            "Conv",
            &["v", "w3", "b3"],
            &["u"],
            vec![ints("strides", &[1, 2, 1])],
        )
        .output("y")
        .output("z")
        .output("u");
    let i = check_configs(
        "implicit GEMM, emulated",
        &g,
        0,
        &[Config::Emulated(WIDE), Config::Emulated(NARROW)],
    );
    for k in &i.kernels {
        assert!(
            k.source.contains("mma.sync.aligned.m16n8k8")
                && k.params.iter().any(|(p, _)| p == "MMA"),
            "{}: the tensor-core path",
            k.entry
        );
        assert!(
            !k.source.contains("#error") && !k.source.contains("KM_CP16(As_"),
            "{}: no directive beyond the allow-list; the gather's own loader",
            k.entry
        );
    }
    // A depthwise convolution (one channel per group) and a pooled one keep the portable path.
    let p = G::new()
        .input("x", &[1, 8, 10, 10])
        .weight("w", &[8, 1, 3, 3], 1)
        .node("Conv", &["x", "w"], &["c"], vec![ai("group", 8)])
        .weight("w2", &[16, 8, 3, 3], 2)
        .node("Conv", &["c", "w2"], &["d"], vec![])
        .node(
            "MaxPool",
            &["d"],
            &["y"],
            vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
        )
        .output("y");
    let i = check_configs("no tensor cores", &p, 0, &[Config::Emulated(NARROW)]);
    assert!(
        i.kernels
            .iter()
            .all(|k| !k.params.iter().any(|(p, _)| p == "MMA")),
        "{:?}",
        i.kernels.iter().map(|k| &k.entry).collect::<Vec<_>>()
    );
}

/// Attention as one kernel: scores scaled and masked (rows whose first keys, a whole tile or
/// more, are masked out with -inf), Softmax along the keys, the product by v, a chain after
/// it; with k transposed by a kernel before (as exporters write it) and by Gemm's `transB`; in
/// the reference, with tiles of 8 to 64 keys and 1 to 8 items per row.
#[test]
fn attention_is_one_kernel() {
    const SPLITS: &[&[(&str, i64)]] = &[
        &[("KSPLIT", 4), ("BK", 8), ("WG", 32)],
        &[("KSPLIT", 8), ("BK", 64), ("WG", 256)],
        &[("KSPLIT", 2), ("BK", 32), ("WG", 64)],
    ];
    let (lq, lk) = (37, 37);
    let mask: Vec<f32> = (0..lq * lk)
        .map(|e| {
            if e % lk < (e / lk % 3) * 12 {
                f32::NEG_INFINITY
            } else {
                0.0
            }
        })
        .collect();
    let g = G::new()
        .input("q", &[2, 3, lq, 16])
        .input("k", &[2, 3, lk, 16])
        .input("v", &[1, 1, lk, 8])
        .node(
            "Transpose",
            &["k"],
            &["kt"],
            vec![ints("perm", &[0, 1, 3, 2])],
        )
        .node("MatMul", &["q", "kt"], &["s"], vec![])
        .init("scale", &[], vec![0.25])
        .node("Mul", &["s", "scale"], &["s2"], vec![])
        .init("mask", &[lq, lk], mask)
        .node("Add", &["s2", "mask"], &["s3"], vec![])
        .node("Softmax", &["s3"], &["p"], vec![ai("axis", -1)])
        .node("MatMul", &["p", "v"], &["o"], vec![])
        .node("Tanh", &["o"], &["y"], vec![])
        .output("y");
    let i = check_with("attention", &g, 2, SPLITS);
    assert_eq!(anchors(&i), ["K00Transpose", "K01Attention"]);
    let g = G::new()
        .input("q", &[29, 12])
        .weight("k", &[45, 12], 1)
        .weight("v", &[45, 20], 2)
        .node(
            "Gemm",
            &["q", "k"],
            &["s"],
            vec![ai("transB", 1), af("alpha", 0.3)],
        )
        .node("Softmax", &["s"], &["p"], vec![ai("axis", 1)])
        .node("MatMul", &["p", "v"], &["y"], vec![])
        .output("y");
    let i = check_with("attention, Gemm", &g, 2, SPLITS);
    assert_eq!(anchors(&i), ["K00Attention"]);
    // Head dimensions of 128 (Llama 3's), k already transposed: the reference fits local memory.
    let g = G::new()
        .input("q", &[1, 2, 20, 128])
        .input("kt", &[1, 2, 128, 20])
        .input("v", &[1, 2, 20, 128])
        .node("MatMul", &["q", "kt"], &["s"], vec![])
        .node("Softmax", &["s"], &["p"], vec![ai("axis", 3)])
        .node("MatMul", &["p", "v"], &["y"], vec![])
        .output("y");
    let i = check_with("attention, head 128", &g, 1, SPLITS);
    assert_eq!(anchors(&i), ["K00Attention"]);
    // The probabilities read twice, or a softmax along another axis: three kernels.
    let g = G::new()
        .input("q", &[9, 12])
        .input("k", &[12, 9])
        .input("v", &[9, 5])
        .node("MatMul", &["q", "k"], &["s"], vec![])
        .node("Softmax", &["s"], &["p"], vec![ai("axis", 0)])
        .node("MatMul", &["p", "v"], &["y"], vec![])
        .node("Softmax", &["s"], &["p2"], vec![])
        .node("MatMul", &["p2", "v"], &["y2"], vec![])
        .output("y")
        .output("y2")
        .output("p2");
    let i = check("attention, not fused", &g, 0);
    assert!(
        !anchors(&i).iter().any(|a| a.contains("Attention")),
        "{:?}",
        anchors(&i)
    );
}
