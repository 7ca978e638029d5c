//! `cargo kfoundry tune`: discover → for each kernel and workload, search with the engine over
//! a supervised [`Bench`](crate::evaluate::Bench) on the chosen device (checkpointed after every
//! evaluation) → [`finalists`](crate::finalists): prove the best candidates at other sizes and
//! re-measure them against the reference → [`record`](crate::record) the winners in
//! `Kfoundry.lock` → summary table.
//!
//! A kernel or workload whose tune fails is reported and the run goes on with the others;
//! whatever finished is recorded, and the exit status says that something failed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use indicatif::{ProgressBar, ProgressStyle};
use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes, Workload};
use kfoundry_rt::model::variant::Variant;
use kfoundry_search::{Evaluation, Record, SearchState, Settings as SearchSettings, Space, Step};
use kfoundry_tooling::fingerprint;
use kfoundry_tooling::generated;
use kfoundry_tooling::lockfile::Lockfile;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{Checkpoints, Key};
use crate::cli::{MessageFormat, TuneArgs};
use crate::devices::{self, Selected};
use crate::discover::{sources, Kernel};
use crate::evaluate::supervisor::Supervised;
use crate::evaluate::{config_of, fmt_sizes, params_of, Settings as EvalSettings};
use crate::exit::Exit;
use crate::finalists::{decide, Finalist, FINALISTS};
use crate::interrupt;
use crate::llm::{DeviceDescription, LlmConfig};
use crate::peaks::{self, Peaks};
use crate::record::{check_writable, record};
use crate::report::{fmt_ns, Table};
use crate::source_search::{Context as SourceContext, SourceSearch};

/// The outcome of tuning one kernel at one workload.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// The winner's worst output error against the reference over its input sets.
    pub max_abs_error: Option<f64>,
    pub rel_error_norm: Option<f64>,
    /// The other sizes the winner was checked at.
    pub probed_sizes: Vec<String>,
    /// Every size set the winner was verified at (the workload's first): dispatch uses it only
    /// within their range.
    #[serde(default)]
    pub proven: Vec<Sizes>,
    /// Finalists that were not shipped: (parameters, why) — wrong or failing at another size,
    /// or failing on re-measure.
    pub probe_rejections: Vec<(Params, String)>,
    /// Why the reference (or an earlier complete result) is shipped rather than a candidate.
    #[serde(default)]
    pub note: Option<String>,
    /// The search was interrupted and the lockfile's complete earlier result was kept.
    #[serde(default)]
    pub kept_existing: bool,
    /// Failed candidates and their build logs, when any failed.
    pub failure_log: Option<PathBuf>,
    /// True when the search was cut short by Ctrl-C/SIGTERM (resume to continue it).
    pub interrupted: bool,
    /// Roofline floor (from `cost(...)` and the device's measured peaks) ÷ the winner's time.
    pub roofline: Option<f64>,
    /// The winner's source when it is a source-level variant from the language model.
    pub generated_source: Option<String>,
    /// What the language model did, when one is configured.
    pub llm: Option<LlmSummary>,
}

/// The language model's part in one tune.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LlmSummary {
    pub requests: u64,
    pub tokens: u64,
    /// Mutations asked for, and how many passed verification.
    pub mutations: usize,
    pub accepted: usize,
    /// Source variants in the archive.
    pub elites: usize,
    /// Meta-requests that rewrote prompts, and the prompt variants now in the population.
    pub meta_requests: u32,
    pub prompt_variants: usize,
    /// Why the model stopped being asked (a refused key, an unknown model, a spent budget).
    pub disabled: Option<String>,
}

/// Where the tune reads and writes, and how it talks.
struct Run<'a> {
    args: &'a TuneArgs,
    device: Selected,
    checkpoints: Checkpoints,
    /// The device's measured peaks, when some kernel declares a cost.
    peaks: Option<Peaks>,
    /// The language model, when one is configured (and not `--no-llm`).
    llm: Option<LlmConfig>,
    /// No progress bars and no informational lines on stdout (-q or JSON messages).
    quiet: bool,
    /// Notes on stderr (resuming, waiting for the lock): all but -q.
    notes: bool,
    json: bool,
}

