//! The generated kernels against tract-onnx, an independent ONNX runtime, on random inputs.
//! Runs through dispatch: the reference kernels before a tune, the tuned variants after
//! `cargo kfoundry tune` and a rebuild.

use kfoundry::ocl::{Context, Queue};
use tract_onnx::prelude::*;

// The generated crate.
use cnn_block as model;

fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn matches_tract_onnx() -> Result<(), Box<dyn std::error::Error>> {
    let (platform, device) = kfoundry::default_device()?;
    let context = Context::builder().platform(platform).devices(device).build()?;
    let queue = Queue::new(&context, device, None)?;
    let runner = model::Model::new(&queue)?;
    let inputs: Vec<Vec<f32>> = model::INPUTS.iter().enumerate().map(|(i, (_, shape))| random(shape.iter().product(), i as u64 + 1)).collect();
    let refs: Vec<&[f32]> = inputs.iter().map(|v| &v[..]).collect();
    let ours = runner.run(&refs)?;

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/model.onnx");
    let plan = tract_onnx::onnx().model_for_path(path)?.into_optimized()?.into_runnable()?;
    let mut tensors = TVec::new();
    for ((_, shape), data) in model::INPUTS.iter().zip(&inputs) {
        let t: Tensor = tract_ndarray::ArrayD::from_shape_vec(shape.to_vec(), data.clone())?.into();
        tensors.push(t.into());
    }
    let theirs = plan.run(tensors)?;
    assert_eq!(theirs.len(), ours.len(), "output count");
    for (o, ((name, _), (t, a))) in model::OUTPUTS.iter().zip(theirs.iter().zip(&ours)).enumerate() {
        // Integer outputs (ArgMax's) are compared as the floats the kernels write.
        let t: Vec<f32> = t.clone().into_tensor().cast_to::<f32>()?.to_plain_array_view::<f32>()?.iter().copied().collect();
        assert_eq!(t.len(), a.len(), "output {o} `{name}`: length");
        let scale = t.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (i, (x, y)) in a.iter().zip(&t).enumerate() {
            let tol = 1e-4 * scale + 1e-3 * y.abs() + 1e-6;
            assert!((x - y).abs() <= tol, "output {o} `{name}`, element {i}: kfoundry {x}, tract-onnx {y} (tolerance {tol:e})");
        }
    }
    println!("{} output(s) match tract-onnx on {}\n{}", ours.len(), device.name()?, model::Model::explain(&device)?);
    Ok(())
}

#[test]
fn weights_of_another_length_or_content_are_refused() -> Result<(), Box<dyn std::error::Error>> {
    let (platform, device) = kfoundry::default_device()?;
    let context = Context::builder().platform(platform).devices(device).build()?;
    let queue = Queue::new(&context, device, None)?;
    let mut weights = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/weights.bin"))?;
    assert!(matches!(model::Model::with_weights(&queue, &[weights.clone(), vec![0]].concat()), Err(model::Error::Weights(_))));
    if let Some(byte) = weights.last_mut() {
        *byte ^= 1;
        assert!(matches!(model::Model::with_weights(&queue, &weights), Err(model::Error::Weights(_))));
    }
    let missing = model::Model::from_weights_file(&queue, "/nonexistent/weights.bin").err().map(|e| e.to_string()).unwrap_or_default();
    assert!(missing.contains("/nonexistent/weights.bin"), "{missing}");
    let folder = model::Model::from_weights_file(&queue, env!("CARGO_MANIFEST_DIR")).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(folder.contains("not a regular file"), "{folder}");
    Ok(())
}
