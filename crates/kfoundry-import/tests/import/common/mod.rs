//! Shared by the import tests: graphs built operator by operator (encoded with the importer's
//! own message types, decoded independently by tract-onnx), the imported kernels run on the
//! default OpenCL device through the runtime's checked launches (their annotations read back
//! exactly as the macro reads them), and tract-onnx's results.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use kfoundry_import::emit::{self, Slots};
use kfoundry_import::onnx::{
    self, attribute_type, data_type, AttributeProto, GraphProto, ModelProto, NodeProto,
    TensorProto, ValueInfoProto,
};
use kfoundry_import::Imported;
use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes};
use kfoundry_rt::opencl::session::Session;

/// A graph under construction.
pub struct G {
    graph: GraphProto,
    opset: i64,
}

pub fn ai(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INT,
        i: v,
        ..Default::default()
    }
}
pub fn af(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::FLOAT,
        f: v,
        ..Default::default()
    }
}
pub fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
}
pub fn astr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::STRING,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// Deterministic values in [-1, 1).
pub fn random(len: usize, seed: u64) -> Vec<f32> {
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

impl G {
    pub fn new() -> G {
        G::opset(18)
    }

    pub fn opset(opset: i64) -> G {
        G {
            graph: GraphProto {
                name: "test".into(),
                ..Default::default()
            },
            opset,
        }
    }

    fn value_info(name: &str, shape: Option<&[usize]>) -> ValueInfoProto {
        let shape = shape.map(|s| onnx::TensorShapeProto {
            dim: s
                .iter()
                .map(|&d| onnx::Dimension {
                    dim_value: Some(d as i64),
                    dim_param: None,
                })
                .collect(),
        });
        ValueInfoProto {
            name: name.into(),
            r#type: Some(onnx::TypeProto {
                tensor_type: Some(onnx::TensorTypeProto {
                    elem_type: data_type::FLOAT,
                    shape,
                }),
            }),
        }
    }

    pub fn input(mut self, name: &str, shape: &[usize]) -> G {
        self.graph.input.push(G::value_info(name, Some(shape)));
        self
    }

    /// An input with a symbolic dimension 0.
    pub fn symbolic_input(mut self, name: &str, symbol: &str, rest: &[usize]) -> G {
        let mut dim = vec![onnx::Dimension {
            dim_value: None,
            dim_param: Some(symbol.into()),
        }];
        dim.extend(rest.iter().map(|&d| onnx::Dimension {
            dim_value: Some(d as i64),
            dim_param: None,
        }));
        self.graph.input.push(ValueInfoProto {
            name: name.into(),
            r#type: Some(onnx::TypeProto {
                tensor_type: Some(onnx::TensorTypeProto {
                    elem_type: data_type::FLOAT,
                    shape: Some(onnx::TensorShapeProto { dim }),
                }),
            }),
        });
        self
    }

    pub fn output(mut self, name: &str) -> G {
        self.graph.output.push(G::value_info(name, None));
        self
    }

    pub fn init(mut self, name: &str, shape: &[usize], data: Vec<f32>) -> G {
        // A scalar has one element; an empty tensor (an unused input, as exporters write) none.
        assert_eq!(
            data.len(),
            if shape.is_empty() {
                1
            } else {
                shape.iter().product::<usize>()
            },
            "{name}"
        );
        self.graph.initializer.push(TensorProto {
            name: name.into(),
            dims: shape.iter().map(|&d| d as i64).collect(),
            data_type: data_type::FLOAT,
            raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ..Default::default()
        });
        self
    }

    pub fn weight(self, name: &str, shape: &[usize], seed: u64) -> G {
        let n = shape.iter().product::<usize>().max(1);
        self.init(name, shape, random(n, seed))
    }

    /// An int64 initializer of any shape.
    pub fn init_ints(mut self, name: &str, shape: &[usize], values: &[i64]) -> G {
        self.graph.initializer.push(TensorProto {
            name: name.into(),
            dims: shape.iter().map(|&d| d as i64).collect(),
            data_type: data_type::INT64,
            int64_data: values.to_vec(),
            ..Default::default()
        });
        self
    }

    pub fn int64s(mut self, name: &str, values: &[i64]) -> G {
        self.graph.initializer.push(TensorProto {
            name: name.into(),
            dims: vec![values.len() as i64],
            data_type: data_type::INT64,
            int64_data: values.to_vec(),
            ..Default::default()
        });
        self
    }

    pub fn node(
        mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> G {
        let name = format!("{}_{}", op.to_lowercase(), self.graph.node.len());
        self.graph.node.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name,
            op_type: op.into(),
            attribute: attrs,
            ..Default::default()
        });
        self
    }

    /// Moves initializer `name`'s data out of the model: the tensor says it is in `location`
    /// at `offset` (the caller writes the file), and the raw bytes are returned.
    pub fn external(self, name: &str, location: &str, offset: usize) -> (G, Vec<u8>) {
        self.external_claiming(name, location, offset, None)
    }

    /// As [`G::external`], the tensor claiming `length` bytes when given (its true length
    /// otherwise).
    pub fn external_claiming(
        mut self,
        name: &str,
        location: &str,
        offset: usize,
        length: Option<usize>,
    ) -> (G, Vec<u8>) {
        let t = self
            .graph
            .initializer
            .iter_mut()
            .find(|t| t.name == name)
            .expect("an initializer of that name");
        let raw = std::mem::take(&mut t.raw_data);
        let entry = |key: &str, value: String| onnx::StringStringEntryProto {
            key: key.into(),
            value,
        };
        t.external_data = vec![
            entry("location", location.into()),
            entry("offset", offset.to_string()),
            entry("length", length.unwrap_or(raw.len()).to_string()),
        ];
        t.data_location = 1;
        (self, raw)
    }

    pub fn bytes(&self) -> Vec<u8> {
        onnx::encode(&ModelProto {
            ir_version: 8,
            opset_import: vec![onnx::OperatorSetIdProto {
                domain: String::new(),
                version: self.opset,
            }],
            producer_name: "kfoundry-import tests".into(),
            graph: Some(self.graph.clone()),
        })
    }

    pub fn input_shapes(&self) -> Vec<Vec<usize>> {
        self.graph
            .input
            .iter()
            .map(|i| {
                i.r#type
                    .as_ref()
                    .unwrap()
                    .tensor_type
                    .as_ref()
                    .unwrap()
                    .shape
                    .as_ref()
                    .unwrap()
                    .dim
                    .iter()
                    .map(|d| d.dim_value.unwrap_or(1) as usize)
                    .collect()
            })
            .collect()
    }
}

