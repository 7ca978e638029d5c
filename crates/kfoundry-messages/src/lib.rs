//! The machine-readable output of `cargo kfoundry --message-format json`: one JSON object per
//! line, each a [`Message`] with `"version"` and `"reason"` fields, as typed structs that a
//! tool can deserialize (as `nextest-metadata` is for cargo-nextest). This is a contract with
//! tools and CI: a field is only ever added within a version; renaming or removing one, or
//! changing its meaning, raises [`VERSION`]. The manual (`book/src/ci.md`) documents every message, and a
//! snapshot test (`cargo-kfoundry/tests/cli/contract.rs`) pins their shape.

use std::path::PathBuf;

use kfoundry_rt::model::expr::Expr;
use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes, Workload};
use kfoundry_rt::model::variant::Variant;
use kfoundry_rt::{DeviceInfo, DeviceTraits};
use kfoundry_search::{Config, Evaluation, Operator};
use serde::{Deserialize, Serialize};

/// An input on which a finalist and the reference disagree: what a call would have to pass to
/// see it wrong. Its input values are drawn from the tune's proof seed as `values` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counterexample {
    pub sizes: Sizes,
    /// The integer scalars that are not sizes (the others drawn as declared).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub scalars: std::collections::BTreeMap<String, i64>,
    /// The class of input values, in words ("inputs shifted far below zero").
    pub values: String,
    /// What the outputs held before the run: `poison` (NaN), `zeros` or `random`.
    pub prefill: String,
    /// Whether the written buffers were their inputs' (`in_place(...)`).
    pub in_place: bool,
}

/// The version of the message schema, in every message.
pub const VERSION: u32 = 1;

/// One line of JSON output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Message {
    /// `tune`: one configuration of the parameter search was evaluated.
    Evaluation {
        kernel: String,
        workload: String,
        params: Params,
        operator: Operator,
        outcome: Evaluation,
    },
    /// `tune`: the language model took a turn (one mutation).
    LanguageModel {
        kernel: String,
        workload: String,
        turn: LlmTurn,
    },
    /// `tune`: a finalist was not shipped: `stage` is `probe` (wrong or failing at another
    /// size) or `remeasure` (failed, or was no faster, when measured again).
    Rejected {
        kernel: String,
        workload: String,
        stage: String,
        params: Params,
        why: String,
        /// The smallest input the proof found the finalist wrong on (absent when the proof
        /// did not refuse it, or failed before it had a case to show).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counterexample: Option<Counterexample>,
    },
    /// `tune`: one kernel at one workload is done.
    /// (Boxed: the largest message by far; the JSON is the same.)
    Tuned { result: Box<TuneResult> },
    /// `tune`: one kernel at one workload failed (the others go on).
    Failed {
        kernel: String,
        workload: String,
        error: String,
    },
    /// `tune`: the portfolio of a kernel with `ranges(...)`: its buckets, each with the variant
    /// every anchor in it recorded, and the fraction of the best speed at each anchor it keeps.
    Portfolio {
        kernel: String,
        ranges: String,
        buckets: Vec<PortfolioBucket>,
        kept_geomean: f64,
        kept_min: f64,
    },
    /// `tune`: the end of the run.
    Finished {
        lockfile: PathBuf,
        results: usize,
        failed: usize,
        interrupted: bool,
    },
    /// `list`: an annotated kernel.
    Kernel(KernelListing),
    /// `devices`: an OpenCL device.
    Device {
        index: usize,
        key: String,
        info: DeviceInfo,
        traits: DeviceTraits,
        peaks: Option<Peaks>,
    },
    /// `check`: a problem with the lockfile.
    Finding { message: String },
    /// `tune`: something worth knowing that changes nothing (a search resumed, a workload
    /// skipped on this device, a general variant recorded, a lock waited for), as the human
    /// output's `note:` line says it.
    Note { text: String },
    /// `tune`: something went wrong that the run survives (no roofline figures, a history not
    /// saved), as the human output's `warning:` line says it.
    Warning { text: String },
    /// `report`: a recorded winner.
    Variant { kernel: String, variant: Variant },
    /// `report --cross`: one device's winner measured on another device.
    Cross { result: CrossCell },
    /// `simulate`: the engine replayed on a brute-forced space.
    Simulated(Simulated),
    /// `brute-force`: one kernel's space at one workload, evaluated into a cache file.
    BruteForced(BruteForced),
}

