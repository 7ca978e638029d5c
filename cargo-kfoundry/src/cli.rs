//! The command line, with cargo's conventions. Invoked as `cargo kfoundry <command>` (cargo
//! passes `kfoundry` as the first argument) or directly as `cargo-kfoundry <command>`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kfoundry_bench::supervisor::TimeLimits;
use kfoundry_tune::options::Partition;
use kfoundry_tune::{TuneOptions, WorkspaceOptions};

#[derive(Parser, Debug)]
#[command(
    name = "cargo-kfoundry",
    bin_name = "cargo kfoundry",
    version,
    about = "Tune annotated OpenCL kernels for the local device and embed the winners through Kfoundry.lock"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Search for the fastest correct variant of every annotated kernel on a device and record the winners in Kfoundry.lock.
    Tune(TuneArgs),
    /// List the annotated kernels and their search spaces.
    List(WorkspaceArgs),
    /// List the OpenCL devices with their kfoundry keys.
    Devices(DevicesArgs),
    /// Compare Kfoundry.lock with the sources: stale, missing and orphaned entries.
    Check(CheckArgs),
    /// Reports on the lockfile; `--cross` re-measures every device's winners on the devices present (the hardware-awareness matrix).
    Report(ReportArgs),
    /// Replay the search engine on a brute-forced search space (Kernel Tuner cache file).
    Simulate(SimulateArgs),
    /// Evaluate every valid configuration of a kernel's search space on a device and write the results as a Kernel Tuner cache file (for `simulate`).
    BruteForce(BruteForceArgs),
    /// Write the annotated kernels to a file that `tune --bundle` reads on a machine without a Rust toolchain.
    Bundle(BundleArgs),
    /// Combine lockfiles from different machines and devices (or, with --git, be git's merge driver for Kfoundry.lock).
    Merge(MergeArgs),
    /// Turn an ONNX model into a crate of fused, annotated OpenCL kernels and a `Model` that runs the graph through them.
    Import(ImportArgs),
    /// Run an ONNX model once through its imported kernels on a device, each kernel in the variant dispatch would choose from a lockfile (or its reference): outputs to files, times.
    Run(RunArgs),
    /// Internal: the evaluation worker process the tuner starts (JSON lines on stdin/stdout).
    #[command(name = kfoundry_tune::WORKER_COMMAND, hide = true)]
    Worker,
}

#[derive(Args, Debug, Clone, Default)]
pub struct WorkspaceArgs {
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// Package(s) to consider (default: every workspace member).
    #[arg(short = 'p', long = "package", value_name = "SPEC")]
    pub packages: Vec<String>,
    /// Consider every workspace member (the default when no package is named; cargo's flag).
    #[arg(long, conflicts_with = "packages")]
    pub workspace: bool,
    /// Output format for messages.
    #[arg(long, value_enum, default_value_t = MessageFormat::Human)]
    pub message_format: MessageFormat,
    /// No progress or informational output.
    #[arg(short, long)]
    pub quiet: bool,
    /// More output (each evaluation).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageFormat {
    #[default]
    Human,
    Json,
}

impl From<MessageFormat> for kfoundry_tune::MessageFormat {
    fn from(format: MessageFormat) -> Self {
        match format {
            MessageFormat::Human => kfoundry_tune::MessageFormat::Human,
            MessageFormat::Json => kfoundry_tune::MessageFormat::Json,
        }
    }
}

