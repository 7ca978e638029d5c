//! Stage 2, plan: what the run will do, decided before anything is searched. The kernels and
//! workloads selected, the device, its measured peaks (for roofline figures), the language
//! model, where state goes, and that the lockfile can be read and written: a tune fails
//! before it starts, not after an hour. For each search, [`start`] says where it begins:
//! afresh (the reference, then the lockfile's [`warm`] starts), from its checkpoint, or already
//! finished in an interrupted run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kfoundry_rt::model::spec::{KernelSpec, Workload};
use kfoundry_search::{Config, SearchState, Settings as SearchSettings, Space};
use kfoundry_tooling::generated;
use kfoundry_tooling::lockfile::Lockfile;

use super::discover::{sources, Kernel};
use super::finalists::Finalist;
use super::partition::{estimated_cost, share, Job};
use super::record::check_writable;
use super::warm;
use crate::checkpoint::{Checkpoints, Key};
use crate::device::peaks::{self, Peaks};
use crate::device::{self, Selected};
use crate::error::usage;
use crate::events::{Reporter, TuneEvent};
use crate::interrupt;
use crate::llm::LlmConfig;
use crate::messages::TuneResult;
use crate::options::TuneOptions;
use crate::tuning_db::{template_of, TuningDb};
use kfoundry_bench::config_of;

/// Everything the later stages read: decided once, never changed during the run.
pub struct Plan<'a> {
    pub options: &'a TuneOptions,
    /// The kernels to tune (those without parameters are skipped with a note).
    pub kernels: Vec<Kernel>,
    /// Each kernel's fingerprint (by position in `kernels`), computed once.
    pub fingerprints: Vec<String>,
    /// With `--partition`: the (kernel id, workload) jobs of this runner's share.
    pub jobs: Option<BTreeSet<(String, String)>>,
    pub lockfile: PathBuf,
    /// Whether the lockfile existed before the run.
    pub had_lockfile: bool,
    /// The kernels come from the workspace's sources (not a bundle).
    pub from_workspace: bool,
    pub state_dir: PathBuf,
    pub device: Selected,
    pub checkpoints: Checkpoints,
    /// The device's measured peaks, when some kernel declares a cost.
    pub peaks: Option<Peaks>,
    /// The language model, when one is configured (and not `--no-llm`).
    pub llm: Option<LlmConfig>,
    /// Where the run's events go.
    pub reporter: &'a dyn Reporter,
}

impl Plan<'_> {
    /// Sends `event` to the run's reporter.
    pub fn report(&self, event: TuneEvent<'_>) {
        self.reporter.report(event);
    }

    /// Sends a note to the run's reporter.
    pub fn note(&self, text: String) {
        self.reporter.report(TuneEvent::Note { text });
    }

    /// What build errors call the source of kernel `spec` ([`Kernel::source_place`]).
    pub fn source_place(&self, spec: &KernelSpec) -> Option<String> {
        self.kernels
            .iter()
            .find(|k| k.spec.id == spec.id)
            .map(Kernel::source_place)
    }
}

/// Where one search begins.
pub enum Start {
    /// The interrupted run had finished this one; its result is kept.
    Finished(Box<TuneResult>),
    /// The engine's state (fresh, or resumed) and the external operator's saved state.
    Search {
        state: Box<SearchState>,
        operator_state: Option<serde_json::Value>,
    },
}

