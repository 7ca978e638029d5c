//! The generated crate, as files: `Cargo.toml`, `src/lib.rs` (one annotated struct per kernel
//! and `Model`, which runs the graph through their launchers), `kernels/*.cl`, `weights.bin`
//! (the constants the kernels read, little-endian f32), `model.onnx` (a copy, for the test) and
//! `tests/tract.rs` (the model against tract-onnx on random inputs, through dispatch).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use crate::graph::ValueId;
use crate::kernels::Kernel;
use crate::Imported;

/// How the generated crate depends on kfoundry: a `Cargo.toml` value such as
/// `{ workspace = true }`, `{ path = "../kfoundry" }` or `"0.1"`.
pub struct CrateOptions<'a> {
    pub name: &'a str,
    pub kfoundry: &'a str,
    /// The model file's name, for the docs.
    pub model_file: &'a str,
    /// Whether `weights.bin` is built into the crate (`include_bytes!`, [`Model::new`]) or
    /// read when the program runs (`Model::from_weights_file`), so that a model of any size
    /// builds into a small binary.
    pub weights: Weights,
}

/// Where the generated `Model` finds its weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// In the binary (`include_bytes!("../weights.bin")`).
    Embed,
    /// In a file the program names when it runs; only its length and checksum are built in.
    File,
}

impl Weights {
    /// Embedding up to this many bytes of weights is the default; above it, a file.
    pub const EMBED_LIMIT: usize = 64 << 20;
}

/// FNV-1a over `bytes`: the checksum a weights file is checked against when it is loaded (a
/// file of another model or another import of it is refused, not run).
pub fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The storage of the graph's tensors: one buffer ("slot") per tensor a kernel, an input or an
/// output uses (views share their base's slot).
#[derive(Debug, Clone)]
pub struct Slots {
    /// Slot of each value (by its storage root).
    pub of: BTreeMap<ValueId, usize>,
    /// Length in elements of each slot.
    pub len: Vec<usize>,
    /// Constants: (slot, their data).
    pub constants: Vec<(usize, ValueId)>,
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
}

impl Slots {
    pub fn new(imported: &Imported) -> Slots {
        let f = &imported.fused;
        let mut s = Slots {
            of: BTreeMap::new(),
            len: Vec::new(),
            constants: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        };
        let slot = |s: &mut Slots, v: ValueId| -> usize {
            let root = f.storage[v];
            if let Some(&i) = s.of.get(&root) {
                return i;
            }
            let i = s.len.len();
            s.of.insert(root, i);
            s.len.push(f.graph.values[root].numel().max(1));
            if f.graph.values[root].data.is_some() {
                s.constants.push((i, root));
            }
            i
        };
        for &v in &f.graph.inputs {
            let i = slot(&mut s, v);
            s.inputs.push(i);
        }
        for k in &imported.kernels {
            for b in &k.buffers {
                slot(&mut s, b.value);
            }
        }
        for &v in &f.graph.outputs {
            let i = slot(&mut s, v);
            s.outputs.push(i);
        }
        s
    }

    pub fn slot(&self, imported: &Imported, v: ValueId) -> usize {
        self.of[&imported.fused.storage[v]]
    }
}

/// The style the generated code is written in, so that `cargo fmt` in the user's workspace
/// leaves a fresh import as it is.
const RUSTFMT: &str =
    "# Written by `cargo kfoundry import`: the style of the generated code, which `cargo fmt`\n\
# then keeps as written.\nmax_width = 150\nuse_small_heuristics = \"Max\"\n";

