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

mod cache_file;
mod enumerate;

use cache_file::{
    cache_key, file_name, kernel_tuner_text, record, resumable, short, tally, Header, Tally,
};
use enumerate::{evaluation_order, valid_configs};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _, Result};
use indicatif::{ProgressBar, ProgressStyle};
use kfoundry_rt::model::spec::{KernelSpec, Workload};
use kfoundry_search::{Config, Evaluation};
use kfoundry_tooling::files::write_atomic;
use serde_json::{Map, Value};

use crate::cli::{BruteForceArgs, MessageFormat};
use kfoundry_bench::supervisor::Supervised;
use kfoundry_bench::{config_of, params_of, Measurement};
use kfoundry_tune::device::{self as devices, Selected};
use kfoundry_tune::error::Exit;
use kfoundry_tune::interrupt;
use kfoundry_tune::messages::{BruteForced, Message};
use kfoundry_tune::pipeline::discover::{sources, Kernel};
use kfoundry_tune::text::fmt_ns;

/// The file is rewritten after this many new evaluations (and at the end).
const WRITE_EVERY: usize = 25;
/// Cartesian products larger than this are not even enumerated.
const ENUMERATION_LIMIT: u128 = 10_000_000;

/// `A=1 B=2` from a cache key, in parameter order.
pub(crate) fn fmt_key(names: &[String], key: &str) -> String {
    names
        .iter()
        .zip(key.split(','))
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
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
        let kinds: Vec<String> = self
            .tally
            .failures
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let failures = if failed == 0 {
            "no failures".to_string()
        } else {
            format!("{failed} failed ({})", kinds.join(", "))
        };
        let best = match &self.tally.best {
            Some((key, ms)) => {
                format!("best {} at {}", fmt_ns(ms * 1e6), fmt_key(&self.names, key))
            }
            None => "no configuration succeeded".to_string(),
        };
        let done = self.evaluated + self.resumed;
        let progress = if done < self.valid {
            format!(", {done} done")
        } else {
            String::new()
        };
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

    fn message(&self, device_key: &str) -> Message {
        let best = self.tally.best.as_ref().map(|(key, _)| {
            self.names
                .iter()
                .zip(key.split(','))
                .filter_map(|(n, v)| Some((n.clone(), v.parse().ok()?)))
                .collect()
        });
        Message::BruteForced(BruteForced {
            kernel: self.kernel.clone(),
            workload: self.workload.clone(),
            device: device_key.to_string(),
            path: self.path.clone(),
            valid: self.valid,
            evaluated: self.evaluated,
            resumed: self.resumed,
            timed: self.tally.timed,
            failures: self.tally.failures.clone(),
            best_time_ms: self.tally.best.as_ref().map(|(_, ms)| *ms),
            best,
            interrupted: self.interrupted,
        })
    }
}

/// `Exit::Interrupted` when Ctrl-C stopped it (the files written are complete and resumable).
pub fn run(args: &BruteForceArgs) -> Result<Exit> {
    let json = args.ws.message_format == MessageFormat::Json;
    let quiet = args.ws.quiet || json;
    let src = sources(&args.ws.options(), args.bundle.as_deref(), None)?;
    let kernels: Vec<&Kernel> = kfoundry_tune::filter::KernelFilter::new(&args.kernels)?
        .select(&src.kernels, |k| &k.spec.id)?;
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
                format!(
                    "no kernel has a workload named {}",
                    args.workloads.join(" or ")
                )
            }
        );
    }
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| src.state_dir.join("spaces"));
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let device = devices::select(args.device.as_deref())?;
    interrupt::install()?;
    if !quiet {
        eprintln!(
            "brute-forcing {} kernel/workload pair(s) on {} ({}) into {}",
            jobs.len(),
            device.info.name,
            device.key,
            out_dir.display()
        );
    }
    let device_key = device.key.to_string();
    for (kernel, workload) in jobs {
        if interrupt::requested() {
            return Ok(interrupted(None));
        }
        let done = brute_one(args, &device, &kernel.spec, workload, &out_dir, quiet).with_context(
            || {
                format!(
                    "{}: brute-forcing `{}` at workload `{}`",
                    kernel.location(),
                    kernel.spec.id,
                    workload.name
                )
            },
        )?;
        if json {
            done.message(&device_key).emit();
        } else {
            println!("{}", done.line());
        }
        if done.interrupted {
            return Ok(interrupted(Some(&done)));
        }
    }
    Ok(Exit::Success)
}

fn interrupted(done: Option<&Done>) -> Exit {
    match done {
        Some(d) => eprintln!(
            "interrupted: {} of {} configurations are in {}; `cargo kfoundry brute-force --resume` (same arguments) continues",
            d.evaluated + d.resumed,
            d.valid,
            d.path.display()
        ),
        None => eprintln!("interrupted: the files written so far are complete; `cargo kfoundry brute-force --resume` (same arguments) continues"),
    }
    Exit::Interrupted
}

