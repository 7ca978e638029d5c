//! Evaluation of candidates on a real OpenCL device, as the spec demands: build with `-D`
//! parameters, run on fresh random inputs with poisoned outputs, compare with the reference's
//! output on the same inputs, then time with profiling events (warm-up, median of repeats).
//!
//! What a candidate cannot get away with:
//! - **forgetting an element**: outputs are poisoned (NaN, or the byte 0xA5 for integers)
//!   before every run;
//! - **touching memory outside its buffers**: every buffer is followed by a guard zone of
//!   poison; a write there fails the candidate, a read there feeds it NaN;
//! - **relying on `__local` memory it did not write** (left over from an earlier work-group
//!   or kernel): the device's local memory is scrubbed (filled with NaN) right before each
//!   candidate run; on devices that are not GPUs, where one thread may run every work-group
//!   in turn on the same local memory (PoCL on a busy machine), a finalist that has local
//!   memory is also verified built with its work-groups numbered in reverse
//!   ([`reversed_work_items`]), so that whichever work-group writes what the others read, some
//!   work-group runs before it (in [`Bench::verify_at`], not during the search: a second build
//!   of every candidate doubled the cost of an evaluation on PoCL);
//! - **being right only at the tuned sizes**: finalists are verified again at smaller and
//!   larger sizes ([`Bench::verify_at`], planned by the tuner's prover).
//!
//! One [`Bench`] serves one kernel on one device, at its workload's sizes and any others. It
//! lives in a worker process ([`worker`]); the tuner's [`supervisor::Supervised`] talks to it
//! and is what the search engine sees, as a [`kfoundry_search::Evaluator`].
//!
//! This file holds the bench and its entry points (set up, evaluate, verify); its methods are
//! grouped by job in files of their own: `validity` (can a configuration run here at all),
//! `builds` (compiling candidates, ahead and cached), `runs` (an input set prepared, uploaded
//! with guard zones, launched), `reference` (the reference checked and run), `verdicts` (a
//! candidate's run compared with the reference's) and `timing` (profiling-event medians). Its
//! state is grouped the same way: `Builds` (what was built, builds ahead, the program cache,
//! the build farm), `Inputs` (the input sets shared by the search's candidates) and
//! `ReferenceKnown` (where the reference was checked, its kept runs on proof cases).

mod builds;
pub mod case;
mod compare;
mod device_data;
pub mod diagnostics;
mod farm;
mod inputs;
pub mod program_cache;
mod reference;
mod reference_runs;
mod runs;
pub mod supervisor;
pub mod text;
mod timing;
mod validity;
mod verdicts;
pub mod worker;

use std::time::Instant;

use kfoundry_rt::model::signature::{KernelArg, ScalarType};
use kfoundry_rt::model::source_policy;
use kfoundry_rt::model::spec::{ArgRole, KernelSpec, Params, Sizes};
use kfoundry_rt::opencl::session::{DeviceBuffer, Kernel, KernelInfo, Program, Session};
use kfoundry_rt::{Arg, Error as RtError, Scalar};
use kfoundry_search::cones::{GroupSize, WORK_GROUP_LIMIT};
use kfoundry_search::{Config, Evaluation, FailureKind};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use self::case::{Case, Prefill, Values};
use self::compare::{compare, Comparison};
use self::device_data::DeviceData;
use self::inputs::{
    decode, draw_scalar_values, draw_values, fits_elements, guard_pattern, perturb, prefill_buffer,
    Nudge,
};
use kfoundry_messages::ProofTime;
use rand::Rng as _;

use self::builds::{Background, BuildKey, MAX_BUILDERS};
use self::runs::{Fill, Prepared, PreparedBuffer, Run, RunBuffer};
use self::validity::{check_fits, work_group_items};

pub use self::builds::reversed_work_items;
pub use self::timing::{median, relative_spread, MAX_REPEATS, STABLE, TIMING_BUDGET_S};
pub use self::validity::{check_launchable, pins_work_group, Validity};

/// Elements of guard after every buffer (fewer when the device's allocation limit is near).
pub const GUARD_ELEMS: usize = 16384;
/// Bytes of guard before every buffer (rounded up to the device's sub-buffer alignment).
pub const FRONT_GUARD_BYTES: usize = 65536;