/// Every file of the crate, paths relative to its directory.
pub fn files(imported: &Imported, o: &CrateOptions) -> Vec<(PathBuf, Vec<u8>)> {
    // The model's file name lands in comments and a TOML string: letters, digits, `.-_` only.
    let model_file: String = o
        .model_file
        .chars()
        .take(80)
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let o = &CrateOptions {
        name: o.name,
        kfoundry: o.kfoundry,
        model_file: &model_file,
        weights: o.weights,
    };
    let slots = Slots::new(imported);
    let mut weights = Vec::new();
    let mut placed = Vec::new();
    for &(slot, v) in &slots.constants {
        let data = imported.fused.graph.values[v]
            .data
            .as_ref()
            .expect("constants have data");
        placed.push((slot, weights.len(), data.len()));
        for x in data {
            weights.extend_from_slice(&x.to_le_bytes());
        }
    }
    let mut out = vec![
        (PathBuf::from("Cargo.toml"), cargo_toml(o).into_bytes()),
        (
            PathBuf::from("src/lib.rs"),
            lib_rs(
                imported,
                &slots,
                &placed,
                (weights.len(), checksum(&weights)),
                o,
            )
            .into_bytes(),
        ),
        (PathBuf::from("weights.bin"), weights),
        (PathBuf::from("rustfmt.toml"), RUSTFMT.as_bytes().to_vec()),
    ];
    // The test against tract-onnx needs the model as one file.
    if let Some(model) = &imported.model_copy {
        out.push((PathBuf::from("model.onnx"), model.clone()));
        let new_model = match o.weights {
            Weights::Embed => "model::Model::new(&queue)",
            Weights::File => "model::Model::from_weights_file(&queue, concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/weights.bin\"))",
        };
        let test = TRACT_TEST
            .replace("NAME", &o.name.replace('-', "_"))
            .replace("NEW_MODEL", new_model);
        out.push((PathBuf::from("tests/tract.rs"), test.into_bytes()));
    }
    for k in &imported.kernels {
        out.push((
            PathBuf::from(format!("kernels/{}.cl", k.entry)),
            k.source.clone().into_bytes(),
        ));
    }
    out
}

fn cargo_toml(o: &CrateOptions) -> String {
    format!(
        r#"# Generated by `cargo kfoundry import` from {model}.
[package]
name = "{name}"
version = "0.1.0"
edition = "2021"
publish = false
description = "The ONNX model {model} as fused, tunable OpenCL kernels (cargo kfoundry import)"

[dependencies]
kfoundry = {kfoundry}

[dev-dependencies]
# The independent ONNX runtime the model is checked against (tests/tract.rs).
tract-onnx = {{ version = "0.23", default-features = false }}
"#,
        model = o.model_file,
        name = o.name,
        kfoundry = o.kfoundry
    )
}

/// The annotation of one kernel.
/// Where an annotation's kernel source is: the crate's file `kernels/<entry>.cl`, or inline
/// (`code = "..."`, to parse the annotation before any file is written).
#[derive(Clone, Copy)]
enum SourceAt {
    File,
    Inline,
}

/// The inside of the kernel's `#[kfoundry::evolve(...)]`, one key per line.
fn annotation(k: &Kernel, at: SourceAt) -> String {
    let mut a = String::new();
    let list = |items: Vec<String>| items.join(", ");
    match at {
        SourceAt::File => {
            let _ = writeln!(a, "    source = \"kernels/{}.cl\",", k.entry);
        }
        SourceAt::Inline => {
            let _ = writeln!(a, "    code = {:?},", k.source);
        }
    }
    let _ = writeln!(
        a,
        "    params({}),",
        list(k.params.iter().map(|(n, d)| format!("{n} = {d}")).collect())
    );
    let _ = writeln!(
        a,
        "    reference({}),",
        list(
            k.reference
                .iter()
                .map(|(n, v)| format!("{n} = {v}"))
                .collect()
        )
    );
    if !k.require.is_empty() {
        let _ = writeln!(a, "    require({}),", list(k.require.clone()));
    }
    let tuple = |v: &[String]| {
        if v.len() == 1 {
            v[0].clone()
        } else {
            format!("({})", v.join(", "))
        }
    };
    let _ = writeln!(
        a,
        "    global = {}, local = {},",
        tuple(&k.global),
        tuple(&k.local)
    );
    let buffers = k
        .buffers
        .iter()
        .map(|b| (&b.name, &b.len))
        .chain(k.locals.iter().map(|(n, l)| (n, l)))
        .chain(k.scratch.iter().map(|(n, l)| (n, l)));
    let _ = writeln!(
        a,
        "    buffers({}),",
        list(buffers.map(|(n, l)| format!("{n} = {l}")).collect())
    );
    if !k.scratch.is_empty() {
        let names = k.scratch.iter().map(|(n, _)| n.clone()).collect();
        let _ = writeln!(a, "    scratch({}),", list(names));
    }
    let drawn: Vec<String> = k
        .buffers
        .iter()
        .filter_map(|b| b.inputs.as_ref().map(|d| format!("{} = {d}", b.name)))
        .collect();
    if !drawn.is_empty() {
        let _ = writeln!(a, "    inputs({}),", list(drawn));
    }
    if let Some(note) = k.check_note {
        let _ = writeln!(a, "    // {note}");
    }
    let _ = writeln!(a, "    check(y, rtol = {:e}, atol = {:e}),", k.rtol, k.atol);
    if k.edges_finite {
        let _ = writeln!(a, "    edges = finite,");
    }
    let bind = |small: bool| {
        list(
            k.sizes
                .iter()
                .map(|s| format!("{} = {}", s.name, if small { s.small } else { s.full }))
                .collect(),
        )
    };
    if k.sizes.iter().all(|s| s.small == s.full) {
        let _ = writeln!(a, "    workloads(full({})),", bind(false));
    } else {
        let _ = writeln!(
            a,
            "    workloads(small({}), full({}, on = gpu)),",
            bind(true),
            bind(false)
        );
    }
    let _ = writeln!(a, "    cost(bytes = {}, flops = {}),", k.bytes, k.flops);
    let _ = writeln!(a, "    extrapolate = true,");
    a
}