/// Plans the run of `args`, whose events go to `reporter`.
pub fn plan<'a>(args: &'a TuneOptions, reporter: &'a dyn Reporter) -> Result<Plan<'a>> {
    let src = sources(&args.ws, args.bundle.as_deref(), args.lockfile.as_deref())?;
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(|| src.state_dir.clone());
    if src.kernels.is_empty() {
        return Err(anyhow::anyhow!("no annotated kernel found"));
    }
    let kernels: Vec<Kernel> = crate::filter::KernelFilter::new(&args.kernels)?
        .select(&src.kernels, |k| &k.spec.id)?
        .into_iter()
        .cloned()
        .collect();
    for name in &args.workloads {
        if !kernels
            .iter()
            .any(|k| k.spec.workloads.iter().any(|w| &w.name == name))
        {
            return Err(usage(format!(
                "no selected kernel declares the workload `{name}` (--workload)"
            )));
        }
    }
    // Fail before tuning (not after an hour) when the lockfile cannot be read or written.
    let had_lockfile = Lockfile::read(&src.lockfile)?.is_some();
    check_writable(&src.lockfile)?;
    let device = match args.device.as_slice() {
        [] => device::select(None)?,
        [one] => device::select(Some(one))?,
        _ => {
            return Err(usage(
                "several devices are tuned by one process each (cargo-kfoundry's `fleet`), not by one plan",
            ))
        }
    };
    interrupt::install()?;
    reporter.report(TuneEvent::Planned {
        kernels: kernels.len(),
        device: &device,
    });
    let peaks = if kernels.iter().any(|k| k.spec.cost.is_some()) {
        match peaks::of(&device, false) {
            Ok(p) => Some(p),
            Err(e) => {
                reporter.report(TuneEvent::Warning {
                    text: format!("cannot measure the device's peaks, no roofline figures: {e:#}"),
                });
                None
            }
        }
    } else {
        None
    };
    let llm = llm_config(args, &src.metadata, !src.from_workspace, reporter)?;
    if let Some(config) = &llm {
        reporter.report(TuneEvent::LanguageModel { config });
    }
    let jobs = partition_jobs(args, &kernels, &device, reporter)?;
    let fingerprints = kernels
        .iter()
        .map(|k| kfoundry_tooling::fingerprint(&k.spec))
        .collect::<Result<_, _>>()?;
    Ok(Plan {
        options: args,
        kernels,
        fingerprints,
        jobs,
        lockfile: src.lockfile,
        had_lockfile,
        from_workspace: src.from_workspace,
        checkpoints: Checkpoints::new(state_dir.join("checkpoints")),
        state_dir,
        device,
        peaks,
        llm,
        reporter,
    })
}

impl Plan<'_> {
    /// The workloads of `spec` this run tunes (none when it declares no parameters: it runs its
    /// reference, and a note says so).
    pub fn workloads<'s>(&self, spec: &'s KernelSpec) -> Vec<&'s Workload> {
        if spec.params.is_empty() {
            let at = self
                .kernels
                .iter()
                .find(|k| k.spec.id == spec.id)
                .map(Kernel::location)
                .unwrap_or_default();
            self.note(format!(
                "{at}: `{}` declares no parameters: nothing to tune, it runs its reference",
                spec.id
            ));
            return Vec::new();
        }
        selected_workloads(
            self.options,
            spec,
            &self.device.info.kind,
            Some(self.reporter),
        )
        .into_iter()
        .filter(|w| {
            self.jobs
                .as_ref()
                .is_none_or(|jobs| jobs.contains(&(spec.id.clone(), w.name.clone())))
        })
        .collect()
    }
}

/// The workloads of `spec` that `--workload` selects and that are meant for a device of
/// `kind` (a note to `notes` for each one that is not).
fn selected_workloads<'s>(
    args: &TuneOptions,
    spec: &'s KernelSpec,
    kind: &str,
    notes: Option<&dyn Reporter>,
) -> Vec<&'s Workload> {
    spec.workloads
        .iter()
        .filter(|w| args.workloads.is_empty() || args.workloads.contains(&w.name))
        .filter(|w| {
            let meant = w.is_for(kind);
            if let (false, Some(reporter)) = (meant, notes) {
                reporter.report(TuneEvent::Note {
                    text: format!(
                        "note: `{}` workload `{}` is for {} only; skipped on this {kind}",
                        spec.id,
                        w.name,
                        w.on.join(", ")
                    ),
                });
            }
            meant
        })
        .collect()
}

/// With `--partition`: this runner's share of the jobs (each partition taking its share of
/// what the one before left), reported.
fn partition_jobs(
    args: &TuneOptions,
    kernels: &[Kernel],
    device: &Selected,
    reporter: &dyn Reporter,
) -> Result<Option<BTreeSet<(String, String)>>> {
    if args.partition.is_empty() {
        return Ok(None);
    }
    let all: Vec<Job> = kernels
        .iter()
        .filter(|k| !k.spec.params.is_empty())
        .flat_map(|k| {
            selected_workloads(args, &k.spec, &device.info.kind, None)
                .into_iter()
                .map(move |w| Job {
                    kernel: k.spec.id.clone(),
                    workload: w.name.clone(),
                    cost: estimated_cost(&k.spec, w),
                })
        })
        .collect();
    let mut jobs = all.clone();
    for p in &args.partition {
        jobs = share(&jobs, *p);
    }
    let (mine, total) = (
        jobs.iter().map(|j| j.cost).sum::<f64>(),
        all.iter().map(|j| j.cost).sum::<f64>(),
    );
    reporter.report(TuneEvent::Partitioned {
        partition: &args.partition,
        jobs: jobs.len(),
        of: all.len(),
        cost_share: mine / total.max(f64::MIN_POSITIVE),
    });
    Ok(Some(
        jobs.into_iter().map(|j| (j.kernel, j.workload)).collect(),
    ))
}

