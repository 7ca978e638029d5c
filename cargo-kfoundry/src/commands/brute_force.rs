//! `cargo kfoundry brute-force`: evaluates every valid configuration of a kernel's search space
//! on a device and writes the results as a Kernel Tuner cache file, which
//! `cargo kfoundry simulate FILE` (or Kernel Tuner itself) replays.
//!
//! The configurations are the Cartesian product of the parameter values in declaration order
//! (the last parameter varying fastest, like Kernel Tuner), less those the annotation's
//! constraints or the device's limits reject: those are absent from the file, which in the
//! format means "violates the restrictions". The reference is evaluated first (it calibrates
//! the per-candidate time limit, as in `tune`), then the rest in enumeration order, each in the
//! same supervised worker process as `tune` (hangs and crashes are recorded as failures).
//! The file is replaced atomically every [`WRITE_EVERY`] evaluations and at the end; `--resume`
//! skips the configurations an earlier run already wrote.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _, Result};
use indicatif::{ProgressBar, ProgressStyle};
use kfoundry_rt::model::spec::{KernelSpec, Param, Workload};
use kfoundry_search::{Config, Evaluation, FailureKind};
use kfoundry_tooling::files::{state_file_name, write_atomic};
use serde_json::{json, Map, Value};

use crate::cli::{BruteForceArgs, MessageFormat};
use crate::devices::{self, Selected};
use crate::discover::{sources, Kernel};
use crate::evaluate::supervisor::Supervised;
use crate::evaluate::{config_of, params_of, Settings as EvalSettings};
use crate::interrupt;
use crate::report::fmt_ns;

/// The file is rewritten after this many new evaluations (and at the end).
const WRITE_EVERY: usize = 25;
/// Cartesian products larger than this are not even enumerated.
const ENUMERATION_LIMIT: u128 = 10_000_000;
/// Failure reasons kept in a record, in characters.
const REASON_CHARS: usize = 200;
/// What the cost fields mean in our files.
const COST_NOTE: &str = "benchmark_time holds the whole evaluation's cost";

/// The Cartesian product of the parameters' values in declaration order, the last parameter
/// varying fastest (Kernel Tuner's and `itertools.product`'s order).
pub struct Product<'a> {
    params: &'a [Param],
    next: Option<Vec<usize>>,
}

pub fn product(params: &[Param]) -> Product<'_> {
    let next = if params.iter().any(|p| p.values.is_empty()) { None } else { Some(vec![0; params.len()]) };
    Product { params, next }
}

impl Iterator for Product<'_> {
    type Item = Config;

    fn next(&mut self) -> Option<Config> {
        let idx = self.next.as_mut()?;
        let config: Config = self.params.iter().zip(idx.iter()).filter_map(|(p, &i)| p.values.get(i).copied()).collect();
        // Advance the odometer; past the last configuration there is none.
        let mut d = idx.len();
        loop {
            if d == 0 {
                self.next = None;
                break;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < self.params[d].values.len() {
                break;
            }
            idx[d] = 0;
        }
        Some(config)
    }
}

/// The configurations `accepts` keeps, in enumeration order; `Err(count)` with their number
/// when there are more than `max` (counting goes on past `max`, storing nothing more).
pub fn valid_configs(params: &[Param], accepts: impl Fn(&Config) -> bool, max: usize) -> Result<Vec<Config>, usize> {
    let mut valid = Vec::new();
    let mut count = 0usize;
    for config in product(params) {
        if accepts(&config) {
            count += 1;
            if count <= max {
                valid.push(config);
            }
        }
    }
    if count > max {
        Err(count)
    } else {
        Ok(valid)
    }
}

/// The order of evaluation: the reference first (when valid), then enumeration order.
pub fn evaluation_order(valid: Vec<Config>, reference: &Config) -> Vec<Config> {
    let mut order = Vec::with_capacity(valid.len());
    if valid.contains(reference) {
        order.push(reference.clone());
    }
    order.extend(valid.into_iter().filter(|c| c != reference));
    order
}

/// The cache key of a configuration: its values joined by commas, in parameter order.
pub fn cache_key(config: &Config) -> String {
    config.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// Kernel Tuner's name for a failure in the `time` field.
pub fn failure_name(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::Build => "CompilationFailedConfig",
        FailureKind::Invalid => "InvalidConfig",
        FailureKind::Runtime | FailureKind::Wrong | FailureKind::Timeout => "RuntimeFailedConfig",
    }
}

