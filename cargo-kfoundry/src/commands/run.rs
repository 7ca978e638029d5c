//! `cargo kfoundry run MODEL.onnx --name NAME [--lockfile L]`: the model run through the kernels
//! `import` generates for it, on one device, each kernel in the variant dispatch would choose
//! there from the lockfile's entries (the same rules as a shipped binary:
//! [`kfoundry_rt::model::select::choose`]), or its reference without a lockfile. For checking a
//! whole imported model against another framework where no Rust toolchain is (the KernelBench
//! harness compares the outputs with PyTorch's) and for timing it as one graph.
//!
//! Inputs and outputs are raw little-endian float32 files in row-major order. What it prints
//! (standard output, one JSON object): each kernel's choice and median time, the whole graph's
//! median wall time (launches and the gaps between them), and where the outputs went.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};
use kfoundry_rt::model::select::choose;
use kfoundry_rt::model::spec::Sizes;
use kfoundry_rt::model::variant::Variant;
use kfoundry_rt::opencl::session::Session;
use kfoundry_tooling::lockfile::Lockfile;

use crate::cli::RunArgs;
use kfoundry_tune::error::usage;

pub fn run(args: &RunArgs) -> Result<()> {
    super::import::check_name(&args.name)?;
    let imported = super::import::read_model(&args.model, &args.dims, &args.precision)?;
    let g = &imported.fused.graph;
    // The kernels' specifications as the macro reads them: the crate written to a temporary
    // folder and its annotations read back.
    let tmp = tempfile::tempdir().context("a temporary folder")?;
    let files = kfoundry_import::emit::files(
        &imported,
        &kfoundry_import::emit::CrateOptions {
            name: &args.name,
            kfoundry: "\"0\"",
            model_file: "model.onnx",
            weights: kfoundry_import::emit::Weights::File,
        },
    );
    // Only what the annotations read: the crate's lib.rs and its kernels (not its weights).
    for (path, data) in files
        .iter()
        .filter(|(p, _)| p.starts_with("src") || p.starts_with("kernels"))
    {
        let p = tmp.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap_or(tmp.path()))?;
        std::fs::write(&p, data)?;
    }
    let kernels = kfoundry_tune::pipeline::discover::kernels_in_file(
        &tmp.path().join("src/lib.rs"),
        &args.name,
        tmp.path(),
    )
    .map_err(|e| anyhow::anyhow!("the generated crate's annotations: {}", e.join("; ")))?;
    anyhow::ensure!(
        kernels.len() == imported.kernels.len(),
        "{} annotations read back for {} generated kernels",
        kernels.len(),
        imported.kernels.len()
    );
    let lock = match &args.lockfile {
        None => None,
        Some(path) => Some((
            path,
            Lockfile::read(path)?
                .ok_or_else(|| usage(format!("--lockfile {}: no such file", path.display())))?,
        )),
    };

    let device = kfoundry_tune::device::select(args.device.as_deref())?;
    let (platform, cl_device) = kfoundry_rt::list_devices()?
        .into_iter()
        .nth(device.index)
        .context("the selected device")?;
    let session = Session::new(platform, cl_device)?;
    let slots = kfoundry_import::emit::Slots::new(&imported);
    let mut buffers = Vec::with_capacity(slots.len.len());
    for &n in &slots.len {
        buffers.push(session.alloc(4 * n.max(1))?);
    }
    let bytes = |data: &[f32]| -> Vec<u8> { data.iter().flat_map(|v| v.to_le_bytes()).collect() };
    for &(slot, v) in &slots.constants {
        buffers[slot].write(0, &bytes(g.values[v].data.as_deref().unwrap_or_default()))?;
    }
    if !args.inputs.is_empty() && args.inputs.len() != slots.inputs.len() {
        return Err(usage(format!(
            "the model takes {} input(s), {} --input given",
            slots.inputs.len(),
            args.inputs.len()
        )));
    }
    for (i, (&slot, &v)) in slots.inputs.iter().zip(&g.inputs).enumerate() {
        let n = g.values[v].numel();
        let data = match args.inputs.get(i) {
            Some(path) => {
                let raw = kfoundry_tooling::files::read_bounded(path, 4 * n as u64 + 1, "input")
                    .map_err(|e| usage(e.to_string()))?;
                if raw.len() != 4 * n {
                    return Err(usage(format!(
                        "--input {}: {} bytes where input {i} `{}` of shape {:?} needs {} (float32)",
                        path.display(),
                        raw.len(),
                        kfoundry_tune::text::printable(&g.values[v].name),
                        g.values[v].shape,
                        4 * n
                    )));
                }
                raw
            }
            None => bytes(&random(n, i as u64 + 1)),
        };
        buffers[slot].write(0, &data)?;
    }

    // Each kernel's choice, built once.
    let mut plan = Vec::new();
    let mut report = Vec::new();
    for (k, kernel) in imported.kernels.iter().zip(&kernels) {
        let spec = &kernel.spec;
        let sizes: Sizes = k
            .sizes
            .iter()
            .map(|s| (s.name.clone(), s.full as i64))
            .collect();
        // The lockfile's variants of this very kernel exactly as the macro embeds them (same
        // fingerprint, each checked against the annotation, with its device's description); a
        // variant the annotation does not allow fails the run as it fails a build.
        // Generated-source variants are left to the shipped binary. A lockfile that has no
        // entry for a kernel, or one of other sources (another --name, --precision or
        // version), is said, not silently read as "run the reference".
        let (variants, entry): (Vec<Variant>, &str) = match &lock {
            None => (Vec::new(), "no lockfile"),
            Some((path, l)) => match l.kernels.get(&spec.id) {
                None => (Vec::new(), "no entry"),
                Some(e) if e.fingerprint != kfoundry_tooling::fingerprint(spec)? => {
                    (Vec::new(), "stale entry (other sources)")
                }
                Some(_) => {
                    let embedded =
                        kfoundry_tooling::embed::embeddable(path, l, spec).map_err(|problems| {
                            usage(format!(
                                "--lockfile {}: `{}`: {}",
                                path.display(),
                                spec.id,
                                problems.join("; ")
                            ))
                        })?;
                    (
                        embedded
                            .variants
                            .into_iter()
                            .filter(|v| v.source.is_none())
                            .collect(),
                        "entry",
                    )
                }
            },
        };
        if lock.is_some() && entry != "entry" {
            eprintln!(
                "warning: `{}`: the lockfile has {entry}; it runs its reference",
                spec.id
            );
        }
        let choice = choose(
            spec,
            &variants,
            &device.key,
            Some(&device.info),
            Some(&device.traits),
            &sizes,
            None,
        )
        .map_err(|e| anyhow::anyhow!("`{}` cannot run at the graph's sizes: {e}", spec.id))?;
        let program = session.build_spec(spec, &spec.source, &choice.params)?;
        let cl_kernel = session.kernel(&program, &spec.signature.name)?;
        let by_name: BTreeMap<&str, usize> = k
            .buffers
            .iter()
            .map(|b| (b.name.as_str(), slots.slot(&imported, b.value)))
            .collect();
        let order: Vec<usize> = spec.caller_args().map(|a| by_name[a.name()]).collect();
        report.push(serde_json::json!({ "kernel": spec.id, "lockfile": entry, "step": choice.step.to_string(), "params": choice.params }));
        plan.push((spec, cl_kernel, choice.params, sizes, order));
    }
    let launch_all = |profile: bool| -> Result<Vec<f64>> {
        let mut timings = Vec::new();
        for (spec, kernel, params, sizes, order) in &plan {
            let args: Vec<_> = order.iter().map(|&s| buffers[s].arg()).collect();
            timings.push(session.launch(spec, kernel, params, sizes, &args, profile)?);
        }
        session.finish()?;
        timings
            .into_iter()
            .map(|t| t.map_or(Ok(0.0), |t| t.seconds().map_err(anyhow::Error::from)))
            .collect()
    };
    launch_all(false)?;
    let mut outputs = Vec::new();
    if let Some(dir) = &args.output_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    for (o, (&slot, &v)) in slots.outputs.iter().zip(&g.outputs).enumerate() {
        let n = g.values[v].numel();
        let mut raw = vec![0u8; 4 * n];
        buffers[slot].read(0, &mut raw)?;
        let mut entry = serde_json::json!({ "name": kfoundry_tune::text::printable(&g.values[v].name), "shape": g.values[v].shape });
        if let Some(dir) = &args.output_dir {
            let path = dir.join(format!("{o}.bin"));
            std::fs::write(&path, &raw)
                .with_context(|| format!("cannot write {}", path.display()))?;
            entry["file"] = serde_json::json!(path);
        }
        outputs.push(entry);
    }
    // Timed: the whole graph's wall time (host clock around launches and finish) and each
    // kernel's profiling events.
    let (mut walls, mut per_kernel) = (Vec::new(), vec![Vec::new(); plan.len()]);
    for _ in 0..args.repeats {
        let t = std::time::Instant::now();
        launch_all(false)?;
        walls.push(t.elapsed().as_secs_f64());
        for (i, s) in launch_all(true)?.into_iter().enumerate() {
            per_kernel[i].push(s);
        }
    }
    for (r, times) in report.iter_mut().zip(per_kernel.iter_mut()) {
        r["median_ms"] = serde_json::json!(median(times) * 1e3);
    }
    let kernels_ms: f64 = per_kernel.iter_mut().map(|t| median(t)).sum::<f64>() * 1e3;
    let summary = serde_json::json!({
        "model": args.model,
        "device": device.key.to_string(),
        "kernels": report,
        "outputs": outputs,
        "repeats": args.repeats,
        "graph_wall_ms": median(&mut walls) * 1e3,
        "kernels_ms": kernels_ms,
    });
    println!("{summary}");
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `len` values in [-1, 1) from `seed` (for timing runs without given inputs).
fn random(len: usize, seed: u64) -> Vec<f32> {
    use rand::{Rng as _, SeedableRng as _};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}