/// Where the search of `spec` at `workload` begins: from its checkpoint with `--resume` (when
/// it belongs to this very search), else afresh with the reference first; either way with
/// `budget_secs` of evaluations (`--budget-secs`, or the search's share of `--budget-total-secs`).
pub fn start(
    plan: &Plan,
    spec: &KernelSpec,
    workload: &Workload,
    key: &Key,
    budget_secs: Option<f64>,
) -> Result<Start> {
    let args = plan.options;
    let mut resumed = None;
    if args.resume {
        let (ck, why) = plan.checkpoints.load(key)?;
        if let Some(why) = why {
            plan.note(format!("note: {why}"));
        }
        resumed = ck;
    }
    if let Some(done) = resumed.as_mut().and_then(|ck| ck.finished.take()) {
        match check_finished(spec, workload, &done) {
            Ok(()) => {
                plan.note(format!(
                    "{} @ {}: finished in the interrupted run; kept",
                    spec.id, workload.name
                ));
                return Ok(Start::Finished(Box::new(done)));
            }
            Err(why) => {
                plan.note(format!(
                    "note: the checkpoint's result of {} @ {} is not usable ({why}); searching afresh",
                    spec.id, workload.name
                ));
                resumed = None;
            }
        }
    }
    let fresh = fresh_search(spec, args, &plan.device.info.kind, budget_secs)?;
    let Some(ck) = resumed else {
        let mut state = fresh;
        warm_start(plan, spec, workload, key, &mut state)?;
        return Ok(Start::Search {
            state: Box::new(state),
            operator_state: None,
        });
    };
    // The checkpoint must be of this very search: the kernel's space and the engine's settings.
    // (Speculation is not part of the search: what it proposes does not depend on it.)
    let unbudgeted = |s: &SearchSettings| SearchSettings {
        max_evals: None,
        max_seconds: None,
        stagnation: None,
        speculate: 0,
        ..s.clone()
    };
    if ck.state.space() != fresh.space()
        || unbudgeted(ck.state.settings()) != unbudgeted(fresh.settings())
    {
        plan.note(format!(
            "note: the checkpoint of {} @ {} was made for another search space or settings; searching afresh",
            spec.id, workload.name
        ));
        let mut state = fresh;
        warm_start(plan, spec, workload, key, &mut state)?;
        return Ok(Start::Search {
            state: Box::new(state),
            operator_state: None,
        });
    }
    let mut state = ck.state;
    state.set_speculate(fresh.settings().speculate);
    let stagnation = state.settings().stagnation;
    state.set_budgets(Some(args.budget_evals.max(1)), budget_secs, stagnation);
    plan.note(format!(
        "{} @ {}: resuming after {} evaluations",
        spec.id,
        workload.name,
        state.history().len()
    ));
    Ok(Start::Search {
        state: Box::new(state),
        operator_state: ck.source_search,
    })
}

/// The complete results the lockfile already holds for this kernel (at `fingerprint`) on
/// this device, by workload: what a new winner must beat to replace it. Read once per kernel.
/// A lockfile that cannot be read is an error (taken as "no entry", a worse result would
/// replace a better one); an entry whose generated source is missing or altered is none (it
/// cannot run as recorded).
pub(crate) fn complete_entries(
    lock_path: &Path,
    spec: &KernelSpec,
    fingerprint: &str,
    device: &Selected,
) -> Result<BTreeMap<String, Finalist>> {
    let Some(lock) = Lockfile::read(lock_path)
        .with_context(|| format!("cannot read {}", lock_path.display()))?
    else {
        return Ok(BTreeMap::new());
    };
    let Some(entry) = lock
        .kernels
        .get(&spec.id)
        .filter(|e| e.fingerprint == fingerprint)
    else {
        return Ok(BTreeMap::new());
    };
    let key = device.key.to_string();
    let mut out = BTreeMap::new();
    let mut seen = BTreeSet::new();
    // The first complete variant of each workload decides, as dispatch reads them.
    for v in entry
        .variants
        .iter()
        .filter(|v| v.device == key && !v.partial && !v.general && seen.insert(v.workload.clone()))
    {
        let finalist = match &v.source {
            Some(hash) => generated::read_verified(lock_path, &spec.id, hash)
                .ok()
                .map(|(_, text)| (v.params.clone(), Some(text))),
            None => Some((v.params.clone(), None)),
        };
        if let Some(f) = finalist {
            out.insert(v.workload.clone(), f);
        }
    }
    Ok(out)
}

