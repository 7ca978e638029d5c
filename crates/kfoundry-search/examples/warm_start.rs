//! What a warm start buys (issue 29): the engine on a brute-forced space `TO`, started cold,
//! warm from the K best configurations of another space `FROM` of the same parameters (the
//! same kernel on another workload or device, or a kernel of the same template), and warm
//! from K of `FROM`'s *worst* successful configurations (a warm start that misleads: what it
//! costs when the other space is not like this one).
//!
//! ```text
//! cargo run --release -p kfoundry-search --example warm_start -- SEEDS K FROM TO [FROM TO ...]
//! ```
//!
//! Per pair: the methodology score on `TO`'s evaluation axis (0 = random search, 1 = the
//! optimum), the median over seeds of the evaluations until the best found is within 10% and
//! 5% of `TO`'s optimum (runs of max(500, M_0.96) evaluations; a run that never gets there
//! counts as its length), and the median of optimum / best after 1, 2, 5, 10, 20 and 50
//! evaluations. No reference configuration (the replays have none), so a warm start is the
//! first thing evaluated. Never run on the judged spaces: pairs are development spaces.

use std::path::Path;

use kfoundry_search::cache::CacheSpace;
use kfoundry_search::methodology::{self, Trace};
use kfoundry_search::simulate::{baseline, trace_of};
use kfoundry_search::{Config, SearchState, Settings, SimEvaluator};

fn fail(msg: String) -> ! {
    eprintln!("warm_start: {msg}");
    std::process::exit(2)
}

/// `from`'s successful configurations sorted by time (best first), as configurations of `to`
/// (parameters matched by name; a configuration with a value `to` does not have is left out).
fn ranked_in(from: &CacheSpace, to: &CacheSpace) -> Vec<Config> {
    let names: Vec<&str> = to.space.params.iter().map(|p| p.name.as_str()).collect();
    let at: Vec<usize> = names
        .iter()
        .map(|n| {
            from.space
                .params
                .iter()
                .position(|p| p.name == *n)
                .unwrap_or_else(|| fail(format!("{} has no parameter {n}", from.path.display())))
        })
        .collect();
    let mut ok: Vec<(&Config, f64)> = from
        .entries
        .iter()
        .filter_map(|(c, e)| e.time_ms.as_ref().ok().map(|t| (c, *t)))
        .collect();
    ok.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
    ok.into_iter()
        .map(|(c, _)| at.iter().map(|&i| c[i]).collect::<Config>())
        .filter(|c| to.space.indices(c).is_ok())
        .collect()
}

fn run(to: &CacheSpace, seed: u64, evals: usize, warm: &[Config]) -> Trace {
    let settings = Settings {
        seed,
        max_evals: Some(evals),
        ..Settings::default()
    };
    let mut state =
        SearchState::new(to.space.clone(), settings, None).unwrap_or_else(|e| fail(e.to_string()));
    state.warm_start(warm);
    let mut eval = SimEvaluator::new(to);
    let valid = |c: &Config| to.is_valid(c);
    trace_of(&state.run(&mut eval, &valid, &mut |_| true))
}

/// Evaluations until the best so far is within `within` of `best` (the run's length if never).
fn evals_to(trace: &Trace, best: f64, within: f64) -> usize {
    let mut so_far = f64::INFINITY;
    for (i, t) in trace.times.iter().enumerate() {
        if let Some(t) = t {
            so_far = so_far.min(*t);
        }
        if so_far <= best * (1.0 + within) {
            return i + 1;
        }
    }
    trace.times.len()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    methodology::quantile(&v, 0.5)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 || args.len() % 2 != 0 {
        fail("usage: warm_start SEEDS K FROM TO [FROM TO ...]".into());
    }
    let seeds: u64 = args[0]
        .parse()
        .unwrap_or_else(|_| fail("SEEDS: a number".into()));
    let k: usize = args[1]
        .parse()
        .unwrap_or_else(|_| fail("K: a number".into()));
    let load = |p: &str| CacheSpace::load(Path::new(p)).unwrap_or_else(|e| fail(e.to_string()));
    let at = [1usize, 2, 5, 10, 20, 50];
    println!(
        "| from → to | start | score (evals) | evals to 10% | evals to 5% | {} |",
        at.map(|m| format!("@{m}")).join(" | ")
    );
    println!(
        "| --- | --- | ---: | ---: | ---: |{}",
        " ---: |".repeat(at.len())
    );
    for pair in args[2..].chunks(2) {
        let (from, to) = (load(&pair[0]), load(&pair[1]));
        let base = baseline(&to).unwrap_or_else(|| fail(format!("{}: no valid time", pair[1])));
        let best = to.sorted_times_ms()[0] / 1000.0;
        let evals = base.eval_axis().1.max(500);
        let ranked = ranked_in(&from, &to);
        let good: Vec<Config> = ranked.iter().take(k).cloned().collect();
        let bad: Vec<Config> = ranked.iter().rev().take(k).cloned().collect();
        let name = |p: &str| {
            Path::new(p)
                .file_name()
                .map(|f| f.to_string_lossy().trim_end_matches(".json.gz").to_string())
                .unwrap_or_default()
        };
        for (label, warm) in [
            ("cold", &Vec::new()),
            ("warm, best K", &good),
            ("warm, worst K", &bad),
        ] {
            let traces: Vec<Trace> = (0..seeds).map(|s| run(&to, s, evals, warm)).collect();
            let to10 = median(
                traces
                    .iter()
                    .map(|t| evals_to(t, best, 0.10) as f64)
                    .collect(),
            );
            let to5 = median(
                traces
                    .iter()
                    .map(|t| evals_to(t, best, 0.05) as f64)
                    .collect(),
            );
            let fr: Vec<String> = at
                .iter()
                .map(|&m| format!("{:.3}", methodology::median_fraction(&base, &traces, m)))
                .collect();
            println!(
                "| {} → {} | {label} | {:.3} | {to10} | {to5} | {} |",
                name(&pair[0]),
                name(&pair[1]),
                methodology::score_evals(&base, &traces),
                fr.join(" | ")
            );
        }
    }
    println!("\n(K = {k}, {seeds} seeds; the warm starts are FROM's best and worst K that TO has)");
}
