//! `cargo kfoundry import`: from an ONNX model to a crate of fused, annotated OpenCL reference
//! kernels and a `Model` that runs the graph through their launchers.
//!
//! The flow, one module each:
//! [`onnx`] (the file format) → [`graph`] (operators with checked attributes and static shapes)
//! → [`fuse`] (groups: an anchor and its element-wise chain) → [`kernels`] (OpenCL C and its
//! tunable space per group) → [`emit`] (the crate's files). [`error`] and [`text`] (the model's
//! text made safe to show) serve them all and import none of them.

// A malformed model is an error (`ImportError`), never a panic; the `expect`s left state
// invariants of the importer's own data (a template's markers, a rank already counted).
#![allow(clippy::expect_used)]

pub mod emit;
pub mod error;
pub mod fuse;
pub mod graph;
pub mod kernels;
pub mod onnx;
pub mod text;

use std::collections::BTreeMap;

pub use error::ImportError;

/// A model read, fused and generated.
#[derive(Debug, Clone)]
pub struct Imported {
    pub fused: fuse::Fused,
    pub kernels: Vec<kernels::Kernel>,
    /// The model as one file, for the generated crate's test (its external data inside it);
    /// `None` when that would pass the 2 GiB of one protocol-buffer file.
    pub model_copy: Option<Vec<u8>>,
}

impl Imported {
    /// The bytes of the weights (every constant the kernels read), as `weights.bin` holds them.
    pub fn weight_bytes(&self) -> usize {
        let g = &self.fused.graph;
        emit::Slots::new(self)
            .constants
            .iter()
            .map(|&(_, v)| 4 * g.values[v].data.as_ref().map_or(0, |d| d.len()))
            .sum()
    }
}

/// How a model is read.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Values of symbolic input dimensions (`batch = 1`).
    pub dims: BTreeMap<String, usize>,
    /// The model's folder, where tensors stored as external data are read from (never a file
    /// outside it). `None`: a model with external data is refused.
    pub data_dir: Option<std::path::PathBuf>,
    /// 64-bit indices in every kernel. Without it they are used only where a kernel touches a
    /// tensor of more than 2^31 - 2^24 elements (the tests force them on small graphs).
    pub index64: bool,
    /// The matrix products' tensor-core path: FP32-accurate (the default) or TF32.
    pub precision: kernels::Precision,
}

/// Imports the ONNX model in `bytes`.
pub fn import(bytes: &[u8], options: &Options) -> Result<Imported, ImportError> {
    let mut model = onnx::decode(bytes).map_err(|e| ImportError::Decode(e.to_string()))?;
    let external = onnx::has_external_data(&model);
    if let (true, Some(dir)) = (external, &options.data_dir) {
        onnx::load_external(&mut model, dir).map_err(ImportError::Model)?;
    }
    // The copy of the model the generated crate's test reads: a model whose data was in other
    // files as one file, when that fits protocol buffers' 2 GiB.
    let model_copy = if external {
        Some(onnx::encode(&model)).filter(|b| b.len() < (2 << 30) - 1)
    } else {
        Some(bytes.to_vec())
    };
    let graph = graph::from_model(model, options)?;
    let fused = fuse::fuse(graph);
    let kernels = kernels::generate(&fused, options.index64, options.precision);
    for k in &kernels {
        emit::check_annotation(k).map_err(|why| {
            ImportError::Model(format!(
                "internal error: the annotation generated for `{}` ({}) is refused by kfoundry's own parser: {why}; please report it with the model",
                k.struct_name, k.doc
            ))
        })?;
    }
    Ok(Imported {
        fused,
        kernels,
        model_copy,
    })
}
