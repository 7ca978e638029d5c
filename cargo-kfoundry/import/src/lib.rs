//! `cargo kfoundry import`: from an ONNX model to a crate of fused, annotated OpenCL reference
//! kernels and a `Model` that runs the graph through their launchers.
//!
//! The flow, one module each:
//! [`onnx`] (the file format) → [`graph`] (operators with checked attributes and static shapes)
//! → [`fuse`] (groups: an anchor and its element-wise chain) → [`kernels`] (OpenCL C and its
//! tunable space per group) → [`emit`] (the crate's files).

pub mod emit;
pub mod error;
pub mod fuse;
pub mod graph;
pub mod kernels;
pub mod onnx;

use std::collections::BTreeMap;

pub use error::ImportError;

/// A model read, fused and generated.
#[derive(Debug, Clone)]
pub struct Imported {
    pub fused: fuse::Fused,
    pub kernels: Vec<kernels::Kernel>,
}

/// Imports the ONNX model in `bytes`; `dims` gives values to symbolic input dimensions.
pub fn import(bytes: &[u8], dims: &BTreeMap<String, usize>) -> Result<Imported, ImportError> {
    let graph = graph::read(bytes, dims)?;
    let fused = fuse::fuse(graph);
    let kernels = kernels::generate(&fused);
    Ok(Imported { fused, kernels })
}
