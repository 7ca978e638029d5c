//! `cargo kfoundry simulate <cache>`: replays the search engine on a brute-forced search space
//! (a Kernel Tuner cache file), charging each first visit its recorded cost.

use anyhow::Result;
use kfoundry_search::{simulate, SimulateOptions};

use crate::cli::{MessageFormat, SimulateArgs};
use kfoundry_tune::error::usage;
use kfoundry_tune::messages::{Message, Simulated, SimulatedRun};

pub fn run(args: &SimulateArgs) -> Result<()> {
    let mut options = SimulateOptions {
        repeats: args.runs.max(1),
        ..SimulateOptions::default()
    };
    for assignment in &args.set {
        options
            .settings
            .set(assignment)
            .map_err(|e| usage(format!("--set {e}")))?;
    }
    options
        .settings
        .check()
        .map_err(|e| usage(format!("--set: {e}")))?;
    options.settings.seed = args.seed;
    options.settings.max_evals = Some(args.budget_evals.max(1));
    let report = simulate(&args.cache, &options)?;
    match args.message_format {
        MessageFormat::Human => print!("{report}"),
        MessageFormat::Json => {
            let runs = report
                .runs
                .iter()
                .map(|r| SimulatedRun {
                    seed: r.seed,
                    evaluations: r.evaluations,
                    failures: r.failures,
                    seconds: r.seconds,
                    fraction: r.fraction,
                    best: r.best.clone(),
                })
                .collect();
            Message::Simulated(Simulated {
                kernel: report.kernel.clone(),
                device: report.device.clone(),
                best_time: report.best_time,
                fractions: report.fractions.clone(),
                score_evals: report.score_evals,
                score_time: report.score_time,
                incomplete: report.incomplete,
                runs,
            })
            .emit();
        }
    }
    Ok(())
}
