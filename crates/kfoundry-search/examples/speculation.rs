//! What speculation buys (issue 29, `Settings::speculate`): the engine on brute-forced spaces,
//! replayed, with the configurations it offers for building ahead recorded; then how often
//! the configuration it really evaluated next had been offered, and what that would save on a
//! device where a build takes `BUILD` seconds, the rest of an evaluation `MEASURE` seconds, and
//! `BUILDERS` builds run at once besides the measuring thread.
//!
//! ```text
//! cargo run --release -p kfoundry-search --example speculation -- SEEDS EVALS LEVELS BUILD MEASURE BUILDERS SPACE...
//! ```
//!
//! Per space: the share of evaluations (after the first) whose configuration had been offered
//! one step before (`hit@1`) or at any earlier step (`hit`); builds offered per evaluation;
//! and the modelled evaluations per second with speculation against one build after another
//! (`speedup`). The search itself must not change: each run is compared, evaluation for
//! evaluation, with a run of the same seed without speculation, and a difference is an error.
//! Never run on the judged spaces: pass development spaces.

use std::collections::HashMap;
use std::path::Path;

use kfoundry_search::cache::CacheSpace;
use kfoundry_search::{Config, Evaluation, Evaluator, SearchState, Settings, SimEvaluator};

fn fail(msg: String) -> ! {
    eprintln!("speculation: {msg}");
    std::process::exit(2)
}

/// Replays a space and writes down what was offered before each evaluation.
struct Recording<'a> {
    inner: SimEvaluator<'a>,
    /// Per evaluation so far: the configuration.
    evaluated: Vec<Config>,
    /// (evaluations so far when offered, configuration), in order.
    offered: Vec<(usize, Config)>,
}

impl Evaluator for Recording<'_> {
    fn evaluate(&mut self, config: &Config) -> Evaluation {
        self.evaluated.push(config.clone());
        self.inner.evaluate(config)
    }

    fn prepare(&mut self, upcoming: &[Config]) {
        let n = self.evaluated.len();
        self.offered.extend(upcoming.iter().map(|c| (n, c.clone())));
    }
}

fn run(space: &CacheSpace, settings: Settings) -> Recording<'_> {
    let mut state = SearchState::new(space.space.clone(), settings, None)
        .unwrap_or_else(|e| fail(e.to_string()));
    let mut rec = Recording {
        inner: SimEvaluator::new(space),
        evaluated: Vec::new(),
        offered: Vec::new(),
    };
    let valid = |c: &Config| space.is_valid(c);
    state.run(&mut rec, &valid, &mut |_| true);
    rec
}

/// Modelled seconds of the run: each evaluation waits for its build (started when first
/// offered, on the first free builder, or on the measuring thread when never offered), then
/// measures. Offers are made just before the evaluation they speculate past begins.
fn timeline(rec: &Recording, build: f64, measure: f64, builders: usize) -> f64 {
    let mut free = vec![0.0f64; builders.max(1)];
    let mut ready: HashMap<&Config, f64> = HashMap::new();
    let mut offers = rec.offered.iter().peekable();
    let mut now = 0.0f64;
    for (i, config) in rec.evaluated.iter().enumerate() {
        while let Some((at, c)) = offers.peek() {
            if *at > i {
                break;
            }
            if builders > 0 && !ready.contains_key(c) {
                let b = (0..free.len())
                    .min_by(|&x, &y| free[x].total_cmp(&free[y]))
                    .unwrap_or(0);
                let start = free[b].max(now);
                free[b] = start + build;
                ready.insert(c, free[b]);
            }
            offers.next();
        }
        let built = ready.get(config).copied().unwrap_or(now + build);
        now = now.max(built) + measure;
    }
    now
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 7 {
        fail("usage: speculation SEEDS EVALS LEVELS BUILD MEASURE BUILDERS SPACE...".into());
    }
    let num = |i: usize, what: &str| -> f64 {
        args[i]
            .parse()
            .unwrap_or_else(|_| fail(format!("{what}: a number")))
    };
    let (seeds, evals, levels) = (
        num(0, "SEEDS") as u64,
        num(1, "EVALS") as usize,
        num(2, "LEVELS") as usize,
    );
    let (build, measure, builders) = (
        num(3, "BUILD"),
        num(4, "MEASURE"),
        num(5, "BUILDERS") as usize,
    );
    println!("| space | hit@1 | hit | offered per eval | speedup |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let (mut all_hits, mut all_speedups) = (Vec::new(), Vec::new());
    for path in &args[6..] {
        let space = CacheSpace::load(Path::new(path)).unwrap_or_else(|e| fail(e.to_string()));
        let (mut hit1, mut hit, mut total, mut offered) = (0usize, 0usize, 0usize, 0usize);
        let (mut with, mut without) = (0.0, 0.0);
        for seed in 0..seeds {
            let settings = Settings {
                seed,
                max_evals: Some(evals),
                ..Settings::default()
            };
            let plain = run(&space, settings.clone());
            let rec = run(
                &space,
                Settings {
                    speculate: levels,
                    ..settings
                },
            );
            if plain.evaluated != rec.evaluated {
                fail(format!(
                    "{path}, seed {seed}: speculation changed the search"
                ));
            }
            for (i, c) in rec.evaluated.iter().enumerate().skip(1) {
                total += 1;
                if rec.offered.iter().any(|(at, o)| *at == i - 1 && o == c) {
                    hit1 += 1;
                }
                if rec.offered.iter().any(|(at, o)| *at < i && o == c) {
                    hit += 1;
                }
            }
            offered += rec.offered.len();
            with += timeline(&rec, build, measure, builders);
            without += timeline(&plain, build, measure, 0);
        }
        let share = |k: usize| k as f64 / total.max(1) as f64;
        let name = Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!(
            "| {name} | {:.2} | {:.2} | {:.1} | {:.2}x |",
            share(hit1),
            share(hit),
            offered as f64 / total.max(1) as f64,
            without / with
        );
        all_hits.push(share(hit));
        all_speedups.push(without / with);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp();
    println!(
        "| mean | | {:.2} | | {:.2}x (geomean) |",
        mean(&all_hits),
        geo(&all_speedups)
    );
}
