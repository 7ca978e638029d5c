//! `cargo kfoundry tune`: discover → for each kernel and workload, search with the engine over
//! a [`Bench`] on the chosen device → record the winners in `Kfoundry.lock` (atomically,
//! keeping other devices' entries) → summary table.

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use indicatif::{ProgressBar, ProgressStyle};
use kfoundry_rt::model::lockfile::{Lockfile, Variant, FILE_NAME};
use kfoundry_rt::model::spec::{KernelSpec, Params, Workload};
use kfoundry_search::{Evaluation, SearchState, Settings as SearchSettings, Space};
use serde::Serialize;

use crate::cli::{MessageFormat, TuneArgs};
use crate::devices::{self, Selected};
use crate::discover::{discover, Bundle, Kernel};
use crate::evaluate::supervisor::{Supervised, TimeLimits};
use crate::evaluate::{config_of, fmt_sizes, median, params_of, Settings as EvalSettings};
use crate::report::{fmt_ns, Table};

/// The outcome of tuning one kernel at one workload.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub kernel: String,
    pub workload: String,
    pub sizes: String,
    pub device: String,
    pub reference_ns: u64,
    pub best_ns: u64,
    pub speedup: f64,
    pub params: Params,
    pub evaluations: usize,
    pub failures: usize,
    pub seconds: f64,
    /// Achieved bandwidth and compute of the winner, from `cost(...)`.
    pub gbytes_per_s: Option<f64>,
    pub gflops: Option<f64>,
}

pub fn run(args: &TuneArgs) -> Result<()> {
    let json = args.ws.message_format == MessageFormat::Json;
    let quiet = args.ws.quiet || json;
    let (all, lock_path, from_workspace) = match &args.bundle {
        Some(bundle) => {
            let lock = args.lockfile.clone().unwrap_or_else(|| FILE_NAME.into());
            (Bundle::read(bundle)?.kernels, lock, false)
        }
        None => {
            let ws = discover(&args.ws)?;
            let lock = args.lockfile.clone().unwrap_or_else(|| ws.lockfile());
            (ws.kernels, lock, true)
        }
    };
    let kernels: Vec<&Kernel> = all
        .iter()
        .filter(|k| args.kernel.as_deref().is_none_or(|f| k.spec.id.contains(f)))
        .collect();
    if kernels.is_empty() {
        bail!("no annotated kernel found{}", args.kernel.as_deref().map(|f| format!(" matching `{f}`")).unwrap_or_default());
    }
    let device = devices::select(args.device.as_deref())?;
    // Fail before tuning (not after an hour) when the existing lockfile cannot be read.
    let had_lockfile = Lockfile::read(&lock_path)?.is_some();
    if !quiet {
        eprintln!("tuning {} kernel(s) on {} ({})", kernels.len(), device.info.name, device.key);
    }

    let mut outcomes = Vec::new();
    for kernel in &kernels {
        let workloads: Vec<&Workload> = kernel
            .spec
            .workloads
            .iter()
            .filter(|w| args.workloads.is_empty() || args.workloads.contains(&w.name))
            .collect();
        let mut variants = Vec::new();
        for workload in workloads {
            let outcome = tune_one(args, &kernel.spec, workload, &device, quiet)
                .with_context(|| format!("{}: tuning `{}` at workload `{}`", kernel.location(), kernel.spec.id, workload.name))?;
            if json {
                println!("{}", serde_json::json!({ "reason": "tuned", "result": outcome }));
            }
            variants.push(Variant {
                device: device.key.to_string(),
                workload: workload.name.clone(),
                sizes: workload.sizes.clone(),
                params: outcome.params.clone(),
                time_ns: outcome.best_ns,
                reference_time_ns: outcome.reference_ns,
                evaluations: outcome.evaluations as u64,
                failures: outcome.failures as u64,
                source: None,
            });
            outcomes.push(outcome);
        }
        record(&lock_path, &kernel.spec, &device, variants, quiet)?;
    }

    if !had_lockfile && from_workspace {
        mark_changed(&kernels);
    }
    if json {
        println!("{}", serde_json::json!({ "reason": "finished", "lockfile": lock_path, "results": outcomes.len() }));
    } else {
        print!("{}", summary(&outcomes));
        if !quiet {
            eprintln!("wrote {}", lock_path.display());
        }
    }
    Ok(())
}