pub fn run(args: &TuneArgs) -> Result<Exit> {
    let json = args.ws.message_format == MessageFormat::Json;
    let quiet = args.ws.quiet || json;
    let src = sources(&args.ws, args.bundle.as_deref(), args.lockfile.as_deref())?;
    let (all, lock_path, from_workspace) = (src.kernels.clone(), src.lockfile.clone(), src.from_workspace);
    let state_dir = args.state_dir.clone().unwrap_or(src.state_dir);
    let kernels: Vec<&Kernel> = all.iter().filter(|k| args.kernel.as_deref().is_none_or(|f| k.spec.id.contains(f))).collect();
    if kernels.is_empty() {
        bail!("no annotated kernel found{}", args.kernel.as_deref().map(|f| format!(" matching `{f}`")).unwrap_or_default());
    }
    // Fail before tuning (not after an hour) when the lockfile cannot be read or written.
    let had_lockfile = Lockfile::read(&lock_path)?.is_some();
    check_writable(&lock_path)?;
    let device = devices::select(args.device.as_deref())?;
    interrupt::install()?;
    if !quiet {
        eprintln!("tuning {} kernel(s) on {} ({})", kernels.len(), device.info.name, device.key);
    }
    let peaks = if kernels.iter().any(|k| k.spec.cost.is_some()) {
        match peaks::of(&device, false) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("warning: cannot measure the device's peaks, no roofline figures: {e:#}");
                None
            }
        }
    } else {
        None
    };
    let llm = llm_config(args, &src.metadata)?;
    if let (Some(cfg), true) = (&llm, !args.ws.quiet) {
        eprintln!(
            "language model: {} at {} (one mutation per {} evaluations, at most {} requests)",
            cfg.model, cfg.base_url, cfg.every, cfg.max_requests
        );
    }
    let run = Run { args, device, checkpoints: Checkpoints::new(state_dir.join("checkpoints")), peaks, llm, quiet, notes: !args.ws.quiet, json };

    let mut outcomes = Vec::new();
    let mut done_keys = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut interrupted = false;
    'kernels: for kernel in &kernels {
        if kernel.spec.params.is_empty() {
            if run.notes {
                eprintln!("{}: `{}` declares no parameters: nothing to tune, it runs its reference", kernel.location(), kernel.spec.id);
            }
            continue;
        }
        let workloads: Vec<&Workload> =
            kernel.spec.workloads.iter().filter(|w| args.workloads.is_empty() || args.workloads.contains(&w.name)).collect();
        let mut variants = Vec::new();
        for workload in workloads {
            if interrupt::requested() {
                interrupted = true;
                break;
            }
            let existing = complete_entry(&lock_path, &kernel.spec, &run.device, workload);
            let outcome = match tune_one(&run, &kernel.spec, workload, &state_dir, existing.as_ref()) {
                Ok(Some(outcome)) => outcome,
                Ok(None) => {
                    interrupted = true;
                    break;
                }
                Err(e) => {
                    let what = format!("{}: tuning `{}` at workload `{}`: {e:#}", kernel.location(), kernel.spec.id, workload.name);
                    if json {
                        println!(
                            "{}",
                            serde_json::json!({ "reason": "failed", "kernel": kernel.spec.id, "workload": workload.name, "error": format!("{e:#}") })
                        );
                    }
                    eprintln!("error: {what}");
                    failed.push(what);
                    continue;
                }
            };
            if json {
                println!("{}", serde_json::json!({ "reason": "tuned", "result": outcome }));
            }
            if !outcome.kept_existing {
                let source = match &outcome.generated_source {
                    Some(text) => Some(generated::write(&lock_path, &kernel.spec.id, text).with_context(|| {
                        format!("cannot store the generated source of `{}` beside {}{}", kernel.spec.id, lock_path.display(), RESUME_HINT)
                    })?),
                    None => None,
                };
                variants.push(Variant {
                    device: run.device.key.to_string(),
                    workload: workload.name.clone(),
                    sizes: workload.sizes.clone(),
                    params: outcome.params.clone(),
                    time_ns: outcome.best_ns,
                    reference_time_ns: outcome.reference_ns,
                    evaluations: outcome.evaluations as u64,
                    failures: outcome.failures as u64,
                    source,
                    proven: outcome.proven.clone(),
                    partial: outcome.interrupted,
                    device_info: None,
                });
            }
            interrupted |= outcome.interrupted;
            done_keys.push((kernel.spec.id.clone(), fingerprint(&kernel.spec)?, workload.name.clone()));
            outcomes.push(outcome);
            if interrupted {
                break;
            }
        }
        if !variants.is_empty() {
            record(&lock_path, &kernel.spec, &run.device, variants, !run.notes)
                .map_err(|e| e.context(RESUME_HINT.trim_start_matches(['\n', ';', ' '])))?;
        }
        if interrupted {
            break 'kernels;
        }
    }

    if !had_lockfile && from_workspace && !outcomes.is_empty() {
        mark_changed(&kernels);
    }
    if !interrupted {
        // The run is complete and recorded: its checkpoints have served.
        let device = run.device.key.to_string();
        for (kernel, fingerprint, workload) in &done_keys {
            run.checkpoints.remove(&Key { kernel, fingerprint, workload, device: &device, seed: args.seed });
        }
    }
    if json {
        println!(
            "{}",
            serde_json::json!({ "reason": "finished", "lockfile": lock_path, "results": outcomes.len(), "failed": failed.len(), "interrupted": interrupted })
        );
    } else {
        print!("{}", summary(&outcomes));
        for o in &outcomes {
            if let Some(note) = &o.note {
                eprintln!("{} @ {}: {note}", o.kernel, o.workload);
            }
            if let Some(log) = &o.failure_log {
                eprintln!("{} @ {}: {} failed candidate(s), see {}", o.kernel, o.workload, o.failures, log.display());
            }
        }
        if !quiet && !outcomes.is_empty() {
            eprintln!("wrote {}", lock_path.display());
        }
    }
    if !failed.is_empty() {
        eprintln!("error: {} of {} tune(s) failed (the others are recorded):", failed.len(), failed.len() + outcomes.len());
        for f in &failed {
            eprintln!("  {f}");
        }
    }
    if interrupted {
        eprintln!(
            "interrupted: what was found so far is in {}; `cargo kfoundry tune --resume` (same arguments) continues from {}",
            lock_path.display(),
            run.checkpoints.dir().display()
        );
        return Ok(Exit::Interrupted);
    }
    if !failed.is_empty() {
        return Ok(Exit::PartlyFailed);
    }
    Ok(Exit::Success)
}