fn write(path: &Path, header: &Header, cache: &Map<String, Value>) -> Result<()> {
    let text = kernel_tuner_text(&header.document(cache))?;
    write_atomic(path, text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

fn brute_one(
    args: &BruteForceArgs,
    device: &Selected,
    spec: &KernelSpec,
    workload: &Workload,
    out_dir: &Path,
    quiet: bool,
) -> Result<Done> {
    if spec.params.is_empty() {
        bail!(
            "`{}` has no tunable parameters: there is no space to brute-force",
            spec.id
        );
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
    let settings = Measurement {
        repeats: args.repeats,
        seed: args.seed,
        ..Measurement::default()
    };
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
    let mut header = Header {
        valid: valid.len(),
        ..Header::new(
            spec,
            workload,
            &device.info.name,
            &device_key,
            args.repeats,
            args.seed,
        )?
    };
    let names = header.names();
    let valid_keys: BTreeSet<String> = valid.iter().map(cache_key).collect();
    let mut cache = Map::new();
    if args.resume {
        match kfoundry_tooling::files::read_text_bounded(
            &path,
            256 << 20,
            "Kernel Tuner cache file",
        ) {
            Ok(text) => {
                let existing: Value = serde_json::from_str(&text)
                    .with_context(|| format!("{}: not valid JSON", path.display()))?;
                cache = resumable(&existing, &header, &valid_keys).map_err(|why| {
                    anyhow!(
                        "cannot resume from {}: {why}; run without --resume to start over",
                        path.display()
                    )
                })?;
                header.keep_limit(&existing);
            }
            Err(e) if e.is_not_found() => {
                if !args.ws.quiet {
                    eprintln!(
                        "note: {} does not exist yet; nothing to resume",
                        path.display()
                    );
                }
            }
            Err(e) => return Err(e.into()),
        }
    } else if path.exists() && !args.ws.quiet {
        eprintln!(
            "note: {} exists and will be replaced (`--resume` keeps what it holds)",
            path.display()
        );
    }
    let resumed = cache.len();
    let reference = config_of(spec, &spec.reference);
    if let Some(r) = cache.get(&cache_key(&reference)) {
        // The reference's cost from the earlier run sets the time limit, as evaluating it would.
        let cost_ms = if r.get("time").is_some_and(Value::is_number) {
            r.get("benchmark_time")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
        } else {
            0.0
        };
        bench.calibrate(cost_ms / 1000.0);
    }
    let todo: Vec<Config> = evaluation_order(valid, &reference)
        .into_iter()
        .filter(|c| !cache.contains_key(&cache_key(c)))
        .collect();

    let total = valid_keys.len();
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{prefix:.bold} [{bar:30}] {pos}/{len} configs  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{} @ {}", spec.id, workload.name));
    bar.set_position(resumed as u64);
    if resumed > 0 && !args.ws.quiet {
        eprintln!(
            "{} @ {}: resuming: {resumed} of {total} configurations already in {}",
            spec.id,
            workload.name,
            path.display()
        );
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
                Evaluation::Failed { kind, reason, .. } => {
                    format!("{}: {}", kind.name(), short(reason))
                }
            };
            bar.println(format!("  {} → {outcome}", fmt_key(&names, &key)));
        }
        match evaluation.time() {
            Some(t) => best = Some(best.map_or(t * 1000.0, |b| b.min(t * 1000.0))),
            None => failures += 1,
        }
        header.note_limit(&evaluation);
        cache.insert(key, record(&names, config, &evaluation));
        evaluated += 1;
        since_write += 1;
        bar.inc(1);
        bar.set_message(format!(
            "best {}  failures {failures}",
            best.map_or("-".to_string(), |ms| fmt_ns(ms * 1e6))
        ));
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

/// The kernel the tests of the brute-force modules brute-force.
#[cfg(test)]
fn test_spec() -> KernelSpec {
    use kfoundry_tooling::annotation::{parse, Context};
    let src = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)]; }";
    let args: proc_macro2::TokenStream = format!(
        "code = {src:?}, params(WG = [16, 64, 256], V = [1, 2, 4]), reference(WG = 16, V = 1), require(WG * V <= 256), global = n / V, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"
    )
    .parse()
    .unwrap();
    let item: syn::Item = syn::parse_str("pub struct K;").unwrap();
    let dir = std::env::temp_dir();
    parse(
        args,
        &item,
        &Context {
            package: "t",
            manifest_dir: &dir,
        },
    )
    .unwrap()
    .spec
}