/// The first line of `text`, at most [`REASON_CHARS`] characters.
fn short(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    if line.chars().count() > REASON_CHARS {
        format!("{}…", line.chars().take(REASON_CHARS).collect::<String>())
    } else {
        line.to_string()
    }
}

/// The cache record of one evaluation: every parameter's value, `time` in milliseconds (or the
/// failure's name, with our kind and reason in `kfoundry_failure`), and the evaluation's whole
/// cost in `benchmark_time` (milliseconds; `compile_time` and `verification_time` are 0: our
/// evaluations are not broken down).
pub fn record(names: &[String], config: &Config, evaluation: &Evaluation) -> Value {
    let mut r = Map::new();
    for (name, value) in names.iter().zip(config) {
        r.insert(name.clone(), json!(value));
    }
    let failure = |kind: FailureKind, reason: String| (json!(failure_name(kind)), Some(json!({ "kind": kind.name(), "reason": reason })));
    let (time, failure) = match evaluation {
        Evaluation::Ok { time, .. } if time.is_finite() && *time > 0.0 => (json!(time * 1000.0), None),
        Evaluation::Ok { time, .. } => failure(FailureKind::Runtime, format!("the measured time {time} s is not usable")),
        Evaluation::Failed { kind, reason, .. } => failure(*kind, short(reason)),
    };
    r.insert("time".into(), time);
    if let Some(f) = failure {
        r.insert("kfoundry_failure".into(), f);
    }
    r.insert("compile_time".into(), json!(0.0));
    r.insert("verification_time".into(), json!(0.0));
    r.insert("benchmark_time".into(), json!(evaluation.cost() * 1000.0));
    Value::Object(r)
}

/// What the file says about itself: everything but `cache`.
pub struct Header {
    pub kernel: String,
    pub fingerprint: String,
    pub params: Vec<Param>,
    /// The workload's sizes in the kernel's declaration order.
    pub sizes: Vec<(String, i64)>,
    pub workload: String,
    pub device_name: String,
    pub device_key: String,
    pub repeats: usize,
    pub seed: u64,
    /// Valid configurations of the space (the file is complete when it holds them all).
    pub valid: usize,
}

impl Header {
    pub fn new(
        spec: &KernelSpec,
        workload: &Workload,
        device_name: &str,
        device_key: &str,
        repeats: usize,
        seed: u64,
    ) -> Result<Header, kfoundry_tooling::FingerprintError> {
        Ok(Header {
            kernel: spec.id.clone(),
            fingerprint: kfoundry_tooling::fingerprint(spec)?,
            params: spec.params.clone(),
            sizes: spec.sizes.iter().filter_map(|s| workload.sizes.get(s).map(|v| (s.clone(), *v))).collect(),
            workload: workload.name.clone(),
            device_name: device_name.to_string(),
            device_key: device_key.to_string(),
            repeats,
            seed,
            valid: 0,
        })
    }

    pub fn names(&self) -> Vec<String> {
        self.params.iter().map(|p| p.name.clone()).collect()
    }

    /// The top-level fields other than `cache`.
    fn fields(&self) -> Map<String, Value> {
        let mut tune_params = Map::new();
        for p in &self.params {
            tune_params.insert(p.name.clone(), json!(p.values));
        }
        let sizes: Map<String, Value> = self.sizes.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        let mut m = Map::new();
        m.insert("device_name".into(), json!(self.device_name));
        m.insert("kernel_name".into(), json!(self.kernel));
        m.insert("problem_size".into(), json!(self.sizes.iter().map(|(_, v)| *v).collect::<Vec<_>>()));
        m.insert("tune_params_keys".into(), json!(self.names()));
        m.insert("tune_params".into(), Value::Object(tune_params));
        m.insert("objective".into(), json!("time"));
        m.insert(
            "kfoundry".into(),
            json!({
                "tool": "cargo-kfoundry brute-force",
                "version": env!("CARGO_PKG_VERSION"),
                "device_key": self.device_key,
                "workload": self.workload,
                "sizes": sizes,
                "fingerprint": self.fingerprint,
                "repeats": self.repeats,
                "seed": self.seed,
                "note": COST_NOTE,
                "time": "median of `repeats` timed runs after one warm-up, in ms; every configuration was checked against the reference on fresh random inputs first",
            }),
        );
        m
    }