/// How candidates are checked and timed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Measurement {
    /// Input sets each candidate must pass (see [`Bench`] for which are fresh).
    pub input_sets: usize,
    /// Untimed runs before timing.
    pub warmup: usize,
    /// Timed runs at least; more while the median still moves (see `Bench::time`), and the
    /// median is the candidate's time.
    pub repeats: usize,
    /// Seed of the input generator.
    pub seed: u64,
    /// How many builds ahead ([`Bench::build_ahead`]) may run at once (at most
    /// `MAX_BUILDERS`); `None`: one on a GPU (NVIDIA's compiler slows every build it runs at
    /// once: 16 at once finished only 1.2-1.7x as many a second, BENCHMARKS.md), every core but
    /// the one that measures elsewhere.
    #[serde(default)]
    pub build_jobs: Option<usize>,
    /// Builds ahead in this many builder processes (the `farm` module) instead of threads of the
    /// worker, while the search may read builds that were not made from source (until
    /// [`Bench::seal`]); 0 or `None`: threads. With a farm, `build_jobs` is its size.
    #[serde(default)]
    pub build_processes: Option<usize>,
    /// Program binaries kept across runs ([`program_cache`]); `None`: every build from source.
    #[serde(default)]
    pub program_cache: Option<ProgramCacheUse>,
    /// What the compiler's messages about the kernel's own source (not a generated one) call
    /// it, in place of the driver's temporary copy (the tuner's `Kernel::source_place`);
    /// `None`: as the driver names it.
    #[serde(default)]
    pub source_place: Option<String>,
}

/// How a bench uses the program-binary cache ([`program_cache`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProgramCacheUse {
    /// The cache's folder.
    pub dir: std::path::PathBuf,
    /// Whether builds may be read from it (the search's); `false`: only written to (once a
    /// proof has begun, [`Bench::seal`]).
    pub read: bool,
}

impl Default for Measurement {
    fn default() -> Self {
        Measurement {
            input_sets: 3,
            warmup: 1,
            repeats: 5,
            seed: 0,
            build_jobs: None,
            build_processes: None,
            program_cache: None,
            source_place: None,
        }
    }
}

/// How far a candidate's outputs were from the reference's, worst over its input sets and
/// checked outputs (reported per kernel).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ErrorStats {
    /// Largest |candidate − reference| element-wise.
    pub max_abs: f64,
    /// ‖candidate − reference‖₂ / ‖reference‖₂.
    pub rel_norm: f64,
}

impl ErrorStats {
    fn worst(self, other: ErrorStats) -> ErrorStats {
        ErrorStats {
            max_abs: self.max_abs.max(other.max_abs),
            rel_norm: self.rel_norm.max(other.rel_norm),
        }
    }
}

/// Device limits checked before a candidate is built, and used to size probes.
pub use kfoundry_rt::opencl::device::Limits;

/// The file name a generated source's diagnostics carry: what the diagnostics filter keeps
/// (`diagnostics::own_diagnostics`).
pub use kfoundry_rt::model::source_policy::CANDIDATE_FILE;

/// What varies between the runs of a proof, for one input set (see [`Case`]).
#[derive(Clone)]
struct Shape<'a> {
    sizes: &'a Sizes,
    scalars: &'a std::collections::BTreeMap<String, i64>,
    prefill: Prefill,
    values: Values,
    in_place: bool,
    /// The seed of this input set (`None`: the bench's own stream).
    seed: Option<u64>,
}