/// The kernels' specifications, read back from the generated crate's `src/lib.rs` exactly as
/// the macro reads them (the crate's files written under `dir`).
pub fn specs(imported: &Imported, dir: &Path) -> Vec<KernelSpec> {
    let files = emit::files(
        imported,
        &emit::CrateOptions {
            name: "imported",
            kfoundry: "{ path = \"../..\" }",
            model_file: "model.onnx",
            weights: emit::Weights::Embed,
        },
    );
    for (path, data) in &files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    let file = syn::parse_file(&lib)
        .unwrap_or_else(|e| panic!("generated lib.rs does not parse: {e}\n{lib}"));
    let cx = kfoundry_tooling::annotation::Context {
        package: "imported",
        manifest_dir: dir,
    };
    let mut out = Vec::new();
    for item in &file.items {
        let syn::Item::Struct(s) = item else { continue };
        let Some(attr) = s
            .attrs
            .iter()
            .find(|a| kfoundry_tooling::annotation::is_evolve_attr(a))
        else {
            continue;
        };
        let syn::Meta::List(list) = &attr.meta else {
            panic!("evolve without arguments")
        };
        let mut bare = s.clone();
        bare.attrs.clear();
        let annotated =
            kfoundry_tooling::annotation::parse(list.tokens.clone(), &syn::Item::Struct(bare), &cx)
                .unwrap_or_else(|e| {
                    panic!("the annotation of {} does not parse: {e}\n{}", s.ident, lib)
                });
        out.push(annotated.spec);
    }
    assert_eq!(out.len(), imported.kernels.len());
    out
}

/// Which configuration of each kernel to run.
#[derive(Clone, Copy)]
pub enum Config {
    Reference,
    /// A valid configuration drawn with this seed (its constraints and geometry hold at the
    /// graph's sizes on this device).
    Random(u64),
    /// The reference with these parameters set, in the kernels that have them (kernels whose
    /// constraints refuse that run their reference).
    With(&'static [(&'static str, i64)]),
    /// As `With`, for the paths of NVIDIA GPUs (the tensor cores): the kernels that have
    /// parameter `MMA` are built with `KM_EMULATE` (the warp-wide instructions emulated in
    /// local memory, as the suite's emulation test does) and launched as on an sm_80 device.
    Emulated(&'static [(&'static str, i64)]),
}