    /// The whole file.
    pub fn document(&self, cache: &Map<String, Value>) -> Value {
        let mut m = self.fields();
        if let Some(Value::Object(k)) = m.get_mut("kfoundry") {
            k.insert("valid_configurations".into(), json!(self.valid));
            k.insert("complete".into(), json!(cache.len() >= self.valid));
        }
        m.insert("cache".into(), Value::Object(cache.clone()));
        Value::Object(m)
    }
}

/// The records of an earlier file (`existing`) that this run can keep: those of configurations
/// still valid. `Err` saying what differs when the file is of another kernel version, workload,
/// device or measurement settings.
pub fn resumable(existing: &Value, header: &Header, valid: &BTreeSet<String>) -> Result<Map<String, Value>, String> {
    let ours = Value::Object(header.fields());
    let same = |field: &str, pointer: &str| {
        let (theirs, mine) = (existing.pointer(pointer), ours.pointer(pointer));
        if theirs == mine {
            Ok(())
        } else {
            let show = |v: Option<&Value>| v.map_or("missing".to_string(), Value::to_string);
            Err(format!("its {field} is {}, this run's is {}", show(theirs), show(mine)))
        }
    };
    same("kernel", "/kernel_name")?;
    same("kernel fingerprint (source and annotation)", "/kfoundry/fingerprint")?;
    same("parameters", "/tune_params_keys")?;
    same("parameter values", "/tune_params")?;
    same("device key", "/kfoundry/device_key")?;
    same("workload", "/kfoundry/workload")?;
    same("sizes", "/kfoundry/sizes")?;
    same("--repeats", "/kfoundry/repeats")?;
    same("--seed", "/kfoundry/seed")?;
    let cache = existing.get("cache").and_then(Value::as_object).ok_or("it has no `cache` object")?;
    Ok(cache
        .iter()
        .filter(|(k, r)| valid.contains(k.as_str()) && r.get("time").is_some_and(|t| t.is_number() || t.is_string()))
        .map(|(k, r)| (k.clone(), r.clone()))
        .collect())
}

/// Counts of a cache: timed configurations, failures by kind, the best time (ms) and its key.
#[derive(Debug, Default, PartialEq)]
pub struct Tally {
    pub timed: usize,
    pub failures: BTreeMap<String, usize>,
    pub best: Option<(String, f64)>,
}

pub fn tally(cache: &Map<String, Value>) -> Tally {
    let mut t = Tally::default();
    for (key, r) in cache {
        match r.get("time") {
            Some(Value::Number(n)) => {
                t.timed += 1;
                let ms = n.as_f64().unwrap_or(f64::INFINITY);
                if t.best.as_ref().is_none_or(|(_, b)| ms < *b) {
                    t.best = Some((key.clone(), ms));
                }
            }
            other => {
                let kind = r
                    .get("kfoundry_failure")
                    .and_then(|f| f.get("kind"))
                    .and_then(Value::as_str)
                    .or_else(|| other.and_then(Value::as_str))
                    .unwrap_or("unknown");
                *t.failures.entry(kind.to_string()).or_default() += 1;
            }
        }
    }
    t
}

/// `<safe kernel id>@<workload>@<safe device key>.json`.
pub fn file_name(kernel: &str, workload: &str, device_key: &str) -> String {
    state_file_name(&[kernel, workload, device_key], "json")
}

/// `A=1 B=2` from a cache key, in parameter order.
fn fmt_key(names: &[String], key: &str) -> String {
    names.iter().zip(key.split(',')).map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(" ")
}

/// What brute-forcing one kernel at one workload gave.
struct Done {
    kernel: String,
    workload: String,
    path: PathBuf,
    valid: usize,
    evaluated: usize,
    resumed: usize,
    names: Vec<String>,
    tally: Tally,
    interrupted: bool,
}

