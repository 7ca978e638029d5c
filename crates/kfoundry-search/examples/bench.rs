//! The scoring half of `bench/search_vs_kernel_tuner.sh` and `bench/search_dev.sh`.
//!
//! ```text
//! bench --budget CACHE                       print the evaluation budget max(500, M_0.96)
//! bench --axis-end CACHE                     print M_0.96, the end of the score's axis
//! bench --variants                           print the kfoundry variants KF_VARIANTS picks,
//!                                            one key a line (checked: an unknown one fails)
//! bench --trace CACHE VARIANT SEED_FROM SEED_TO MAX_EVALS OUT.jsonl
//!                                            run one kfoundry variant (a key of --variants)
//!                                            with seeds SEED_FROM..SEED_TO and write its
//!                                            traces in kt_runner.py's line format; the file
//!                                            appears complete or not at all (written under a
//!                                            temporary name, then renamed)
//! bench --score CACHE [--scores S.jsonl] TRACES.jsonl ...
//!                                            score trace files only (kfoundry's from --trace,
//!                                            Kernel Tuner's from kt_runner.py), print a table
//! bench CACHE SEEDS [--scores S.jsonl] [TRACES.jsonl ...]
//!                                            also run the KF_VARIANTS rows in this process
//!                                            with seeds 0..SEEDS (KF_VARIANTS empty: none)
//! bench --summary S.jsonl ...                one table across spaces from --scores files
//! ```
//! KF_VARIANTS=a,b,... picks kfoundry variants by key (default: default, gradient, previous,
//! single-cell, no-screening; also fixed, random (uniform random sampling), or settings changes joined by `+`, e.g.
//! `screening=8+selection.p_min=0.05`).
//!
//! Trace line format (one JSON object a line): `{"space": kernel name, "strategy": name,
//! "seed": n, "trace": ["v1,v2,...", ...], "seconds": wall time of the run}`, the trace being
//! the configurations in the order of their first evaluation (keys as in the cache file),
//! `"error"` when the run crashed. A strategy named `kfoundry ...` is shown under that name,
//! any other as `KT name`.
//!
//! `--scores FILE` writes one JSON line per row of the table: `{"space": file name without
//! .json[.gz], "kernel", "device", "strategy" (the row name), "seeds", "score" (evaluation
//! axis), "lo", "hi" (its 90% bootstrap interval), "score_time", "below_random" (share of the
//! evaluation axis's points where the median best-so-far is worse than random search's)}`.
//!
//! Every strategy is scored the same way (`kfoundry_search::methodology`): its trace is the
//! sequence of first visits; costs are the cache's compile + verification + benchmark times.
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use kfoundry_search::cache::CacheSpace;
use kfoundry_search::methodology::{self, Baseline, Trace};
use kfoundry_search::simulate::{baseline, run_once};
use kfoundry_search::{Selection, Settings};

const FRACTIONS_AT: [usize; 4] = [50, 100, 200, 500];
/// Bootstrap resamples of each strategy's runs for the score's interval.
const BOOTSTRAP: usize = 1000;
/// The variants run when KF_VARIANTS is not set.
const DEFAULT_VARIANTS: &str = "default,gradient,previous,single-cell,no-screening";
const USAGE: &str = "usage: bench --budget CACHE | --axis-end CACHE | --variants\n\
    \x20      bench --trace CACHE VARIANT SEED_FROM SEED_TO MAX_EVALS OUT.jsonl\n\
    \x20      bench --score CACHE [--scores S.jsonl] TRACES.jsonl ...\n\
    \x20      bench CACHE SEEDS [--scores S.jsonl] [TRACES.jsonl ...]\n\
    \x20      bench --summary S.jsonl ...";

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

fn parse<T: std::str::FromStr>(what: &str, s: Option<&String>) -> T {
    let s = s.unwrap_or_else(|| fail(format!("missing {what}\n{USAGE}")));
    s.parse()
        .unwrap_or_else(|_| fail(format!("bad {what} `{s}`")))
}

