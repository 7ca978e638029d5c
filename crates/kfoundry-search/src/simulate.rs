//! Replaying a brute-forced space: `cargo kfoundry simulate <cache.json[.gz]>`.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::cache::{CacheError, CacheSpace, SimEvaluator};
use crate::engine::{SearchResult, SearchState, Settings, Stop};
use crate::methodology::{self, Baseline, Trace};
use crate::space::Config;

/// What to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct SimulateOptions {
    /// Engine settings; `settings.seed` is the first seed. When no budget is set at all
    /// (`max_evals`, `max_seconds` and `stagnation` all `None`), each run gets
    /// `max(M_0.96, largest of `fractions_at`)` evaluations: enough for the score's axis.
    pub settings: Settings,
    /// Runs with seeds `seed, seed + 1, …` (at least 1).
    pub repeats: usize,
    /// A reference configuration evaluated first (values in parameter order).
    pub reference: Option<Config>,
    /// Evaluation counts at which the median fraction of the optimum is reported.
    pub fractions_at: Vec<usize>,
}

impl Default for SimulateOptions {
    fn default() -> Self {
        SimulateOptions {
            settings: Settings {
                max_evals: None,
                ..Settings::default()
            },
            repeats: 10,
            reference: None,
            fractions_at: vec![50, 100, 200, 500],
        }
    }
}

/// One seeded run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub seed: u64,
    pub evaluations: usize,
    pub failures: usize,
    /// Simulated seconds charged (compile + verification + benchmark of each first visit).
    pub seconds: f64,
    pub best: Option<(Config, f64)>,
    /// Optimum time / best time found.
    pub fraction: f64,
    /// Evaluations until the best was within 5% of the optimum (if it got there).
    pub evals_to_5pct: Option<usize>,
    pub stop: Option<Stop>,
}

/// The report of [`simulate`]; `Display` prints it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimulationReport {
    pub path: PathBuf,
    pub kernel: String,
    pub device: String,
    pub parameters: Vec<(String, usize)>,
    pub configurations: usize,
    pub valid: usize,
    /// Optimum and median of the valid times, seconds.
    pub best_time: f64,
    pub median_time: f64,
    /// Median cost of one evaluation, seconds.
    pub median_cost: f64,
    /// The score's evaluation axis (M_0.5, M_0.96).
    pub axis_evals: (usize, usize),
    pub runs: Vec<RunSummary>,
    /// (evaluations, median over runs of optimum / best found).
    pub fractions: Vec<(usize, f64)>,
    /// Methodology scores (0 = random search, 1 = optimum) on the evaluation and time axes.
    pub score_evals: f64,
    pub score_time: f64,
    /// The file is an interrupted brute-force run (see [`CacheSpace::incomplete`]).
    pub incomplete: bool,
}

/// One seeded run of the engine against a loaded cache, with its trace (times in seconds).
pub fn run_once(
    cache: &CacheSpace,
    settings: Settings,
    reference: Option<&Config>,
) -> Result<(SearchResult, Trace), CacheError> {
    let mut state =
        SearchState::new(cache.space.clone(), settings, reference).map_err(|e| CacheError {
            path: cache.path.clone(),
            what: e.to_string(),
        })?;
    state.set_group_size(cache.group_size());
    let mut eval = SimEvaluator::new(cache);
    let valid = |c: &Config| cache.is_valid(c);
    let result = state.run(&mut eval, &valid, &mut |_| true);
    let trace = trace_of(&result);
    Ok((result, trace))
}

/// The trace of a result (times and costs in seconds).
pub fn trace_of(result: &SearchResult) -> Trace {
    Trace {
        times: result.history.iter().map(|r| r.outcome.time()).collect(),
        costs: result.history.iter().map(|r| r.outcome.cost()).collect(),
    }
}

/// The baseline of a cache (seconds).
pub fn baseline(cache: &CacheSpace) -> Option<Baseline> {
    let times: Vec<f64> = cache.sorted_times_ms().iter().map(|t| t / 1000.0).collect();
    let costs: Vec<f64> = cache.entries.values().map(|e| e.cost_ms / 1000.0).collect();
    Baseline::new(&times, &costs)
}

/// Loads a cache file and replays it `repeats` times.
pub fn simulate(path: &Path, options: &SimulateOptions) -> Result<SimulationReport, CacheError> {
    let cache = CacheSpace::load(path)?;
    simulate_cache(&cache, options)
}