impl<'a> Shape<'a> {
    /// The search's shape at `sizes`: declared inputs, poisoned outputs, nothing in place.
    fn plain(sizes: &'a Sizes) -> Shape<'a> {
        static NONE: std::sync::OnceLock<std::collections::BTreeMap<String, i64>> =
            std::sync::OnceLock::new();
        Shape {
            sizes,
            scalars: NONE.get_or_init(Default::default),
            prefill: Prefill::Poison,
            values: Values::Declared,
            in_place: false,
            seed: None,
        }
    }

    /// Input set `k` of `case`.
    fn of(case: &'a Case, k: usize) -> Shape<'a> {
        let seed = (case.seed != 0)
            .then(|| case.seed ^ (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        Shape {
            sizes: &case.sizes,
            scalars: &case.scalars,
            prefill: case.prefill.nth(k),
            values: case.values,
            in_place: case.in_place,
            seed,
        }
    }
}

/// How one verification on a fresh input set ended.
enum SetOutcome {
    Passed(Run, ErrorStats),
    Failed(Rejection),
    /// The reference itself misbehaved on these inputs: they prove nothing.
    Unproven(Untrusted),
}

/// Why a case proves nothing: the reference cannot be trusted there.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Untrusted {
    pub message: String,
    /// The reference reads or writes outside its buffers on inputs its annotation declares:
    /// the annotation's mistake (an input of indices drawn out of range, a length declared
    /// too short), reported as such, never a candidate's.
    pub annotation_fault: bool,
}

impl Untrusted {
    /// Not the annotation's mistake: a failure of the run (the device, memory, a crash).
    pub fn device(message: String) -> Untrusted {
        Untrusted {
            message,
            annotation_fault: false,
        }
    }
}

/// The measured descriptor that reports a timing's noise ([`relative_spread`]); not a
/// dimension of the search's archive.
pub(crate) const TIMING_NOISE: &str = "timing_noise";

/// How a failure found in a guard zone begins.
const GUARD_FAILURE: &str = "writes";

/// Candidates one pooled input set serves before it is drawn afresh (with a new reference run).
pub(crate) const POOL_REUSES: usize = 8;

/// One input set of the pool: what it is made of, the reference's finished run on it, and how
/// many candidates it has served.
struct PooledSet {
    prepared: Prepared,
    reference: Run,
    served: usize,
}

/// Evaluates configurations of one kernel on one device.
///
/// Where a candidate's inputs come from. During the search (the workload's sizes), each
/// candidate must pass `input_sets` sets from a pool: each set is drawn once, the reference
/// runs on it once, and it serves `POOL_REUSES` candidates before it is replaced by a fresh
/// one (the sets are staggered, so one is renewed every few candidates). The reference's run,
/// the slowest part of a check for a naive reference, and the drawing of inputs on the host
/// are so paid once per set, not once per candidate. What stays per candidate: its own copy of
/// the inputs, poisoned outputs, guard zones, the local-memory scrub, the comparison of every
/// output and of every input it must leave alone. What a reused set gives up: candidates no
/// longer see new values each time, so a value-dependent bug the current sets do not trigger
/// passes the search. That is why a finalist is verified again before it ships, on fresh
/// inputs at the workload's sizes and at every probe size ([`Bench::verify_at`], never
/// pooled). The pool is skipped (fresh sets per candidate, as at other sizes) when it would
/// take more than half of the device's memory, or when the candidate's buffers have other
/// lengths than the reference's.
pub struct Bench {
    pub spec: KernelSpec,
    /// The workload's sizes (where candidates are timed).
    pub sizes: Sizes,
    session: Session,
    limits: Limits,
    reference: Kernel,
    /// Building candidates: what was built, builds ahead, the program cache, the build farm.
    builds: Builds,
    /// On-device drawing, poisoning, comparison and local-memory scrubbing.
    device_data: DeviceData,
    settings: Measurement,
    /// Input sets at the workload's sizes, shared by the search's candidates.
    inputs: Inputs,
    /// What is known of the reference: where it was checked, its kept runs on proof cases.
    known: ReferenceKnown,
    /// Whether the device is not a GPU. Then one thread may run every work-group in turn, so
    /// finalists with local memory are also verified with their work-groups numbered in
    /// reverse ([`reversed_work_items`]); and kernels share the CPU with the compiler, so a
    /// candidate is timed only once the builds ahead are done.
    not_gpu: bool,
    /// The most local memory any kernel launched here has used (`u64::MAX`: one did not say):
    /// how far the scrub must reach on a device that is not a GPU ([`Bench::scrub_reach`]).
    local_high: std::cell::Cell<u64>,
    /// Where the proof cases verified since the last [`Bench::take_proof_time`] spent their
    /// time (for the tune's `phases`).
    proof_time: std::cell::Cell<ProofTime>,
    /// Build logs of failed candidates: (parameters, log).
    pub build_failures: Vec<(Params, String)>,
    /// The compiler's logs of candidates that built with something to say (warnings), not yet
    /// passed on (the worker sends them with each answer).
    pub build_warnings: Vec<String>,
    /// Errors of the last candidate that passed verification.
    pub last_errors: Option<ErrorStats>,
}

/// A bench's builds ([`builds`]): the candidates built, those building ahead, the program
/// cache and the build farm.
struct Builds {
    /// The last candidates built, most recent last, each with whether its program came from
    /// the program cache (not from its source).
    built: Vec<(BuildKey, std::rc::Rc<Kernel>, bool)>,
    /// Program binaries kept across runs ([`Measurement::program_cache`]).
    program_cache: Option<program_cache::ProgramCache>,
    /// Whether builds may be read from `program_cache` ([`Bench::seal`]).
    read_cache: bool,
    /// Builds started ahead of their evaluation ([`Bench::build_ahead`]).
    building: Vec<(BuildKey, Background)>,
    /// How many builds ahead may run at once ([`Measurement::build_jobs`]).
    builders: usize,
    /// The device's index (in `list_devices()` order), for the build farm's members.
    device: usize,
    /// The build farm, once builds ahead went to it ([`Measurement::build_processes`]).
    farm: Option<farm::BuildFarm>,
    /// Whether every build must now come from source ([`Bench::seal`]).
    sealed: bool,
    /// Builds taken from the build farm's binaries ([`Bench::farmed_builds`]).
    farmed: usize,
}

/// A bench's input sets at the workload's sizes ([`runs`]).
#[derive(Default)]
struct Inputs {
    /// Input sets drawn so far (each gets its own seed).
    draws: std::cell::Cell<u64>,
    /// Input sets with the reference's run on each, shared by the candidates of the search
    /// ([`POOL_REUSES`]); empty when they would not fit the device.
    pool: std::cell::RefCell<Vec<Option<PooledSet>>>,
    /// Whether a pool fits the device's memory (decided with the first set).
    pool_fits: std::cell::Cell<Option<bool>>,
}

/// What a bench learned of its reference ([`reference`]).
#[derive(Default)]
struct ReferenceKnown {
    /// The sizes at which the reference passed [`Bench::check_reference`]: a proof case at
    /// such sizes does not check it again (a portfolio's proofs, the next finalist's, run the
    /// same sizes; a slow reference's checks were 15% of KernelBench tunes on an H100).
    checked: std::cell::RefCell<std::collections::BTreeSet<Sizes>>,
    /// The reference's runs on seeded proof cases, for the next proof that meets them.
    runs: std::cell::RefCell<reference_runs::ReferenceRuns>,
    /// Whether the reference's outputs reacted to its inputs at some sizes checked here
    /// ([`Bench::check_reference`]).
    varies: std::cell::Cell<bool>,
}

/// Why a bench could not be set up, or a size not checked (the reference itself is broken).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0}")]
    OpenCl(#[from] RtError),
    #[error("the reference does not run at sizes {sizes}: {message}")]
    Reference { sizes: String, message: String },
    #[error("the reference touches memory outside its buffers at sizes {sizes}: {message}")]
    ReferenceOutside { sizes: String, message: String },
    #[error("the reference's output `{0}` does not change when the inputs change: a kernel writing constants would pass verification; check the annotation's inputs and check(...)")]
    InsensitiveOutput(String),
    /// The workload's buffers do not fit the device (or, on a device that is host memory, the
    /// memory the host has free): nothing would run, or the machine would swap for hours.
    #[error("{0}")]
    TooLarge(String),
    /// The kernel source redefines a name the verification relies on.
    #[error("the kernel source, {0}: kfoundry verifies candidates with the work-group ids renamed, and a kernel that redefines them could escape that; remove the directive")]
    ProtectedName(source_policy::Violation),
    /// The guard zones cannot be trusted on this device: nothing would be verified safely.
    #[error("this device's OpenCL driver does not show a write before a buffer's start in the guard before it ({0}): candidates that write out of bounds could not be caught, so nothing is tuned here")]
    GuardsUnreliable(String),
}

/// A verdict on a candidate at some sizes: its output errors, or why it failed.
pub type Verdict = Result<ErrorStats, Rejection>;

/// Why a candidate was refused: the variant decides what happens next (a pool of inputs drawn
/// afresh, a worker restarted, the search's failure kind), the text says it to people.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Rejection {
    /// It did not build: the compiler's first error line.
    Build(String),
    /// It broke a limit known only after its build (local memory, work-group size), or its
    /// configuration cannot run at these sizes.
    Invalid(String),
    /// The run broke: a launch, a read or the device failed, or the worker died.
    Runtime(String),
    /// It ran past its time limit (its worker was killed).
    Timeout(String),
    /// It wrote outside its buffers (into a guard zone), where other runs' data may live.
    OutOfBounds(String),
    /// Its outputs differ from the reference's, or it changed what it must leave alone.
    Wrong(String),
}

impl Rejection {
    /// The search's kind of failure (writing out of bounds is a wrong result to it).
    pub fn kind(&self) -> FailureKind {
        match self {
            Rejection::Build(_) => FailureKind::Build,
            Rejection::Invalid(_) => FailureKind::Invalid,
            Rejection::Runtime(_) => FailureKind::Runtime,
            Rejection::Timeout(_) => FailureKind::Timeout,
            Rejection::OutOfBounds(_) | Rejection::Wrong(_) => FailureKind::Wrong,
        }
    }

    /// What was wrong, for people.
    pub fn why(&self) -> &str {
        match self {
            Rejection::Build(w)
            | Rejection::Invalid(w)
            | Rejection::Runtime(w)
            | Rejection::Timeout(w)
            | Rejection::OutOfBounds(w)
            | Rejection::Wrong(w) => w,
        }
    }

    /// The same rejection with its text changed by `f` (context added).
    pub fn map_why(mut self, f: impl FnOnce(String) -> String) -> Self {
        let why = std::mem::take(self.why_mut());
        *self.why_mut() = f(why);
        self
    }

    /// The search's failed evaluation of this rejection, at `cost` seconds.
    pub fn evaluation(self, cost: f64) -> Evaluation {
        let kind = self.kind();
        Evaluation::failed(kind, self.into_why(), cost)
    }

    /// What was wrong, for people, taken out of the rejection.
    pub fn into_why(mut self) -> String {
        std::mem::take(self.why_mut())
    }

    fn why_mut(&mut self) -> &mut String {
        match self {
            Rejection::Build(w)
            | Rejection::Invalid(w)
            | Rejection::Runtime(w)
            | Rejection::Timeout(w)
            | Rejection::OutOfBounds(w)
            | Rejection::Wrong(w) => w,
        }
    }
}

/// How far a request got, reported to the supervisor as it happens: it charges each phase to
/// the right time limit and blames a failure on the right party.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Phase {
    /// The reference was checked at the requested sizes (verification at other sizes).
    ReferenceChecked,
    /// The candidate is built: the time from here on is its run time.
    Built,
}

impl Bench {
    /// A bench on device number `device` of `kfoundry_rt::list_devices()`.
    pub fn new(
        spec: &KernelSpec,
        sizes: &Sizes,
        device: usize,
        settings: Measurement,
    ) -> Result<Bench, SetupError> {
        source_policy::check_protected_names(&spec.source).map_err(SetupError::ProtectedName)?;
        let session = Session::on_device(device)?;
        let mut limits = session.limits()?;
        let program = session.build_spec(spec, &spec.source, &spec.reference)?;
        let reference = session.kernel(&program, &spec.signature.name)?;
        limits.preferred_multiple = session
            .kernel_info(&reference)
            .preferred_multiple
            .map(|m| m as u64);
        let not_gpu = !session.is_gpu();
        check_fits(spec, sizes, &limits, not_gpu)?;
        let device_data = DeviceData::new(&session, &limits)?;
        let builders = settings
            .build_jobs
            .unwrap_or_else(|| {
                if not_gpu {
                    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1))
                } else {
                    1
                }
            })
            .clamp(1, MAX_BUILDERS);
        let read_cache = settings.program_cache.as_ref().is_some_and(|c| c.read);
        let program_cache = settings
            .program_cache
            .as_ref()
            .and_then(|c| program_cache::ProgramCache::open(&c.dir, &session));
        let bench = Bench {
            spec: spec.clone(),
            sizes: sizes.clone(),
            session,
            limits,
            reference,
            builds: Builds {
                built: Vec::new(),
                program_cache,
                read_cache,
                building: Vec::new(),
                builders,
                device,
                farm: None,
                sealed: false,
                farmed: 0,
            },
            device_data,
            settings,
            inputs: Inputs::default(),
            known: ReferenceKnown::default(),
            not_gpu,
            local_high: std::cell::Cell::new(0),
            proof_time: std::cell::Cell::new(ProofTime::default()),
            build_failures: Vec::new(),
            build_warnings: Vec::new(),
            last_errors: None,
        };
        bench.check_guards()?;
        match bench.check_reference(sizes) {
            Err(SetupError::InsensitiveOutput(_)) if bench.reference_varies_elsewhere(sizes) => {
                bench.known.checked.borrow_mut().insert(sizes.clone());
            }
            checked => checked?,
        }
        Ok(bench)
    }

    /// Is `params` launchable at the workload: constraints, geometry and the device's limits.
    pub fn valid(&self, params: &Params) -> Result<(), String> {
        self.valid_at(params, &self.sizes)
    }

    fn valid_at(&self, params: &Params, sizes: &Sizes) -> Result<(), String> {
        check_launchable(&self.spec, &self.limits, params, sizes)
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Builds, verifies and times `params` of the annotated source, or of `source` (a
    /// source-level variant with the same signature) when given. `progress` hears when the
    /// build is done (the supervisor does not charge build time to a candidate's time limit).
    pub fn evaluate(
        &mut self,
        params: &Params,
        source: Option<&str>,
        progress: &mut dyn FnMut(Phase),
    ) -> Evaluation {
        let start = Instant::now();
        let cost = |start: Instant| start.elapsed().as_secs_f64();
        let sizes = self.sizes.clone();
        if let Err(reason) = self.valid(params) {
            return Evaluation::failed(FailureKind::Invalid, reason, cost(start));
        }
        let (candidate, info) = match self.built_for(params, source, &sizes, progress) {
            Ok(built) => built,
            Err(rejection) => return rejection.evaluation(cost(start)),
        };
        let kernel = candidate.as_deref().unwrap_or(&self.reference);
        self.last_errors = None;
        let (run, errors) = match self.verify_search(kernel, params, self.settings.input_sets) {
            Ok(r) => r,
            Err(rejection) => return rejection.evaluation(cost(start)),
        };
        self.last_errors = Some(errors);
        // Scratch left dirty by any of the timed runs (a race the verified run missed) would
        // break every later launch on it: then the candidate is wrong.
        let mut timed = self.time(kernel, params, &sizes, &run);
        if timed.is_ok() {
            match self.dirty_scratch(&run) {
                Ok(None) => {}
                Ok(Some((name, n))) => {
                    let why = format!("after its timed runs it {}", scratch_left_message(&name, n));
                    return Evaluation::failed(FailureKind::Wrong, why, cost(start));
                }
                Err(e) => timed = Err(e),
            }
        }
        match timed {
            Ok((seconds, noise)) => {
                let mut descriptors = vec![
                    ("local_mem_bytes".to_string(), info.local_mem_bytes as f64),
                    (TIMING_NOISE.to_string(), noise),
                ];
                // The largest work-group the driver allows this build (none: not reported;
                // nor for a source that fixes its work-group, whose limit is that work-group
                // and says nothing of other configurations': the search learns it from
                // failures instead).
                let pinned = pins_work_group(source.unwrap_or(&self.spec.source));
                if info.work_group_size < usize::MAX && !pinned {
                    descriptors.push((WORK_GROUP_LIMIT.to_string(), info.work_group_size as f64));
                }
                Evaluation::Ok {
                    time: seconds,
                    cost: cost(start),
                    descriptors,
                }
            }
            Err(e) => Evaluation::failed(FailureKind::Runtime, e.to_string(), cost(start)),
        }
    }

    /// Builds and times `params` (of `source` when given) at `sizes` rather than the
    /// workload's, once it passed a check against the reference on a fresh input set there:
    /// how a proven entry compares with the reference at smaller sizes
    /// (the tuner's floors).
    pub fn evaluate_at(
        &mut self,
        params: &Params,
        source: Option<&str>,
        sizes: &Sizes,
    ) -> Evaluation {
        let start = Instant::now();
        let cost = |start: Instant| start.elapsed().as_secs_f64();
        if let Err(reason) = self.valid_at(params, sizes) {
            return Evaluation::failed(FailureKind::Invalid, reason, cost(start));
        }
        let candidate = match self.built_for(params, source, sizes, &mut |_| {}) {
            Ok((candidate, _)) => candidate,
            Err(rejection) => return rejection.evaluation(cost(start)),
        };
        let kernel = candidate.as_deref().unwrap_or(&self.reference);
        let run = match self.verify(kernel, params, &Shape::plain(sizes)) {
            SetOutcome::Passed(run, _) => run,
            SetOutcome::Failed(rejection) => return rejection.evaluation(cost(start)),
            SetOutcome::Unproven(why) => {
                return Evaluation::failed(FailureKind::Runtime, why.message, cost(start))
            }
        };
        match self.time(kernel, params, sizes, &run) {
            Ok((seconds, _)) => Evaluation::ok(seconds, cost(start)),
            Err(e) => Evaluation::failed(FailureKind::Runtime, e.to_string(), cost(start)),
        }
    }

    /// Verifies `params` (of `source` when given) in `case` on fresh inputs (never pooled ones,
    /// also at the workload's sizes) without timing it: the proof a finalist needs before it
    /// may be used at those sizes. `Err` when the reference itself cannot be trusted there
    /// (then the case proves nothing either way).
    pub fn verify_at(
        &mut self,
        params: &Params,
        source: Option<&str>,
        case: &Case,
        progress: &mut dyn FnMut(Phase),
    ) -> Result<Verdict, Untrusted> {
        self.seal();
        // The proof time of this case alone (the search's verifications count elsewhere).
        self.proof_time.take();
        if case.check_reference {
            self.timed(
                |t| &mut t.check_reference,
                || self.check_reference(&case.sizes),
            )
            .map_err(|e| Untrusted {
                annotation_fault: matches!(e, SetupError::ReferenceOutside { .. }),
                message: e.to_string(),
            })?;
        }
        progress(Phase::ReferenceChecked);
        if let Err(reason) = self.valid_at(params, &case.sizes) {
            return Ok(Err(Rejection::Invalid(reason)));
        }
        let started = Instant::now();
        let built = self.build(params, source);
        self.add_time(|t| &mut t.build, started);
        let candidate = match built {
            Ok(b) => b,
            Err(failure) => return Ok(Err(failure)),
        };
        progress(Phase::Built);
        let kernel = candidate.as_deref().unwrap_or(&self.reference);
        let local_mem = match self.check_built(kernel, params, &case.sizes) {
            Ok(info) => info.local_mem_bytes,
            Err(failure) => return Ok(Err(failure)),
        };
        let started = Instant::now();
        let reversed = self.reversed_build(params, source, local_mem);
        self.add_time(|t| &mut t.build, started);
        let reversed = match reversed {
            Ok(r) => r,
            Err(failure) => return Ok(Err(failure)),
        };
        let kernel = candidate.as_deref().unwrap_or(&self.reference);
        let mut errors = ErrorStats::default();
        for set in 0..case.sets.max(1) {
            let (kernel, order) = match reversed.as_deref() {
                Some(r) if set % 2 == 1 => (r, " (work-groups in reverse order)"),
                _ => (kernel, ""),
            };
            let shape = Shape::of(case, set);
            match self.verify(kernel, params, &shape) {
                SetOutcome::Passed(_, e) => errors = errors.worst(e),
                SetOutcome::Failed(rejection) => {
                    return Ok(Err(rejection.map_why(|why| {
                        format!("{why}{order}{}", prefill_note(shape.prefill))
                    })))
                }
                SetOutcome::Unproven(why) => return Err(why),
            }
        }
        Ok(Ok(errors))
    }

    /// `sets` verifications at the workload's sizes for the search: on pooled sets when they
    /// fit the device ([`Bench`]), else on fresh ones. The last run (for timing) and the worst
    /// errors.
    fn verify_search(
        &self,
        kernel: &Kernel,
        params: &Params,
        sets: usize,
    ) -> Result<(Run, ErrorStats), Rejection> {
        let mut last_run = None;
        let mut errors = ErrorStats::default();
        let sizes = self.sizes.clone();
        for set in 0..sets.max(1) {
            let verified = match self.verify_pooled(set, sets.max(1), kernel, params) {
                Ok(Some(verified)) => Ok(verified),
                Ok(None) => match self.verify(kernel, params, &Shape::plain(&sizes)) {
                    SetOutcome::Passed(run, e) => Ok((run, e)),
                    SetOutcome::Failed(rejection) => Err(rejection),
                    SetOutcome::Unproven(why) => Err(Rejection::Runtime(why.message)),
                },
                Err(e) => Err(e),
            };
            let (run, e) = verified?;
            last_run = Some(run);
            errors = errors.worst(e);
        }
        last_run
            .map(|run| (run, errors))
            .ok_or(Rejection::Runtime("no run".into()))
    }

    /// One verification on pooled set number `set` of `sets` (drawn, or renewed once it has
    /// served [`POOL_REUSES`] candidates); `None` when the pool does not fit the device or the
    /// candidate's buffers have other lengths than the set's.
    fn verify_pooled(
        &self,
        set: usize,
        sets: usize,
        kernel: &Kernel,
        params: &Params,
    ) -> Result<Option<(Run, ErrorStats)>, Rejection> {
        if self.inputs.pool_fits.get() == Some(false) {
            return Ok(None);
        }
        let runtime = |e: String| Rejection::Runtime(e);
        let mut pool = self.inputs.pool.borrow_mut();
        if pool.len() <= set {
            pool.resize_with(set + 1, || None);
        }
        if pool[set].as_ref().is_none_or(|p| p.served >= POOL_REUSES) {
            // Freed before the new set is drawn: the device holds one set at a time more.
            let renewing = pool[set].take().is_some();
            let reference_params = self.spec.reference.clone();
            let mut rng = self.fresh_rng();
            let prepared = self
                .prepare(&reference_params, &Shape::plain(&self.sizes), &mut rng)
                .map_err(runtime)?;
            if self.inputs.pool_fits.get().is_none() {
                let bytes: usize = prepared
                    .buffers
                    .iter()
                    .map(|b| b.front.len() + b.len * b.ty.size() + b.back.len())
                    .sum();
                let room = usize::try_from(self.limits.global_mem_bytes / 2).unwrap_or(usize::MAX);
                let fits =
                    self.limits.global_mem_bytes > 0 && bytes.saturating_mul(sets + 1) <= room;
                self.inputs.pool_fits.set(Some(fits));
                if !fits {
                    return Ok(None);
                }
            }
            let reference = self
                .upload(&prepared, &reference_params, &self.sizes)
                .map_err(|e| runtime(e.to_string()))?;
            self.launch(
                &self.reference,
                &reference_params,
                &self.sizes,
                &reference,
                false,
            )
            .map_err(|e| runtime(e.to_string()))?;
            // Staggered: the first draw of each set starts it part-used, so that the sets are
            // not all renewed at once; a renewed set starts afresh.
            let served = if renewing {
                0
            } else {
                set * POOL_REUSES / sets
            };
            pool[set] = Some(PooledSet {
                prepared,
                reference,
                served,
            });
        }
        let Some(entry) = pool[set].as_mut() else {
            return Ok(None);
        };
        // (A scratch buffer is made for each run at its configuration's length.)
        for b in entry
            .prepared
            .buffers
            .iter()
            .filter(|b| !matches!(b.fill, Fill::Scratch))
        {
            if self.spec.buffer_len(&b.name, params, &self.sizes).ok() != Some(b.len) {
                return Ok(None);
            }
        }
        entry.served += 1;
        let verdict = self.check_candidate(
            kernel,
            params,
            &self.sizes,
            &entry.prepared,
            &entry.reference,
            Values::Declared,
            &Slack::new(),
        );
        if let Err(Rejection::Runtime(_) | Rejection::OutOfBounds(_)) = &verdict {
            // A candidate that wrote outside its buffers, or broke the run, may have reached
            // the pooled reference runs too: every set is drawn afresh.
            pool.clear();
        }
        verdict.map(Some)
    }
}

/// Extra absolute tolerance for each checked output (by name) of one input set.
type Slack = std::collections::BTreeMap<String, f64>;

/// How many times its usual tolerance (`atol` plus `rtol` of the largest reference value) a
/// candidate may differ from the reference on inputs far from the declared ones: there a
/// correct kernel's rounding can also be amplified where the nudge of [`SENSITIVITY_FACTOR`]
/// does not show it (a sum of squared deviations that cancels, with an order of summation of
/// its own, on saturated values), while the slips these inputs are for are gross (a one-pass
/// variance off by 8x, NaN, infinity, zero).
pub(crate) const FAR_FACTOR: f64 = 16.0;

/// How many times the reference's own movement under a one-unit nudge of its inputs a
/// candidate may differ from it, on inputs far from the declared ones
/// ([`Values::judged_by_sensitivity`]): a kernel that rounds in another order is off by a few
/// such units; an unstable formulation (a one-pass variance at 1000 ± 1, a sum of squares
/// that overflows) by orders of magnitude more.
pub(crate) const SENSITIVITY_FACTOR: f64 = 16.0;

/// The absolute tolerance of an element-wise check on inputs of large magnitude: `atol` plus
/// `rtol` of the largest finite reference value. Those inputs are there to catch a kernel
/// that only works on the declared range (a polynomial `exp`, an overflowing intermediate),
/// whose outputs are then wrong by far more; a correct kernel that rounds in another order is
/// off by a few units of its intermediates, which can be that large where terms of the
/// output's magnitude cancel (a normalization's `x * scale + bias` with both large), so an
/// element's own tolerance would refuse it.
/// Where a reference reads or writes outside its buffers (or crashes) at setup: what the
/// kernel's integer inputs are drawn from, with how to declare indices, or nothing when it has
/// none. Integer inputs left at the default distribution are the usual cause (a CSR matrix's
/// row pointers and column indices drawn at random).
pub(crate) fn index_hint(spec: &KernelSpec) -> String {
    let ints: Vec<String> = spec
        .caller_args()
        .filter_map(|a| match a {
            KernelArg::Buffer {
                name,
                elem,
                read_only: true,
                ..
            } if !elem.is_float() => Some(format!(
                "`{name}` is drawn from `{}`{}",
                spec.distribution(name),
                if spec.inputs.contains_key(name) {
                    ""
                } else {
                    " (the default: no `inputs(...)` entry)"
                }
            )),
            _ => None,
        })
        .collect();
    if ints.is_empty() {
        String::new()
    } else {
        format!(". If an integer input holds indices, declare the range they index (`inputs(ids = uniform_int(0, vocab))`): {}", ints.join(", "))
    }
}

fn large_case_tolerance(rtol: f64, atol: f64, ref_max: f64) -> f64 {
    atol + rtol * ref_max
}

/// The engine's configuration (values in the spec's parameter order) as named parameters.
pub fn params_of(spec: &KernelSpec, config: &Config) -> Params {
    spec.params
        .iter()
        .zip(config)
        .map(|(p, v)| (p.name.clone(), *v))
        .collect()
}

/// The named parameters in the spec's order (the engine's form).
pub fn config_of(spec: &KernelSpec, params: &Params) -> Config {
    spec.params
        .iter()
        .map(|p| params.get(&p.name).copied().unwrap_or(0))
        .collect()
}

pub fn fmt_sizes(sizes: &Sizes) -> String {
    kfoundry_rt::model::spec::fmt_assignments(sizes, ", ")
}

/// How a failure says what the outputs held before the run, when it was not the poison.
fn prefill_note(prefill: Prefill) -> &'static str {
    match prefill {
        Prefill::Poison => "",
        Prefill::Zeros => " (outputs pre-filled with zeros)",
        Prefill::Random => " (outputs pre-filled with random values)",
    }
}