/// Gives a fresh search the warm starts of the lockfile and the tuning database (unless
/// `--no-warm-start`) and says which.
fn warm_start(
    plan: &Plan,
    spec: &KernelSpec,
    workload: &Workload,
    key: &Key,
    state: &mut SearchState,
) -> Result<()> {
    if !plan.options.warm_start {
        return Ok(());
    }
    let lock = Lockfile::read(&plan.lockfile)
        .with_context(|| format!("cannot read {}", plan.lockfile.display()))?;
    let read = plan
        .options
        .tuning_db
        .as_ref()
        .map(|dir| TuningDb::new(dir).entries(key.device, &template_of(spec)))
        .unwrap_or_default();
    for text in read.skipped {
        plan.report(TuneEvent::Warning { text });
    }
    let entries = read.entries;
    let starts = warm::warm_starts(
        lock.as_ref(),
        &entries,
        spec,
        key.fingerprint,
        workload,
        key.device,
    );
    let configs: Vec<Config> = starts.iter().map(|w| w.config.clone()).collect();
    let kept = state.warm_start(&configs);
    if kept > 0 {
        let from: Vec<&str> = starts.iter().take(kept).map(|w| w.from.as_str()).collect();
        plan.note(format!(
            "{} @ {}: starting from the reference and {kept} known configuration(s): {}",
            spec.id,
            workload.name,
            warm_sources(&from)
        ));
    }
    Ok(())
}