impl Done {
    fn line(&self) -> String {
        let failed: usize = self.tally.failures.values().sum();
        let kinds: Vec<String> = self.tally.failures.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let failures = if failed == 0 { "no failures".to_string() } else { format!("{failed} failed ({})", kinds.join(", ")) };
        let best = match &self.tally.best {
            Some((key, ms)) => format!("best {} at {}", fmt_ns(ms * 1e6), fmt_key(&self.names, key)),
            None => "no configuration succeeded".to_string(),
        };
        let done = self.evaluated + self.resumed;
        let progress = if done < self.valid { format!(", {done} done") } else { String::new() };
        format!(
            "{} @ {}: {} valid configurations ({} evaluated, {} resumed{progress}), {failures}, {best} → {}",
            self.kernel,
            self.workload,
            self.valid,
            self.evaluated,
            self.resumed,
            self.path.display()
        )
    }

    fn json(&self, device_key: &str) -> Value {
        let best = self.tally.best.as_ref().map(|(key, _)| {
            let values = self.names.iter().zip(key.split(',')).map(|(n, v)| (n.clone(), v.parse::<i64>().map_or(json!(v), |v| json!(v))));
            Value::Object(values.collect())
        });
        json!({
            "reason": "brute-forced",
            "kernel": self.kernel,
            "workload": self.workload,
            "device": device_key,
            "path": self.path,
            "valid": self.valid,
            "evaluated": self.evaluated,
            "resumed": self.resumed,
            "timed": self.tally.timed,
            "failures": self.tally.failures,
            "best_time_ms": self.tally.best.as_ref().map(|(_, ms)| *ms),
            "best": best,
            "interrupted": self.interrupted,
        })
    }
}