fn load(path: &Path) -> (CacheSpace, Baseline) {
    let cache = CacheSpace::load(path).unwrap_or_else(|e| fail(e.to_string()));
    let base = baseline(&cache)
        .unwrap_or_else(|| fail(format!("{}: no valid configuration", path.display())));
    (cache, base)
}

/// The space's name: its file name without `.gz` and `.json`.
fn space_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    name.strip_suffix(".json").unwrap_or(name).to_string()
}

/// The kfoundry variants KF_VARIANTS picks.
fn variants() -> Vec<(String, String, Settings)> {
    variants_of(&std::env::var("KF_VARIANTS").unwrap_or_else(|_| DEFAULT_VARIANTS.into()))
}

/// The variants a comma-separated list of keys names: (key, row name, settings), in order.
fn variants_of(wanted: &str) -> Vec<(String, String, Settings)> {
    let all: [(&str, &str, Settings); 7] = [
        ("default", "kfoundry default", Settings::default()),
        ("gradient", "kfoundry gradient steering on", Settings { gradient_steering: true, ..Settings::default() }),
        ("fixed", "kfoundry fixed selection (every step screened)", Settings { selection: Selection::legacy(), ..Settings::default() }),
        (
            "previous",
            "kfoundry previous default (every step screened, gradient steering on, 12 initial samples)",
            Settings::before_adaptive_selection(),
        ),
        ("single-cell", "kfoundry single-cell", Settings { single_cell: true, ..Settings::default() }),
        ("no-screening", "kfoundry no-screening", Settings { screening: 1, ..Settings::default() }),
        // Uniform random sampling without replacement over the space as given, failing
        // configurations included (what Kernel Tuner's `random_sample` does): the baseline that
        // pays for failures as every real search does, beside the methodology's random search,
        // which draws from the configurations that succeed only.
        (
            "random",
            "kfoundry engine as uniform random sampling",
            Settings {
                initial_samples: usize::MAX,
                selection: Selection { novel_start: false, ..Selection::default() },
                ..Settings::default()
            },
        ),
    ];
    let mut out: Vec<(String, String, Settings)> = Vec::new();
    for w in wanted.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if out.iter().any(|(k, ..)| k == w) {
            continue;
        }
        if let Some((key, name, s)) = all.iter().find(|(k, ..)| *k == w) {
            out.push((key.to_string(), name.to_string(), s.clone()));
        } else if w.contains('=') {
            // free-form diagnostics: settings changes joined by `+`
            let mut s = Settings::default();
            for a in w.split('+') {
                s.set(a)
                    .unwrap_or_else(|e| fail(format!("KF_VARIANTS `{w}`: {e}")));
            }
            out.push((w.to_string(), format!("kfoundry {w}"), s));
        } else {
            let keys: Vec<&str> = all.iter().map(|(k, ..)| *k).collect();
            fail(format!(
                "KF_VARIANTS: unknown variant `{w}` (known: {}, or KEY=VALUE+...)",
                keys.join(", ")
            ));
        }
    }
    out
}

/// One kfoundry run: the configurations in the order evaluated, the trace, the wall time.
struct Run {
    seed: u64,
    keys: Vec<String>,
    trace: Trace,
    seconds: f64,
}