/// Said when results cannot be written: they are not lost.
const RESUME_HINT: &str = "; the results are kept in the checkpoints: fix this and run `cargo kfoundry tune --resume` with the same arguments to write them without searching again";

/// The complete result the lockfile already holds for this kernel (same fingerprint), device
/// and workload, if any: what an interrupted search must beat to replace it.
fn complete_entry(lock_path: &Path, spec: &KernelSpec, device: &Selected, workload: &Workload) -> Option<Finalist> {
    let lock = Lockfile::read(lock_path).ok()??;
    let current = fingerprint(spec).ok()?;
    let entry = lock.kernels.get(&spec.id).filter(|e| e.fingerprint == current)?;
    let key = device.key.to_string();
    let v = entry.variants.iter().find(|v| v.device == key && v.workload == workload.name && !v.partial)?;
    let source = match &v.source {
        Some(hash) => Some(generated::read_verified(lock_path, &spec.id, hash).ok()?.1),
        None => None,
    };
    Some((v.params.clone(), source))
}

/// Searches one kernel at one workload, resuming from its checkpoint when asked. `None` when
/// interrupted before any candidate (the reference included) was measured.
fn tune_one(run: &Run, spec: &KernelSpec, workload: &Workload, state_dir: &Path, existing: Option<&Finalist>) -> Result<Option<Outcome>> {
    let args = run.args;
    let started = Instant::now();
    let fingerprint = fingerprint(spec)?;
    let device_key = run.device.key.to_string();
    let key = Key { kernel: &spec.id, fingerprint: &fingerprint, workload: &workload.name, device: &device_key, seed: args.seed };
    let mut resumed = None;
    if args.resume {
        let (ck, why) = run.checkpoints.load(&key)?;
        if let (Some(why), true) = (why, run.notes) {
            eprintln!("note: {why}");
        }
        resumed = ck;
    }
    if let Some(done) = resumed.as_mut().and_then(|ck| ck.finished.take()) {
        match check_finished(spec, workload, &done) {
            Ok(()) => {
                if run.notes {
                    eprintln!("{} @ {}: finished in the interrupted run; kept", spec.id, workload.name);
                }
                return Ok(Some(done));
            }
            Err(why) => {
                eprintln!("note: the checkpoint's result of {} @ {} is not usable ({why}); searching afresh", spec.id, workload.name);
                resumed = None;
            }
        }
    }
    let fresh = fresh_search(spec, args)?;
    if let Some(ck) = &resumed {
        // The checkpoint must be of this very search: the kernel's space and the engine's settings.
        let expected = fresh.settings();
        let same_settings = SearchSettings { max_evals: None, max_seconds: None, stagnation: None, ..ck.state.settings().clone() }
            == SearchSettings { max_evals: None, max_seconds: None, stagnation: None, ..expected.clone() };
        if ck.state.space() != fresh.space() || !same_settings {
            eprintln!("note: the checkpoint of {} @ {} was made for another search space or settings; searching afresh", spec.id, workload.name);
            resumed = None;
        }
    }

    let settings = EvalSettings { repeats: args.repeats, seed: args.seed, ..EvalSettings::default() };
    // Candidates run in a supervised worker process: one that hangs or crashes is recorded as
    // failed and the search goes on with a fresh worker.
    let mut bench = Supervised::start(spec, &workload.sizes, run.device.index, settings, args.limits.time_limits())?;
    let max_evals = Some(args.budget_evals.max(1));
    let mut source_search = match (&run.llm, resumed.as_mut().and_then(|ck| ck.source_search.take())) {
        (Some(cfg), Some(st)) => match SourceSearch::resume(cfg, st) {
            Ok(ss) => Some(ss),
            Err(e) => {
                eprintln!("note: {} @ {}: the language model's saved state is not usable ({e:#}); its search starts afresh", spec.id, workload.name);
                Some(SourceSearch::new(cfg, args.seed)?)
            }
        },
        (Some(cfg), None) => Some(SourceSearch::new(cfg, args.seed)?),
        (None, _) => None,
    };
    let mut state = match resumed {
        Some(ck) => {
            let mut state = ck.state;
            let stagnation = state.settings().stagnation;
            state.set_budgets(max_evals, args.budget_secs, stagnation);
            if run.notes {
                eprintln!("{} @ {}: resuming after {} evaluations", spec.id, workload.name, state.history().len());
            }
            state
        }
        None => fresh,
    };

    let bar = if run.quiet { ProgressBar::hidden() } else { ProgressBar::new(args.budget_evals as u64) };
    bar.set_style(
        ProgressStyle::with_template("{prefix:.bold} [{bar:30}] {pos}/{len} evals  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{} @ {}", spec.id, workload.name));
    bar.set_position(state.history().len() as u64);
    let verbose = args.ws.verbose > 0 && !run.quiet;
    let validity = bench.validity();
    let valid = |c: &kfoundry_search::Config| validity.accepts(c);
    let mut interrupted = false;
    // The parameter search and the language model's mutations share the budget: a mutation
    // is due every `every` evaluations, and once the parameter search has nothing left to
    // try, the remaining budget goes to mutations.
    let mut params_done = false;
    loop {
        if interrupt::requested() {
            interrupted = true;
            break;
        }
        let mutations = source_search.as_ref().map_or(0, |ss| ss.records.len());
        let total = state.history().len() + mutations;
        if total >= args.budget_evals.max(1) {
            break;
        }
        let llm_ready = source_search.as_ref().is_some_and(|ss| ss.mutator().disabled().is_none());
        let llm_due = llm_ready && (params_done || source_search.as_ref().is_some_and(|ss| ss.wants(total)));
        if let (true, Some(ss), Some((best, best_time)), Some(reference_time)) =
            (llm_due, source_search.as_mut(), state.progress().best, reference_time(spec, state.history()))
        {
            let floor = |p: &Params| run.peaks.and_then(|pk| pk.kernel_floor(spec, p, &workload.sizes));
            let cx = SourceContext {
                spec,
                device: DeviceDescription::from_info(&run.device.info, bench.limits().preferred_multiple, bench.limits().sub_groups),
                reference_time,
                best_params: params_of(spec, best),
                best_time,
                floor: &floor,
            };
            bar.set_message("asking the language model");
            let record = ss.step(&mut bench, &cx);
            run.checkpoints.save(&key, &state, Some(&ss.state()), None)?;
            bar.set_position((total + 1) as u64);
            if run.json {
                println!("{}", serde_json::json!({ "reason": "llm", "kernel": spec.id, "workload": workload.name, "result": record }));
            }
            if verbose || (run.notes && record.outcome == "accepted") {
                bar.println(format!("  language model: {} {}", record.outcome, first_line(&record.detail)));
            }
            continue;
        }
        if params_done {
            break;
        }
        let Step::Evaluated(i) = state.step(&mut bench, &valid) else {
            params_done = true;
            continue;
        };
        // Saved before it is reported: whatever was reported is never evaluated again.
        let source_state = source_search.as_ref().map(SourceSearch::state);
        run.checkpoints.save(&key, &state, source_state.as_ref(), None)?;
        let r = &state.history()[i];
        let p = state.progress();
        bar.set_position((p.evaluations + source_search.as_ref().map_or(0, |ss| ss.records.len())) as u64);
        if let Some((_, t)) = p.best {
            bar.set_message(format!("best {}  failures {}", fmt_ns(t * 1e9), p.failures));
        }
        if run.json {
            let v = serde_json::json!({ "reason": "evaluation", "kernel": spec.id, "workload": workload.name,
                "params": params_of(spec, &r.config), "operator": format!("{:?}", r.operator), "outcome": r.outcome });
            println!("{v}");
        }
        if verbose {
            bar.println(format!("  {:?} {} → {}", r.operator, fmt_params(&params_of(spec, &r.config)), describe(&r.outcome)));
        }
        if let (Some(target), Some((best, t)), Some(peaks)) = (args.roofline_stop, p.best, run.peaks) {
            let floor = peaks.kernel_floor(spec, &params_of(spec, best), &workload.sizes);
            if floor.is_some_and(|f| f / t >= target) {
                if run.notes {
                    bar.println(format!("{} @ {}: within {:.0}% of the roofline; stopping", spec.id, workload.name, target * 100.0));
                }
                break;
            }
        }
    }
    bar.finish_and_clear();
    if state.progress().best.is_none() && interrupted {
        return Ok(None);
    }

    // The finalists, fastest first: each proven at other sizes and re-measured against the
    // reference until one wins (or the reference stays).
    let sources: Vec<(f64, Params, Option<String>)> = source_search
        .as_ref()
        .map(|ss| ss.elites().into_iter().map(|e| (e.time, e.params.clone(), Some(e.source.clone()))).collect())
        .unwrap_or_default();
    let finalists = finalists(spec, state.history(), sources);
    let kernel_id = spec.id.clone();
    let decision = decide(&mut bench, spec, workload, &finalists, existing.filter(|_| interrupted), |r| {
        if run.json {
            println!(
                "{}",
                serde_json::json!({ "reason": r.stage, "kernel": kernel_id, "workload": workload.name, "params": r.params, "rejected": r.reason })
            );
        }
        if run.notes {
            eprintln!("{} @ {}: {} rejected: {}", kernel_id, workload.name, fmt_params(&r.params), r.reason);
        }
    })
    .map_err(|e| anyhow::anyhow!(e))?;
    let (params, generated_source, best_s, ref_s) = (decision.params.clone(), decision.source.clone(), decision.best_s, decision.reference_s);
    let errors = decision.errors;
    let probed_sizes: Vec<String> = decision.proven.iter().skip(1).map(fmt_sizes).collect();
    let env = spec.env(&params, &workload.sizes);
    let per_s = |e: Option<&kfoundry_rt::model::expr::Expr>| e.and_then(|e| e.eval(&env).ok()).map(|v| v as f64 / best_s / 1e9);
    let result = state.result();
    let failure_log = write_failure_log(state_dir, spec, workload, state.history(), &bench.build_failures)?;
    let outcome = Outcome {
        kernel: spec.id.clone(),
        workload: workload.name.clone(),
        sizes: fmt_sizes(&workload.sizes),
        device: device_key.clone(),
        reference_ns: (ref_s * 1e9).round() as u64,
        best_ns: (best_s * 1e9).round() as u64,
        speedup: ref_s / best_s,
        params: params.clone(),
        evaluations: result.evaluations,
        failures: result.failures,
        seconds: started.elapsed().as_secs_f64(),
        gbytes_per_s: per_s(spec.cost.as_ref().and_then(|c| c.bytes.as_ref())),
        gflops: per_s(spec.cost.as_ref().and_then(|c| c.flops.as_ref())),
        max_abs_error: errors.map(|e| e.max_abs),
        rel_error_norm: errors.map(|e| e.rel_norm),
        probed_sizes,
        proven: decision.proven.clone(),
        probe_rejections: decision.rejections.iter().map(|r| (r.params.clone(), r.reason.clone())).collect(),
        note: decision.note.clone(),
        kept_existing: decision.kept_existing,
        failure_log,
        interrupted,
        roofline: run.peaks.and_then(|p| p.kernel_floor(spec, &params, &workload.sizes)).map(|f| f / best_s),
        generated_source,
        llm: source_search.as_ref().map(|ss| {
            let spent = ss.spent();
            LlmSummary {
                requests: spent.requests as u64,
                tokens: spent.tokens,
                mutations: ss.records.len(),
                accepted: ss.records.iter().filter(|r| r.outcome == "accepted").count(),
                elites: ss.elites().len(),
                meta_requests: ss.mutator().counters().meta_requests,
                prompt_variants: ss.mutator().population().variants().len(),
                disabled: ss.mutator().disabled().map(str::to_string),
            }
        }),
    };
    if !interrupted {
        let source_state = source_search.as_ref().map(SourceSearch::state);
        run.checkpoints.save(&key, &state, source_state.as_ref(), Some(&outcome))?;
    }
    Ok(Some(outcome))
}