/// [`simulate`] on a loaded cache.
pub fn simulate_cache(
    cache: &CacheSpace,
    options: &SimulateOptions,
) -> Result<SimulationReport, CacheError> {
    let base = baseline(cache).ok_or_else(|| CacheError {
        path: cache.path.clone(),
        what: "no valid configuration".into(),
    })?;
    let axis = base.eval_axis();
    let mut settings = options.settings.clone();
    if settings.max_evals.is_none()
        && settings.max_seconds.is_none()
        && settings.stagnation.is_none()
    {
        settings.max_evals = Some(
            axis.1
                .max(options.fractions_at.iter().copied().max().unwrap_or(0)),
        );
    }
    let mut runs = Vec::new();
    let mut traces = Vec::new();
    for k in 0..options.repeats.max(1) {
        let seed = settings.seed.wrapping_add(k as u64);
        let (result, trace) = run_once(
            cache,
            Settings {
                seed,
                ..settings.clone()
            },
            options.reference.as_ref(),
        )?;
        let within = base.best * 1.05;
        let evals_to_5pct = (1..=trace.times.len())
            .find(|&m| trace.best_after_evals(m).is_some_and(|t| t <= within));
        runs.push(RunSummary {
            seed,
            evaluations: result.evaluations,
            failures: result.failures,
            seconds: result.elapsed,
            fraction: result.best.as_ref().map_or(0.0, |(_, t)| base.best / t),
            best: result.best,
            evals_to_5pct,
            stop: result.stop,
        });
        traces.push(trace);
    }
    let fractions = options
        .fractions_at
        .iter()
        .map(|&m| (m, methodology::median_fraction(&base, &traces, m)))
        .collect();
    Ok(SimulationReport {
        incomplete: cache.incomplete,
        path: cache.path.clone(),
        kernel: cache.kernel_name.clone(),
        device: cache.device_name.clone(),
        parameters: cache
            .space
            .params
            .iter()
            .map(|p| (p.name.clone(), p.values.len()))
            .collect(),
        configurations: cache.entries.len(),
        valid: base.n(),
        best_time: base.best,
        median_time: base.median,
        median_cost: base.median_cost,
        axis_evals: axis,
        runs,
        fractions,
        score_evals: methodology::score_evals(&base, &traces),
        score_time: methodology::score_time(&base, &traces),
    })
}

impl fmt::Display for SimulationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "space      {} ({} on {})",
            self.path.display(),
            self.kernel,
            self.device
        )?;
        let ps: Vec<String> = self
            .parameters
            .iter()
            .map(|(n, k)| format!("{n}:{k}"))
            .collect();
        writeln!(f, "parameters {}", ps.join(" "))?;
        if self.incomplete {
            writeln!(f, "warning    an interrupted brute-force run: configurations missing from it were not evaluated, and count as invalid here")?;
        }
        writeln!(
            f,
            "configs    {} cached, {} valid; optimum {:.4} ms, median {:.4} ms; median evaluation cost {:.2} s",
            self.configurations,
            self.valid,
            self.best_time * 1e3,
            self.median_time * 1e3,
            self.median_cost
        )?;
        writeln!(f, "runs       {} seeds", self.runs.len())?;
        writeln!(
            f,
            "{:>6} {:>6} {:>5} {:>10} {:>12} {:>9} {:>9}  best configuration",
            "seed", "evals", "fail", "sim. s", "best ms", "of opt.", "to 5%"
        )?;
        for r in &self.runs {
            let (cfg, t) = match &r.best {
                Some((c, t)) => (format!("{c:?}"), format!("{:.4}", t * 1e3)),
                None => ("-".into(), "-".into()),
            };
            writeln!(
                f,
                "{:>6} {:>6} {:>5} {:>10.1} {:>12} {:>9.4} {:>9}  {}",
                r.seed,
                r.evaluations,
                r.failures,
                r.seconds,
                t,
                r.fraction,
                r.evals_to_5pct.map_or("-".to_string(), |m| m.to_string()),
                cfg
            )?;
        }
        let fr: Vec<String> = self
            .fractions
            .iter()
            .map(|(m, x)| format!("@{m}: {x:.4}"))
            .collect();
        writeln!(f, "median fraction of the optimum  {}", fr.join("  "))?;
        writeln!(
            f,
            "methodology score (0 = random search, 1 = optimum)  evaluations {:.4} (axis {}..{} evals)  time {:.4}",
            self.score_evals, self.axis_evals.0, self.axis_evals.1, self.score_time
        )
    }
}
