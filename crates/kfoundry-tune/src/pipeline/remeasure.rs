//! Stage 4a, re-measure: a finalist and the reference are measured again, alternately
//! (so that drifting clocks or load affect both alike); the medians decide. The search's own
//! timing of the finalist is not trusted for the decision: it was the fastest of many noisy
//! measurements, so it is biased low.

use kfoundry_rt::model::spec::{KernelSpec, Params};
use kfoundry_search::Evaluation;

use kfoundry_bench::{median, ErrorStats, Judge};

/// Alternating measurements of finalist and reference.
const REMEASURES: usize = 3;

/// A finalist whose median is this many times the reference's after a round is slower: the
/// rounds left could not make it faster (a profiling-event median moves by a few percent
/// between rounds), and each of them would time the reference again, which for a slow
/// reference (a KernelBench product's, 27-150 ms a run) is most of a re-measure's cost.
const CLEARLY_SLOWER: f64 = 1.25;

/// The finalist and the reference measured alternately: `Ok(Ok((finalist, reference, errors)))`
/// in seconds (medians), `Ok(Err(why))` when the finalist failed, `Err` when the reference did.
/// Stops after the first round that leaves the finalist 1.25× slower (`CLEARLY_SLOWER`).
#[allow(clippy::type_complexity)]
pub fn remeasure(
    judge: &mut dyn Judge,
    spec: &KernelSpec,
    params: &Params,
    source: Option<&str>,
) -> Result<Result<(f64, f64, Option<ErrorStats>), String>, String> {
    let (mut reference, mut finalist) = (Vec::new(), Vec::new());
    let mut errors = None;
    for _ in 0..REMEASURES {
        reference.push(
            time_of(judge.evaluate(&spec.reference, None))
                .map_err(|why| format!("the reference failed on re-measure: {why}"))?,
        );
        match time_of(judge.evaluate(params, source)) {
            Ok(t) => finalist.push(t),
            Err(why) => return Ok(Err(format!("failed on re-measure: {why}"))),
        }
        errors = judge.last_errors().or(errors);
        if median(&mut finalist.clone()) > CLEARLY_SLOWER * median(&mut reference.clone()) {
            break;
        }
    }
    Ok(Ok((median(&mut finalist), median(&mut reference), errors)))
}

/// The reference alone, measured again: its median time and output errors.
pub(crate) fn measure_reference(
    judge: &mut dyn Judge,
    spec: &KernelSpec,
) -> Result<(f64, Option<ErrorStats>), String> {
    let mut times = Vec::new();
    for _ in 0..REMEASURES {
        times.push(
            time_of(judge.evaluate(&spec.reference, None))
                .map_err(|why| format!("the reference failed on re-measure: {why}"))?,
        );
    }
    Ok((median(&mut times), judge.last_errors()))
}

/// Whether the winner (`params`, `source`) is faster than the existing complete result
/// (`existing`), measured alternately now. An existing result that cannot be measured is
/// beaten; a winner that cannot be measured again is not.
pub(crate) fn beats_existing(
    judge: &mut dyn Judge,
    params: &Params,
    source: Option<&str>,
    existing: (&Params, Option<&str>),
) -> bool {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..REMEASURES {
        match (
            time_of(judge.evaluate(params, source)),
            time_of(judge.evaluate(existing.0, existing.1)),
        ) {
            (Ok(a), Ok(b)) => {
                ours.push(a);
                theirs.push(b);
            }
            (_, Err(_)) => return true,
            (Err(_), Ok(_)) => return false,
        }
    }
    median(&mut ours) < median(&mut theirs)
}

fn time_of(e: Evaluation) -> Result<f64, String> {
    match e {
        Evaluation::Ok { time, .. } => Ok(time),
        Evaluation::Failed { kind, reason, .. } => Err(format!("{}: {reason}", kind.name())),
    }
}