/// The search a tune of `spec` starts with: the annotation's space, the engine's default
/// settings with this run's seed and budgets, the reference first.
fn fresh_search(spec: &KernelSpec, args: &TuneArgs) -> Result<SearchState> {
    let space = Space::new(spec.params.iter().map(|p| kfoundry_search::Param { name: p.name.clone(), values: p.values.clone() }).collect())
        .map_err(|e| anyhow::anyhow!("search space: {e}"))?;
    let reference = config_of(spec, &spec.reference);
    let settings = SearchSettings { seed: args.seed, max_evals: Some(args.budget_evals), max_seconds: args.budget_secs, ..SearchSettings::default() };
    SearchState::new(space, settings, Some(&reference)).map_err(|e| anyhow::anyhow!("{e}"))
}

/// A finished result read back from a checkpoint is recorded only if it is a valid lockfile
/// variant of this kernel and workload (anyone could have edited the checkpoint).
fn check_finished(spec: &KernelSpec, workload: &Workload, done: &Outcome) -> Result<(), String> {
    let declared = match &done.generated_source {
        Some(text) => {
            match kfoundry_rt::model::signature::find_kernel(text, Some(&spec.signature.name)) {
                Ok(sig) if sig.args == spec.signature.args => {}
                _ => return Err("its generated source does not have the kernel's signature".into()),
            }
            kfoundry_rt::model::declared::declared_params(text).map_err(|e| format!("its source, line {}: {}", e.line, e.problem))?
        }
        None => Vec::new(),
    };
    let variant = Variant {
        device: done.device.clone(),
        workload: workload.name.clone(),
        sizes: workload.sizes.clone(),
        params: done.params.clone(),
        time_ns: done.best_ns,
        reference_time_ns: done.reference_ns,
        evaluations: 0,
        failures: 0,
        source: None,
        proven: done.proven.clone(),
        partial: done.interrupted,
        device_info: None,
    };
    kfoundry_rt::model::variant::check_variant(spec, &variant, &declared)?;
    if done.kernel != spec.id || done.workload != workload.name {
        return Err("it belongs to another kernel or workload".into());
    }
    Ok(())
}

