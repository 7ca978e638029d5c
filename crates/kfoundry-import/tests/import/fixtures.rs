//! The committed fixtures (made by `fixtures/make.py`) imported and run against tract-onnx, and
//! the fusion each one gets.

use crate::common;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/fixtures/{name}.onnx",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn run(name: &str) -> kfoundry_import::Imported {
    let bytes = fixture(name);
    let imported = kfoundry_import::import(&bytes, &Default::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let specs = common::specs(&imported, dir.path());
    let g = &imported.fused.graph;
    let shapes: Vec<Vec<usize>> = g
        .inputs
        .iter()
        .map(|&v| g.values[v].shape.clone())
        .collect();
    let inputs: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| common::random(s.iter().product(), 7 + i as u64))
        .collect();
    let theirs = common::tract(&bytes, &shapes, &inputs);
    common::assert_close(
        name,
        &common::run(&imported, &specs, &inputs, common::Config::Reference),
        &theirs,
    );
    for seed in 1..=3 {
        common::assert_close(
            name,
            &common::run(&imported, &specs, &inputs, common::Config::Random(seed)),
            &theirs,
        );
    }
    imported
}

fn kernels(i: &kfoundry_import::Imported) -> Vec<&str> {
    i.kernels.iter().map(|k| k.struct_name.as_str()).collect()
}

#[test]
fn kernelbench_linear_gelu_softmax() {
    let i = run("kb_linear_gelu_softmax");
    assert_eq!(kernels(&i), ["K00Matmul", "K01Softmax"]);
}

#[test]
fn kernelbench_conv_bias_scale_sigmoid_group_norm() {
    let i = run("kb_conv_gn");
    // The bias and the scale fold into the convolution; the sigmoid rides on it.
    assert_eq!(kernels(&i), ["K00Conv", "K01GroupNorm"]);
    assert_eq!(i.fused.groups[0].chain.steps.len(), 1);
}

#[test]
fn cnn_block() {
    let i = run("cnn_block");
    // Conv+BN+ReLU+MaxPool, Conv+BN+ReLU, GlobalAveragePool (Flatten is a view), Gemm.
    assert_eq!(
        kernels(&i),
        ["K00Conv", "K01Conv", "K02Reduce", "K03Matmul"]
    );
    assert!(i.fused.groups[0].pool.is_some());
}