/// What a run that left scratch buffer `name` with `n` elements not zero did wrong.
fn scratch_left_message(name: &str, n: usize) -> String {
    format!("leaves {n} element(s) of scratch `{name}` not zero: a kernel must clear the scratch it used before it ends, every byte (-0.0 counts as written), as every launch finds it all zero")
}

/// The line of a build log that says what went wrong (the first mentioning an error), cut short.
fn build_error_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.contains("error"))
        .or_else(|| text.lines().next())
        .unwrap_or("build failed");
    truncate(line.trim(), 300)
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// What the finalist stages (verify, re-measure) need of an evaluator: the supervised worker
/// in a tune, a scripted one in their tests.
pub trait Judge {
    /// Builds, verifies and times `params` (of `source` when given) at the workload's sizes.
    fn evaluate(&mut self, params: &Params, source: Option<&str>) -> Evaluation;
    /// The same at `sizes` ([`Bench::evaluate_at`]); a judge that cannot says so as a failure.
    fn evaluate_at(&mut self, params: &Params, source: Option<&str>, sizes: &Sizes) -> Evaluation {
        let _ = (params, source, sizes);
        Evaluation::failed(
            FailureKind::Runtime,
            "this judge times at the workload only",
            0.0,
        )
    }
    /// Verifies `params` in a case of its proof; `Err` when the reference cannot be trusted there.
    fn verify(
        &mut self,
        params: &Params,
        case: &Case,
        source: Option<&str>,
    ) -> Result<Verdict, Untrusted>;
    /// Output errors of the last evaluation that passed verification.
    fn last_errors(&self) -> Option<ErrorStats>;
    fn limits(&self) -> &Limits;
    /// From now on every build comes from its source, none from the program cache: what is
    /// re-measured and proven is what the source compiles to ([`Bench::seal`]).
    fn seal(&mut self);
}

#[cfg(test)]
mod tests;