/// Searches one kernel at one workload.
fn tune_one(args: &TuneArgs, spec: &KernelSpec, workload: &Workload, device: &Selected, quiet: bool) -> Result<Outcome> {
    let started = Instant::now();
    let settings = EvalSettings { repeats: args.repeats, seed: args.seed, ..EvalSettings::default() };
    // Candidates run in a supervised worker process: one that hangs or crashes is recorded as
    // failed and the search goes on with a fresh worker.
    let time = TimeLimits { floor: std::time::Duration::from_secs_f64(args.candidate_timeout.max(0.1)), ..TimeLimits::default() };
    let mut bench = Supervised::start(spec, &workload.sizes, device.index, settings, time)?;
    let space = Space::new(
        spec.params.iter().map(|p| kfoundry_search::Param { name: p.name.clone(), values: p.values.clone() }).collect(),
    )
    .map_err(|e| anyhow::anyhow!("search space: {e}"))?;
    let reference = config_of(spec, &spec.reference);
    let search_settings = SearchSettings {
        seed: args.seed,
        max_evals: Some(args.budget_evals.max(1)),
        max_seconds: args.budget_secs,
        ..SearchSettings::default()
    };
    let mut state = SearchState::new(space, search_settings, Some(&reference)).map_err(|e| anyhow::anyhow!("{e}"))?;

    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(args.budget_evals as u64) };
    bar.set_style(
        ProgressStyle::with_template("{prefix:.bold} [{bar:30}] {pos}/{len} evals  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{} @ {}", spec.id, workload.name));
    let verbose = args.ws.verbose > 0 && !quiet;
    let json = args.ws.message_format == MessageFormat::Json;
    let validity = bench.validity();
    let result = state.run(&mut bench, &|c| validity.accepts(c), &mut |p| {
        bar.set_position(p.evaluations as u64);
        if let Some((_, t)) = p.best {
            bar.set_message(format!("best {}  failures {}", fmt_ns(t * 1e9), p.failures));
        }
        if let (true, Some(r)) = (json, p.last) {
            let v = serde_json::json!({ "reason": "evaluation", "kernel": spec.id, "workload": workload.name,
                "params": params_of(spec, &r.config), "operator": format!("{:?}", r.operator), "outcome": r.outcome });
            println!("{v}");
        }
        if verbose {
            if let Some(r) = p.last {
                let params = params_of(spec, &r.config);
                let what = match &r.outcome {
                    Evaluation::Ok { time, .. } => fmt_ns(time * 1e9),
                    Evaluation::Failed { kind, reason, .. } => format!("{kind:?}: {reason}"),
                };
                bar.println(format!("  {:?} {} → {what}", r.operator, fmt_params(&params)));
            }
        }
        true
    });
    bar.finish_and_clear();

    // Final figures: the winner and the reference measured again, alternately, in this run.
    let winner = result.best.as_ref().map(|(c, _)| params_of(spec, c)).unwrap_or_else(|| spec.reference.clone());
    let (mut ref_times, mut best_times) = (Vec::new(), Vec::new());
    let mut remeasure = |params: &Params, what: &str| match bench.evaluate_params(params) {
        Evaluation::Ok { time, .. } => Ok(time),
        Evaluation::Failed { reason, .. } => Err(anyhow::anyhow!("{what} failed on re-measure: {reason}")),
    };
    for _ in 0..3 {
        ref_times.push(remeasure(&spec.reference, "the reference")?);
        best_times.push(remeasure(&winner, "the winner")?);
    }
    let (ref_s, best_s) = (median(&mut ref_times), median(&mut best_times));
    // A winner that is not faster than the reference on re-measure is not worth shipping.
    let (params, best_s) = if best_s < ref_s { (winner, best_s) } else { (spec.reference.clone(), ref_s) };
    let env = spec.env(&params, &workload.sizes);
    let per_s = |e: Option<&kfoundry_rt::model::expr::Expr>| e.and_then(|e| e.eval(&env).ok()).map(|v| v as f64 / best_s / 1e9);
    Ok(Outcome {
        kernel: spec.id.clone(),
        workload: workload.name.clone(),
        sizes: fmt_sizes(&workload.sizes),
        device: device.key.to_string(),
        reference_ns: (ref_s * 1e9).round() as u64,
        best_ns: (best_s * 1e9).round() as u64,
        speedup: ref_s / best_s,
        params,
        evaluations: result.evaluations,
        failures: result.failures,
        seconds: started.elapsed().as_secs_f64(),
        gbytes_per_s: per_s(spec.cost.as_ref().and_then(|c| c.bytes.as_ref())),
        gflops: per_s(spec.cost.as_ref().and_then(|c| c.flops.as_ref())),
    })
}