/// Where warm starts came from, for a note: runs of the same source counted, not repeated
/// (`2 from k @ small (tuning database); k @ large`).
fn warm_sources(from: &[&str]) -> String {
    let mut runs: Vec<(&str, usize)> = Vec::new();
    for &f in from {
        match runs.last_mut() {
            Some((last, n)) if *last == f => *n += 1,
            _ => runs.push((f, 1)),
        }
    }
    runs.iter()
        .map(|&(f, n)| {
            if n == 1 {
                f.to_string()
            } else {
                format!("{n} from {f}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Levels of speculation ([`SearchSettings::speculate`]) a search on a device of `kind`
/// starts with, before `--set`: [`SPECULATE_ON_GPU`] on a GPU, none on other devices (their
/// builds would take the cores the kernel being timed runs on, and the bench waits for them
/// before timing).
fn default_speculation(kind: &str) -> usize {
    if kind == "gpu" {
        SPECULATE_ON_GPU
    } else {
        0
    }
}

/// On a GPU the candidates the engine may propose next are built while the device measures,
/// one at a time (the evaluator's default on GPUs): on the H200 (NVIDIA's driver, 16 cores) 1
/// and 2 levels so built made tuning 1.15x and 1.21x as fast as none (geomean of four
/// kernels), where 4 levels built on every idle core made it 0.70x, NVIDIA's compiler slowing
/// every build it runs at once (BENCHMARKS.md). Two levels; the search is the same either way.
const SPECULATE_ON_GPU: usize = 2;

/// The search a tune of `spec` starts with on a device of `kind`: the annotation's space, the
/// engine's default settings (and [`default_speculation`]) changed by `--set`, with this run's
/// seed, its evaluation budget and `budget_secs`, the reference first.
fn fresh_search(
    spec: &KernelSpec,
    args: &TuneOptions,
    kind: &str,
    budget_secs: Option<f64>,
) -> Result<SearchState> {
    let space = Space::new(
        spec.params
            .iter()
            .map(|p| kfoundry_search::Param {
                name: p.name.clone(),
                values: p.values.clone(),
            })
            .collect(),
    )
    .map_err(|e| anyhow::anyhow!("search space: {e}"))?;
    let reference = config_of(spec, &spec.reference);
    let mut settings = SearchSettings {
        speculate: default_speculation(kind),
        ..SearchSettings::default()
    };
    for assignment in &args.set {
        settings
            .set(assignment)
            .map_err(|e| anyhow::anyhow!("--set {e}"))?;
    }
    let settings = SearchSettings {
        seed: args.seed,
        max_evals: Some(args.budget_evals.max(1)),
        max_seconds: budget_secs,
        ..settings
    };
    SearchState::new(space, settings, Some(&reference)).map_err(|e| anyhow::anyhow!("{e}"))
}

/// A finished result read back from a checkpoint is recorded only if it is a valid lockfile
/// variant of this kernel and workload (anyone could have edited the checkpoint).
fn check_finished(spec: &KernelSpec, workload: &Workload, done: &TuneResult) -> Result<(), String> {
    let declared = match &done.generated_source {
        Some(text) => {
            match kfoundry_rt::model::signature::find_kernel(text, Some(&spec.signature.name)) {
                Ok(sig) if spec.has_signature(&sig) => {}
                _ => return Err("its generated source does not have the kernel's signature".into()),
            }
            kfoundry_rt::model::declared::declared_params(text)
                .map_err(|e| format!("its source, line {}: {}", e.line, e.problem))?
        }
        None => Vec::new(),
    };
    // the entries the result would record, each as the lockfile would hold it (the winner
    // without its source's hash: the source itself was checked above)
    for v in super::record::entries_of(&done.device, workload, done, None) {
        if v.general {
            kfoundry_rt::model::variant::check_variant(spec, &v, &[])
                .map_err(|e| format!("its general variant: {e}"))?;
        } else {
            kfoundry_rt::model::variant::check_variant(spec, &v, &declared)?;
        }
    }
    if done.kernel != spec.id || done.workload != workload.name {
        return Err("it belongs to another kernel or workload".into());
    }
    Ok(())
}

/// The language model's settings, in layers ([`crate::llm::config`]): the user's own
/// `llm.toml`, the project's table only with `--llm-from-project`, `--llm-config FILE`, then
/// the environment; none with `--no-llm`. A project table that is not used is noted.
fn llm_config(
    args: &TuneOptions,
    metadata: &serde_json::Value,
    from_bundle: bool,
    reporter: &dyn Reporter,
) -> Result<Option<LlmConfig>> {
    use crate::llm::config::{user_config_path, Layer, Origin};
    use kfoundry_tooling::toml_text;
    type Places = std::collections::BTreeMap<String, toml_text::Place>;
    if args.no_llm {
        return Ok(None);
    }
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    // A file's table, and where each of its keys is (a mistake in it is named `path:line:col`).
    let read_toml = |path: &std::path::Path| -> Result<(serde_json::Value, Places)> {
        let text = kfoundry_tooling::files::read_text_bounded(
            path,
            1 << 20,
            "language-model configuration",
        )?;
        let table: toml::Value = toml_text::parse(path, &text)
            .map_err(|e| anyhow::anyhow!("{}: not valid TOML: {}", e.at, e.message))?;
        Ok((serde_json::to_value(table)?, toml_text::key_places(&text)))
    };
    let mut tables: Vec<(serde_json::Value, Origin, Places)> = Vec::new();
    if let Some(path) = user_config_path(env).filter(|p| p.exists()) {
        let (table, places) = read_toml(&path)?;
        tables.push((table, Origin::User(path.display().to_string()), places));
    }
    let project = metadata
        .get("kfoundry")
        .and_then(|k| k.get("llm"))
        .filter(|t| !t.is_null());
    let what = if from_bundle {
        "the bundle"
    } else {
        "the workspace's Cargo.toml"
    };
    match project {
        Some(table) if args.llm_from_project => {
            tables.push((table.clone(), Origin::Project(what.into()), Places::new()))
        }
        Some(table) => {
            let url = table
                .get("base_url")
                .or_else(|| table.get("url"))
                .and_then(|u| u.as_str())
                .unwrap_or("(no base_url)");
            reporter.report(TuneEvent::Note {
                text: format!(
                    "note: {} of {what} configures a language model at {}; it is not used unless you pass --llm-from-project (or put the settings in your own {})",
                    crate::llm::config::TABLE,
                    crate::text::printable(url),
                    user_config_path(env)
                        .map_or_else(|| "llm.toml".to_string(), |p| p.display().to_string())
                ),
            });
        }
        _ => {}
    }
    if let Some(path) = &args.llm_config {
        let (table, places) = read_toml(path)?;
        tables.push((
            table,
            Origin::CommandLine(path.display().to_string()),
            places,
        ));
    }
    let layers: Vec<Layer> = tables
        .iter()
        .map(|(table, origin, places)| Layer {
            table,
            origin: origin.clone(),
            places: places.clone(),
        })
        .collect();
    let config = LlmConfig::resolve(&layers, env).map_err(|e| anyhow::anyhow!("{e}"))?;
    if config.is_some() && cfg!(not(feature = "llm")) {
        return Err(usage(
            "a language model is configured, but this cargo-kfoundry was built without the `llm` feature: reinstall it with default features, or pass --no-llm",
        ));
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::warm_sources;

    #[test]
    fn a_note_counts_the_starts_of_one_source() {
        assert_eq!(
            warm_sources(&["k @ small (tuning database)"; 3]),
            "3 from k @ small (tuning database)"
        );
        assert_eq!(warm_sources(&["a", "a", "b", "a"]), "2 from a; b; a");
        assert_eq!(warm_sources(&[]), "");
    }
}