/// The fastest distinct successful candidates (configurations of the annotated source, and
/// source-level variants with their defines), at most [`FINALISTS`], then the reference.
fn finalists(spec: &KernelSpec, history: &[Record], sources: Vec<(f64, Params, Option<String>)>) -> Vec<(Params, Option<String>)> {
    let mut ok: Vec<(f64, Params, Option<String>)> =
        history.iter().filter_map(|r| r.outcome.time().map(|t| (t, params_of(spec, &r.config), None))).collect();
    ok.extend(sources);
    ok.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(Params, Option<String>)> = Vec::new();
    for (_, p, s) in ok {
        if out.len() >= FINALISTS {
            break;
        }
        let c = (p, s);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out.push((spec.reference.clone(), None));
    out
}

/// The reference's measured time in the search history.
fn reference_time(spec: &KernelSpec, history: &[Record]) -> Option<f64> {
    history.iter().find(|r| params_of(spec, &r.config) == spec.reference).and_then(|r| r.outcome.time())
}

/// The language model's settings: `--llm-config FILE`, else the workspace's
/// `[workspace.metadata.kfoundry.llm]`, with the environment's overrides; none with `--no-llm`.
fn llm_config(args: &TuneArgs, metadata: &serde_json::Value) -> Result<Option<LlmConfig>> {
    if args.no_llm {
        return Ok(None);
    }
    let wrapped;
    let metadata = match &args.llm_config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            let table: toml::Value = toml::from_str(&text).with_context(|| format!("{}: not valid TOML", path.display()))?;
            wrapped = serde_json::json!({ "kfoundry": { "llm": table } });
            &wrapped
        }
        None => metadata,
    };
    LlmConfig::from_workspace_metadata(metadata).map_err(|e| anyhow::anyhow!("{e}"))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn describe(outcome: &Evaluation) -> String {
    match outcome {
        Evaluation::Ok { time, .. } => fmt_ns(time * 1e9),
        Evaluation::Failed { kind, reason, .. } => format!("{kind:?}: {reason}"),
    }
}