fn run_seeds(
    cache: &CacheSpace,
    settings: &Settings,
    seeds: std::ops::Range<u64>,
    evals: usize,
) -> Vec<Run> {
    seeds
        .map(|seed| {
            let t0 = Instant::now();
            let s = Settings {
                seed,
                max_evals: Some(evals),
                ..settings.clone()
            };
            let (result, trace) = run_once(cache, s, None).unwrap_or_else(|e| fail(e.to_string()));
            let keys = result
                .history
                .iter()
                .map(|r| {
                    r.config
                        .iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect();
            Run {
                seed,
                keys,
                trace,
                seconds: t0.elapsed().as_secs_f64(),
            }
        })
        .collect()
}

/// `bench --trace`: one variant's runs as trace lines, written atomically.
fn write_traces(args: &[String]) {
    let path = PathBuf::from(parse::<String>("CACHE", args.first()));
    let key: String = parse("VARIANT", args.get(1));
    let s0: u64 = parse("SEED_FROM", args.get(2));
    let s1: u64 = parse("SEED_TO", args.get(3));
    let evals: usize = parse("MAX_EVALS", args.get(4));
    let out = PathBuf::from(parse::<String>("OUT.jsonl", args.get(5)));
    // any key KF_VARIANTS may name, whatever it is set to
    let (_, name, settings) = variants_of(&key)
        .into_iter()
        .next()
        .unwrap_or_else(|| fail(format!("no variant `{key}`")));
    let (cache, _) = load(&path);
    let mut text = String::new();
    for run in run_seeds(&cache, &settings, s0..s1, evals) {
        let line = serde_json::json!({
            "space": cache.kernel_name,
            "strategy": name,
            "variant": key,
            "seed": run.seed,
            "trace": run.keys,
            "seconds": run.seconds,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    let tmp = PathBuf::from(format!("{}.part.{}", out.display(), std::process::id()));
    std::fs::write(&tmp, text).unwrap_or_else(|e| fail(format!("{}: {e}", tmp.display())));
    std::fs::rename(&tmp, &out).unwrap_or_else(|e| fail(format!("{}: {e}", out.display())));
}

/// A row of the table: its name, its runs' traces, the median wall time of a run, how many
/// runs crashed.
struct Row {
    name: String,
    traces: Vec<Trace>,
    seconds: Vec<f64>,
    errors: usize,
}

/// The trace files' runs on this cache's space, grouped by strategy: kfoundry rows first in
/// the order they appear, then Kernel Tuner's by name.
fn read_traces(cache: &CacheSpace, files: &[String]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| fail(format!("{f}: {e}")));
        for (ln, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| fail(format!("{f}:{}: {e}", ln + 1)));
            if v["space"].as_str() != Some(cache.kernel_name.as_str()) {
                continue;
            }
            let strategy = v["strategy"].as_str().unwrap_or("?");
            let name = if strategy.starts_with("kfoundry") {
                strategy.to_string()
            } else {
                format!("KT {strategy}")
            };
            let mut trace = Trace::default();
            for k in v["trace"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                let key = k.as_str().unwrap_or("");
                let config: Vec<i64> = key
                    .split(',')
                    .filter_map(|x| x.trim().parse().ok())
                    .collect();
                let e = cache.evaluation(&config);
                trace.times.push(e.time());
                trace.costs.push(e.cost());
            }
            let i = *index.entry(name.clone()).or_insert_with(|| {
                rows.push(Row {
                    name,
                    traces: Vec::new(),
                    seconds: Vec::new(),
                    errors: 0,
                });
                rows.len() - 1
            });
            let row = &mut rows[i];
            row.traces.push(trace);
            row.seconds.push(v["seconds"].as_f64().unwrap_or(f64::NAN));
            if v.get("error").is_some_and(|e| !e.is_null()) {
                row.errors += 1;
            }
        }
    }
    // stable: kfoundry rows keep their order
    rows.sort_by_key(|r| {
        if r.name.starts_with("kfoundry") {
            (0, String::new())
        } else {
            (1, r.name.clone())
        }
    });
    rows
}

/// Prints the space's table and, with `scores`, writes its JSON lines (atomically).
fn table(path: &Path, cache: &CacheSpace, base: &Baseline, rows: &[Row], scores: Option<&Path>) {
    let evals = budget(base);
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
    let boots: Vec<Vec<f64>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| methodology::bootstrap_score_evals(base, &r.traces, BOOTSTRAP, i as u64))
        .collect();
    let first = rows.first().map_or(String::new(), |r| r.name.clone());
    println!("| strategy | seeds | score (evals) | 90% interval | P({first} above) | below random | score (time) | @50 | @100 | @200 | @500 | median evals done | s/run |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut lines = String::new();
    for (i, r) in rows.iter().enumerate() {
        let name = if r.errors > 0 {
            format!("{} ({} runs crashed)", r.name, r.errors)
        } else {
            r.name.clone()
        };
        let (lo, hi) = (
            methodology::quantile(&boots[i], 0.05),
            methodology::quantile(&boots[i], 0.95),
        );
        let above = if i == 0 {
            "–".to_string()
        } else {
            format!("{:.2}", methodology::share_above(&boots[0], &boots[i]))
        };
        let fr: Vec<String> = FRACTIONS_AT
            .iter()
            .map(|&m| format!("{:.4}", methodology::median_fraction(base, &r.traces, m)))
            .collect();
        let done = median(r.traces.iter().map(|t| t.times.len() as f64).collect());
        let score = methodology::score_evals(base, &r.traces);
        let score_time = methodology::score_time(base, &r.traces);
        let below = methodology::below_random_share(base, &r.traces);
        println!(
            "| {} | {} | {:.4} | {:.3}–{:.3} | {} | {:.2} | {:.4} | {} | {:.0} | {:.2} |",
            name,
            r.traces.len(),
            score,
            lo,
            hi,
            above,
            below,
            score_time,
            fr.join(" | "),
            done,
            median(r.seconds.clone())
        );
        let line = serde_json::json!({
            "space": space_name(path),
            "kernel": cache.kernel_name,
            "device": cache.device_name,
            "strategy": r.name,
            "seeds": r.traces.len(),
            "crashed": r.errors,
            "score": score,
            "lo": lo,
            "hi": hi,
            "score_time": score_time,
            "below_random": below,
        });
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    println!();
    if std::env::var("CURVE").is_ok() {
        let at = [
            5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 1400,
        ];
        println!("P(M) at {at:?}");
        for r in rows {
            let c = methodology::curve_evals(base, &r.traces, &at);
            let c: Vec<String> = c.iter().map(|x| format!("{x:.2}")).collect();
            println!("{:32} {}", r.name, c.join(" "));
        }
    }
    if let Some(out) = scores {
        let tmp = PathBuf::from(format!("{}.part.{}", out.display(), std::process::id()));
        std::fs::write(&tmp, lines).unwrap_or_else(|e| fail(format!("{}: {e}", tmp.display())));
        std::fs::rename(&tmp, out).unwrap_or_else(|e| fail(format!("{}: {e}", out.display())));
    }
}

/// `bench --score` and `bench CACHE SEEDS`: `seeds` is `Some` when kfoundry runs here.
fn score(args: &[String], seeds: Option<u64>) {
    let path = PathBuf::from(parse::<String>("CACHE", args.first()));
    let mut rest = &args[if seeds.is_some() { 2 } else { 1 }..];
    let mut scores = None;
    if rest.first().map(String::as_str) == Some("--scores") {
        scores = Some(PathBuf::from(parse::<String>(
            "the --scores file",
            rest.get(1),
        )));
        rest = &rest[2..];
    }
    let (cache, base) = load(&path);
    let mut rows = Vec::new();
    if let Some(seeds) = seeds {
        for (_, name, settings) in variants() {
            let runs = run_seeds(&cache, &settings, 0..seeds, budget(&base));
            let seconds = runs.iter().map(|r| r.seconds).collect();
            rows.push(Row {
                name,
                traces: runs.into_iter().map(|r| r.trace).collect(),
                seconds,
                errors: 0,
            });
        }
    }
    let mut traced = read_traces(&cache, rest);
    // a row both run here and read from a file would be two rows of the same name: merge
    traced.retain_mut(|t| match rows.iter_mut().find(|r| r.name == t.name) {
        Some(r) => {
            r.traces.append(&mut t.traces);
            r.seconds.append(&mut t.seconds);
            r.errors += t.errors;
            false
        }
        None => true,
    });
    rows.append(&mut traced);
    table(&path, &cache, &base, &rows, scores.as_deref());
}

/// `bench --summary`: per strategy, the mean score over spaces, the worst space, and the
/// share of the score axis below random search (mean, and the worst space's).
fn summary(files: &[String]) {
    struct Line {
        space: String,
        strategy: String,
        score: f64,
        below: f64,
    }
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let mut lines = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| fail(format!("{f}: {e}")));
        for (ln, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| fail(format!("{f}:{}: {e}", ln + 1)));
            let s = |k: &str| v[k].as_str().unwrap_or("?").to_string();
            lines.push(Line {
                space: s("space"),
                strategy: s("strategy"),
                score: num(&v["score"]),
                below: num(&v["below_random"]),
            });
        }
    }
    let mut spaces: Vec<String> = Vec::new();
    let mut strategies: Vec<String> = Vec::new();
    for l in &lines {
        if !spaces.contains(&l.space) {
            spaces.push(l.space.clone());
        }
        if !strategies.contains(&l.strategy) {
            strategies.push(l.strategy.clone());
        }
    }
    strategies.sort_by_key(|s| {
        if s.starts_with("kfoundry") {
            (0, String::new())
        } else {
            (1, s.clone())
        }
    });
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!("## Summary over {} spaces", spaces.len());
    println!();
    println!("mean score: of the methodology score (evals) over the spaces; worst space: the lowest score; below random: the share");
    println!("of the score axis's points where the median best-so-far is worse than random search's (mean over the spaces, and the");
    println!("highest, with its space). A strategy missing on some spaces is averaged over the spaces it has.");
    println!();
    println!("| strategy | spaces | mean score | worst space (score) | below random, mean | below random, worst space |");
    println!("| --- | ---: | ---: | --- | ---: | --- |");
    for st in &strategies {
        let of: Vec<&Line> = lines
            .iter()
            .filter(|l| &l.strategy == st && !l.score.is_nan())
            .collect();
        let (Some(worst), Some(most_below)) = (
            of.iter().min_by(|a, b| a.score.total_cmp(&b.score)),
            of.iter().max_by(|a, b| a.below.total_cmp(&b.below)),
        ) else {
            continue;
        };
        println!(
            "| {st} | {}/{} | {:.4} | {} ({:.4}) | {:.2} | {} ({:.2}) |",
            of.len(),
            spaces.len(),
            mean(&of.iter().map(|l| l.score).collect::<Vec<_>>()),
            worst.space,
            worst.score,
            mean(&of.iter().map(|l| l.below).collect::<Vec<_>>()),
            most_below.space,
            most_below.below
        );
    }
    println!();
    println!("score (evals) per space:");
    println!();
    println!("| strategy | {} |", spaces.join(" | "));
    println!("| --- |{}", " ---: |".repeat(spaces.len()));
    for st in &strategies {
        let cells: Vec<String> = spaces
            .iter()
            .map(|sp| {
                lines
                    .iter()
                    .find(|l| &l.strategy == st && &l.space == sp)
                    .map_or("–".to_string(), |l| format!("{:.4}", l.score))
            })
            .collect();
        println!("| {st} | {} |", cells.join(" | "));
    }
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(flag @ ("--budget" | "--axis-end")) => {
            let (_, b) = load(Path::new(&parse::<String>("CACHE", args.get(1))));
            println!(
                "{}",
                if flag == "--budget" {
                    budget(&b)
                } else {
                    b.eval_axis().1
                }
            );
        }
        Some("--variants") => {
            let mut out = std::io::stdout().lock();
            for (key, ..) in variants() {
                writeln!(out, "{key}").unwrap_or_else(|e| fail(e.to_string()));
            }
        }
        Some("--trace") => write_traces(&args[1..]),
        Some("--score") => score(&args[1..], None),
        Some("--summary") => summary(&args[1..]),
        Some(a) if !a.starts_with('-') && args.len() >= 2 => {
            let seeds = parse("seed count", args.get(1));
            score(&args, Some(seeds));
        }
        _ => fail(USAGE.into()),
    }
}