/// Writes one kernel's results: re-reads the lockfile just before (so that entries written
/// meanwhile are kept), keeps this device's variants of workloads not tuned now, and replaces
/// the file atomically.
fn record(path: &std::path::Path, spec: &KernelSpec, device: &Selected, mut variants: Vec<Variant>, quiet: bool) -> Result<()> {
    let mut lock = Lockfile::read(path)?.unwrap_or_default();
    let fingerprint = spec.fingerprint();
    let tuned: BTreeSet<String> = variants.iter().map(|v| v.workload.clone()).collect();
    let key = device.key.to_string();
    if let Some(entry) = lock.kernels.get(&spec.id).filter(|e| e.fingerprint == fingerprint) {
        let declared: BTreeSet<&str> = spec.workloads.iter().map(|w| w.name.as_str()).collect();
        variants.extend(
            entry
                .variants
                .iter()
                .filter(|v| v.device == key && !tuned.contains(&v.workload) && declared.contains(v.workload.as_str()))
                .cloned(),
        );
    }
    let dropped = lock.record(&spec.id, &fingerprint, &key, device.info.clone(), variants);
    if !quiet && !dropped.is_empty() {
        eprintln!("note: `{}` changed; dropped its stale variants for {}", spec.id, dropped.join(", "));
    }
    lock.write_atomic(path)?;
    Ok(())
}

/// The macro makes rustc track `Kfoundry.lock` once it exists; a crate built before the first
/// tune did not track it. Bumping the modification time of the files holding the annotations
/// makes cargo rebuild them, so the first `cargo build` after the first tune embeds the
/// variants. (Contents are untouched.)
fn mark_changed(kernels: &[&Kernel]) {
    let files: BTreeSet<&std::path::Path> = kernels.iter().map(|k| k.file.as_path()).collect();
    for file in files {
        if let Ok(f) = std::fs::File::options().append(true).open(file) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
    }
}

fn fmt_params(p: &Params) -> String {
    kfoundry_rt::model::spec::fmt_assignments(p, " ")
}

/// The table printed at the end of a tune.
pub fn summary(outcomes: &[Outcome]) -> String {
    let mut t = Table::new(&["kernel", "workload", "reference", "best", "speedup", "evals", "failures", "evals/s", "parameters"]);
    for o in outcomes {
        t.row(vec![
            o.kernel.clone(),
            o.workload.clone(),
            fmt_ns(o.reference_ns as f64),
            fmt_ns(o.best_ns as f64),
            format!("{:.2}x", o.speedup),
            o.evaluations.to_string(),
            o.failures.to_string(),
            format!("{:.1}", o.evaluations as f64 / o.seconds.max(1e-9)),
            fmt_params(&o.params),
        ]);
    }
    t.render()
}
