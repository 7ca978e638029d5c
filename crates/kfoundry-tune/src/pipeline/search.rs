//! Stage 3, search: the engine (`kfoundry_search`) over the supervised bench, one loop. Each
//! step either evaluates a configuration of the parameter space or, when a language model is
//! configured, gives the model's operator a turn ([`LanguageModel`]): both count against the
//! one evaluation budget and the one time budget. The state is checkpointed after every
//! step, before it is reported, so whatever was reported is never evaluated again. The loop
//! ends when the budget is spent, the space and the model are done, the roofline target is
//! reached, or Ctrl-C asks to stop.

use anyhow::Result;
use kfoundry_rt::model::spec::{KernelSpec, Params, Workload};
use kfoundry_search::{ExternalOperator, Progress, SearchState, Stepped};

use super::plan::Plan;
use crate::checkpoint::Key;
use crate::events::{Reporter, Search, TuneEvent};
use crate::interrupt;
use crate::llm::operator::{LanguageModel, SourceSearch, SourceState};
use crate::llm::DeviceDescription;
use kfoundry_bench::params_of;
use kfoundry_bench::supervisor::Supervised;

/// A finished (or interrupted) search.
pub struct Searched {
    pub state: SearchState,
    /// The language model's source search, when one ran.
    pub language_model: Option<SourceSearch>,
    /// Cut short by Ctrl-C or SIGTERM.
    pub interrupted: bool,
}

impl Searched {
    /// The language model's verified source variants as finalists: (time, defines, source).
    pub fn source_finalists(&self) -> Vec<(f64, Params, Option<String>)> {
        self.language_model
            .as_ref()
            .map(|ss| {
                ss.elites()
                    .into_iter()
                    .map(|e| (e.time, e.params.clone(), Some(e.source.clone())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What the checkpoint keeps of the language model.
    pub fn operator_state(&self) -> Option<serde_json::Value> {
        self.language_model
            .as_ref()
            .and_then(|ss| serde_json::to_value(ss.state()).ok())
    }
}

/// Runs the search of `spec` at `workload` from `state`. `None` when interrupted before any
/// candidate (the reference included) was measured.
pub fn search(
    plan: &Plan,
    spec: &KernelSpec,
    workload: &Workload,
    key: &Key,
    bench: &mut Supervised,
    mut state: SearchState,
    operator_state: Option<serde_json::Value>,
) -> Result<Option<Searched>> {
    let mut language_model = match &plan.llm {
        None => None,
        Some(cfg) => Some(
            match operator_state.map(serde_json::from_value::<SourceState>) {
                None => SourceSearch::new(cfg, plan.options.seed)?,
                Some(saved) => match saved
                    .map_err(anyhow::Error::from)
                    .and_then(|st| SourceSearch::resume(cfg, st))
                {
                    Ok(ss) => ss,
                    Err(e) => {
                        plan.note(format!(
                            "note: {} @ {}: the language model's saved state is not usable ({e:#}); its search starts afresh",
                            spec.id, workload.name
                        ));
                        SourceSearch::new(cfg, plan.options.seed)?
                    }
                },
            },
        ),
    };
    let search = Search {
        kernel: &spec.id,
        workload: &workload.name,
    };
    let turns = |s: &SearchState| (s.progress().evaluations + s.progress().external_turns) as u64;
    plan.report(TuneEvent::SearchStarted {
        search,
        budget: plan.options.budget_evals as u64,
        done: turns(&state),
    });
    let validity = bench.validity();
    let valid = |c: &kfoundry_search::Config| validity.accepts(c);
    // Work-groups over the limit the driver reports for the compiled kernels come last. A
    // kernel compiled for exactly its own work-group reports none: the engine learns the
    // limit from failures.
    state.set_group_size(Some(validity.group_size()));
    let floor = |p: &Params| {
        plan.peaks
            .and_then(|pk| pk.kernel_floor(spec, p, &workload.sizes))
    };
    let device = DeviceDescription::from_info(
        &plan.device.info,
        bench.limits().preferred_multiple,
        bench.limits().sub_groups,
    );
    let mut interrupted = false;
    loop {
        if interrupt::requested() {
            interrupted = true;
            break;
        }
        let step = match language_model.as_mut() {
            Some(model) => {
                let mut shown = Shown {
                    inner: LanguageModel {
                        search: model,
                        spec,
                        device: device.clone(),
                        floor: &floor,
                    },
                    reporter: plan.reporter,
                    search,
                };
                state.step_with(bench, &valid, Some(&mut shown))
            }
            None => state.step_with(bench, &valid, None),
        };
        match step {
            Stepped::Done(_) => break,
            Stepped::External => {
                let operator_state = language_model
                    .as_ref()
                    .and_then(|ss| serde_json::to_value(ss.state()).ok());
                plan.checkpoints
                    .save(key, &state, operator_state.as_ref(), None)?;
                let Some(turn) = language_model.as_ref().and_then(|ss| ss.records.last()) else {
                    continue;
                };
                plan.report(TuneEvent::LanguageModelTurn {
                    search,
                    turn,
                    done: turns(&state),
                });
            }
            Stepped::Evaluated(i) => {
                // Saved before it is reported: whatever was reported is never evaluated again.
                let operator_state = language_model
                    .as_ref()
                    .and_then(|ss| serde_json::to_value(ss.state()).ok());
                plan.checkpoints
                    .save(key, &state, operator_state.as_ref(), None)?;
                let record = &state.history()[i];
                let p = state.progress();
                plan.report(TuneEvent::Evaluated {
                    search,
                    params: params_of(spec, &record.config),
                    record,
                    done: turns(&state),
                    best: p.best.map(|(_, t)| t),
                    failures: p.failures,
                });
                if roofline_reached(plan, spec, workload, &p) {
                    plan.report(TuneEvent::RooflineReached {
                        search,
                        target: plan.options.roofline_stop.unwrap_or(1.0),
                    });
                    break;
                }
            }
        }
    }
    plan.report(TuneEvent::SearchFinished { search });
    if state.progress().best.is_none() && interrupted {
        return Ok(None);
    }
    Ok(Some(Searched {
        state,
        language_model,
        interrupted,
    }))
}

/// Whether the best so far is within `--roofline-stop` of the device's roofline floor.
fn roofline_reached(plan: &Plan, spec: &KernelSpec, workload: &Workload, p: &Progress) -> bool {
    let (Some(target), Some((best, t)), Some(peaks)) =
        (plan.options.roofline_stop, p.best, plan.peaks)
    else {
        return false;
    };
    peaks
        .kernel_floor(spec, &params_of(spec, best), &workload.sizes)
        .is_some_and(|f| f / t >= target)
}

/// The language model's operator, telling the reporter that it is being asked.
struct Shown<'a, O> {
    inner: O,
    reporter: &'a dyn Reporter,
    search: Search<'a>,
}

impl<O: ExternalOperator<Supervised>> ExternalOperator<Supervised> for Shown<'_, O> {
    fn wants_turn(&self, progress: &Progress, exhausted: bool) -> bool {
        self.inner.wants_turn(progress, exhausted)
    }

    fn turn(&mut self, evaluator: &mut Supervised, progress: &Progress) -> f64 {
        self.reporter.report(TuneEvent::Asking {
            search: self.search,
        });
        self.inner.turn(evaluator, progress)
    }
}