impl Message {
    /// The message as one line of JSON: `{"version":1,"reason":...,...}`.
    pub fn to_line(&self) -> String {
        #[derive(Serialize)]
        struct Versioned<'a> {
            version: u32,
            #[serde(flatten)]
            message: &'a Message,
        }
        // Serializing these types cannot fail (string keys, no non-string map keys); should it
        // ever, the line says so rather than vanishing.
        serde_json::to_string(&Versioned {
            version: VERSION,
            message: self,
        })
        .unwrap_or_else(|e| {
            format!(
                "{{\"version\":{VERSION},\"reason\":\"unprintable\",\"error\":{:?}}}",
                e.to_string()
            )
        })
    }

    /// Prints the message on stdout.
    pub fn emit(&self) {
        println!("{}", self.to_line());
    }
}

/// One bucket of a portfolio: the stretch `lo..=hi` of the split size `size` (none: the whole
/// range is one bucket), its variant's parameters, and its anchors (workload names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortfolioBucket {
    pub size: Option<String>,
    pub lo: Option<i64>,
    pub hi: Option<i64>,
    pub params: Params,
    pub anchors: Vec<String>,
}

/// The result of tuning one kernel at one workload on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneResult {
    pub kernel: String,
    pub workload: String,
    pub sizes: String,
    pub device: String,
    pub reference_ns: u64,
    pub best_ns: u64,
    pub speedup: f64,
    pub params: Params,
    pub evaluations: usize,
    pub failures: usize,
    pub seconds: f64,
    /// Of `seconds`, what the search's evaluations cost (the rest: the worker's start, the
    /// finalists, their proof and re-measure).
    #[serde(default)]
    pub search_seconds: f64,
    /// Where `seconds` went: the worker's start, the search, the proof (and its parts, as the
    /// worker timed them), the re-measure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
    /// Achieved bandwidth and compute of the winner, from `cost(...)`.
    pub gbytes_per_s: Option<f64>,
    pub gflops: Option<f64>,
    /// The winner's worst output error against the reference over its input sets.
    pub max_abs_error: Option<f64>,
    pub rel_error_norm: Option<f64>,
    /// The other sizes the winner was checked at.
    pub probed_sizes: Vec<String>,
    /// Every size set the winner was verified at (the workload's first): dispatch uses it only
    /// within their range.
    #[serde(default)]
    pub proven: Vec<Sizes>,
    /// For each integer scalar that is not a size, the smallest and largest value the winner was
    /// verified with: dispatch uses it only within.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub proven_scalars: std::collections::BTreeMap<String, [i64; 2]>,
    /// The seed the proof drew its sizes, scalars and inputs from (`--proof-seed` repeats it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof_seed: Option<u64>,
    /// Proof cases the winner passed, and those skipped because the reference itself could not
    /// be trusted there.
    #[serde(default)]
    pub proof_cases: usize,
    #[serde(default)]
    pub proof_cases_skipped: usize,
    /// Finalists that were not shipped: (parameters, why) — wrong or failing at another size,
    /// or failing on re-measure.
    pub probe_rejections: Vec<(Params, String)>,
    /// Why the reference (or an earlier complete result) is shipped rather than a candidate.
    #[serde(default)]
    pub note: Option<String>,
    /// The search was interrupted and the lockfile's complete earlier result was kept.
    #[serde(default)]
    pub kept_existing: bool,
    /// The plain reference is what ships (no finalist beat it on re-measure, or every one was
    /// rejected at other sizes: `note` says which).
    #[serde(default)]
    pub reference_kept: bool,
    /// The compiler's warnings while building this search's candidates, each distinct one
    /// once with how many times it came (PoCL's "1 warning generated." and the like dropped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_warnings: Vec<(String, usize)>,
    /// Failed candidates and their build logs, when any failed.
    pub failure_log: Option<PathBuf>,
    /// True when the search was cut short by Ctrl-C/SIGTERM (resume to continue it).
    pub interrupted: bool,
    /// Roofline floor (from `cost(...)` and the device's measured peaks) ÷ the winner's time.
    pub roofline: Option<f64>,
    /// The winner's source when it is a source-level variant from the language model.
    pub generated_source: Option<String>,
    /// What the language model did, when one is configured.
    pub llm: Option<LlmSummary>,
    /// Where the winner's constraints refuse part of the region it was proven over: the
    /// workload's general variant, proven over the same region, which dispatch runs where the
    /// winner cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub general: Option<GeneralVariant>,
    /// The smallest sizes at which the winner was measured no slower than the reference, going
    /// down from the workload: dispatch runs it only at calls whose work is at least theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Sizes>,
}