/// Runs the imported graph on the default device, every kernel in configuration `config`.
pub fn run(
    imported: &Imported,
    specs: &[KernelSpec],
    inputs: &[Vec<f32>],
    config: Config,
) -> Vec<Vec<f32>> {
    let (platform, device) = kfoundry_rt::default_device().expect("an OpenCL device");
    let session = Session::new(platform, device).expect("session");
    let traits = kfoundry_rt::traits_of(&device).expect("traits");
    let slots = Slots::new(imported);
    let buffers: Vec<_> = slots
        .len
        .iter()
        .map(|&n| session.alloc(4 * n).expect("alloc"))
        .collect();
    // Every buffer starts as NaN: an output element no kernel writes cannot pass for the value
    // an earlier run left in recycled memory.
    for (b, &n) in buffers.iter().zip(&slots.len) {
        b.write(0, &bytes_of(&vec![f32::NAN; n])).unwrap();
    }
    for &(slot, v) in &slots.constants {
        let data = imported.fused.graph.values[v].data.as_ref().unwrap();
        buffers[slot].write(0, &bytes_of(data)).unwrap();
    }
    for (i, &slot) in slots.inputs.iter().enumerate() {
        buffers[slot].write(0, &bytes_of(&inputs[i])).unwrap();
    }
    for (k, spec) in imported.kernels.iter().zip(specs) {
        let sizes: Sizes = k
            .sizes
            .iter()
            .map(|s| (s.name.clone(), s.full as i64))
            .collect();
        let params = match config {
            Config::Reference => spec.reference.clone(),
            Config::Random(seed) => draw(spec, &sizes, &traits, seed),
            Config::Emulated(over) if spec.params.iter().any(|p| p.name == "MMA") => {
                let mut p = spec.reference.clone();
                for (name, value) in over {
                    if let Some(v) = p.get_mut(*name) {
                        *v = *value;
                    }
                }
                let nvidia = kfoundry_rt::DeviceTraits {
                    vendor_id: 0x10de,
                    kind: "gpu".into(),
                    nv_compute_capability: 80,
                    ..traits.clone()
                };
                spec.geometry(&p, &sizes, Some(&nvidia))
                    .unwrap_or_else(|e| panic!("{}: {p:?} on an sm_80 device: {e}", k.entry));
                let options =
                    kfoundry_rt::opencl::launch::build_options_for(spec, &spec.source, &p).unwrap()
                        + " -DKM_EMULATE";
                let program = session
                    .build(&spec.id, &spec.source, &options)
                    .unwrap_or_else(|e| panic!("{}: emulated build: {e}", k.entry));
                let kernel = session.kernel(&program, &spec.signature.name).unwrap();
                let by_name: BTreeMap<&str, usize> = k
                    .buffers
                    .iter()
                    .map(|b| (b.name.as_str(), slots.slot(imported, b.value)))
                    .collect();
                let args: Vec<_> = spec
                    .caller_args()
                    .map(|a| buffers[by_name[a.name()]].arg())
                    .collect();
                session
                    .launch_as(spec, &kernel, &p, &sizes, &args, false, &nvidia)
                    .unwrap_or_else(|e| panic!("{}: emulated launch with {p:?}: {e}", k.entry));
                continue;
            }
            Config::With(over) | Config::Emulated(over) => {
                // As many of the settings as the kernel's constraints allow here: the first
                // valid one of dropping none, then the last one, the last two, ... (a setting
                // that one kernel refuses still reaches the rest of its settings).
                (0..=over.len())
                    .map(|drop| {
                        let mut p = spec.reference.clone();
                        for (name, value) in &over[..over.len() - drop] {
                            if let Some(v) = p.get_mut(*name) {
                                *v = *value;
                            }
                        }
                        p
                    })
                    .find(|p| spec.geometry(p, &sizes, Some(&traits)).is_ok())
                    .unwrap_or_else(|| spec.reference.clone())
            }
        };
        let program = session
            .build_spec(spec, &spec.source, &params)
            .unwrap_or_else(|e| panic!("{}: build with {params:?}: {e}", k.entry));
        let kernel = session.kernel(&program, &spec.signature.name).unwrap();
        let by_name: BTreeMap<&str, usize> = k
            .buffers
            .iter()
            .map(|b| (b.name.as_str(), slots.slot(imported, b.value)))
            .collect();
        let args: Vec<_> = spec
            .caller_args()
            .map(|a| buffers[by_name[a.name()]].arg())
            .collect();
        session
            .launch(spec, &kernel, &params, &sizes, &args, false)
            .unwrap_or_else(|e| panic!("{}: launch with {params:?}: {e}", k.entry));
    }
    session.finish().unwrap();
    slots
        .outputs
        .iter()
        .zip(&imported.fused.graph.outputs)
        .map(|(&slot, &v)| {
            let n = imported.fused.graph.values[v].numel();
            let mut out = vec![0u8; 4 * n];
            buffers[slot].read(0, &mut out).unwrap();
            out.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        })
        .collect()
}

