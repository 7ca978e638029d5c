//! The JSON messages of a tune's events (`--message-format json`): one per event that has one,
//! one per workload for a failure of several.

use kfoundry_tune::events::TuneEvent;
use kfoundry_tune::messages::Message;

/// The messages `event` is printed as (none for the events that are only shown to people).
pub fn messages(event: &TuneEvent<'_>) -> Vec<Message> {
    match event {
        TuneEvent::Evaluated {
            search,
            params,
            record,
            ..
        } => vec![Message::Evaluation {
            kernel: search.kernel.to_string(),
            workload: search.workload.to_string(),
            params: params.clone(),
            operator: record.operator,
            outcome: record.outcome.clone(),
        }],
        TuneEvent::LanguageModelTurn { search, turn, .. } => vec![Message::LanguageModel {
            kernel: search.kernel.to_string(),
            workload: search.workload.to_string(),
            turn: (*turn).clone(),
        }],
        TuneEvent::Rejected { search, unshipped } => vec![Message::Rejected {
            kernel: search.kernel.to_string(),
            workload: search.workload.to_string(),
            stage: unshipped.stage.to_string(),
            params: unshipped.params.clone(),
            why: unshipped.reason.clone(),
            counterexample: unshipped.counterexample.as_deref().map(counterexample),
        }],
        TuneEvent::Tuned { result } => vec![Message::Tuned {
            result: Box::new((*result).clone()),
        }],
        TuneEvent::Failed { failure } => failure
            .workloads
            .iter()
            .map(|workload| Message::Failed {
                kernel: failure.kernel.clone(),
                workload: workload.clone(),
                error: failure.error.clone(),
            })
            .collect(),
        TuneEvent::Portfolio { spec, portfolio: p } => vec![p.message(spec)],
        TuneEvent::Finished {
            lockfile,
            results,
            failed,
            interrupted,
            ..
        } => vec![Message::Finished {
            lockfile: lockfile.to_path_buf(),
            results: results.len(),
            failed: failed.len(),
            interrupted: *interrupted,
        }],
        TuneEvent::Note { text } => vec![Message::Note {
            text: text.strip_prefix("note: ").unwrap_or(text).to_string(),
        }],
        TuneEvent::Warning { text } => vec![Message::Warning { text: text.clone() }],
        TuneEvent::Planned { .. }
        | TuneEvent::Partitioned { .. }
        | TuneEvent::LanguageModel { .. }
        | TuneEvent::SearchStarted { .. }
        | TuneEvent::Asking { .. }
        | TuneEvent::RooflineReached { .. }
        | TuneEvent::SearchFinished { .. } => Vec::new(),
    }
}

/// A proof's failing case as the JSON messages carry it.
fn counterexample(case: &kfoundry_bench::case::Case) -> kfoundry_tune::messages::Counterexample {
    use kfoundry_bench::case::Prefill;
    kfoundry_tune::messages::Counterexample {
        sizes: case.sizes.clone(),
        scalars: case.scalars.clone(),
        values: case.values.describe().to_string(),
        prefill: match case.prefill {
            Prefill::Poison => "poison",
            Prefill::Zeros => "zeros",
            Prefill::Random => "random",
        }
        .to_string(),
        in_place: case.in_place,
    }
}