/// A workload's general variant: the fastest configuration of the search that runs wherever
/// the reference does, recorded beside a winner whose constraints refuse some sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneralVariant {
    pub params: Params,
    /// Its median time and the reference's, re-measured alternately at the workload.
    pub best_ns: u64,
    pub reference_ns: u64,
    /// Every size set it was proven at (the workload's first).
    pub proven: Vec<Sizes>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub proven_scalars: std::collections::BTreeMap<String, [i64; 2]>,
    pub proof_cases: usize,
    /// As the winner's `floor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Sizes>,
}

/// Where one tune's wall time went, in seconds of the tuner's wall clock. What is left of the
/// tune's `seconds` went to where its search starts (a checkpoint, warm starts) and to what is
/// written after (history, checkpoint).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Starting the worker process: the device opened, the reference built and checked.
    pub start: f64,
    /// The search, its evaluations (`search_seconds`) and its proposals between them.
    pub search: f64,
    /// Proving the finalists (every case of every finalist, the worker's answers included).
    pub proof: f64,
    /// The proof's parts, as the worker timed them (their sum is under `proof`: the rest is
    /// the exchange with the worker and workers started again after a failure).
    pub proof_parts: ProofTime,
    /// Re-measuring finalists against the reference (before their proof), and the winner
    /// against the lockfile's entry.
    pub remeasure: f64,
}

/// Seconds of proof cases spent in each part, summed over the cases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProofTime {
    /// Checking the reference at a case's sizes (that it stays within its buffers there).
    pub check_reference: f64,
    /// Building the candidate (once a worker; later cases find it built), and on a device that
    /// is not a GPU its build with the work-groups numbered in reverse.
    pub build: f64,
    /// Drawing the input sets (on the host or the device).
    pub draw: f64,
    /// Writing them to the device's buffers, for the reference and for the candidate.
    pub upload: f64,
    /// Running the reference on them.
    pub reference: f64,
    /// Running the candidate (the local-memory scrub and the guard zones' inspection with it).
    pub candidate: f64,
    /// Comparing the candidate's buffers with the reference's.
    pub compare: f64,
}

impl ProofTime {
    /// The two summed part by part.
    pub fn plus(self, o: ProofTime) -> ProofTime {
        ProofTime {
            check_reference: self.check_reference + o.check_reference,
            build: self.build + o.build,
            draw: self.draw + o.draw,
            upload: self.upload + o.upload,
            reference: self.reference + o.reference,
            candidate: self.candidate + o.candidate,
            compare: self.compare + o.compare,
        }
    }
}

/// The language model's part in one tune.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmSummary {
    pub requests: u64,
    pub tokens: u64,
    /// Mutations asked for, and how many passed verification.
    pub mutations: usize,
    pub accepted: usize,
    /// Source variants in the archive.
    pub elites: usize,
    /// Meta-requests that rewrote prompts, and the prompt variants now in the population.
    pub meta_requests: u32,
    pub prompt_variants: usize,
    /// Why the model stopped being asked (a refused key, an unknown model, a spent budget).
    pub disabled: Option<String>,
}

/// What became of one mutation asked of the language model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmTurn {
    pub prompt_variant: Option<usize>,
    /// The hash of the proposed source, when there was one.
    pub hash: Option<String>,
    /// `accepted`, `rejected` (no usable answer, or one seen before), `build`, `wrong`, `failed`.
    pub outcome: String,
    pub detail: String,
    /// Seconds, when accepted.
    pub time: Option<f64>,
}

