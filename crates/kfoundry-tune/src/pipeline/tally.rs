//! Stage 6, tally: the result of each tune (times, speedup, errors, roofline, what was
//! rejected and why), the failure logs, what failed, and the end of the run with its exit
//! status; each reported to the run's reporter.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kfoundry_rt::model::expr::Expr;
use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes, Workload};
use kfoundry_rt::model::variant::Variant;
use kfoundry_search::Record;

use super::discover::Kernel;
use super::finalists::{Decision, Unshipped};
use super::plan::Plan;
use super::search::Searched;
use crate::device::peaks::Peaks;
use crate::error::Exit;
use crate::events::{Failure, Search, TuneEvent};
use crate::messages::TuneResult;
use crate::text::{describe, fmt_params};
use kfoundry_bench::supervisor::Supervised;
use kfoundry_bench::{fmt_sizes, params_of};

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
pub(crate) fn result_of(
    plan: &Plan,
    spec: &KernelSpec,
    workload: &Workload,
    searched: &Searched,
    decision: &Decision,
    bench: &Supervised,
    seconds: f64,
) -> Result<TuneResult> {
    let (params, best_s, ref_s) = (&decision.params, decision.best_s, decision.reference_s);
    let rates = Rates::of(spec, params, &workload.sizes, best_s, plan.peaks.as_ref());
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
        gbytes_per_s: rates.gbytes_per_s,
        gflops: rates.gflops,
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
        roofline: rates.roofline,
        generated_source: decision.source.clone(),
        llm: searched.language_model.as_ref().map(|ss| ss.summary()),
        floor: decision.floor.clone(),
        general: decision
            .general
            .as_ref()
            .map(|g| crate::messages::GeneralVariant {
                floor: g.floor.clone(),
                params: g.params.clone(),
                best_ns: (g.best_s * 1e9).round() as u64,
                reference_ns: (g.reference_s * 1e9).round() as u64,
                proven: g.proven.clone(),
                proven_scalars: g.scalars.clone(),
                proof_cases: g.proof_cases,
            }),
    })
}

/// What a winner achieved, from `cost(...)` and the device's peaks.
struct Rates {
    gbytes_per_s: Option<f64>,
    gflops: Option<f64>,
    roofline: Option<f64>,
}

impl Rates {
    fn of(
        spec: &KernelSpec,
        params: &Params,
        sizes: &Sizes,
        best_s: f64,
        peaks: Option<&Peaks>,
    ) -> Rates {
        let env = spec.env(params, sizes);
        let per_s = |e: Option<&Expr>| {
            e.and_then(|e| e.eval(&env).ok())
                .map(|v| v as f64 / best_s / 1e9)
        };
        Rates {
            gbytes_per_s: per_s(spec.cost.as_ref().and_then(|c| c.bytes.as_ref())),
            gflops: per_s(spec.cost.as_ref().and_then(|c| c.flops.as_ref())),
            roofline: peaks
                .and_then(|p| p.kernel_floor(spec, params, sizes))
                .map(|f| f / best_s),
        }
    }
}