pub fn run(args: &BruteForceArgs) -> Result<()> {
    let json = args.ws.message_format == MessageFormat::Json;
    let quiet = args.ws.quiet || json;
    let src = sources(&args.ws, args.bundle.as_deref(), None)?;
    for text in &args.kernels {
        if !src.kernels.iter().any(|k| k.spec.id.contains(text.as_str())) {
            bail!("no annotated kernel matches `--kernel {text}`");
        }
    }
    let kernels: Vec<&Kernel> =
        src.kernels.iter().filter(|k| args.kernels.is_empty() || args.kernels.iter().any(|t| k.spec.id.contains(t.as_str()))).collect();
    let jobs: Vec<(&Kernel, &Workload)> = kernels
        .iter()
        .flat_map(|k| k.spec.workloads.iter().map(move |w| (*k, w)))
        .filter(|(_, w)| args.workloads.is_empty() || args.workloads.contains(&w.name))
        .collect();
    if jobs.is_empty() {
        bail!(
            "nothing to brute-force: {}",
            if kernels.is_empty() {
                "no annotated kernel found".to_string()
            } else {
                format!("no kernel has a workload named {}", args.workloads.join(" or "))
            }
        );
    }
    let out_dir = args.out.clone().unwrap_or_else(|| src.state_dir.join("spaces"));
    std::fs::create_dir_all(&out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let device = devices::select(args.device.as_deref())?;
    interrupt::install()?;
    if !quiet {
        eprintln!("brute-forcing {} kernel/workload pair(s) on {} ({}) into {}", jobs.len(), device.info.name, device.key, out_dir.display());
    }
    let device_key = device.key.to_string();
    for (kernel, workload) in jobs {
        if interrupt::requested() {
            interrupted_exit(None);
        }
        let done = brute_one(args, &device, &kernel.spec, workload, &out_dir, quiet)
            .with_context(|| format!("{}: brute-forcing `{}` at workload `{}`", kernel.location(), kernel.spec.id, workload.name))?;
        if json {
            println!("{}", done.json(&device_key));
        } else {
            println!("{}", done.line());
        }
        if done.interrupted {
            interrupted_exit(Some(&done));
        }
    }
    Ok(())
}

fn interrupted_exit(done: Option<&Done>) -> ! {
    match done {
        Some(d) => eprintln!(
            "interrupted: {} of {} configurations are in {}; `cargo kfoundry brute-force --resume` (same arguments) continues",
            d.evaluated + d.resumed,
            d.valid,
            d.path.display()
        ),
        None => eprintln!("interrupted: the files written so far are complete; `cargo kfoundry brute-force --resume` (same arguments) continues"),
    }
    std::process::exit(130);
}

/// The file's text in Kernel Tuner's own layout, which its reader relies on: the fields in
/// Kernel Tuner's order with `cache` last, one record per line, ending in `}\n}` (Kernel Tuner
/// reopens a cache file for appending by cutting those three characters).
pub fn kernel_tuner_text(document: &Value) -> Result<String> {
    const ORDER: [&str; 7] = ["device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params", "objective", "kfoundry"];
    let Value::Object(fields) = document else { bail!("a cache document is a JSON object") };
    let mut out = String::from("{\n");
    for key in ORDER {
        if let Some(v) = fields.get(key) {
            out += &format!("{}: {},\n", serde_json::to_string(key)?, serde_json::to_string(v)?);
        }
    }
    out += "\"cache\": {";
    let empty = Map::new();
    let cache = fields.get("cache").and_then(Value::as_object).unwrap_or(&empty);
    for (i, (key, record)) in cache.iter().enumerate() {
        out += if i == 0 { "\n" } else { ",\n" };
        out += &format!("{}: {}", serde_json::to_string(key)?, serde_json::to_string(record)?);
    }
    out += "\n}\n}";
    Ok(out)
}

fn write(path: &Path, header: &Header, cache: &Map<String, Value>) -> Result<()> {
    let text = kernel_tuner_text(&header.document(cache))?;
    write_atomic(path, text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

fn brute_one(args: &BruteForceArgs, device: &Selected, spec: &KernelSpec, workload: &Workload, out_dir: &Path, quiet: bool) -> Result<Done> {
    if spec.params.is_empty() {
        bail!("`{}` has no tunable parameters: there is no space to brute-force", spec.id);
    }
    let product_size = spec.space_size();
    if product_size > ENUMERATION_LIMIT {
        bail!(
            "{} @ {}: the Cartesian product of the parameter values has {product_size} configurations, more than {ENUMERATION_LIMIT} are not enumerated; narrow the parameters",
            spec.id,
            workload.name
        );
    }
    let device_key = device.key.to_string();
    let path = out_dir.join(file_name(&spec.id, &workload.name, &device_key));
    let settings = EvalSettings { repeats: args.repeats, seed: args.seed, ..EvalSettings::default() };
    let time = args.limits.time_limits();
    // The worker builds and checks the reference, and knows the device's limits.
    let mut bench = Supervised::start(spec, &workload.sizes, device.index, settings, time)?;
    let validity = bench.validity();
    let valid = valid_configs(&spec.params, |c| validity.accepts(c), args.max_configs).map_err(|count| {
        anyhow!(
            "{} @ {}: {count} valid configurations (of {product_size} in the Cartesian product), more than --max-configs {}; raise --max-configs or narrow the space",
            spec.id,
            workload.name,
            args.max_configs
        )
    })?;
    let header = Header { valid: valid.len(), ..Header::new(spec, workload, &device.info.name, &device_key, args.repeats, args.seed)? };
    let names = header.names();
    let valid_keys: BTreeSet<String> = valid.iter().map(cache_key).collect();
    let mut cache = Map::new();
    if args.resume {
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let existing: Value = serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))?;
                cache = resumable(&existing, &header, &valid_keys)
                    .map_err(|why| anyhow!("cannot resume from {}: {why}; run without --resume to start over", path.display()))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !args.ws.quiet {
                    eprintln!("note: {} does not exist yet; nothing to resume", path.display());
                }
            }
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    } else if path.exists() && !args.ws.quiet {
        eprintln!("note: {} exists and will be replaced (`--resume` keeps what it holds)", path.display());
    }
    let resumed = cache.len();
    let reference = config_of(spec, &spec.reference);
    if let Some(r) = cache.get(&cache_key(&reference)) {
        // The reference's cost from the earlier run sets the time limit, as evaluating it would.
        let cost_ms = if r.get("time").is_some_and(Value::is_number) { r.get("benchmark_time").and_then(Value::as_f64).unwrap_or(0.0) } else { 0.0 };
        bench.calibrate(cost_ms / 1000.0);
    }
    let todo: Vec<Config> = evaluation_order(valid, &reference).into_iter().filter(|c| !cache.contains_key(&cache_key(c))).collect();

    let total = valid_keys.len();
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(total as u64) };
    bar.set_style(
        ProgressStyle::with_template("{prefix:.bold} [{bar:30}] {pos}/{len} configs  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{} @ {}", spec.id, workload.name));
    bar.set_position(resumed as u64);
    if resumed > 0 && !args.ws.quiet {
        eprintln!("{} @ {}: resuming: {resumed} of {total} configurations already in {}", spec.id, workload.name, path.display());
    }
    let verbose = args.ws.verbose > 0 && !quiet;
    let (mut evaluated, mut since_write, mut interrupted) = (0usize, 0usize, false);
    let mut best: Option<f64> = tally(&cache).best.map(|(_, ms)| ms);
    let mut failures = 0usize;
    for config in &todo {
        if interrupt::requested() {
            interrupted = true;
            break;
        }
        let evaluation = bench.evaluate_params(&params_of(spec, config));
        let key = cache_key(config);
        if verbose {
            let outcome = match &evaluation {
                Evaluation::Ok { time, .. } => fmt_ns(time * 1e9),
                Evaluation::Failed { kind, reason, .. } => format!("{}: {}", kind.name(), short(reason)),
            };
            bar.println(format!("  {} → {outcome}", fmt_key(&names, &key)));
        }
        match evaluation.time() {
            Some(t) => best = Some(best.map_or(t * 1000.0, |b| b.min(t * 1000.0))),
            None => failures += 1,
        }
        cache.insert(key, record(&names, config, &evaluation));
        evaluated += 1;
        since_write += 1;
        bar.inc(1);
        bar.set_message(format!("best {}  failures {failures}", best.map_or("-".to_string(), |ms| fmt_ns(ms * 1e6))));
        if since_write >= WRITE_EVERY {
            write(&path, &header, &cache)?;
            since_write = 0;
        }
    }
    bar.finish_and_clear();
    write(&path, &header, &cache)?;
    Ok(Done {
        kernel: spec.id.clone(),
        workload: workload.name.clone(),
        path,
        valid: total,
        evaluated,
        resumed,
        names,
        tally: tally(&cache),
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::{Limits, Validity};
    use kfoundry_tooling::annotation::{parse, Context};

    fn p(name: &str, values: &[i64]) -> Param {
        Param { name: name.into(), values: values.to_vec() }
    }

    fn spec() -> KernelSpec {
        let src = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)]; }";
        let args: proc_macro2::TokenStream = format!(
            "code = {src:?}, params(WG = [16, 64, 256], V = [1, 2, 4]), reference(WG = 16, V = 1), require(WG * V <= 256), global = n / V, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"
        )
        .parse()
        .unwrap();
        let item: syn::Item = syn::parse_str("pub struct K;").unwrap();
        let dir = std::env::temp_dir();
        parse(args, &item, &Context { package: "t", manifest_dir: &dir }).unwrap().spec
    }

    #[test]
    fn enumerates_in_declaration_order_last_fastest() {
        let params = [p("a", &[1, 2]), p("b", &[10, 20, 30])];
        let all: Vec<Config> = product(&params).collect();
        assert_eq!(all, vec![vec![1, 10], vec![1, 20], vec![1, 30], vec![2, 10], vec![2, 20], vec![2, 30]]);
        assert_eq!(product(&[p("a", &[1]), p("b", &[])]).count(), 0, "an empty domain has no configuration");
        assert_eq!(product(&[]).collect::<Vec<_>>(), vec![Vec::<i64>::new()]);
        assert_eq!(cache_key(&vec![16, -1, 0]), "16,-1,0");
    }

    #[test]
    fn filters_by_the_constraints_and_the_device_limits_and_refuses_large_spaces() {
        let spec = spec();
        let sizes = spec.workloads[0].sizes.clone();
        let limits =
            |max_wg| Limits { max_work_group_size: max_wg, max_work_item_sizes: vec![max_wg], local_mem_bytes: 1 << 16, ..Limits::default() };
        // require(WG * V <= 256) drops (256, 2) and (256, 4).
        let v = Validity::new(spec.clone(), sizes.clone(), limits(1024));
        let valid = valid_configs(&spec.params, |c| v.accepts(c), 100).unwrap();
        assert_eq!(valid, vec![vec![16, 1], vec![16, 2], vec![16, 4], vec![64, 1], vec![64, 2], vec![64, 4], vec![256, 1]]);
        // A device whose work-groups hold at most 64 items drops WG = 256 as well.
        let v = Validity::new(spec.clone(), sizes, limits(64));
        let valid = valid_configs(&spec.params, |c| v.accepts(c), 100).unwrap();
        assert_eq!(valid.len(), 6);
        assert!(valid.iter().all(|c| c[0] <= 64));
        // More than `max`: the full count comes back.
        assert_eq!(valid_configs(&spec.params, |c| v.accepts(c), 4), Err(6));
        assert_eq!(valid_configs(&spec.params, |c| v.accepts(c), 6).map(|v| v.len()), Ok(6));
        // The reference first, then enumeration order.
        let order = evaluation_order(valid, &vec![64, 2]);
        assert_eq!(order[0], vec![64, 2]);
        assert_eq!(order[1..], [vec![16, 1], vec![16, 2], vec![16, 4], vec![64, 1], vec![64, 4]]);
    }

    #[test]
    fn records_times_in_milliseconds_and_failures_by_name() {
        let names = vec!["WG".to_string(), "V".to_string()];
        let c = vec![64, 2];
        let ok = record(&names, &c, &Evaluation::ok(0.0125, 1.5));
        assert_eq!(ok["WG"], 64);
        assert_eq!(ok["V"], 2);
        assert!((ok["time"].as_f64().unwrap() - 12.5).abs() < 1e-9);
        assert!((ok["benchmark_time"].as_f64().unwrap() - 1500.0).abs() < 1e-9);
        assert_eq!(ok["compile_time"], 0.0);
        assert_eq!(ok["verification_time"], 0.0);
        assert!(ok.get("kfoundry_failure").is_none());
        let cases = [
            (FailureKind::Build, "CompilationFailedConfig", "build"),
            (FailureKind::Runtime, "RuntimeFailedConfig", "runtime"),
            (FailureKind::Wrong, "RuntimeFailedConfig", "wrong"),
            (FailureKind::Timeout, "RuntimeFailedConfig", "timeout"),
            (FailureKind::Invalid, "InvalidConfig", "invalid"),
        ];
        for (kind, name, ours) in cases {
            let r = record(&names, &c, &Evaluation::failed(kind, format!("\nwhy it failed\nsecond line {}", "x".repeat(500)), 0.25));
            assert_eq!(r["time"], name);
            assert_eq!(r["kfoundry_failure"]["kind"], ours);
            assert_eq!(r["kfoundry_failure"]["reason"], "why it failed");
            assert!((r["benchmark_time"].as_f64().unwrap() - 250.0).abs() < 1e-9);
        }
        let long = record(&names, &c, &Evaluation::failed(FailureKind::Wrong, "y".repeat(500), 0.0));
        assert_eq!(long["kfoundry_failure"]["reason"].as_str().unwrap().chars().count(), REASON_CHARS + 1);
        // A zero time would make the file unreadable: it is a runtime failure.
        let zero = record(&names, &c, &Evaluation::ok(0.0, 0.1));
        assert_eq!(zero["time"], "RuntimeFailedConfig");
        assert_eq!(zero["kfoundry_failure"]["kind"], "runtime");
    }

    fn header() -> Header {
        Header::new(&spec(), &spec().workloads[0], "Some Device", "1|some device|1.0|3.0", 5, 0).unwrap()
    }

    #[test]
    fn the_document_is_a_cache_file_the_simulator_reads() {
        let h = header();
        let names = h.names();
        let mut cache = Map::new();
        cache.insert("16,1".into(), record(&names, &vec![16, 1], &Evaluation::ok(0.002, 0.1)));
        cache.insert("64,2".into(), record(&names, &vec![64, 2], &Evaluation::ok(0.001, 0.1)));
        cache.insert("16,2".into(), record(&names, &vec![16, 2], &Evaluation::failed(FailureKind::Build, "no", 0.05)));
        let doc = h.document(&cache);
        assert_eq!(doc["tune_params_keys"], json!(["WG", "V"]));
        assert_eq!(doc["problem_size"], json!([4096]));
        assert_eq!(doc["kfoundry"]["sizes"], json!({ "n": 4096 }));
        assert_eq!(doc["kfoundry"]["note"], COST_NOTE);
        assert_eq!(doc["kfoundry"]["complete"], true);
        assert_eq!(Header { valid: 4, ..header() }.document(&cache)["kfoundry"]["complete"], false);
        // Kernel Tuner's layout: `cache` last, the text ending in `}\n}`, the same document
        let text = kernel_tuner_text(&doc).unwrap();
        assert!(text.ends_with("}\n}"), "{text}");
        let cache_at = text.find("\"cache\"").unwrap();
        assert!(["\"device_name\"", "\"tune_params\"", "\"kfoundry\""].iter().all(|k| text.find(k).unwrap() < cache_at));
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), doc);
        // Kernel Tuner reopens a closed file for appending by cutting `}\n}` and adding `,`
        let reopened = format!("{},\n\"99,9\": {{\"time\": 1.0}}}}\n}}", &text[..text.len() - 3]);
        assert_eq!(serde_json::from_str::<Value>(&reopened).unwrap()["cache"].as_object().unwrap().len(), 4);
        let space = kfoundry_search::CacheSpace::parse(Path::new("t.json"), &text).unwrap();
        assert_eq!(space.entries.len(), 3);
        assert_eq!(space.kernel_name, "t::K");
        assert_eq!(space.evaluation(&vec![64, 2]), Evaluation::ok(0.001, 0.1));
        assert_eq!(space.sorted_times_ms(), vec![1.0, 2.0]);
        let t = tally(&cache);
        assert_eq!(t.timed, 2);
        assert_eq!(t.failures, [("build".to_string(), 1)].into());
        assert_eq!(t.best, Some(("64,2".to_string(), 1.0)));
        assert_eq!(fmt_key(&names, "64,2"), "WG=64 V=2");
        assert_eq!(file_name("t::K", "w", "1|some device|1.0|3.0"), "t__K@w@1_some_device_1_0_3_0.json");
    }

    #[test]
    fn resume_keeps_what_was_done_and_refuses_other_runs() {
        let h = header();
        let names = h.names();
        let mut cache = Map::new();
        cache.insert("16,1".into(), record(&names, &vec![16, 1], &Evaluation::ok(0.002, 0.1)));
        cache.insert("64,4".into(), record(&names, &vec![64, 4], &Evaluation::failed(FailureKind::Timeout, "slow", 20.0)));
        cache.insert("256,4".into(), record(&names, &vec![256, 4], &Evaluation::ok(0.002, 0.1)));
        let doc = h.document(&cache);
        let valid: Vec<Config> = vec![vec![16, 1], vec![16, 2], vec![64, 4]];
        let keys: BTreeSet<String> = valid.iter().map(cache_key).collect();
        let kept = resumable(&doc, &h, &keys).unwrap();
        // A configuration no longer valid is dropped; the failure is kept (not retried).
        assert_eq!(kept.keys().cloned().collect::<Vec<_>>(), vec!["16,1".to_string(), "64,4".to_string()]);
        let todo: Vec<Config> = evaluation_order(valid, &vec![16, 1]).into_iter().filter(|c| !kept.contains_key(&cache_key(c))).collect();
        assert_eq!(todo, vec![vec![16, 2]]);
        // Everything done: nothing to do.
        let mut all = kept.clone();
        all.insert("16,2".into(), record(&names, &vec![16, 2], &Evaluation::ok(0.003, 0.1)));
        let again = resumable(&h.document(&all), &h, &keys).unwrap();
        assert!(evaluation_order(vec![vec![16, 1], vec![16, 2], vec![64, 4]], &vec![16, 1]).iter().all(|c| again.contains_key(&cache_key(c))));

        let mut other = header();
        other.seed = 7;
        let e = resumable(&doc, &other, &keys).unwrap_err();
        assert!(e.contains("--seed") && e.contains('0') && e.contains('7'), "{e}");
        let mut other = header();
        other.device_key = "2|other|1|3.0".into();
        assert!(resumable(&doc, &other, &keys).unwrap_err().contains("device key"));
        let mut other = header();
        other.fingerprint = "0000".into();
        assert!(resumable(&doc, &other, &keys).unwrap_err().contains("fingerprint"));
        assert!(resumable(&json!({}), &h, &keys).is_err());
    }
}