/// An annotated kernel as `list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelListing {
    pub id: String,
    pub package: String,
    /// `file:line`.
    pub location: String,
    /// The OpenCL entry point.
    pub entry: String,
    pub fingerprint: String,
    /// Configurations before constraints (a decimal string: it may exceed 2^64).
    pub space_size: String,
    pub params: Vec<(String, Vec<i64>)>,
    /// The constraints, as written.
    pub require: Vec<String>,
    /// The device properties the constraints read (`device_*`): the space differs by device.
    pub device_properties: Vec<String>,
    pub workloads: Vec<Workload>,
}

/// One cell of the hardware-awareness matrix: `owner`'s winner measured on `on`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossCell {
    pub kernel: String,
    pub workload: String,
    /// The device measured on.
    pub on: String,
    /// The device whose winner ran.
    pub owner: String,
    pub params: Params,
    /// Median time here, or why it could not run here.
    pub time_ns: Option<u64>,
    pub failure: Option<String>,
    /// time of `owner`'s winner ÷ time of `on`'s own winner.
    pub hws: Option<f64>,
}

/// A replay of the engine on a brute-forced space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Simulated {
    pub kernel: String,
    pub device: String,
    /// The optimum of the space, seconds.
    pub best_time: f64,
    /// (evaluations, median over runs of optimum ÷ best found).
    pub fractions: Vec<(usize, f64)>,
    /// Methodology scores (0 = random search, 1 = optimum) on the evaluation and time axes.
    pub score_evals: f64,
    pub score_time: f64,
    /// The cache file is an interrupted brute-force run.
    pub incomplete: bool,
    pub runs: Vec<SimulatedRun>,
}

/// One seeded run of a replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimulatedRun {
    pub seed: u64,
    pub evaluations: usize,
    pub failures: usize,
    pub seconds: f64,
    pub fraction: f64,
    /// The best configuration found and its time, seconds.
    pub best: Option<(Config, f64)>,
}

/// A brute-forced space: the Kernel Tuner cache file written, and what it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BruteForced {
    pub kernel: String,
    pub workload: String,
    pub device: String,
    pub path: PathBuf,
    /// Valid configurations of the space, evaluated now, and found in the file already.
    pub valid: usize,
    pub evaluated: usize,
    pub resumed: usize,
    /// Configurations with a time; failures by kind (`build`, `wrong`, ...).
    pub timed: usize,
    pub failures: std::collections::BTreeMap<String, usize>,
    /// The fastest configuration and its time in milliseconds.
    pub best_time_ms: Option<f64>,
    pub best: Option<Params>,
    pub interrupted: bool,
}

/// What the micro-benchmarks measured on one device (`cargo kfoundry devices`), the roofline's
/// two slopes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Peaks {
    /// Bytes read + written per second by a float4 copy kernel, in GB/s.
    pub copy_gbytes_per_s: f64,
    /// FP32 rate of independent `mad` chains, in GFLOP/s (a mad counts 2).
    pub gflops: f64,
}

impl Peaks {
    /// The roofline floor in seconds of `bytes` moved and `flops` computed.
    pub fn floor_seconds(&self, bytes: Option<f64>, flops: Option<f64>) -> Option<f64> {
        let b = bytes.map(|b| b / (self.copy_gbytes_per_s * 1e9));
        let f = flops.map(|f| f / (self.gflops * 1e9));
        match (b, f) {
            (None, None) => None,
            (b, f) => Some(b.unwrap_or(0.0).max(f.unwrap_or(0.0))),
        }
    }

    /// The floor of a kernel at `params` and `sizes`, from its `cost(...)`.
    pub fn kernel_floor(&self, spec: &KernelSpec, params: &Params, sizes: &Sizes) -> Option<f64> {
        let cost = spec.cost.as_ref()?;
        let env = spec.env(params, sizes);
        let eval = |e: Option<&Expr>| e.and_then(|e| e.eval(&env).ok()).map(|v| v as f64);
        self.floor_seconds(eval(cost.bytes.as_ref()), eval(cost.flops.as_ref()))
    }
}