/// Makes the results of `spec`'s anchors say what the portfolio recorded at each (`variants`,
/// as written to the lockfile): the bucket's variant, its time as the portfolio measured it and
/// the box it was proven over, not the anchor's own winner it replaced. Where the two differ,
/// the note names the anchor's own winner; its output errors, measured of the winner, are not
/// the recorded variant's and are left out.
pub(crate) fn as_recorded(
    spec: &KernelSpec,
    variants: &[Variant],
    peaks: Option<&Peaks>,
    results: &mut [TuneResult],
) {
    for r in results.iter_mut().filter(|r| r.kernel == spec.id) {
        let (Some(v), Some(workload)) = (
            variants
                .iter()
                .find(|v| v.workload == r.workload && !v.general),
            spec.workloads.iter().find(|w| w.name == r.workload),
        ) else {
            continue;
        };
        let replaced = v.params != r.params || (v.source.is_none() && r.generated_source.is_some());
        if replaced {
            let own = format!(
                "the portfolio records its bucket's variant {} here; this anchor's own winner was {} ({:.3} ms, {:.2}x)",
                fmt_params(&v.params),
                fmt_params(&r.params),
                r.best_ns as f64 / 1e6,
                r.speedup
            );
            r.note = Some(match r.note.take() {
                Some(note) => format!("{note}; {own}"),
                None => own,
            });
            r.max_abs_error = None;
            r.rel_error_norm = None;
            r.params = v.params.clone();
            if v.source.is_none() {
                r.generated_source = None;
            }
        }
        r.best_ns = v.time_ns.max(1);
        r.reference_ns = v.reference_time_ns;
        r.speedup = r.reference_ns as f64 / r.best_ns as f64;
        r.proven = v.proven.clone();
        r.probed_sizes = v.proven.iter().skip(1).map(fmt_sizes).collect();
        r.proven_scalars = v.scalars.clone();
        r.reference_kept = v.params == spec.reference && v.source.is_none() && !r.kept_existing;
        let rates = Rates::of(
            spec,
            &v.params,
            &workload.sizes,
            r.best_ns as f64 * 1e-9,
            peaks,
        );
        r.gbytes_per_s = rates.gbytes_per_s;
        r.gflops = rates.gflops;
        r.roofline = rates.roofline;
    }
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
pub(crate) fn reference_broken(plan: &Plan, kernel: &Kernel, why: &str, tally: &mut Tally) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn result(workload: &str, wg: i64, best_ns: u64) -> TuneResult {
        serde_json::from_value(serde_json::json!({
            "kernel": "t::K", "workload": workload, "sizes": "", "device": "d",
            "reference_ns": 4000, "best_ns": best_ns, "speedup": 4000.0 / best_ns as f64,
            "params": {"WG": wg}, "evaluations": 10, "failures": 0, "seconds": 1.0,
            "probed_sizes": [], "probe_rejections": [], "interrupted": false,
            "max_abs_error": 0.5, "rel_error_norm": 0.25
        }))
        .unwrap()
    }

    fn variant(workload: &str, wg: i64, time_ns: u64) -> Variant {
        Variant {
            device: "d".into(),
            workload: workload.into(),
            sizes: Default::default(),
            params: [("WG".to_string(), wg)].into(),
            time_ns,
            reference_time_ns: 4200,
            evaluations: 10,
            failures: 0,
            source: None,
            proven: vec![
                [("n".to_string(), 1)].into(),
                [("n".to_string(), 64)].into(),
            ],
            scalars: Default::default(),
            proof: 0,
            partial: false,
            general: false,
            floor: None,
            device_info: None,
        }
    }

    /// After a portfolio, the summary shows what the lockfile holds at each anchor: the
    /// bucket's variant and time, the anchor's own winner only in the note.
    #[test]
    fn the_summary_of_a_range_is_what_the_portfolio_recorded() {
        let spec = crate::test_spec::spec(
            "code = \"__kernel void k(const int n, __global float* y) {}\", params(WG = [1, 16, 64]), reference(WG = 1), global = n, local = WG, buffers(y = n), check(y), ranges(n = 1..=64)",
        );
        let anchors: Vec<String> = spec.workloads.iter().map(|w| w.name.clone()).collect();
        let (a, b) = (&anchors[0], &anchors[1]);
        let mut results = vec![result(a, 64, 1000), result(b, 16, 2000)];
        // the bucket's variant WG=16 replaced the first anchor's WG=64
        let variants = [variant(a, 16, 1200), variant(b, 16, 1900)];
        as_recorded(&spec, &variants, None, &mut results);
        let [first, second] = &results[..] else {
            unreachable!()
        };
        assert_eq!(first.params, variants[0].params);
        assert_eq!((first.best_ns, first.reference_ns), (1200, 4200));
        assert!((first.speedup - 3.5).abs() < 1e-9, "{}", first.speedup);
        assert_eq!(first.proven, variants[0].proven);
        assert_eq!(
            first.max_abs_error, None,
            "the winner's errors, not the variant's"
        );
        let note = first.note.as_deref().unwrap_or_default();
        assert!(
            note.contains("own winner was WG=64 (0.001 ms, 4.00x)"),
            "{note}"
        );
        // the same parameters: the portfolio's time, no note
        assert_eq!((second.best_ns, second.note.as_deref()), (1900, None));
        assert_eq!(second.max_abs_error, Some(0.5));
    }
}