/// Writes every failed candidate (parameters, kind, reason) and the build logs of those that
/// did not build to `<state dir>/logs/<kernel>@<workload>.log`; `None` when nothing failed.
fn write_failure_log(
    state_dir: &Path,
    spec: &KernelSpec,
    workload: &Workload,
    history: &[Record],
    build_logs: &[(Params, String)],
) -> Result<Option<PathBuf>> {
    let failed: Vec<&Record> = history.iter().filter(|r| r.outcome.time().is_none()).collect();
    if failed.is_empty() {
        return Ok(None);
    }
    let mut text = format!("# {} at workload {} ({})\n\n", spec.id, workload.name, fmt_sizes(&workload.sizes));
    for r in failed {
        text.push_str(&format!("{}: {}\n", fmt_params(&params_of(spec, &r.config)), describe(&r.outcome)));
    }
    for (params, log) in build_logs {
        text.push_str(&format!("\n## build log of {}\n{log}\n", fmt_params(params)));
    }
    let dir = state_dir.join("logs");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(kfoundry_tooling::files::state_file_name(&[&spec.id, &workload.name], "log"));
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Some(path))
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
    let mut t =
        Table::new(&["kernel", "workload", "reference", "best", "speedup", "evals", "failures", "evals/s", "roofline", "rel err", "parameters"]);
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
            o.roofline.map_or("-".to_string(), |r| format!("{:.0}%", r * 100.0)),
            o.rel_error_norm.map_or("-".to_string(), |e| format!("{e:.1e}")),
            fmt_params(&o.params),
        ]);
    }
    t.render()
}