impl WorkspaceArgs {
    /// The engine's options from these flags.
    pub fn options(&self) -> WorkspaceOptions {
        WorkspaceOptions {
            manifest_path: self.manifest_path.clone(),
            packages: self.packages.clone(),
            workspace: self.workspace,
            message_format: self.message_format.into(),
            quiet: self.quiet,
            verbose: self.verbose,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct TuneArgs {
    #[command(flatten)]
    pub ws: WorkspaceArgs,
    /// Device to tune on: an index from `cargo kfoundry devices`, `gpu`, `cpu`, or text found in the device's name, platform or key (default: the first GPU, else the first device). Repeat it, or say `all`, to tune several devices at once (identical devices split the jobs).
    #[arg(long, value_name = "SELECTOR")]
    pub device: Vec<String>,
    /// Tune only share K of N of the (kernel, workload) jobs, balanced by estimated cost, so that N runners together tune each job once (a CI matrix, a Slurm array). Repeatable: each takes its share of what the one before left.
    #[arg(long, value_name = "K/N")]
    pub partition: Vec<Partition>,
    /// Evaluations per kernel and workload (the reference included).
    #[arg(long, value_name = "N", default_value_t = TuneOptions::default().budget_evals, value_parser = count)]
    pub budget_evals: usize,
    /// Seconds per kernel and workload (whichever budget ends first).
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub budget_secs: Option<f64>,
    /// Seconds for the whole run (a model's kernels tuned together): each search gets the time left in proportion to its kernel's estimated share of the model's time (roofline floor from `cost(...)` on the measured peaks, plus a launch) among the searches to come, less what the finalists and proofs have been taking; --budget-evals and --budget-secs still bound each search.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub budget_total_secs: Option<f64>,
    /// Builds ahead (speculation, `--set speculate=N`, or `--set batch=N`) at most N at once [default: 1 on a GPU, every core but one on other devices].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=32))]
    pub build_jobs: Option<u64>,
    /// Builds ahead in N processes of their own, each keeping a context on the device, instead of threads of the evaluating process: NVIDIA's OpenCL compiler runs one process's builds nearly one after another, and builds in such processes in parallel (the evaluation then builds from their program binaries; finalists are proven from source). 0: threads [default: 0].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=32))]
    pub build_processes: Option<u8>,
    /// Keep the search's program binaries in kfoundry's own cache and read them back in later runs (`$KFOUNDRY_CACHE_DIR/programs`, else `$XDG_CACHE_HOME/kfoundry/programs` or `~/.cache/kfoundry/programs`), for a driver that keeps no cache of its own builds. Off by default: NVIDIA's and PoCL's drivers do keep one, and re-tunes were faster with theirs alone. Finalists are proven from source either way.
    #[arg(long)]
    pub program_cache: bool,
    /// Seed of the search and of the random inputs.
    #[arg(long, default_value_t = TuneOptions::default().seed)]
    pub seed: u64,
    /// Seed of the finalists' proof (its sizes, scalars and inputs): by default drawn afresh for every tune, so that nobody can predict where a variant will be proven; the result says which was used (JSON: `proof_seed`).
    #[arg(long, value_name = "N")]
    pub proof_seed: Option<u64>,
    /// Search under another engine setting, KEY=VALUE (repeatable), e.g. `gradient_steering=true`, `selection.adaptive=false`, `screening=8`; the names are the fields of `kfoundry_search::Settings` (seed and budgets have their own flags).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = engine_setting)]
    pub set: Vec<String>,
    /// Tune only these kernels (repeatable): an id, a name (`Sgemm`, `::Sgemm`) or a glob over ids (`cnn-block::*`).
    #[arg(long = "kernel", value_name = "PATTERN")]
    pub kernels: Vec<String>,
    /// Tune only these workloads (by name).
    #[arg(long = "workload", value_name = "NAME")]
    pub workloads: Vec<String>,
    /// Timed runs per candidate (median taken), after one warm-up run.
    #[arg(long, default_value_t = TuneOptions::default().repeats, value_parser = repeats)]
    pub repeats: usize,
    #[command(flatten)]
    pub limits: TimeLimitArgs,
    /// Tune the kernels of a bundle written by `cargo kfoundry bundle` instead of reading the workspace (no cargo needed).
    #[arg(long, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
    /// The lockfile to update (default: Kfoundry.lock at the workspace root; with --bundle, in the current directory).
    #[arg(long, value_name = "FILE")]
    pub lockfile: Option<PathBuf>,
    /// Stop a search early once the best candidate reaches this fraction of its roofline floor (from `cost(...)` and the device's peaks), e.g. 0.9.
    #[arg(long, value_name = "FRACTION", value_parser = fraction)]
    pub roofline_stop: Option<f64>,
    /// Do not use a language model even if one is configured.
    #[arg(long)]
    pub no_llm: bool,
    /// Language-model settings as a TOML file with the keys of `[workspace.metadata.kfoundry.llm]`, over those of your own `~/.config/kfoundry/llm.toml`.
    #[arg(long, value_name = "FILE")]
    pub llm_config: Option<PathBuf>,
    /// Also use the language-model table of the workspace's Cargo.toml (`[workspace.metadata.kfoundry.llm]`), or the one the --bundle carries: not read otherwise, since a project you did not write could point the tune, and your API key, at any server. It may not name the key's variable (`api_key_env`).
    #[arg(long)]
    pub llm_from_project: bool,
    /// Continue an interrupted tune (Ctrl-C, SIGTERM, kill -9) from its checkpoints: nothing already evaluated is evaluated again.
    #[arg(long)]
    pub resume: bool,
    /// Search from the reference and random samples only: do not start from what the lockfile and the tuning database know for this device (this kernel's winners at other workloads or from earlier sources, and those of kernels with the same parameters).
    #[arg(long)]
    pub no_warm_start: bool,
    /// The tuning database: what tunes on this machine found (the fastest configurations of each kernel, source, shape and device), shared by every project. Fresh searches also start from its entries for kernels with the same parameters (this kernel at these sizes first, then the nearest shapes), and each finished search adds its own [default: `$KFOUNDRY_TUNING_DB`, else `tuning` in kfoundry's cache folder (`$KFOUNDRY_CACHE_DIR`, `$XDG_CACHE_HOME/kfoundry` or `~/.cache/kfoundry`)].
    #[arg(long, value_name = "DIR", conflicts_with = "no_tuning_db")]
    pub tuning_db: Option<PathBuf>,
    /// Neither read nor write the tuning database (a search that depends on nothing outside the project); `KFOUNDRY_TUNING_DB=off` does the same.
    #[arg(long)]
    pub no_tuning_db: bool,
    /// Where checkpoints and failure logs go (default: `kfoundry/` under cargo's target directory; with --bundle, `target/kfoundry/` beside the lockfile).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

impl TuneArgs {
    /// The engine's options from this command line.
    pub fn options(&self) -> TuneOptions {
        TuneOptions {
            ws: self.ws.options(),
            device: self.device.clone(),
            partition: self.partition.clone(),
            budget_evals: self.budget_evals,
            budget_secs: self.budget_secs,
            budget_total_secs: self.budget_total_secs,
            build_jobs: self.build_jobs.map(|n| n as usize),
            build_processes: self.build_processes.map(usize::from),
            program_cache: self
                .program_cache
                .then(kfoundry_bench::program_cache::default_dir)
                .flatten(),
            seed: self.seed,
            proof_seed: self.proof_seed,
            set: self.set.clone(),
            kernels: self.kernels.clone(),
            workloads: self.workloads.clone(),
            repeats: self.repeats,
            limits: self.limits.time_limits(),
            bundle: self.bundle.clone(),
            lockfile: self.lockfile.clone(),
            roofline_stop: self.roofline_stop,
            no_llm: self.no_llm,
            llm_config: self.llm_config.clone(),
            llm_from_project: self.llm_from_project,
            resume: self.resume,
            warm_start: !self.no_warm_start,
            tuning_db: if self.no_tuning_db {
                None
            } else {
                self.tuning_db
                    .clone()
                    .or_else(kfoundry_tune::tuning_db::default_dir)
            },
            state_dir: self.state_dir.clone(),
        }
    }
}

/// Time limits of evaluations (each candidate runs in a worker process that is killed when it
/// overruns).
#[derive(Args, Debug, Clone)]
pub struct TimeLimitArgs {
    /// Seconds a candidate may always run after its build before it is killed (the limit is otherwise 20 times the reference's evaluation).
    #[arg(long, value_name = "SECS", default_value_t = TimeLimits::default().floor.as_secs_f64(), value_parser = seconds)]
    pub candidate_timeout: f64,
    /// Seconds one candidate may take to build (not charged to its run time).
    #[arg(long, value_name = "SECS", default_value_t = TimeLimits::default().build.as_secs_f64(), value_parser = seconds)]
    pub build_timeout: f64,
    /// Seconds the reference may take to build and pass its checks (at the workload, and again at each probe size).
    #[arg(long, value_name = "SECS", default_value_t = TimeLimits::default().reference.as_secs_f64(), value_parser = seconds)]
    pub reference_timeout: f64,
}

impl TimeLimitArgs {
    pub fn time_limits(&self) -> TimeLimits {
        use std::time::Duration;
        TimeLimits {
            reference: Duration::from_secs_f64(self.reference_timeout),
            build: Duration::from_secs_f64(self.build_timeout),
            floor: Duration::from_secs_f64(self.candidate_timeout),
            ..Default::default()
        }
    }
}

/// Longest time limit or budget accepted, in seconds (30 days).
const MAX_SECONDS: f64 = 30.0 * 86400.0;

/// A number of seconds: finite, above 0 and at most 30 days.
fn seconds(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if v.is_finite() && v > 0.0 && v <= MAX_SECONDS {
        Ok(v)
    } else {
        Err(format!(
            "`{text}`: seconds must be above 0 and at most {MAX_SECONDS} (30 days)"
        ))
    }
}

/// A fraction of the roofline: finite, above 0 and at most 10.
fn fraction(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if v.is_finite() && v > 0.0 && v <= 10.0 {
        Ok(v)
    } else {
        Err(format!(
            "`{text}`: the fraction must be above 0 and at most 10"
        ))
    }
}

/// A number of evaluations: 1 to a million.
fn count(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(v) if (1..=1_000_000).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{text}`: the budget must be a whole number from 1 to 1000000"
        )),
    }
}

/// An engine setting for `tune --set`: one the engine takes, and not one of those that have
/// their own flags.
fn engine_setting(text: &str) -> Result<String, String> {
    let key = text.split_once('=').map_or(text, |(k, _)| k).trim();
    if matches!(key, "seed" | "max_evals" | "max_seconds" | "stagnation") {
        return Err(format!(
            "`{key}` is set by --seed, --budget-evals or --budget-secs"
        ));
    }
    let mut settings = kfoundry_search::Settings::default();
    settings.set(text)?;
    settings.check()?;
    Ok(text.to_string())
}

/// Timed runs: 1 to 10000.
fn repeats(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(v) if (1..=10_000).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{text}`: repeats must be a whole number from 1 to 10000"
        )),
    }
}

#[derive(Args, Debug, Clone)]
pub struct BruteForceArgs {
    #[command(flatten)]
    pub ws: WorkspaceArgs,
    /// Device to evaluate on (selectors as for `tune --device`; default: the first GPU, else the first device).
    #[arg(long, value_name = "SELECTOR")]
    pub device: Option<String>,
    /// Only these kernels (repeatable; default: every kernel): an id, a name (`Sgemm`, `::Sgemm`) or a glob over ids (`cnn-block::*`).
    #[arg(long = "kernel", value_name = "PATTERN")]
    pub kernels: Vec<String>,
    /// Only these workloads (by name; repeatable; default: every workload of each kernel).
    #[arg(long = "workload", value_name = "NAME")]
    pub workloads: Vec<String>,
    /// Where to write `<kernel>@<workload>@<device key>.json` (default: `kfoundry/spaces/` under cargo's target directory; with --bundle, `target/kfoundry/spaces/` here).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Refuse a space with more valid configurations than this (after the constraints and the device's limits).
    #[arg(long, value_name = "N", default_value_t = 20000)]
    pub max_configs: usize,
    /// Timed runs per configuration (median taken), after one warm-up run.
    #[arg(long, default_value_t = 5, value_parser = repeats)]
    pub repeats: usize,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub limits: TimeLimitArgs,
    /// Read the kernels from a bundle written by `cargo kfoundry bundle` instead of the workspace.
    #[arg(long, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
    /// Continue from an existing file for the same kernel, workload and device: configurations already in it are not evaluated again.
    #[arg(long)]
    pub resume: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    #[command(flatten)]
    pub ws: WorkspaceArgs,
    /// Run each device's winner on every device present and print hws = time of the other device's winner ÷ time of this device's own winner (above 1: tuning for the device paid).
    #[arg(long)]
    pub cross: bool,
    /// Measure on these devices only (selectors as for `tune --device`; default: every device present that has winners).
    #[arg(long = "device", value_name = "SELECTOR")]
    pub devices: Vec<String>,
    /// Only these kernels (repeatable): an id, a name (`Sgemm`, `::Sgemm`) or a glob over ids (`cnn-block::*`).
    #[arg(long = "kernel", value_name = "PATTERN")]
    pub kernels: Vec<String>,
    /// Only these workloads.
    #[arg(long = "workload", value_name = "NAME")]
    pub workloads: Vec<String>,
    /// Timed runs per measurement (median), after one warm-up.
    #[arg(long, default_value_t = 10, value_parser = repeats)]
    pub repeats: usize,
    /// Read the kernels from a bundle instead of the workspace.
    #[arg(long, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
    /// The lockfile (default: the workspace's; with --bundle, Kfoundry.lock here).
    #[arg(long, value_name = "FILE")]
    pub lockfile: Option<PathBuf>,
    /// Write a self-contained HTML report (default path: report.html under the tune's state directory, `target/kfoundry/`).
    #[arg(long, value_name = "PATH", num_args = 0..=1)]
    pub html: Option<Option<PathBuf>>,
    /// Where the tune kept its state (its histories feed the HTML report).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct BundleArgs {
    #[command(flatten)]
    pub ws: WorkspaceArgs,
    /// Where to write the bundle.
    #[arg(
        short,
        long,
        value_name = "FILE",
        default_value = "kfoundry-bundle.json"
    )]
    pub output: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    #[command(flatten)]
    pub ws: WorkspaceArgs,
    /// The lockfiles to combine (with --git: git's %O %A %B, the ancestor's, ours and theirs).
    #[arg(value_name = "LOCKFILE", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Where to write the result (default: standard output; with --git, over %A as git wants).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Act as git's merge driver: `cargo kfoundry merge --git %O %A %B` (see the manual, book/src/fleet.md, for the .gitattributes and git config lines).
    #[arg(long)]
    pub git: bool,
    /// The lockfile the inputs started from (their common ancestor): a slot only one input changed takes that input's state. Without it, inputs that disagree on a slot conflict.
    #[arg(long, value_name = "FILE", conflicts_with = "git")]
    pub base: Option<PathBuf>,
    /// Read the current kernels from a bundle instead of the workspace (to tell stale entries).
    #[arg(long, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct ImportArgs {
    /// The ONNX model (opset 13 or later, float32, static shapes).
    #[arg(value_name = "MODEL")]
    pub model: PathBuf,
    /// The generated crate's package name.
    #[arg(long, value_name = "NAME")]
    pub name: String,
    /// The directory to write the crate into (created; it must not exist or be empty, unless --force).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// A value for a symbolic input dimension, e.g. `--dim batch=1` (repeatable).
    #[arg(long = "dim", value_name = "NAME=N")]
    pub dims: Vec<String>,
    /// Replace DIR if it exists.
    #[arg(long)]
    pub force: bool,
    /// What the matrix products' tensor-core path computes: `fp32` (3xTF32, FP32-accurate) or
    /// `tf32` (one TF32 product: faster, with TF32's tolerance in the generated checks).
    #[arg(long, value_name = "fp32|tf32", value_parser = ["fp32", "tf32"], default_value = "fp32")]
    pub precision: String,
    /// Where the generated `Model` gets its weights: `embed` (built into the binary,
    /// `Model::new`) or `file` (`Model::from_weights_file(queue, path)` reads `weights.bin` when
    /// the program runs, checked by length and checksum). Default: embed up to 64 MiB.
    #[arg(long, value_name = "embed|file", value_parser = ["embed", "file"])]
    pub weights: Option<String>,
    /// Also write the generated kernels as a bundle that `tune --bundle` reads (what
    /// `cargo kfoundry bundle` would write for the crate), for a machine without cargo.
    #[arg(long, value_name = "PATH")]
    pub bundle: Option<PathBuf>,
    /// No summary.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The ONNX model (as for `import`).
    #[arg(value_name = "MODEL")]
    pub model: PathBuf,
    /// The package name it was imported and tuned under (the lockfile's kernel ids start with it).
    #[arg(long, value_name = "NAME")]
    pub name: String,
    /// The lockfile whose variants dispatch chooses from (none: every kernel's reference).
    #[arg(long, value_name = "FILE")]
    pub lockfile: Option<PathBuf>,
    /// A value for a symbolic input dimension (as for `import`).
    #[arg(long = "dim", value_name = "NAME=N")]
    pub dims: Vec<String>,
    /// The precision it was imported with (as for `import`).
    #[arg(long, value_name = "fp32|tf32", value_parser = ["fp32", "tf32"], default_value = "fp32")]
    pub precision: String,
    /// The graph's inputs in order, each raw little-endian float32 in row-major order
    /// (numpy: `a.astype('<f4').tofile(path)`); none: random values in [-1, 1).
    #[arg(long = "input", value_name = "FILE")]
    pub inputs: Vec<PathBuf>,
    /// Where to write the outputs, `0.bin`, `1.bin`, ... in the graph's order (raw float32).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Timed runs of the whole graph after the first (medians are reported).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub repeats: u32,
    /// The device (as for `tune`; default: the first).
    #[arg(long, value_name = "SELECTOR")]
    pub device: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct DevicesArgs {
    #[arg(long, value_enum, default_value_t = MessageFormat::Human)]
    pub message_format: MessageFormat,
    /// Also show each device's copy bandwidth and FP32 rate (micro-benchmarks, cached per device; they feed the roofline).
    #[arg(long)]
    pub peaks: bool,
    /// With --peaks: measure again instead of using the cache.
    #[arg(long, requires = "peaks")]
    pub remeasure: bool,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    #[command(flatten)]
    pub ws: WorkspaceArgs,
    /// Exit non-zero when the lockfile is missing, stale, incomplete or has orphaned entries (for CI).
    #[arg(long)]
    pub locked: bool,
    /// Re-prove, on every device present (or those --device names), every entry that dispatch could run there (its own, its family's, the nearest device's), as the tune proves a finalist, over the sizes and scalar values the entry claims; exit 6 when any does not hold. What ships is then what was verified, whoever wrote the lockfile.
    #[arg(long)]
    pub verify: bool,
    /// With --verify: the devices to verify on (an index, `gpu`, `cpu`, or text in the name); default all.
    #[arg(long, value_name = "SELECTOR", requires = "verify")]
    pub device: Vec<String>,
    /// With --verify: the seed of the proofs' draws (default: drawn afresh).
    #[arg(long, value_name = "N", requires = "verify")]
    pub proof_seed: Option<u64>,
    /// Check against the kernels of a bundle instead of the workspace (on a machine without cargo).
    #[arg(long, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
    /// The lockfile to check (default: Kfoundry.lock at the workspace root; with --bundle, in the current directory).
    #[arg(long, value_name = "FILE")]
    pub lockfile: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct SimulateArgs {
    /// A Kernel Tuner cache file (.json or .json.gz).
    pub cache: PathBuf,
    /// Independent seeded runs.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Evaluations per run.
    #[arg(long, default_value_t = 200)]
    pub budget_evals: usize,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Replay under another engine setting, KEY=VALUE (repeatable), e.g. `screening=8`, `sampling.explore=0.4`, `screen_model=Nearest`; the names are the fields of `kfoundry_search::Settings`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    #[arg(long, value_enum, default_value_t = MessageFormat::Human)]
    pub message_format: MessageFormat,
}

/// Parses the process arguments, dropping the `kfoundry` that cargo inserts.
pub fn parse() -> Cli {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "kfoundry") {
        args.remove(1);
    }
    Cli::parse_from(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_that_would_panic_later_are_usage_errors() {
        for bad in ["inf", "1e30", "NaN", "-1", "0", "x"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds("2.5"), Ok(2.5));
        assert!(fraction("inf").is_err() && fraction("0").is_err() && fraction("0.9").is_ok());
        assert!(repeats("0").is_err() && repeats("5").is_ok());
        for args in [
            vec!["cargo-kfoundry", "tune", "--candidate-timeout", "inf"],
            vec!["cargo-kfoundry", "tune", "--budget-secs", "1e30"],
            vec!["cargo-kfoundry", "tune", "--budget-evals", "0"],
            vec!["cargo-kfoundry", "tune", "--roofline-stop", "NaN"],
            vec!["cargo-kfoundry", "brute-force", "--build-timeout", "-3"],
        ] {
            let e = Cli::try_parse_from(&args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        }
        assert!(Cli::try_parse_from([
            "cargo-kfoundry",
            "tune",
            "--candidate-timeout",
            "30",
            "--reference-timeout",
            "600"
        ])
        .is_ok());
    }
}
