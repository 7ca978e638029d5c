//! `cargo kfoundry tune`, as stages, each a module with one job:
//!
//! 1. [`discover`]: the annotated kernels (cargo metadata + syn + the shared annotation
//!    parser), or a bundle written by `cargo kfoundry bundle`.
//! 2. [`plan`]: what this run will do, decided before anything runs: kernels and workloads
//!    (this runner's [`partition`] of them), the device, its peaks, the language model, and that
//!    the lockfile can be written; for each search, where it starts (afresh, or from its
//!    checkpoint). Several devices at once: the command line runs one such pipeline per device
//!    (`cargo-kfoundry`'s `fleet`).
//! 3. [`search`]: the engine over a supervised [`Bench`](kfoundry_bench::Bench) on the
//!    device, with the language model as its external operator (one loop, one budget),
//!    checkpointed after every evaluation.
//! 4. [`finalists`]: the fastest candidates, each [`remeasure`]-d against the reference and,
//!    when faster, proven ([`crate::prove`]) at other sizes, until one wins (or the reference stays).
//!    The winner is timed against the reference at smaller sizes: below its [`floor`], where
//!    the reference was faster, dispatch runs something else. A winner with a floor, or whose
//!    constraints refuse part of the region it was proven over, gets a [`general`] variant
//!    beside it, proven over the same region, for where it does not run (with a floor of its
//!    own).
//!    A kernel with `ranges(...)`: its anchors' winners form a [`portfolio`] of variants, each
//!    proven over a bucket of the range.
//! 5. [`record`]: the winners into `Kfoundry.lock` (merged under an advisory lock, replaced
//!    atomically) and their generated sources beside it.
//! 6. [`tally`]: the result of each tune, what failed, the end of the run and its exit status.
//!
//! Every stage tells the run's [`Reporter`] what happens, as typed
//! [`TuneEvent`]s; none prints. A kernel or workload whose tune fails is reported and the run
//! goes on with the others; whatever finished is recorded, and the exit status says that
//! something failed.

pub mod budget;
pub mod discover;
pub mod finalists;
pub mod floor;
pub mod general;
pub mod history;
pub mod partition;
pub mod plan;
pub mod portfolio;
pub mod preflight;
pub mod record;
pub mod remeasure;
pub mod search;
pub mod tally;
pub mod warm;

use anyhow::{Context as _, Result};
use kfoundry_rt::model::spec::{KernelSpec, Workload};

use crate::checkpoint::Key;
use crate::error::Exit;
use crate::events::{Reporter, TuneEvent};
use crate::interrupt;
use crate::messages::TuneResult;
use crate::options::TuneOptions;
use crate::tuning_db;
use finalists::Finalist;
use kfoundry_bench::supervisor::Supervised;
use kfoundry_bench::{Measurement, ProgramCacheUse};
use plan::{Plan, Start};