fn bytes_of(data: &[f32]) -> Vec<u8> {
    data.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A configuration of `spec` whose constraints and geometry hold (rejection sampling).
fn draw(spec: &KernelSpec, sizes: &Sizes, traits: &kfoundry_rt::DeviceTraits, seed: u64) -> Params {
    let mut s = seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
    for _ in 0..10_000 {
        let params: Params = spec
            .params
            .iter()
            .map(|p| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (
                    p.name.clone(),
                    p.values[(s % p.values.len() as u64) as usize],
                )
            })
            .collect();
        if spec.geometry(&params, sizes, Some(traits)).is_ok() {
            return params;
        }
    }
    panic!("{}: no valid configuration drawn", spec.id)
}

/// tract-onnx's outputs for `inputs`.
pub fn tract(bytes: &[u8], shapes: &[Vec<usize>], inputs: &[Vec<f32>]) -> Vec<Vec<f32>> {
    use tract_onnx::prelude::*;
    let model = tract_onnx::onnx()
        .model_for_read(&mut &bytes[..])
        .expect("tract reads the model");
    let plan = model
        .into_optimized()
        .expect("tract optimizes")
        .into_runnable()
        .expect("runnable");
    let mut tensors = TVec::new();
    for (shape, data) in shapes.iter().zip(inputs) {
        let t: Tensor = tract_ndarray::ArrayD::from_shape_vec(shape.clone(), data.clone())
            .unwrap()
            .into();
        tensors.push(t.into());
    }
    plan.run(tensors)
        .expect("tract runs")
        .into_iter()
        .map(|t| {
            t.into_tensor()
                .cast_to::<f32>()
                .unwrap()
                .to_plain_array_view::<f32>()
                .unwrap()
                .iter()
                .copied()
                .collect()
        })
        .collect()
}

/// Asserts that `ours` matches tract-onnx element by element.
pub fn assert_close(what: &str, ours: &[Vec<f32>], theirs: &[Vec<f32>]) {
    assert_eq!(ours.len(), theirs.len(), "{what}: output count");
    for (o, (a, t)) in ours.iter().zip(theirs).enumerate() {
        assert_eq!(a.len(), t.len(), "{what}: output {o} length");
        let scale = t.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (i, (x, y)) in a.iter().zip(t).enumerate() {
            let tol = 1e-4 * scale + 1e-3 * y.abs() + 1e-6;
            assert!(
                (x - y).abs() <= tol,
                "{what}: output {o}, element {i}: kfoundry {x}, tract-onnx {y} (tolerance {tol:e})"
            );
        }
    }
}

/// Imports `g`, then runs it against tract-onnx with the reference configuration and `random`
/// drawn configurations; returns the import (for assertions on the fusion).
pub fn check(what: &str, g: &G, random_configs: u64) -> Imported {
    check_with(what, g, random_configs, &[])
}

/// [`check`], and also with each of `fixed` (parameters set over the reference).
pub fn check_with(
    what: &str,
    g: &G,
    random_configs: u64,
    fixed: &[&'static [(&'static str, i64)]],
) -> Imported {
    check_configs(
        what,
        g,
        random_configs,
        &fixed.iter().map(|&f| Config::With(f)).collect::<Vec<_>>(),
    )
}

/// As [`check`], with these configurations too.
pub fn check_configs(what: &str, g: &G, random_configs: u64, fixed: &[Config]) -> Imported {
    check_imported(what, g, &Default::default(), random_configs, fixed)
}

/// As [`check_configs`], the model read with `options`.
pub fn check_imported(
    what: &str,
    g: &G,
    options: &kfoundry_import::Options,
    random_configs: u64,
    fixed: &[Config],
) -> Imported {
    let bytes = g.bytes();
    let imported =
        kfoundry_import::import(&bytes, options).unwrap_or_else(|e| panic!("{what}: import: {e}"));
    let dir = tempfile::tempdir().unwrap();
    let specs = specs(&imported, dir.path());
    let shapes = g.input_shapes();
    let inputs: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| random(s.iter().product(), 100 + i as u64))
        .collect();
    let theirs = tract(&bytes, &shapes, &inputs);
    assert_close(
        &format!("{what} (reference)"),
        &run(&imported, &specs, &inputs, Config::Reference),
        &theirs,
    );
    for seed in 1..=random_configs {
        assert_close(
            &format!("{what} (configuration {seed})"),
            &run(&imported, &specs, &inputs, Config::Random(seed)),
            &theirs,
        );
    }
    for &config in fixed {
        let (Config::With(over) | Config::Emulated(over)) = config else {
            unreachable!("fixed configurations")
        };
        assert_close(
            &format!("{what} ({over:?})"),
            &run(&imported, &specs, &inputs, config),
            &theirs,
        );
    }
    imported
}
