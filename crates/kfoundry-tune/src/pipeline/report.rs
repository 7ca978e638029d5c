//! Stage 6, report: the result of each tune (times, speedup, errors, roofline, what was
//! rejected and why), the failure logs, the messages and the summary table, and the exit
//! status of the run.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kfoundry_rt::model::expr::Expr;
use kfoundry_rt::model::spec::{KernelSpec, Params, Workload};
use kfoundry_search::Record;

use super::discover::Kernel;
use super::finalists::{Decision, Rejection};
use super::plan::Plan;
use super::search::Searched;
use crate::error::Exit;
use crate::evaluate::supervisor::Supervised;
use crate::evaluate::{fmt_sizes, params_of};
use crate::messages::{Message, TuneResult};
use crate::text::{describe, fmt_ns, fmt_params, Table};

/// What the run did so far.
#[derive(Default)]
pub struct Tally {
    pub results: Vec<TuneResult>,
    /// (kernel, fingerprint, workload) of each finished tune: their checkpoints have served.
    pub done: Vec<(String, String, String)>,
    /// What failed, with where.
    pub failed: Vec<String>,
    pub interrupted: bool,
}

/// The result of one tune from its search and the finalists' decision.
pub fn result_of(
    plan: &Plan,
    spec: &KernelSpec,
    workload: &Workload,
    searched: &Searched,
    decision: &Decision,
    bench: &Supervised,
    seconds: f64,
) -> Result<TuneResult> {
    let (params, best_s, ref_s) = (&decision.params, decision.best_s, decision.reference_s);
    let env = spec.env(params, &workload.sizes);
    let per_s = |e: Option<&Expr>| {
        e.and_then(|e| e.eval(&env).ok())
            .map(|v| v as f64 / best_s / 1e9)
    };
    let result = searched.state.result();
    let failure_log = write_failure_log(
        &plan.state_dir,
        spec,
        workload,
        searched.state.history(),
        &bench.build_failures,
    )?;
    Ok(TuneResult {
        kernel: spec.id.clone(),
        workload: workload.name.clone(),
        sizes: fmt_sizes(&workload.sizes),
        device: plan.device.key.to_string(),
        reference_ns: (ref_s * 1e9).round() as u64,
        best_ns: (best_s * 1e9).round() as u64,
        speedup: ref_s / best_s,
        params: params.clone(),
        evaluations: result.evaluations,
        failures: result.failures,
        seconds,
        gbytes_per_s: per_s(spec.cost.as_ref().and_then(|c| c.bytes.as_ref())),
        gflops: per_s(spec.cost.as_ref().and_then(|c| c.flops.as_ref())),
        max_abs_error: decision.errors.map(|e| e.max_abs),
        rel_error_norm: decision.errors.map(|e| e.rel_norm),
        probed_sizes: decision.proven.iter().skip(1).map(fmt_sizes).collect(),
        proven: decision.proven.clone(),
        proven_scalars: decision.scalars.clone(),
        proof_seed: Some(decision.proof_seed),
        proof_cases: decision.proof_cases.0,
        proof_cases_skipped: decision.proof_cases.1,
        probe_rejections: decision
            .rejections
            .iter()
            .map(|r| (r.params.clone(), r.reason.clone()))
            .collect(),
        note: decision.note.clone(),
        kept_existing: decision.kept_existing,
        reference_kept: decision.params == spec.reference
            && decision.source.is_none()
            && !decision.kept_existing,
        build_warnings: bench
            .warnings
            .lock()
            .map(|w| w.counts.iter().map(|(t, n)| (t.clone(), *n)).collect())
            .unwrap_or_default(),
        failure_log,
        interrupted: searched.interrupted,
        roofline: plan
            .peaks
            .and_then(|p| p.kernel_floor(spec, params, &workload.sizes))
            .map(|f| f / best_s),
        generated_source: decision.source.clone(),
        llm: searched.language_model.as_ref().map(|ss| ss.summary()),
    })
}

/// Says that a finalist was rejected.
pub fn rejected(plan: &Plan, spec: &KernelSpec, workload: &Workload, r: &Rejection) {
    if plan.output.json {
        Message::Rejected {
            kernel: spec.id.clone(),
            workload: workload.name.clone(),
            stage: r.stage.to_string(),
            params: r.params.clone(),
            why: r.reason.clone(),
        }
        .emit();
    }
    if plan.output.notes {
        eprintln!(
            "{} @ {}: {} rejected: {}",
            spec.id,
            workload.name,
            fmt_params(&r.params),
            r.reason
        );
    }
}

/// Says that the tune of `kernel` at `workload` failed; the run goes on.
pub fn failed(
    plan: &Plan,
    kernel: &Kernel,
    workload: &Workload,
    e: &anyhow::Error,
    tally: &mut Tally,
) {
    if plan.output.json {
        Message::Failed {
            kernel: kernel.spec.id.clone(),
            workload: workload.name.clone(),
            error: format!("{e:#}"),
        }
        .emit();
    }
    let what = format!(
        "{}: tuning `{}` at workload `{}`: {e:#}",
        kernel.location(),
        kernel.spec.id,
        workload.name
    );
    eprintln!("error: {what}");
    tally.failed.push(what);
}

