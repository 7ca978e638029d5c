//! The scoring half of `bench/search_vs_kernel_tuner.sh`.
//!
//! ```text
//! bench --budget CACHE                       print the evaluation budget max(500, M_0.96)
//! bench --axis-end CACHE                     print M_0.96, the end of the score's axis
//! bench CACHE SEEDS [KT_TRACES.jsonl ...]    run kfoundry (default, no gradient, single
//!                                            cell, no screening, the previous default) with SEEDS
//!                                            seeds (KF_VARIANTS picks rows), score them and the
//!                                            Kernel Tuner traces, print a table
//! ```
//! Every strategy is scored the same way (`kfoundry_search::methodology`): its trace is the
//! sequence of first visits; costs are the cache's compile + verification + benchmark times.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use kfoundry_search::cache::CacheSpace;
use kfoundry_search::methodology::{self, Baseline, Trace};
use kfoundry_search::simulate::{baseline, run_once};
use kfoundry_search::{ScreenModel, Settings};

const FRACTIONS_AT: [usize; 4] = [50, 100, 200, 500];
/// Bootstrap resamples of each strategy's runs for the score's interval.
const BOOTSTRAP: usize = 1000;

fn budget(b: &Baseline) -> usize {
    b.eval_axis().1.max(500)
}

fn fail(msg: String) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(flag @ ("--budget" | "--axis-end")) = args.first().map(String::as_str) {
        let path = PathBuf::from(args.get(1).cloned().unwrap_or_default());
        let cache = CacheSpace::load(&path).unwrap_or_else(|e| fail(e.to_string()));
        let b = baseline(&cache).unwrap_or_else(|| fail("no valid configuration".into()));
        println!("{}", if flag == "--budget" { budget(&b) } else { b.eval_axis().1 });
        return;
    }
    if args.len() < 2 {
        fail("usage: bench CACHE SEEDS [KT_TRACES.jsonl ...] | bench --budget CACHE | bench --axis-end CACHE".into());
    }
    let path = PathBuf::from(&args[0]);
    let seeds: u64 = args[1].parse().unwrap_or_else(|_| fail(format!("bad seed count {}", args[1])));
    let cache = CacheSpace::load(&path).unwrap_or_else(|e| fail(e.to_string()));
    let base = baseline(&cache).unwrap_or_else(|| fail("no valid configuration".into()));
    let evals = budget(&base);

    // strategy -> traces, seconds of wall time
    let mut results: Vec<(String, Vec<Trace>, f64)> = Vec::new();
    // KF_VARIANTS=a,b,... picks kfoundry rows (empty: none, to score Kernel Tuner traces alone)
    // the last two are diagnostics (not run unless named): which half of the new default's
    // change (relevance weights, 32 candidates) a difference comes from
    let all: [(&str, &str, Settings); 7] = [
        ("default", "kfoundry default", Settings::default()),
        ("no-gradient", "kfoundry no-gradient", Settings { gradient_steering: false, ..Settings::default() }),
        ("single-cell", "kfoundry single-cell", Settings { single_cell: true, ..Settings::default() }),
        ("no-screening", "kfoundry no-screening", Settings { screening: 1, ..Settings::default() }),
        (
            "previous",
            "kfoundry previous default (3-NN, 8 candidates)",
            Settings { screen_model: ScreenModel::Nearest, screening: 8, ..Settings::default() },
        ),
        ("relevance8", "kfoundry relevance-weighted 3-NN, 8 candidates", Settings { screening: 8, ..Settings::default() }),
        ("nearest32", "kfoundry equal-weight 3-NN, 32 candidates", Settings { screen_model: ScreenModel::Nearest, ..Settings::default() }),
    ];
    let wanted = std::env::var("KF_VARIANTS").unwrap_or_else(|_| "default,no-gradient,single-cell,no-screening,previous".into());
    let wanted: Vec<&str> = wanted.split(',').filter(|w| !w.is_empty()).collect();
    let mut variants: Vec<(String, Settings)> =
        all.iter().filter(|(k, ..)| wanted.contains(k)).map(|(_, name, s)| (name.to_string(), s.clone())).collect();
    // free-form diagnostics: settings changes joined by `+`, e.g. `screening=8+screen_explore=0.1`
    for w in wanted.iter().filter(|w| w.contains('=')) {
        let mut s = Settings::default();
        for a in w.split('+') {
            s.set(a).unwrap_or_else(|e| fail(e));
        }
        variants.push((format!("kfoundry {w}"), s));
    }
    for (name, s) in variants {
        let t0 = Instant::now();
        let mut traces = Vec::new();
        for seed in 0..seeds {
            let settings = Settings { seed, max_evals: Some(evals), ..s.clone() };
            let (_, trace) = run_once(&cache, settings, None).unwrap_or_else(|e| fail(e.to_string()));
            traces.push(trace);
        }
        results.push((name, traces, t0.elapsed().as_secs_f64() / seeds.max(1) as f64));
    }

    // Kernel Tuner traces
    let mut kt: BTreeMap<String, (Vec<Trace>, Vec<f64>, usize)> = BTreeMap::new();
    for f in &args[2..] {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| fail(format!("{f}: {e}")));
        for (ln, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| fail(format!("{f}:{}: {e}", ln + 1)));
            if v["space"].as_str() != Some(cache.kernel_name.as_str()) {
                continue;
            }
            let strategy = v["strategy"].as_str().unwrap_or("?").to_string();
            let mut trace = Trace::default();
            for k in v["trace"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                let key = k.as_str().unwrap_or("");
                let config: Vec<i64> = key.split(',').filter_map(|x| x.trim().parse().ok()).collect();
                let e = cache.evaluation(&config);
                trace.times.push(e.time());
                trace.costs.push(e.cost());
            }
            let entry = kt.entry(strategy).or_default();
            entry.0.push(trace);
            entry.1.push(v["seconds"].as_f64().unwrap_or(f64::NAN));
            if v.get("error").is_some_and(|e| !e.is_null()) {
                entry.2 += 1;
            }
        }
    }
    for (name, (traces, secs, errors)) in kt {
        let label = if errors > 0 { format!("KT {name} ({errors} runs crashed)") } else { format!("KT {name}") };
        results.push((label, traces, median(secs)));
    }

    println!(
        "## {} on {} ({} valid configurations of {}; optimum {:.4} ms; score axis {}..{} evaluations, {:.0}..{:.0} s; runs of {} evaluations)",
        cache.kernel_name,
        cache.device_name,
        base.n(),
        cache.entries.len(),
        base.best * 1e3,
        base.eval_axis().0,
        base.eval_axis().1,
        base.time_axis().0,
        base.time_axis().1,
        evals
    );
    println!();
    // seed-resampling (bootstrap) spread of each score, and how sure it is that the first
    // row (the default when it runs) scores above each other row
    let boots: Vec<Vec<f64>> =
        results.iter().enumerate().map(|(i, (_, traces, _))| methodology::bootstrap_score_evals(&base, traces, BOOTSTRAP, i as u64)).collect();
    let first = results.first().map_or(String::new(), |r| r.0.clone());
    println!("| strategy | seeds | score (evals) | 90% interval | P({first} above) | score (time) | @50 | @100 | @200 | @500 | median evals done | s/run |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (i, (name, traces, secs)) in results.iter().enumerate() {
        let interval = format!("{:.3}–{:.3}", methodology::quantile(&boots[i], 0.05), methodology::quantile(&boots[i], 0.95));
        let above = if i == 0 { "–".to_string() } else { format!("{:.2}", methodology::share_above(&boots[0], &boots[i])) };
        let fr: Vec<String> = FRACTIONS_AT.iter().map(|&m| format!("{:.4}", methodology::median_fraction(&base, traces, m))).collect();
        let done = median(traces.iter().map(|t| t.times.len() as f64).collect());
        println!(
            "| {} | {} | {:.4} | {} | {} | {:.4} | {} | {:.0} | {:.2} |",
            name,
            traces.len(),
            methodology::score_evals(&base, traces),
            interval,
            above,
            methodology::score_time(&base, traces),
            fr.join(" | "),
            done,
            secs
        );
    }
    println!();
    if std::env::var("CURVE").is_ok() {
        let at = [5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 1400];
        println!("P(M) at {at:?}");
        for (name, traces, _) in &results {
            let c = methodology::curve_evals(&base, traces, &at);
            let c: Vec<String> = c.iter().map(|x| format!("{x:.2}")).collect();
            println!("{name:32} {}", c.join(" "));
        }
    }
}
