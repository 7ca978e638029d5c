//! Stage 6, tally: the result of each tune (times, speedup, errors, roofline, what was
//! rejected and why), the failure logs, what failed, and the end of the run with its exit
//! status; each reported to the run's reporter.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kfoundry_rt::model::expr::Expr;
use kfoundry_rt::model::spec::{KernelSpec, Params, Workload};
use kfoundry_search::Record;

use super::discover::Kernel;
use super::finalists::{Decision, Unshipped};
use super::plan::Plan;
use super::search::Searched;
use crate::error::Exit;
use crate::evaluate::supervisor::Supervised;
use crate::evaluate::{fmt_sizes, params_of};
use crate::events::{Failure, Search, TuneEvent};
use crate::messages::TuneResult;
use crate::text::{describe, fmt_params};

/// What the run did so far.
#[derive(Default)]
pub struct Tally {
    pub results: Vec<TuneResult>,
    /// (kernel, fingerprint, workload) of each finished tune: their checkpoints have served.
    pub done: Vec<(String, String, String)>,
    /// What failed, with where.
    pub failed: Vec<Failure>,
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
        search_seconds: searched.state.progress().elapsed,
        phases: None,
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
pub fn rejected(plan: &Plan, spec: &KernelSpec, workload: &Workload, unshipped: &Unshipped) {
    plan.report(TuneEvent::Rejected {
        search: Search {
            kernel: &spec.id,
            workload: &workload.name,
        },
        unshipped,
    });
}

/// Says that the tune of `kernel` at `workload` failed; the run goes on.
pub fn failed(
    plan: &Plan,
    kernel: &Kernel,
    workload: &Workload,
    e: &anyhow::Error,
    tally: &mut Tally,
) {
    let failure = Failure {
        location: kernel.location(),
        kernel: kernel.spec.id.clone(),
        workloads: vec![workload.name.clone()],
        reference: false,
        error: format!("{e:#}"),
    };
    plan.report(TuneEvent::Failed { failure: &failure });
    tally.failed.push(failure);
}

/// A kernel whose reference does not build (found before any search): failed at every
/// workload it would have been tuned at, said once.
pub fn reference_broken(plan: &Plan, kernel: &Kernel, why: &str, tally: &mut Tally) {
    let failure = Failure {
        location: kernel.location(),
        kernel: kernel.spec.id.clone(),
        workloads: plan
            .workloads(&kernel.spec)
            .iter()
            .map(|w| w.name.clone())
            .collect(),
        reference: true,
        error: why.to_string(),
    };
    plan.report(TuneEvent::Failed { failure: &failure });
    tally.failed.push(failure);
}

/// The end of the run: removes the checkpoints of a complete run, reports the end, and
/// returns the exit status.
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
    plan.report(TuneEvent::Finished {
        lockfile: &plan.lockfile,
        checkpoints: plan.checkpoints.dir(),
        results: &tally.results,
        failed: &tally.failed,
        interrupted: tally.interrupted,
    });
    if tally.interrupted {
        Exit::Interrupted
    } else if !tally.failed.is_empty() {
        Exit::PartlyFailed
    } else {
        Exit::Success
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