/// A kernel whose reference does not build (found before any search): failed at every
/// workload it would have been tuned at, said once.
pub fn reference_broken(plan: &Plan, kernel: &Kernel, why: &str, tally: &mut Tally) {
    if plan.output.json {
        for workload in plan.workloads(&kernel.spec) {
            Message::Failed {
                kernel: kernel.spec.id.clone(),
                workload: workload.name.clone(),
                error: why.to_string(),
            }
            .emit();
        }
    }
    let what = format!("{}: `{}`: {why}", kernel.location(), kernel.spec.id);
    eprintln!("error: {what}");
    tally.failed.push(what);
}

/// The end of the run: removes the checkpoints of a complete run, prints the summary (or the
/// last message), and returns the exit status.
pub fn finish(plan: &Plan, tally: &Tally) -> Exit {
    if !tally.interrupted {
        // The run is complete and recorded: its checkpoints have served.
        let device = plan.device.key.to_string();
        for (kernel, fingerprint, workload) in &tally.done {
            plan.checkpoints.remove(&crate::checkpoint::Key {
                kernel,
                fingerprint,
                workload,
                device: &device,
                seed: plan.options.seed,
            });
        }
    }
    if plan.output.json {
        Message::Finished {
            lockfile: plan.lockfile.clone(),
            results: tally.results.len(),
            failed: tally.failed.len(),
            interrupted: tally.interrupted,
        }
        .emit();
    } else {
        print!("{}", summary(&tally.results));
        for o in &tally.results {
            if let Some(note) = &o.note {
                eprintln!("{} @ {}: {note}", o.kernel, o.workload);
            }
            if !o.build_warnings.is_empty() {
                let builds: usize = o.build_warnings.iter().map(|(_, n)| n).sum();
                eprintln!("{} @ {}: the OpenCL compiler warned {builds} time(s) while building candidates; each warning once:", o.kernel, o.workload);
                for (text, n) in &o.build_warnings {
                    eprintln!("  ({n}x) {text}");
                }
            }
            if let Some(log) = &o.failure_log {
                eprintln!(
                    "{} @ {}: {} failed candidate(s), see {}",
                    o.kernel,
                    o.workload,
                    o.failures,
                    log.display()
                );
            }
        }
        if !plan.output.quiet && !tally.results.is_empty() {
            eprintln!("wrote {}", plan.lockfile.display());
        }
    }
    if !tally.failed.is_empty() {
        eprintln!(
            "error: {} of {} tune(s) failed (the others are recorded):",
            tally.failed.len(),
            tally.failed.len() + tally.results.len()
        );
        for f in &tally.failed {
            eprintln!("  {f}");
        }
    }
    if tally.interrupted {
        eprintln!(
            "interrupted: what was found so far is in {}; `cargo kfoundry tune --resume` (same arguments) continues from {}",
            plan.lockfile.display(),
            plan.checkpoints.dir().display()
        );
        return Exit::Interrupted;
    }
    if !tally.failed.is_empty() {
        return Exit::PartlyFailed;
    }
    Exit::Success
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
    let failed: Vec<&Record> = history
        .iter()
        .filter(|r| r.outcome.time().is_none())
        .collect();
    if failed.is_empty() {
        return Ok(None);
    }
    let mut text = format!(
        "# {} at workload {} ({})\n\n",
        spec.id,
        workload.name,
        fmt_sizes(&workload.sizes)
    );
    for r in failed {
        text.push_str(&format!(
            "{}: {}\n",
            fmt_params(&params_of(spec, &r.config)),
            describe(&r.outcome)
        ));
    }
    for (params, log) in build_logs {
        text.push_str(&format!(
            "\n## build log of {}\n{log}\n",
            fmt_params(params)
        ));
    }
    let dir = state_dir.join("logs");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(kfoundry_tooling::files::state_file_name(
        &[&spec.id, &workload.name],
        "log",
    ));
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Some(path))
}

/// The table printed at the end of a tune.
pub fn summary(results: &[TuneResult]) -> String {
    let mut t = Table::new(&[
        "kernel",
        "workload",
        "reference",
        "best",
        "speedup",
        "evals",
        "failures",
        "evals/s",
        "roofline",
        "rel err",
        "parameters",
    ]);
    for o in results {
        t.row(vec![
            o.kernel.clone(),
            o.workload.clone(),
            fmt_ns(o.reference_ns as f64),
            fmt_ns(o.best_ns as f64),
            format!("{:.2}x", o.speedup),
            o.evaluations.to_string(),
            o.failures.to_string(),
            format!("{:.1}", o.evaluations as f64 / o.seconds.max(1e-9)),
            o.roofline
                .map_or("-".to_string(), |r| format!("{:.0}%", r * 100.0)),
            o.rel_error_norm
                .map_or("-".to_string(), |e| format!("{e:.1e}")),
            if o.reference_kept {
                format!(
                    "reference kept ({}): {}",
                    if o.note.is_some() {
                        "see below"
                    } else {
                        "it is the fastest"
                    },
                    fmt_params(&o.params)
                )
            } else if o.kept_existing {
                format!("earlier result kept: {}", fmt_params(&o.params))
            } else {
                fmt_params(&o.params)
            },
        ]);
    }
    t.render()
}