/// Reads the annotation of `k` back with kfoundry's own parser (the one the macro and the tuner
/// use) and checks the specification it gives: the text written here and the language the
/// parser reads cannot drift apart unnoticed. An annotation refused here is the importer's bug,
/// reported as an error (naming the kernel) rather than as a crate that does not build.
pub fn check_annotation(k: &Kernel) -> Result<(), String> {
    let tokens: proc_macro2::TokenStream = annotation(k, SourceAt::Inline)
        .parse()
        .map_err(|e| format!("not Rust tokens: {e}"))?;
    let item: syn::Item = syn::parse_str(&format!("pub struct {};", k.struct_name))
        .map_err(|e| format!("`{}` is not a struct name: {e}", k.struct_name))?;
    let cx = kfoundry_tooling::annotation::Context {
        package: "imported",
        manifest_dir: std::path::Path::new("."),
    };
    let annotated =
        kfoundry_tooling::annotation::parse(tokens, &item, &cx).map_err(|e| e.to_string())?;
    match annotated.spec.validate().first() {
        Some(e) => Err(e.message.clone()),
        None => Ok(()),
    }
}

fn lib_rs(
    imported: &Imported,
    slots: &Slots,
    placed: &[(usize, usize, usize)],
    weights: (usize, u64),
    o: &CrateOptions,
) -> String {
    let g = &imported.fused.graph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "//! The ONNX model `{}` as {} fused OpenCL kernels, generated by `cargo kfoundry import`.",
        o.model_file,
        imported.kernels.len()
    );
    s += "//!\n//! Each kernel is a plain reference with a tunable space: `cargo kfoundry tune -p NAME` tunes\n//! them on this machine's device and a rebuild embeds the winners. [`Model`] runs the graph\n//! through their launchers, which dispatch by device. Re-import rather than edit.\n\n".replace("NAME", o.name).as_str();
    s += "use kfoundry::ocl::{Buffer, Queue};\n\n";
    for k in &imported.kernels {
        let _ = writeln!(s, "/// Fuses {}.", k.doc);
        let _ = writeln!(
            s,
            "#[kfoundry::evolve(\n{})]\npub struct {};\n",
            annotation(k, SourceAt::File),
            k.struct_name
        );
    }
    let shapes = |ids: &[ValueId]| {
        ids.iter()
            .map(|&v| {
                format!(
                    "(\"{}\", &{:?})",
                    g.values[v].name.escape_default(),
                    g.values[v].shape
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        s,
        "/// The graph's inputs, in the order [`Model::run`] takes them: name and shape."
    );
    let _ = writeln!(
        s,
        "pub const INPUTS: &[(&str, &[usize])] = &[{}];",
        shapes(&g.inputs)
    );
    let _ = writeln!(
        s,
        "/// The graph's outputs, in the order [`Model::run`] returns them: name and shape."
    );
    let _ = writeln!(
        s,
        "pub const OUTPUTS: &[(&str, &[usize])] = &[{}];\n",
        shapes(&g.outputs)
    );
    let _ = writeln!(
        s,
        "/// Buffer lengths, in elements.\nconst SLOTS: [usize; {}] = {:?};",
        slots.len.len(),
        slots.len
    );
    let _ = writeln!(s, "/// Constants: (slot, first byte in `weights.bin`, elements).\nconst WEIGHT_SLOTS: &[(usize, usize, usize)] = &{placed:?};");
    let _ = writeln!(
        s,
        "const INPUT_SLOTS: [usize; {}] = {:?};",
        slots.inputs.len(),
        slots.inputs
    );
    let _ = writeln!(
        s,
        "const OUTPUT_SLOTS: [usize; {}] = {:?};",
        slots.outputs.len(),
        slots.outputs
    );
    let _ = writeln!(
        s,
        "/// The length and checksum (FNV-1a) of `weights.bin`: a weights file must match both."
    );
    let _ = writeln!(
        s,
        "pub const WEIGHTS_BYTES: usize = {};\npub const WEIGHTS_CHECKSUM: u64 = {:#018x};",
        weights.0, weights.1
    );
    if o.weights == Weights::Embed {
        s += "static WEIGHTS: &[u8] = include_bytes!(\"../weights.bin\");\n\n";
    }
    s += MODEL_TYPES;
    let mut launches = String::new();
    let mut explains = String::new();
    for k in &imported.kernels {
        let sizes: Vec<String> = k.sizes.iter().map(|z| format!("{}usize", z.full)).collect();
        let bufs: Vec<String> = k
            .buffers
            .iter()
            .map(|b| format!("&s[{}]", slots.slot(imported, b.value)))
            .collect();
        let _ = writeln!(
            launches,
            "        {}::launch(q, {})?;",
            k.struct_name,
            [sizes.clone(), bufs].concat().join(", ")
        );
        let _ = writeln!(
            explains,
            "        out.push_str(&format!(\"{}: {{}}\\n\", {}::explain(device, {})?));",
            k.struct_name,
            k.struct_name,
            sizes.join(", ")
        );
    }
    let new = if o.weights == Weights::Embed {
        EMBEDDED_NEW
    } else {
        ""
    };
    s += &MODEL_IMPL
        .replace("EMBEDDED_NEW\n", new)
        .replace("LAUNCHES\n", &launches)
        .replace("EXPLAINS\n", &explains);
    s
}

const MODEL_TYPES: &str = r#"/// Why the model could not run.
#[derive(Debug)]
pub enum Error {
    /// OpenCL or dispatch failed (see [`kfoundry::Error`]).
    Kfoundry(kfoundry::Error),
    /// `run` was given another number of inputs than the graph has.
    InputCount { expected: usize, given: usize },
    /// An input holds another number of elements than its shape.
    InputLength { input: &'static str, expected: usize, given: usize },
    /// The weights given are not this import's `weights.bin` (length or checksum), or the
    /// file could not be read.
    Weights(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Kfoundry(e) => write!(f, "{e}"),
            Error::InputCount { expected, given } => write!(f, "the model takes {expected} input(s), {given} given"),
            Error::InputLength { input, expected, given } => write!(f, "input `{input}` needs {expected} element(s), {given} given"),
            Error::Weights(what) => write!(f, "weights: {what}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<kfoundry::Error> for Error {
    fn from(e: kfoundry::Error) -> Error {
        Error::Kfoundry(e)
    }
}

impl From<kfoundry::ocl::Error> for Error {
    fn from(e: kfoundry::ocl::Error) -> Error {
        Error::Kfoundry(e.into())
    }
}

/// The graph on one OpenCL queue: its weights uploaded once, a buffer per tensor.
pub struct Model {
    queue: Queue,
    slots: Vec<Buffer<f32>>,
}
"#;

const MODEL_IMPL: &str = r#"
impl Model {
EMBEDDED_NEW
    /// Allocates the graph's buffers on `queue`'s device and uploads the weights in the file
    /// at `path` (this import's `weights.bin`, checked by length and checksum).
    pub fn from_weights_file(queue: &Queue, path: impl AsRef<std::path::Path>) -> Result<Model, Error> {
        let path = path.as_ref();
        // A regular file of this model's length, before anything is read (not a FIFO, a
        // device or another model's larger file).
        let meta = std::fs::metadata(path).map_err(|e| Error::Weights(format!("{}: {e}", path.display())))?;
        if !meta.is_file() || meta.len() != WEIGHTS_BYTES as u64 {
            return Err(Error::Weights(format!(
                "{}: {} where this model's weights.bin is a file of {WEIGHTS_BYTES} bytes",
                path.display(),
                if meta.is_file() { format!("{} bytes", meta.len()) } else { "not a regular file".to_string() }
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| Error::Weights(format!("{}: {e}", path.display())))?;
        Model::with_weights(queue, &bytes).map_err(|e| match e {
            Error::Weights(what) => Error::Weights(format!("{}: {what}", path.display())),
            e => e,
        })
    }

    /// Allocates the graph's buffers on `queue`'s device and uploads `weights` (the bytes of
    /// this import's `weights.bin`, checked by length and checksum).
    pub fn with_weights(queue: &Queue, weights: &[u8]) -> Result<Model, Error> {
        if weights.len() != WEIGHTS_BYTES {
            return Err(Error::Weights(format!("{} bytes where this model's weights.bin has {WEIGHTS_BYTES}", weights.len())));
        }
        let sum = weights.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
        if sum != WEIGHTS_CHECKSUM {
            return Err(Error::Weights(format!(
                "checksum {sum:#018x} where this model's weights.bin has {WEIGHTS_CHECKSUM:#018x}: another model's, or another import's"
            )));
        }
        let mut slots = Vec::with_capacity(SLOTS.len());
        for &len in &SLOTS {
            slots.push(Buffer::<f32>::builder().queue(queue.clone()).len(len).build()?);
        }
        for &(slot, offset, len) in WEIGHT_SLOTS {
            let data: Vec<f32> = weights[offset..offset + 4 * len].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            slots[slot].write(&data[..]).enq()?;
        }
        queue.finish()?;
        Ok(Model { queue: queue.clone(), slots })
    }

    /// Runs the graph on `inputs` (in the order of [`INPUTS`], row-major) and returns its
    /// outputs (in the order of [`OUTPUTS`]).
    pub fn run(&self, inputs: &[&[f32]]) -> Result<Vec<Vec<f32>>, Error> {
        if inputs.len() != INPUTS.len() {
            return Err(Error::InputCount { expected: INPUTS.len(), given: inputs.len() });
        }
        for (i, (&slot, &data)) in INPUT_SLOTS.iter().zip(inputs).enumerate() {
            let expected: usize = INPUTS[i].1.iter().product();
            if data.len() != expected {
                return Err(Error::InputLength { input: INPUTS[i].0, expected, given: data.len() });
            }
            self.slots[slot].write(data).enq()?;
        }
        self.enqueue()?;
        let mut outputs = Vec::with_capacity(OUTPUT_SLOTS.len());
        for (i, &slot) in OUTPUT_SLOTS.iter().enumerate() {
            let mut data = vec![0f32; OUTPUTS[i].1.iter().product()];
            self.slots[slot].read(&mut data[..]).enq()?;
            outputs.push(data);
        }
        Ok(outputs)
    }

    /// Which variant each kernel runs on `device` at the graph's sizes, and why (dispatch's
    /// `explain()` per kernel).
    pub fn explain(device: &kfoundry::ocl::Device) -> Result<String, Error> {
        let mut out = String::new();
EXPLAINS
        Ok(out)
    }

    /// Enqueues every kernel of the graph on the inputs already in place and waits for them
    /// (what [`Model::run`] does between writing the inputs and reading the outputs; for timing).
    pub fn enqueue(&self) -> Result<(), Error> {
        let q = &self.queue;
        let s = &self.slots;
LAUNCHES
        q.finish()?;
        Ok(())
    }
}
"#;

const EMBEDDED_NEW: &str = r#"    /// Allocates the graph's buffers on `queue`'s device and uploads its weights (built into
    /// the binary).
    pub fn new(queue: &Queue) -> Result<Model, Error> {
        Model::with_weights(queue, WEIGHTS)
    }
"#;

const TRACT_TEST: &str = r#"//! The generated kernels against tract-onnx, an independent ONNX runtime, on random inputs.
//! Runs through dispatch: the reference kernels before a tune, the tuned variants after
//! `cargo kfoundry tune` and a rebuild.

use kfoundry::ocl::{Context, Queue};
use tract_onnx::prelude::*;

// The generated crate.
use NAME as model;

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
    let runner = NEW_MODEL?;
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
"#;