/// Runs the whole pipeline for the selection of `args`, on one device, telling `reporter`.
pub fn run(args: &TuneOptions, reporter: &dyn Reporter) -> Result<Exit> {
    let run_started = std::time::Instant::now();
    let plan = plan::plan(args, reporter)?;
    let mut tally = tally::Tally::default();
    // Stage 0: a reference that does not build is reported now, not when its turn comes. (A
    // device that cannot be opened here is left to the workers to report.)
    let broken = preflight::broken_references(&plan.kernels, plan.device.index).unwrap_or_default();
    for (i, why) in &broken {
        tally::reference_broken(&plan, &plan.kernels[*i], why, &mut tally);
    }
    // `--budget-total-secs`: one budget for every search of the run, shared by the cost model.
    let mut run_budget = plan.options.budget_total_secs.map(|total| {
        let jobs = plan
            .kernels
            .iter()
            .enumerate()
            .filter(|(i, _)| !broken.iter().any(|(b, _)| b == i))
            .flat_map(|(_, k)| {
                plan.workloads(&k.spec).into_iter().map(|w| {
                    let weight = budget::weight(plan.peaks.as_ref(), &k.spec, w);
                    ((k.spec.id.clone(), w.name.clone()), weight)
                })
            })
            .collect::<Vec<_>>();
        budget::RunBudget::new(total, run_started, budget::fill(jobs))
    });
    'kernels: for (i, kernel) in plan.kernels.iter().enumerate() {
        if broken.iter().any(|(b, _)| *b == i) {
            continue;
        }
        let fingerprint = &plan.fingerprints[i];
        let existing =
            plan::complete_entries(&plan.lockfile, &kernel.spec, fingerprint, &plan.device);
        let mut variants = Vec::new();
        for workload in plan.workloads(&kernel.spec) {
            if interrupt::requested() {
                tally.interrupted = true;
                break;
            }
            let result = match existing
                .as_ref()
                .map_err(|e| anyhow::anyhow!("{e:#}"))
                .and_then(|existing| {
                    let existing = existing.get(&workload.name);
                    let budget_secs = share_of(&plan, run_budget.as_mut(), &kernel.spec, workload);
                    let started = std::time::Instant::now();
                    let result = tune_one(
                        &plan,
                        &kernel.spec,
                        fingerprint,
                        workload,
                        existing,
                        budget_secs,
                    );
                    if let (Some(b), Ok(Some(r))) = (run_budget.as_mut(), &result) {
                        b.finished(started.elapsed().as_secs_f64(), r.search_seconds);
                    }
                    result
                }) {
                Ok(Some(result)) => result,
                Ok(None) => {
                    tally.interrupted = true;
                    break;
                }
                Err(e) => {
                    tally::failed(&plan, kernel, workload, &e, &mut tally);
                    continue;
                }
            };
            plan.report(TuneEvent::Tuned { result: &result });
            variants.extend(record::variants_of(
                &plan.lockfile,
                &plan.device,
                &kernel.spec,
                workload,
                &result,
            )?);
            tally.interrupted |= result.interrupted;
            tally.done.push((
                kernel.spec.id.clone(),
                fingerprint.clone(),
                workload.name.clone(),
            ));
            tally.results.push(result);
            if tally.interrupted {
                break;
            }
        }
        // Stage 4c: a kernel with `ranges` gets a portfolio of its anchors' winners, each proven
        // over its bucket (interrupted runs record what they have, as tuned).
        if !tally.interrupted && !kernel.spec.ranges.is_empty() {
            match portfolio::choose(&plan, &kernel.spec, &mut variants) {
                Ok(Some(p)) => {
                    plan.report(TuneEvent::Portfolio {
                        spec: &kernel.spec,
                        portfolio: &p,
                    });
                    // The summary says what is recorded, not the winners the buckets replaced.
                    tally::as_recorded(
                        &kernel.spec,
                        &variants,
                        plan.peaks.as_ref(),
                        &mut tally.results,
                    );
                }
                Ok(None) => {}
                Err(e) => tally::failed(&plan, kernel, &kernel.spec.workloads[0], &e, &mut tally),
            }
        }
        if !variants.is_empty() {
            record::record(
                &plan.lockfile,
                &kernel.spec,
                fingerprint,
                &plan.device,
                variants,
                reporter,
            )
            .context(record::RESUME_HINT.trim_start_matches(['\n', ';', ' ']))?;
        }
        if tally.interrupted {
            break 'kernels;
        }
    }
    if !plan.had_lockfile && plan.from_workspace && !tally.results.is_empty() {
        record::mark_changed(&plan.kernels);
    }
    Ok(tally::finish(&plan, &tally))
}

/// The seconds of evaluations the search of `spec` at `workload` may spend: `--budget-secs`,
/// or less when the run has one budget (`--budget-total-secs`) and this is the search's share
/// of what is left (the run says so, with where the run's budget stands).
fn share_of(
    plan: &Plan,
    run_budget: Option<&mut budget::RunBudget>,
    spec: &KernelSpec,
    workload: &Workload,
) -> Option<f64> {
    let own = plan.options.budget_secs;
    // Without a run budget the search has `--budget-secs` alone.
    let Some(run_budget) = run_budget else {
        return own;
    };
    let share = run_budget.next(&spec.id, &workload.name);
    plan.note(format!(
        "run budget: search {} of {}, {:.1} s of {:.1} s left; {} @ {} gets {:.1} s ({:.1}% of the estimated model time left)",
        share.number,
        share.of,
        share.left,
        plan.options.budget_total_secs.unwrap_or_default(),
        spec.id,
        workload.name,
        share.seconds,
        100.0 * share.fraction
    ));
    Some(own.map_or(share.seconds, |s| s.min(share.seconds)))
}

