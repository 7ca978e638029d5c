//! What a tune is asked to do: plain data, filled by the command line (`cargo-kfoundry`'s
//! `cli` module) or by any other caller of [`crate::tune`]. Nothing here parses text; the
//! caller has checked its ranges (budgets, seconds, fractions) before.

use std::path::PathBuf;

use kfoundry_bench::supervisor::TimeLimits;

/// Share `k` (1-based) of `n` of the run's jobs (`tune --partition K/N`; how they are dealt
/// out and how the text is read: [`crate::pipeline::partition`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub k: usize,
    pub n: usize,
}

/// The workspace whose annotated kernels are read, and how the run talks.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceOptions {
    /// Cargo.toml of the workspace (default: cargo's search from the current directory).
    pub manifest_path: Option<PathBuf>,
    /// Only these packages (default: every workspace member).
    pub packages: Vec<String>,
    /// Every workspace member (cargo's `--workspace`).
    pub workspace: bool,
    /// Human text or JSON messages on stdout.
    pub message_format: MessageFormat,
    /// No progress or informational output.
    pub quiet: bool,
    /// More output: 1 for a line per evaluation.
    pub verbose: u8,
}

/// The format of the messages on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageFormat {
    #[default]
    Human,
    /// One JSON object per line (`crate::messages`).
    Json,
}

/// One `tune` run: which kernels, workloads and devices, the budgets, seeds and limits.
#[derive(Debug, Clone)]
pub struct TuneOptions {
    pub ws: WorkspaceOptions,
    /// Device selectors (`cargo kfoundry devices`): none for the default device, several (or
    /// `all`) for a fleet.
    pub device: Vec<String>,
    /// This runner's share of the jobs, each share taken of what the one before left.
    pub partition: Vec<Partition>,
    /// Evaluations per kernel and workload (the reference included).
    pub budget_evals: usize,
    /// Seconds per kernel and workload (whichever budget ends first).
    pub budget_secs: Option<f64>,
    /// Seconds for the whole run, every kernel and workload (a model's kernels tuned together):
    /// shared out as the run goes, each search getting the time left (less what the stages
    /// after a search have been taking) in proportion to its kernel's estimated share of the
    /// model's time among the searches to come ([`crate::pipeline::budget`]). `budget_evals`
    /// and `budget_secs` still bound each search.
    pub budget_total_secs: Option<f64>,
    /// How many candidates may be built ahead at once (`--set speculate=N` or `--set
    /// batch=N`); `None`: one on a GPU, every core but one elsewhere.
    pub build_jobs: Option<usize>,
    /// Builds ahead in this many processes of their own (the bench's build farm) instead of
    /// threads; `None` or 0: threads.
    pub build_processes: Option<usize>,
    /// Where the search keeps and reads program binaries across runs
    /// ([`kfoundry_bench::program_cache`]); `None`: every build from source.
    pub program_cache: Option<std::path::PathBuf>,
    /// The tuning database ([`crate::tuning_db`]) fresh searches warm-start from (with
    /// `warm_start`) and every finished search records its fastest configurations in; `None`:
    /// none.
    pub tuning_db: Option<std::path::PathBuf>,
    /// Seed of the search and of the random inputs.
    pub seed: u64,
    /// Seed of the finalists' proof; `None` draws one afresh for every tune.
    pub proof_seed: Option<u64>,
    /// Engine settings, `KEY=VALUE` (the fields of `kfoundry_search::Settings`).
    pub set: Vec<String>,
    /// Kernel patterns (ids, names, globs over ids); empty for every kernel.
    pub kernels: Vec<String>,
    /// Workload names; empty for the default ones of each kernel.
    pub workloads: Vec<String>,
    /// Timed runs per candidate (median taken).
    pub repeats: usize,
    pub limits: TimeLimits,
    /// Kernels from a bundle (`cargo kfoundry bundle`) instead of the workspace.
    pub bundle: Option<PathBuf>,
    /// The lockfile to update (default: Kfoundry.lock at the workspace root).
    pub lockfile: Option<PathBuf>,
    /// Stop a search once the best reaches this fraction of its roofline floor.
    pub roofline_stop: Option<f64>,
    /// No language model even if one is configured.
    pub no_llm: bool,
    /// The language-model table as a TOML file.
    pub llm_config: Option<PathBuf>,
    /// Also read the project's language-model table.
    pub llm_from_project: bool,
    /// Continue from the checkpoints.
    pub resume: bool,
    /// A fresh search evaluates this device's winners the lockfile holds for the kernel (other
    /// workloads, earlier sources) and for kernels of its template right after the reference
    /// ([`crate::pipeline::warm`]); false: from the reference and random samples only.
    pub warm_start: bool,
    /// Where checkpoints and failure logs go.
    pub state_dir: Option<PathBuf>,
}

impl Default for TuneOptions {
    /// The command line's defaults.
    fn default() -> Self {
        TuneOptions {
            ws: WorkspaceOptions::default(),
            device: Vec::new(),
            partition: Vec::new(),
            budget_evals: 60,
            budget_secs: None,
            budget_total_secs: None,
            build_jobs: None,
            build_processes: None,
            program_cache: None,
            tuning_db: None,
            seed: 0,
            proof_seed: None,
            set: Vec::new(),
            kernels: Vec::new(),
            workloads: Vec::new(),
            repeats: 5,
            limits: TimeLimits::default(),
            bundle: None,
            lockfile: None,
            roofline_stop: None,
            no_llm: false,
            llm_config: None,
            llm_from_project: false,
            resume: false,
            warm_start: true,
            state_dir: None,
        }
    }
}