/// Adds what a finished search found to the tuning database, if there is one: the fastest
/// configurations its proof did not refuse. One that cannot be written costs later tunes
/// their warm start, not this one its result: a warning.
fn record_in_tuning_db(
    plan: &Plan,
    spec: &KernelSpec,
    fingerprint: &str,
    workload: &Workload,
    searched: &search::Searched,
    decision: &finalists::Decision,
    result: &TuneResult,
) {
    let Some(dir) = &plan.options.tuning_db else {
        return;
    };
    let refused: Vec<&kfoundry_rt::model::spec::Params> =
        decision.rejections.iter().map(|r| &r.params).collect();
    let configs = tuning_db::fastest(spec, searched.state.history(), &refused);
    if configs.is_empty() {
        return;
    }
    let entry = tuning_db::Entry {
        version: tuning_db::VERSION,
        device: plan.device.key.to_string(),
        kernel: spec.id.clone(),
        fingerprint: fingerprint.to_string(),
        template: tuning_db::template_of(spec),
        workload: workload.name.clone(),
        sizes: workload.sizes.clone(),
        reference_ns: result.reference_ns,
        configs,
        evaluations: result.evaluations,
        written: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    if let Err(e) = tuning_db::TuningDb::new(dir).record(&entry) {
        plan.report(TuneEvent::Warning {
            text: format!(
                "cannot add {} @ {} to the tuning database in {}: {e}",
                spec.id,
                workload.name,
                dir.display()
            ),
        });
    }
}

/// Tunes one kernel at one workload through stages 3 to 6 with `budget_secs` of evaluations:
/// `None` when interrupted before any candidate (the reference included) was measured.
fn tune_one(
    plan: &Plan,
    spec: &KernelSpec,
    fingerprint: &str,
    workload: &Workload,
    existing: Option<&Finalist>,
    budget_secs: Option<f64>,
) -> Result<Option<TuneResult>> {
    let started = std::time::Instant::now();
    let device_key = plan.device.key.to_string();
    let key = Key {
        kernel: &spec.id,
        fingerprint,
        workload: &workload.name,
        device: &device_key,
        seed: plan.options.seed,
    };
    let (state, operator_state) = match plan::start(plan, spec, workload, &key, budget_secs)? {
        Start::Finished(result) => return Ok(Some(*result)),
        Start::Search {
            state,
            operator_state,
        } => (*state, operator_state),
    };
    let settings = Measurement {
        repeats: plan.options.repeats,
        seed: plan.options.seed,
        build_jobs: plan.options.build_jobs,
        build_processes: plan.options.build_processes,
        program_cache: plan
            .options
            .program_cache
            .as_ref()
            .map(|dir| ProgramCacheUse {
                dir: dir.clone(),
                read: true,
            }),
        source_place: plan.source_place(spec),
        ..Measurement::default()
    };
    // Candidates run in a supervised worker process: one that hangs or crashes is recorded as
    // failed and the search goes on with a fresh worker.
    let starting = std::time::Instant::now();
    let mut bench = Supervised::start(
        spec,
        &workload.sizes,
        plan.device.index,
        settings,
        plan.options.limits,
    )?;
    let start_seconds = starting.elapsed().as_secs_f64();
    let searching = std::time::Instant::now();
    let Some(searched) = search::search(
        plan,
        spec,
        workload,
        &key,
        &mut bench,
        state,
        operator_state,
    )?
    else {
        return Ok(None);
    };
    let search_wall = searching.elapsed().as_secs_f64();
    let finalists = finalists::select(spec, searched.state.history(), searched.source_finalists());
    // Drawn afresh unless given: the proof's sizes and inputs cannot be known in advance.
    let proof_seed = plan.options.proof_seed.unwrap_or_else(rand::random);
    let deciding = std::time::Instant::now();
    let mut decision = finalists::decide(
        &mut bench,
        spec,
        workload,
        &finalists,
        existing,
        proof_seed,
        |r| tally::rejected(plan, spec, workload, r),
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    // What serves the rest of the region: the winner's floor (below it the reference is
    // faster), then a general variant where the winner's constraints refuse sizes or below its
    // floor (not for a generated source, which serves the workload it was tuned at), with a
    // floor of its own. A portfolio's anchors get neither: its buckets serve the range, chosen
    // by their times at every anchor.
    if !decision.kept_existing && !kfoundry_rt::model::ranges::is_anchor(workload) {
        decision.floor = floor::floor(
            &mut bench,
            spec,
            workload,
            &decision.params,
            decision.source.as_deref(),
        );
        if decision.source.is_none() {
            let outcome = general::choose(
                &mut bench,
                spec,
                workload,
                &decision.params,
                decision.floor.as_ref(),
                general::ran(spec, searched.state.history()),
                proof_seed,
            )
            .map_err(|e| anyhow::anyhow!(e))?;
            decision.proof_seconds += outcome.proof_seconds;
            if let Some(text) = outcome.note {
                plan.note(format!(
                    "note: `{}` at `{}`: {text}",
                    spec.id, workload.name
                ));
            }
            decision.general = outcome.general;
        }
        if let Some(g) = decision.general.as_mut() {
            g.floor = floor::floor(&mut bench, spec, workload, &g.params, None);
        }
    }
    if let Some(text) = sixteen_bit_error(spec, workload, &decision) {
        plan.report(TuneEvent::Warning { text });
    }
    let decide_seconds = deciding.elapsed().as_secs_f64();
    let mut result = tally::result_of(
        plan,
        spec,
        workload,
        &searched,
        &decision,
        &bench,
        started.elapsed().as_secs_f64(),
    )?;
    result.phases = Some(crate::messages::Phases {
        start: start_seconds,
        search: search_wall,
        proof: decision.proof_seconds,
        proof_parts: bench.proof_time,
        remeasure: decide_seconds - decision.proof_seconds,
    });
    // For `report --html`: a history that cannot be written costs the report its plots, not
    // the tune its result.
    let descriptors = searched
        .state
        .space()
        .descriptors
        .iter()
        .map(|d| d.name.clone())
        .collect();
    let history = history::History::of(
        &spec.id,
        &workload.name,
        &device_key,
        descriptors,
        searched.state.history(),
        result.note.clone(),
    );
    if let Err(e) = history.save(&plan.state_dir) {
        plan.report(TuneEvent::Warning {
            text: format!("{e:#}"),
        });
    }
    if !searched.interrupted {
        record_in_tuning_db(
            plan,
            spec,
            fingerprint,
            workload,
            &searched,
            &decision,
            &result,
        );
        plan.checkpoints.save(
            &key,
            &searched.state,
            searched.operator_state().as_ref(),
            Some(&result),
        )?;
    }
    Ok(Some(result))
}

/// A warning when a tuned winner's relative error norm is above two units in the last place
/// of a 16-bit output's format (about what one rounding to that format costs): the
/// annotation's check allowed it, which should be a choice made knowingly.
fn sixteen_bit_error(
    spec: &KernelSpec,
    workload: &Workload,
    decision: &finalists::Decision,
) -> Option<String> {
    if decision.params == spec.reference && decision.source.is_none() {
        return None;
    }
    let errors = decision.errors.as_ref()?;
    spec.checks.iter().find_map(|c| {
        let (unit, format) = match spec.signature.buffer_elem(&c.buffer)? {
            kfoundry_rt::model::signature::ScalarType::F16 => (2f64.powi(-9), "half"),
            kfoundry_rt::model::signature::ScalarType::Bf16 => (2f64.powi(-6), "bfloat16"),
            _ => return None,
        };
        (errors.rel_norm > unit).then(|| {
            format!(
                "`{}` at `{}`: the winner's relative error norm {:.1e} is above two units in the last place of `{}`'s {format} ({unit:.1e}); its check allows that (a tighter `rtol` refuses such a variant)",
                spec.id, workload.name, errors.rel_norm, c.buffer
            )
        })
    })
}
