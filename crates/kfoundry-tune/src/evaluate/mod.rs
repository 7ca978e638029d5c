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
//!   larger sizes ([`Bench::verify_at`], planned by [`crate::prove`]).
//!
//! One [`Bench`] serves one kernel on one device, at its workload's sizes and any others. It
//! lives in a worker process ([`worker`]); the tuner's [`supervisor::Supervised`] talks to it
//! and is what the search engine sees, as a [`kfoundry_search::Evaluator`].

pub mod case;
pub mod compare;
pub mod device_data;
pub mod diagnostics;
pub mod farm;
pub mod inputs;
pub mod program_cache;
mod reference_runs;
pub mod supervisor;
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
use crate::messages::ProofTime;
use rand::Rng as _;

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
    /// Timed runs at least; more while the median still moves (see [`Bench::time`]), and the
    /// median is the candidate's time.
    pub repeats: usize,
    /// Seed of the input generator.
    pub seed: u64,
    /// How many builds ahead ([`Bench::build_ahead`]) may run at once (at most
    /// [`MAX_BUILDERS`]); `None`: one on a GPU (NVIDIA's compiler slows every build it runs at
    /// once: 16 at once finished only 1.2-1.7x as many a second, BENCHMARKS.md), every core but
    /// the one that measures elsewhere.
    #[serde(default)]
    pub build_jobs: Option<usize>,
    /// Builds ahead in this many builder processes ([`farm`]) instead of threads of the
    /// worker, while the search may read builds that were not made from source (until
    /// [`Bench::seal`]); 0 or `None`: threads. With a farm, `build_jobs` is its size.
    #[serde(default)]
    pub build_processes: Option<usize>,
    /// Program binaries kept across runs ([`program_cache`]); `None`: every build from source.
    #[serde(default)]
    pub program_cache: Option<ProgramCacheUse>,
    /// What the compiler's messages about the kernel's own source (not a generated one) call
    /// it, in place of the driver's temporary copy ([`crate::pipeline::discover::Kernel::source_place`]);
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

/// Constraints, geometry and device limits of one kernel at one workload.
///
/// The engine asks about the same configurations over and over (thousands of random draws a
/// proposal, then every configuration of the space when few are valid and unvisited), and each
/// answer evaluates the annotation's expressions over a fresh environment: so answers are kept
/// ([`MEMO_LIMIT`] of each). Without that, the engine's proposals were a third of a tune's CPU
/// time on PoCL (`perf`, the examples at `small`).
pub struct Validity {
    spec: KernelSpec,
    sizes: Sizes,
    limits: Limits,
    accepted: Memo<bool>,
}

/// Answers kept per configuration.
type Memo<T> = std::sync::Mutex<std::collections::HashMap<Config, T>>;

/// How many configurations' answers are kept (beyond, answers are worked out each time).
const MEMO_LIMIT: usize = 1 << 20;

/// `memo`'s answer for `config`, or `work()`'s, kept while there is room.
fn memoized<T: Copy>(memo: &Memo<T>, config: &Config, work: impl FnOnce() -> T) -> T {
    if let Some(v) = memo.lock().ok().and_then(|m| m.get(config).copied()) {
        return v;
    }
    let v = work();
    if let Ok(mut m) = memo.lock() {
        if m.len() < MEMO_LIMIT {
            m.insert(config.clone(), v);
        }
    }
    v
}

impl Validity {
    pub fn new(spec: KernelSpec, sizes: Sizes, limits: Limits) -> Validity {
        Validity {
            spec,
            sizes,
            limits,
            accepted: Default::default(),
        }
    }

    pub fn check(&self, params: &Params) -> Result<(), String> {
        check_launchable(&self.spec, &self.limits, params, &self.sizes)
    }

    /// The engine's form: a configuration in parameter order.
    pub fn accepts(&self, config: &Config) -> bool {
        memoized(&self.accepted, config, || {
            let params = params_of(&self.spec, config);
            // Most configurations of a sparse space fail a requirement: said without the
            // message that `check` writes.
            self.spec
                .meets_requirements(&params, &self.sizes, Some(&self.limits.traits))
                && self.check(&params).is_ok()
        })
    }

    /// Each configuration's work-group size (the product of the annotation's `local` at the
    /// workload's sizes), for the engine's work-group limit
    /// ([`kfoundry_search::SearchState::set_group_size`]); `None` where the kernel leaves the
    /// work-group to the driver.
    pub fn group_size(&self) -> GroupSize {
        let (spec, sizes, limits) = (self.spec.clone(), self.sizes.clone(), self.limits.clone());
        let memo: Memo<Option<u64>> = Default::default();
        GroupSize::new(move |config| {
            memoized(&memo, config, || {
                let items = work_group_items(&spec, &limits, &params_of(&spec, config), &sizes)?;
                u64::try_from(items).ok()
            })
        })
    }
}

/// The work-group `params` launches with at `sizes` (the product of the annotation's
/// `local`); `None` where the kernel leaves it to the driver.
fn work_group_items(
    spec: &KernelSpec,
    limits: &Limits,
    params: &Params,
    sizes: &Sizes,
) -> Option<usize> {
    let geometry = spec.geometry(params, sizes, Some(&limits.traits)).ok()?;
    Some(geometry.local?.iter().product())
}

/// Whether a kernel source fixes its work-group (`reqd_work_group_size`): the driver then
/// reports each build's own work-group as its limit, which says nothing of the others, and
/// evaluations report none.
pub fn pins_work_group(source: &str) -> bool {
    source.contains("reqd_work_group_size")
}

/// Whether `params` can be launched at `sizes` on a device with `limits`: constraints,
/// geometry and the device's work-group limits.
pub fn check_launchable(
    spec: &KernelSpec,
    limits: &Limits,
    params: &Params,
    sizes: &Sizes,
) -> Result<(), String> {
    let g = spec
        .geometry(params, sizes, Some(&limits.traits))
        .map_err(|e| e.to_string())?;
    if let Some(local) = &g.local {
        let total: usize = local.iter().product();
        if total > limits.max_work_group_size {
            return Err(format!(
                "work-group size {total} exceeds the device's {}",
                limits.max_work_group_size
            ));
        }
        for (d, l) in local.iter().enumerate() {
            if limits.max_work_item_sizes.get(d).is_some_and(|m| l > m) {
                return Err(format!(
                    "local size {l} in dimension {d} exceeds the device's limit"
                ));
            }
        }
    }
    Ok(())
}

/// Whether one run of the reference and one of a candidate at `sizes` fit: every buffer within
/// the device's allocation limit, both copies of all of them (with their guard zones) within
/// its global memory, and on a device that is not a GPU (its memory is the host's) within the
/// memory the host has available. Checked before anything is allocated, with overflow checks:
/// a workload of 2^62 elements is an error that says so, not an allocation that wraps around.
fn check_fits(
    spec: &KernelSpec,
    sizes: &Sizes,
    limits: &Limits,
    host_memory: bool,
) -> Result<(), SetupError> {
    let gib = |b: u128| b as f64 / (1u128 << 30) as f64;
    let mut total: u128 = 0;
    for (arg, role) in spec.args_with_roles() {
        // The caller's buffers, and the reference's scratch (a candidate's is checked when it
        // runs: its length is its own).
        let (KernelArg::Buffer { name, elem, .. }, ArgRole::CallerBuffer | ArgRole::Scratch) =
            (arg, role)
        else {
            continue;
        };
        let len = spec.buffer_len(name, &spec.reference, sizes).map_err(|e| {
            SetupError::TooLarge(format!(
                "buffer `{name}` at sizes {}: {e}",
                fmt_sizes(sizes)
            ))
        })?;
        let bytes = len as u128 * elem.size() as u128;
        if limits.max_alloc_bytes > 0 && bytes > limits.max_alloc_bytes as u128 {
            return Err(SetupError::TooLarge(format!(
                "buffer `{name}` at sizes {} holds {len} element(s) of `{}` ({:.2} GiB), more than the device allocates at once ({:.2} GiB)",
                fmt_sizes(sizes),
                elem.opencl_name(),
                gib(bytes),
                gib(limits.max_alloc_bytes as u128)
            )));
        }
        total += bytes + (GUARD_ELEMS * elem.size() + FRONT_GUARD_BYTES) as u128;
    }
    // the reference's copy and a candidate's
    let needed = 2 * total;
    if limits.global_mem_bytes > 0 && needed > limits.global_mem_bytes as u128 {
        return Err(SetupError::TooLarge(format!(
            "the workload's buffers at sizes {} take {:.2} GiB twice over (the reference's copy and a candidate's), more than the device's {:.2} GiB: choose smaller sizes, or give the workload `on = gpu` for a larger device",
            fmt_sizes(sizes),
            gib(total),
            gib(limits.global_mem_bytes as u128)
        )));
    }
    if host_memory {
        if let Some(free) = host_available_bytes().filter(|free| needed > *free as u128) {
            return Err(SetupError::TooLarge(format!(
                "the workload's buffers at sizes {} take {:.2} GiB twice over (the reference's copy and a candidate's), and this device's memory is the host's, which has {:.2} GiB available: choose smaller sizes, or give the workload `on = gpu`",
                fmt_sizes(sizes),
                gib(total),
                gib(free as u128)
            )));
        }
    }
    Ok(())
}

/// `MemAvailable` of `/proc/meminfo`, in bytes (Linux; `None` elsewhere).
fn host_available_bytes() -> Option<u64> {
    let text = kfoundry_tooling::files::read_text_bounded(
        std::path::Path::new("/proc/meminfo"),
        1 << 20,
        "meminfo",
    )
    .ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Candidates built most recently, kept for their proof at other sizes and their re-measures.
const BUILT_KEPT: usize = 4;
/// Finished builds ahead kept while no evaluation has taken them ([`Bench::build_ahead`]).
const BUILT_AHEAD_KEPT: usize = 32;
/// Most builds ahead running at once, however many cores there are.
const MAX_BUILDERS: usize = 32;

/// What a build is made of: parameters, the generated source when it is not the annotated one,
/// and whether its work-groups are numbered in reverse ([`reversed_work_items`]).
type BuildKey = (Params, Option<String>, bool);

/// Put before a candidate's source for its reversed verification build: work-group `g` of a
/// launch of `n` groups acts as group `n - 1 - g`, and (unless the source uses sub-groups)
/// work-item `l` of a group of `s` as `s - 1 - l`, global and linear ids to match. A correct
/// kernel does not depend on the order in which work-groups run, nor on the order of a
/// group's work-items between barriers, so its results are the same; one that reads local
/// memory another work-group wrote only works when the writer runs first, and one that reads
/// a neighbour's `__local` value without a barrier only works where the device runs a
/// group's items in order (a CPU device does): this turns both around. The names are
/// object-like macros for functions defined here (before the macros, so these call OpenCL's):
/// a kernel cannot reach OpenCL's own by writing `(get_group_id)(0)` or pasting the name
/// together, and one that `#undef`s them is refused before it is built
/// ([`kfoundry_rt::model::source_policy::check_protected_names`]).
pub fn reversed_work_items(source: &str) -> String {
    source_policy::work_item_wrappers(true, !source_policy::uses_sub_groups(source))
}

/// The file name a generated source's diagnostics carry: what the diagnostics filter keeps
/// ([`diagnostics::own_diagnostics`]).
pub use kfoundry_rt::model::source_policy::CANDIDATE_FILE;

/// How one buffer is filled before a run (its guard zone is always poisoned).
#[derive(Clone)]
enum Fill {
    /// Bytes from the host (small buffers).
    Host(Vec<u8>),
    /// Drawn on the device from a distribution with a seed (large inputs).
    Draw {
        dist: kfoundry_rt::model::spec::Resolved,
        values: Values,
        seed: u64,
    },
    /// Pre-filled on the device (large outputs).
    Prefill { prefill: Prefill, seed: u64 },
    /// The very buffer of the named input (a run in place).
    Alias(String),
    /// A scratch buffer (`scratch(...)`): all zero, as long as the launched configuration's
    /// length, worked out when it is uploaded for that configuration.
    Scratch,
}

/// One caller buffer of a run: name, element type, length, filling, and the bytes of its guard
/// zones before and after it.
#[derive(Clone)]
struct PreparedBuffer {
    name: String,
    /// A `const` buffer: its guard zones hold a fixed pattern, not random bytes.
    read_only: bool,
    ty: ScalarType,
    len: usize,
    fill: Fill,
    front: Vec<u8>,
    back: Vec<u8>,
}

/// What one input set is made of.
#[derive(Clone)]
struct Prepared {
    buffers: Vec<PreparedBuffer>,
    scalars: Vec<Scalar>,
}

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

/// A device buffer of a run: one allocation of front guard, `len` elements and back guard;
/// the kernel gets `view`, a sub-buffer that starts at the elements (so the front guard lies
/// before what it was given, in the same allocation). In place, a written buffer is its
/// input's (`alias`).
struct RunBuffer {
    name: String,
    alias: bool,
    /// A scratch buffer (`scratch(...)`): the launcher's, not the caller's.
    scratch: bool,
    ty: ScalarType,
    len: usize,
    whole: DeviceBuffer,
    view: DeviceBuffer,
    front: Vec<u8>,
    back: Vec<u8>,
}

impl RunBuffer {
    /// Another handle on the same memory.
    fn shared(&self) -> RunBuffer {
        RunBuffer {
            name: self.name.clone(),
            alias: self.alias,
            scratch: self.scratch,
            ty: self.ty,
            len: self.len,
            whole: self.whole.clone(),
            view: self.view.clone(),
            front: self.front.clone(),
            back: self.back.clone(),
        }
    }
}

/// Device buffers and scalars of one run.
struct Run {
    buffers: Vec<RunBuffer>,
    scalars: Vec<Scalar>,
}

impl Run {
    /// Buffer `name` of the run.
    fn buffer(&self, name: &str) -> Result<&RunBuffer, RtError> {
        self.buffers
            .iter()
            .find(|b| b.name == name)
            .ok_or_else(|| RtError::OpenCl(format!("no buffer `{name}`")))
    }
}

/// The measured descriptor that reports a timing's noise ([`relative_spread`]); not a
/// dimension of the search's archive.
pub const TIMING_NOISE: &str = "timing_noise";

/// How a failure found in a guard zone begins.
const GUARD_FAILURE: &str = "writes";

/// A build started ahead of its evaluation ([`Bench::build_ahead`]).
enum Background {
    Running(std::thread::JoinHandle<Result<Program, RtError>>),
    Done(Result<Program, RtError>),
    /// Built by the build farm ([`farm`]): the program is built here from its binary, or from
    /// `program` and `options` where the farm gives none.
    Farmed {
        job: farm::Farmed,
        program: String,
        options: String,
    },
}

impl Background {
    /// Whether the build is still under way.
    fn is_running(&self) -> bool {
        match self {
            Background::Running(h) => !h.is_finished(),
            Background::Done(_) => false,
            Background::Farmed { job, .. } => job.is_running(),
        }
    }

    /// The program, once the build is done, built on `session` when it came from the farm as a
    /// binary; and whether it did (a build not made from source here, which [`Bench::seal`]
    /// drops).
    fn wait(self, session: &Session, id: &str) -> (Result<Program, RtError>, bool) {
        match self {
            Background::Running(h) => (
                h.join()
                    .unwrap_or_else(|_| Err(RtError::OpenCl("the build's thread panicked".into()))),
                false,
            ),
            Background::Done(result) => (result, false),
            Background::Farmed {
                job,
                program,
                options,
            } => match job
                .wait()
                .map(|binary| session.build_binary(id, &binary, &options))
            {
                Ok(Ok(built)) => (Ok(built), true),
                // no binary, or one the driver refused: the compiler's own verdict and log
                _ => (session.build(id, &program, &options), false),
            },
        }
    }
}

/// Candidates one pooled input set serves before it is drawn afresh (with a new reference run).
pub const POOL_REUSES: usize = 8;

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
/// runs on it once, and it serves [`POOL_REUSES`] candidates before it is replaced by a fresh
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
    /// The last candidates built, most recent last, each with whether its program came from
    /// the program cache (not from its source).
    built: Vec<(BuildKey, std::rc::Rc<Kernel>, bool)>,
    /// Program binaries kept across runs ([`Measurement::program_cache`]).
    program_cache: Option<program_cache::ProgramCache>,
    /// Whether builds may be read from `program_cache` ([`Bench::seal`]).
    read_cache: bool,
    /// On-device drawing, poisoning, comparison and local-memory scrubbing.
    device_data: DeviceData,
    settings: Measurement,
    /// Input sets drawn so far (each gets its own seed).
    draws: std::cell::Cell<u64>,
    /// Input sets at the workload's sizes with the reference's run on each, shared by the
    /// candidates of the search ([`POOL_REUSES`]); empty when they would not fit the device.
    pool: std::cell::RefCell<Vec<Option<PooledSet>>>,
    /// Whether a pool fits the device's memory (decided with the first set).
    pool_fits: std::cell::Cell<Option<bool>>,
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
    /// The sizes at which the reference passed [`Bench::check_reference`]: a proof case at
    /// such sizes does not check it again (a portfolio's proofs, the next finalist's, run the
    /// same sizes; a slow reference's checks were 15% of KernelBench tunes on an H100).
    references_checked: std::cell::RefCell<std::collections::BTreeSet<Sizes>>,
    /// The reference's runs on seeded proof cases, for the next proof that meets them.
    reference_runs: std::cell::RefCell<reference_runs::ReferenceRuns>,
    /// Whether the reference's outputs reacted to its inputs at some sizes checked here
    /// ([`Bench::check_reference`]).
    reference_varies: std::cell::Cell<bool>,
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
    /// Build logs of failed candidates: (parameters, log).
    pub build_failures: Vec<(Params, String)>,
    /// The compiler's logs of candidates that built with something to say (warnings), not yet
    /// passed on (the worker sends them with each answer).
    pub build_warnings: Vec<String>,
    /// Errors of the last candidate that passed verification.
    pub last_errors: Option<ErrorStats>,
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
            built: Vec::new(),
            program_cache,
            read_cache,
            device_data,
            settings,
            draws: std::cell::Cell::new(0),
            pool: std::cell::RefCell::new(Vec::new()),
            pool_fits: std::cell::Cell::new(None),
            not_gpu,
            local_high: std::cell::Cell::new(0),
            proof_time: std::cell::Cell::new(ProofTime::default()),
            references_checked: Default::default(),
            reference_runs: Default::default(),
            reference_varies: std::cell::Cell::new(false),
            building: Vec::new(),
            builders,
            device,
            farm: None,
            sealed: false,
            farmed: 0,
            build_failures: Vec::new(),
            build_warnings: Vec::new(),
            last_errors: None,
        };
        bench.check_guards()?;
        match bench.check_reference(sizes) {
            Err(SetupError::InsensitiveOutput(_)) if bench.reference_varies_elsewhere(sizes) => {
                bench.references_checked.borrow_mut().insert(sizes.clone());
            }
            checked => checked?,
        }
        Ok(bench)
    }

    /// The front guard relies on the driver: a sub-buffer must share its parent's memory, so
    /// that a write before the sub-buffer's start lands in the guard before it. (NVIDIA's
    /// driver did not, for buffers created from host memory.) Checked once per bench with each
    /// way a run's buffers are filled: a deliberate write before the start must be seen.
    fn check_guards(&self) -> Result<(), SetupError> {
        const LEN: usize = 64;
        let (front, back) = self.guard_lens(LEN, ScalarType::U32);
        if front < 4 {
            // No room for a front guard under this device's allocation limit: nothing to check.
            return Ok(());
        }
        for (how, fill) in [
            ("filled from the host", Fill::Host(vec![0u8; LEN * 4])),
            (
                "filled on the device",
                Fill::Prefill {
                    prefill: Prefill::Poison,
                    seed: 0,
                },
            ),
        ] {
            let buffer = PreparedBuffer {
                name: "guard self-test".into(),
                read_only: false,
                ty: ScalarType::U32,
                len: LEN,
                fill,
                front: vec![0x5A; front],
                back: vec![0x5A; back * 4],
            };
            let run = self.upload(
                &Prepared {
                    buffers: vec![buffer],
                    scalars: Vec::new(),
                },
                &self.spec.reference,
                &self.sizes,
            )?;
            let view = &run.buffers[0].view;
            self.device_data.write_before(&self.session, view)?;
            self.session.finish()?;
            if self.touched_guard(&run)?.is_none() {
                return Err(SetupError::GuardsUnreliable(format!("a buffer {how}")));
            }
        }
        Ok(())
    }

    /// The reference can be trusted at `sizes`: it launches, stays within its buffers, and its
    /// outputs react to its inputs (or verification there proves nothing). Where its outputs
    /// do not react at these sizes but did at others this bench checked (a softmax over one
    /// column is all ones, attention over one key is that key's value), the output there is
    /// legitimately constant: a candidate is compared with it there (it must write that
    /// constant), and a kernel writing constants is still caught at the sizes where the
    /// output varies, where every proof also runs (the workload's, or those
    /// [`Bench::new`] found).
    fn check_reference(&self, sizes: &Sizes) -> Result<(), SetupError> {
        if self.references_checked.borrow().contains(sizes) {
            return Ok(());
        }
        match self.check_reference_afresh(sizes) {
            Ok(()) => self.reference_varies.set(true),
            Err(SetupError::InsensitiveOutput(_)) if self.reference_varies.get() => {}
            Err(e) => return Err(e),
        }
        self.references_checked.borrow_mut().insert(sizes.clone());
        Ok(())
    }

    /// At a workload where the reference's outputs do not react to its inputs: whether they do
    /// at larger sizes (each size twice, four and sixteen times the workload's, where those
    /// fit the device) or at another workload's that fits. If so that workload's output is
    /// legitimately constant ([`Bench::check_reference`]); if not, the annotation checks an
    /// output that never depends on the inputs, and nothing could be verified.
    fn reference_varies_elsewhere(&self, sizes: &Sizes) -> bool {
        let scaled = [2, 4, 16].map(|f| -> Sizes {
            sizes
                .iter()
                .map(|(k, &v)| (k.clone(), v.saturating_mul(f)))
                .collect()
        });
        let others = self.spec.workloads.iter().map(|w| w.sizes.clone());
        for other in scaled.into_iter().chain(others) {
            if other == *sizes
                || check_launchable(&self.spec, &self.limits, &self.spec.reference, &other).is_err()
                || check_fits(&self.spec, &other, &self.limits, self.not_gpu).is_err()
            {
                continue;
            }
            if self.check_reference(&other).is_ok() && self.reference_varies.get() {
                return true;
            }
        }
        false
    }

    /// [`Bench::check_reference`]'s checks, run.
    fn check_reference_afresh(&self, sizes: &Sizes) -> Result<(), SetupError> {
        let reference_err = |message: String| SetupError::Reference {
            sizes: fmt_sizes(sizes),
            message,
        };
        self.valid_at(&self.spec.reference, sizes)
            .map_err(reference_err)?;
        let outside = |message: String| SetupError::ReferenceOutside {
            sizes: fmt_sizes(sizes),
            message,
        };
        let (a, prepared) = self
            .reference_run(sizes)
            .map_err(reference_err)?
            .map_err(outside)?;
        if let Some((name, n)) = self
            .dirty_scratch(&a)
            .map_err(|e| reference_err(e.to_string()))?
        {
            return Err(reference_err(format!(
                "it {}",
                scratch_left_message(&name, n)
            )));
        }
        if let Some(output) = self
            .reference_reads_outside(sizes, &prepared, &a)
            .map_err(|e| reference_err(e.to_string()))?
        {
            return Err(outside(self.outside_message(&output)));
        }
        let (b, _) = self
            .reference_run(sizes)
            .map_err(reference_err)?
            .map_err(outside)?;
        for check in &self.spec.checks {
            let same = self
                .compare_outputs(&check.buffer, &a, &b, 0.0, 0.0)
                .map_err(|e| reference_err(e.to_string()))?;
            if same.ok() {
                return Err(SetupError::InsensitiveOutput(check.buffer.clone()));
            }
        }
        Ok(())
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

    fn fresh_rng(&self) -> ChaCha8Rng {
        let draw = self.draws.get() + 1;
        self.draws.set(draw);
        // A distinct stream per input set: never the same inputs twice.
        ChaCha8Rng::seed_from_u64(self.settings.seed ^ draw.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// How each caller buffer of one run of `params` in `shape` is filled (inputs drawn, on
    /// the device when large; outputs pre-filled; in place, a written buffer is its input's)
    /// and guarded, and the scalars (integer ones the shape gives, the others drawn). Guards
    /// of read-only buffers hold poison (a read past the end sees NaN, or 0xA5 bytes); guards
    /// of the others hold random bytes of this run, which no computation reproduces by chance.
    fn prepare(
        &self,
        params: &Params,
        shape: &Shape,
        rng: &mut ChaCha8Rng,
    ) -> Result<Prepared, String> {
        let sizes = shape.sizes;
        let mut buffers = Vec::new();
        let mut scalars = Vec::new();
        for (arg, role) in self.spec.args_with_roles() {
            match (arg, role) {
                (
                    KernelArg::Buffer {
                        name,
                        elem,
                        read_only,
                        ..
                    },
                    ArgRole::CallerBuffer,
                ) => {
                    let len = self
                        .spec
                        .buffer_len(name, params, sizes)
                        .map_err(|e| e.to_string())?;
                    if len.checked_mul(elem.size()).is_none_or(|b| {
                        self.limits.max_alloc_bytes > 0 && b as u64 > self.limits.max_alloc_bytes
                    }) {
                        return Err(format!("buffer `{name}` of {len} element(s) is larger than the device allocates at once"));
                    }
                    if let Some(input) = self.spec.in_place.get(name).filter(|_| shape.in_place) {
                        buffers.push(PreparedBuffer {
                            name: name.clone(),
                            read_only: *read_only,
                            ty: *elem,
                            len,
                            fill: Fill::Alias(input.clone()),
                            front: vec![],
                            back: vec![],
                        });
                        continue;
                    }
                    let (front, back) = self.guard_lens(len, *elem);
                    let mut guard = |n: usize| -> Vec<u8> {
                        if *read_only {
                            vec![guard_pattern(*elem); n]
                        } else {
                            let mut bytes = vec![0u8; n];
                            rng.fill(&mut bytes[..]);
                            bytes
                        }
                    };
                    let (front, back) = (guard(front), guard(back * elem.size()));
                    let large = self.device_side(len.saturating_mul(elem.size()));
                    let input = *read_only || self.spec.inputs.contains_key(name);
                    let dist = self
                        .spec
                        .distribution(name)
                        .at(sizes)
                        .map_err(|e| format!("input `{name}`: {e}"))?;
                    fits_elements(name, *elem, len, dist)?;
                    let on_device = DeviceData::draws(*elem, dist)
                        && !shape.values.host_only()
                        && (shape.values == Values::Declared
                            || *elem == ScalarType::F32
                            || elem.is_half());
                    let fill = match (input, large) {
                        (true, true) if on_device => Fill::Draw {
                            dist,
                            values: shape.values,
                            seed: rng.gen(),
                        },
                        (true, _) => Fill::Host(draw_values(*elem, len, dist, shape.values, rng)),
                        (false, true) => Fill::Prefill {
                            prefill: shape.prefill,
                            seed: rng.gen(),
                        },
                        (false, false) => {
                            Fill::Host(prefill_buffer(*elem, len, shape.prefill, rng))
                        }
                    };
                    buffers.push(PreparedBuffer {
                        name: name.clone(),
                        read_only: *read_only,
                        ty: *elem,
                        len,
                        fill,
                        front,
                        back,
                    });
                }
                (KernelArg::Buffer { name, elem, .. }, ArgRole::Scratch) => {
                    buffers.push(PreparedBuffer {
                        name: name.clone(),
                        read_only: false,
                        ty: *elem,
                        len: 0,
                        fill: Fill::Scratch,
                        front: vec![],
                        back: vec![],
                    });
                }
                (KernelArg::Scalar { name, ty }, ArgRole::CallerScalar) => {
                    let given = shape.scalars.get(name).filter(|_| !ty.is_float());
                    match given {
                        Some(v) => scalars.push(Scalar::from_int(*ty, *v).ok_or_else(|| {
                            format!("`{name}` = {v} does not fit `{}`", ty.opencl_name())
                        })?),
                        None => {
                            let dist = self
                                .spec
                                .distribution(name)
                                .at(sizes)
                                .map_err(|e| format!("input `{name}`: {e}"))?;
                            scalars.push(draw_scalar_values(*ty, dist, shape.values, rng))
                        }
                    }
                }
                _ => {}
            }
        }
        // In place: the written buffer must fit within its input's elements.
        for b in &buffers {
            if let Fill::Alias(input) = &b.fill {
                let Some(source) = buffers.iter().find(|x| &x.name == input) else {
                    return Err(format!(
                        "`in_place({} = {input})`: no buffer `{input}`",
                        b.name
                    ));
                };
                if source.len < b.len || source.ty != b.ty {
                    return Err(format!(
                        "`{}` ({} elements) cannot run in place in `{input}` ({} elements)",
                        b.name, b.len, source.len
                    ));
                }
            }
        }
        Ok(Prepared { buffers, scalars })
    }

    /// The guard zones of a buffer of `len` elements: [`FRONT_GUARD_BYTES`] before it (rounded
    /// up to the sub-buffer alignment) and [`GUARD_ELEMS`] elements after it, or what still
    /// fits the device's allocation limit.
    fn guard_lens(&self, len: usize, ty: ScalarType) -> (usize, usize) {
        let align = usize::try_from(self.limits.base_align_bytes)
            .unwrap_or(1)
            .max(1);
        let front = FRONT_GUARD_BYTES.div_ceil(align).saturating_mul(align);
        let room = usize::try_from(self.limits.max_alloc_bytes)
            .unwrap_or(usize::MAX)
            .saturating_sub(len.saturating_mul(ty.size()));
        let front = if room >= front { front } else { 0 };
        let back = GUARD_ELEMS.min(room.saturating_sub(front) / ty.size());
        (front, back)
    }

    /// Device buffers filled as prepared, for a run of `params` at `sizes` (the length of a
    /// scratch buffer is that configuration's): the same preparation always gives the same
    /// contents.
    fn upload(&self, prepared: &Prepared, params: &Params, sizes: &Sizes) -> Result<Run, RtError> {
        let mut buffers: Vec<RunBuffer> = Vec::new();
        for p in &prepared.buffers {
            let size = p.ty.size();
            let (front, data, back) = (p.front.len(), p.len * size, p.back.len());
            let whole = match &p.fill {
                Fill::Alias(_) => continue,
                Fill::Scratch => {
                    buffers.push(self.upload_scratch(p, params, sizes)?);
                    continue;
                }
                Fill::Host(bytes) => {
                    let mut all = Vec::with_capacity(front + data + back);
                    all.extend_from_slice(&p.front);
                    all.extend_from_slice(bytes);
                    all.extend_from_slice(&p.back);
                    self.session.upload(&all)?
                }
                Fill::Draw { .. } | Fill::Prefill { .. } => {
                    let total = front + data + back;
                    let b = self.session.alloc(total)?;
                    match &p.fill {
                        Fill::Prefill {
                            prefill: Prefill::Zeros,
                            ..
                        } => self.device_data.fill_words(&self.session, &b, total, 0)?,
                        Fill::Prefill {
                            prefill: Prefill::Random,
                            seed,
                        } => self
                            .device_data
                            .random_words(&self.session, &b, total, *seed)?,
                        // Drawn below over every element, its guards written from the host just
                        // after: nothing of it stays as allocated, so nothing to poison (for a
                        // table of a gigabyte, a pass over it saved per candidate).
                        Fill::Draw { .. } => {}
                        _ => self.device_data.poison(&self.session, &b, total)?,
                    }
                    // The fill kernels write whole words: the last bytes of an odd length.
                    b.write(total - total % 4, &[0xFF; 3][..total % 4])?;
                    b.write(0, &p.front)?;
                    b.write(front + data, &p.back)?;
                    b
                }
            };
            let view = whole.sub(front, data + back)?;
            if let Fill::Draw { dist, values, seed } = &p.fill {
                if p.ty == ScalarType::F32 || p.ty.is_half() {
                    self.device_data.draw_values(
                        &self.session,
                        &view,
                        p.ty,
                        p.len,
                        *dist,
                        *values,
                        *seed,
                    )?;
                } else {
                    self.device_data
                        .draw(&self.session, &view, p.ty, p.len, *dist, *seed)?;
                }
            }
            buffers.push(RunBuffer {
                name: p.name.clone(),
                alias: false,
                scratch: false,
                ty: p.ty,
                len: p.len,
                whole,
                view,
                front: p.front.clone(),
                back: p.back.clone(),
            });
        }
        // In place: the written buffer is its input's memory.
        for p in &prepared.buffers {
            if let Fill::Alias(input) = &p.fill {
                let source = buffers.iter().find(|b| &b.name == input).ok_or_else(|| {
                    RtError::OpenCl(format!("no buffer `{input}` to run in place in"))
                })?;
                let aliased = RunBuffer {
                    name: p.name.clone(),
                    alias: true,
                    ..source.shared()
                };
                buffers.push(aliased);
            }
        }
        // In signature order, as the launch passes them.
        let order: Vec<&str> = prepared.buffers.iter().map(|p| p.name.as_str()).collect();
        buffers.sort_by_key(|b| order.iter().position(|n| *n == b.name));
        Ok(Run {
            buffers,
            scalars: prepared.scalars.clone(),
        })
    }

    /// [`Bench::upload`], and once more without the kept reference runs where the device ran
    /// out of memory while it held some: a kept run never makes a case fail to allocate.
    fn upload_with_room(
        &self,
        prepared: &Prepared,
        params: &Params,
        sizes: &Sizes,
    ) -> Result<Run, RtError> {
        match self.upload(prepared, params, sizes) {
            Err(e) if e.is_exhausted() && !self.reference_runs.borrow().is_empty() => {
                self.reference_runs.borrow_mut().clear();
                self.upload(prepared, params, sizes)
            }
            uploaded => uploaded,
        }
    }

    /// Scratch buffer `p` for a run of `params` at `sizes`: that configuration's length, all
    /// zero, between guard zones of never-zero bytes no computation reproduces by chance (a
    /// stream of their own, new each run: scratch never draws from the input stream, so that a
    /// kernel with scratch gets the same inputs as one without).
    fn upload_scratch(
        &self,
        p: &PreparedBuffer,
        params: &Params,
        sizes: &Sizes,
    ) -> Result<RunBuffer, RtError> {
        let len = self
            .spec
            .buffer_len(&p.name, params, sizes)
            .map_err(|e| RtError::OpenCl(format!("scratch `{}`: {e}", p.name)))?;
        let size = p.ty.size();
        let data = len.checked_mul(size).filter(|b| {
            self.limits.max_alloc_bytes == 0 || (*b as u64) <= self.limits.max_alloc_bytes
        });
        let Some(data) = data else {
            return Err(RtError::OpenCl(format!(
                "scratch `{}` of {len} element(s) is larger than the device allocates at once",
                p.name
            )));
        };
        let (front, back) = self.guard_lens(len, p.ty);
        // A stream of its own (the inputs' stays as it would be without scratch), new each run.
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut rng = ChaCha8Rng::seed_from_u64(run ^ self.settings.seed);
        // Never a zero byte: a kernel that clears past its end is seen.
        let mut guard = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.gen::<u8>() | 1).collect() };
        let (front_bytes, back_bytes) = (guard(front), guard(back * size));
        let total = front + data + back_bytes.len();
        let whole = self.session.alloc(total)?;
        self.device_data
            .fill_words(&self.session, &whole, total, 0)?;
        whole.write(total - total % 4, &[0u8; 3][..total % 4])?;
        whole.write(0, &front_bytes)?;
        whole.write(front + data, &back_bytes)?;
        let view = whole.sub(front, data + back_bytes.len())?;
        Ok(RunBuffer {
            name: p.name.clone(),
            alias: false,
            scratch: true,
            ty: p.ty,
            len,
            whole,
            view,
            front: front_bytes,
            back: back_bytes,
        })
    }

    /// The first scratch buffer of a finished run that is not all zero, and how many of its
    /// elements are not (every kernel must leave its scratch as it found it: all zero).
    fn dirty_scratch(&self, run: &Run) -> Result<Option<(String, usize)>, RtError> {
        const CHUNK: usize = 1 << 24;
        for b in run.buffers.iter().filter(|b| b.scratch) {
            let (size, bytes) = (b.ty.size(), b.len * b.ty.size());
            let mut nonzero = 0;
            let mut chunk = vec![0u8; CHUNK.min(bytes)];
            let mut at = 0;
            while at < bytes {
                let n = CHUNK.min(bytes - at);
                b.view.read(at, &mut chunk[..n])?;
                nonzero += chunk[..n]
                    .chunks(size)
                    .filter(|e| e.iter().any(|x| *x != 0))
                    .count();
                at += n;
            }
            if nonzero > 0 {
                return Ok(Some((b.name.clone(), nonzero)));
            }
        }
        Ok(None)
    }

    /// The first buffer of a finished run whose guard zones were written, if any.
    fn touched_guard(&self, run: &Run) -> Result<Option<String>, RtError> {
        for b in run.buffers.iter().filter(|b| !b.alias) {
            let size = b.ty.size();
            let mut front = vec![0u8; b.front.len()];
            b.whole.read(0, &mut front)?;
            if let Some(at) = front.iter().zip(&b.front).position(|(x, y)| x != y) {
                let before = (b.front.len() - at).div_ceil(size);
                return Ok(Some(format!(
                    "{GUARD_FAILURE} before the start of `{}`: element -{before}",
                    b.name
                )));
            }
            let mut back = vec![0u8; b.back.len()];
            b.whole.read(b.front.len() + b.len * size, &mut back)?;
            if let Some(at) = back.iter().zip(&b.back).position(|(x, y)| x != y) {
                return Ok(Some(format!(
                    "{GUARD_FAILURE} past the end of `{}`: element {} of a buffer of {} (the annotation's length)",
                    b.name,
                    b.len + at / size,
                    b.len
                )));
            }
        }
        Ok(None)
    }

    /// Compares output `name` of two finished runs: on the device for large buffers (floats
    /// with tolerances; any type when they must be exactly the same), else on the host.
    fn compare_outputs(
        &self,
        name: &str,
        cand: &Run,
        refr: &Run,
        rtol: f64,
        atol: f64,
    ) -> Result<Comparison, RtError> {
        let (c, r) = (cand.buffer(name)?, refr.buffer(name)?);
        let (ty, len) = (c.ty, c.len);
        if self.device_side(len.saturating_mul(ty.size())) {
            // Floats decoded (16-bit ones too), NaN as NaN whatever its bits.
            if ty == ScalarType::F32 || ty.is_half() {
                return self.device_data.compare(
                    &self.session,
                    &c.view,
                    &r.view,
                    ty,
                    len,
                    rtol,
                    atol,
                );
            }
            if rtol == 0.0 && atol == 0.0 {
                return self
                    .device_data
                    .same(&self.session, &c.view, &r.view, ty, len);
            }
        }
        let ((_, _, x), (_, _, y)) = (self.host_copy(cand, name)?, self.host_copy(refr, name)?);
        Ok(compare(
            len,
            |i| decode(ty, &x, i),
            |i| decode(ty, &y, i),
            rtol,
            atol,
        ))
    }

    /// Whether buffer `name` holds the very same bits after both runs (an input a candidate must
    /// leave as the reference does): on the device for large buffers of any type, else on the
    /// host. Bits, not values: a `-0.0` written over a `0.0` changed the caller's data too.
    fn unchanged(&self, name: &str, cand: &Run, refr: &Run) -> Result<Comparison, RtError> {
        let (c, r) = (cand.buffer(name)?, refr.buffer(name)?);
        if self.device_side(c.len.saturating_mul(c.ty.size())) {
            return self
                .device_data
                .same(&self.session, &c.view, &r.view, c.ty, c.len);
        }
        let ((ty, len, x), (_, _, y)) = (self.host_copy(cand, name)?, self.host_copy(refr, name)?);
        let size = ty.size();
        let differ = |i: &usize| x[i * size..(i + 1) * size] != y[i * size..(i + 1) * size];
        let mut differing = (0..len).filter(differ);
        let first = differing.next();
        let mismatches = first.map_or(0, |_| 1 + differing.count());
        let first = first.map(|i| (i, decode(ty, &x, i), decode(ty, &y, i)));
        Ok(Comparison {
            mismatches,
            first,
            max_abs: 0.0,
            rel_norm: 0.0,
            ref_max: 0.0,
        })
    }

    /// Whether a buffer of `bytes` is drawn, pre-filled and compared on the device (where the
    /// device can): on a GPU every buffer (a kernel launch costs less than the host's draws,
    /// copies and loops even for small buffers: they were 44% of a whole model's proof on an
    /// H100), on a CPU device those of at least [`device_data::MIN_BYTES`] (there the host and
    /// the device are the same cores).
    fn device_side(&self, bytes: usize) -> bool {
        if self.not_gpu {
            bytes >= device_data::MIN_BYTES
        } else {
            bytes > 0
        }
    }

    /// Output `name` of a run, read back to the host: its element type, length and bytes.
    fn host_copy(&self, run: &Run, name: &str) -> Result<(ScalarType, usize, Vec<u8>), RtError> {
        let b = run.buffer(name)?;
        let mut bytes = vec![0u8; b.len * b.ty.size()];
        b.view.read(0, &mut bytes)?;
        Ok((b.ty, b.len, bytes))
    }

    /// The cosine similarity of output `name` of two runs (read back to the host).
    fn cosine(&self, name: &str, cand: &Run, refr: &Run) -> Result<f64, RtError> {
        let ((ty, len, x), (_, _, y)) = (self.host_copy(cand, name)?, self.host_copy(refr, name)?);
        Ok(compare::cosine(
            len,
            |i| decode(ty, &x, i),
            |i| decode(ty, &y, i),
        ))
    }

    /// The reference run on `prepared` at `sizes`, to its end.
    fn run_reference_on(&self, prepared: &Prepared, sizes: &Sizes) -> Result<Run, RtError> {
        let run = self.upload(prepared, &self.spec.reference, sizes)?;
        self.launch(&self.reference, &self.spec.reference, sizes, &run, false)?;
        self.session.finish()?;
        Ok(run)
    }

    /// The reference on a fresh input set at `sizes` (and the inputs), or why it does not run
    /// there (outer `Err`), or how it wrote outside its buffers (inner `Err`).
    fn reference_run(&self, sizes: &Sizes) -> Result<Result<(Run, Prepared), String>, String> {
        let mut rng = self.fresh_rng();
        let prepared = self.prepare(&self.spec.reference, &Shape::plain(sizes), &mut rng)?;
        let run = self
            .run_reference_on(&prepared, sizes)
            .map_err(|e| e.to_string())?;
        if let Some(why) = self.touched_guard(&run).map_err(|e| e.to_string())? {
            return Ok(Err(self.wrote_outside_message(&why)));
        }
        Ok(Ok((run, prepared)))
    }

    /// Whether the reference's outputs on `prepared` (run as `first`) depend on what lies past
    /// its read-only buffers: the same inputs run again with their guard zones zeroed instead
    /// of poisoned. The first checked output that changed, if any (and only then, once more as
    /// before: a result that changes anyway is not the guards').
    fn reference_reads_outside(
        &self,
        sizes: &Sizes,
        prepared: &Prepared,
        first: &Run,
    ) -> Result<Option<String>, RtError> {
        let mut other = prepared.clone();
        let mut any = false;
        for b in other.buffers.iter_mut().filter(|b| b.read_only) {
            b.front.fill(0);
            b.back.fill(0);
            any = true;
        }
        if !any {
            return Ok(None);
        }
        let changed = |run: &Run| -> Result<Option<String>, RtError> {
            for check in &self.spec.checks {
                if !self
                    .compare_outputs(&check.buffer, run, first, 0.0, 0.0)?
                    .ok()
                {
                    return Ok(Some(check.buffer.clone()));
                }
            }
            Ok(None)
        };
        let Some(output) = changed(&self.run_reference_on(&other, sizes)?)? else {
            return Ok(None);
        };
        // A reference whose result varies from run to run on the same bytes (atomics in
        // another order) says nothing about what it reads.
        if changed(&self.run_reference_on(prepared, sizes)?)?.is_some() {
            return Ok(None);
        }
        Ok(Some(output))
    }

    /// What to fix when the reference's `output` read outside its buffers.
    fn outside_message(&self, output: &str) -> String {
        format!(
            "its output `{output}` changed when only the memory past the ends of its inputs did: it reads outside the lengths `buffers(...)` declares{}",
            index_hint(&self.spec)
        )
    }

    /// What to fix when the reference wrote outside its buffers (`why`: where).
    fn wrote_outside_message(&self, why: &str) -> String {
        format!(
            "it {why}; the annotation's `buffers(...)` must cover what the kernel touches{}",
            index_hint(&self.spec)
        )
    }

    /// The integer inputs and how they are drawn: the usual cause of a reference out of
    /// bounds on declared inputs is an input of indices drawn outside the range it indexes.
    fn launch(
        &self,
        kernel: &Kernel,
        params: &Params,
        sizes: &Sizes,
        run: &Run,
        profile: bool,
    ) -> Result<Option<kfoundry_rt::opencl::session::Timing>, RtError> {
        // The caller's arguments in signature order: the one rule of `KernelSpec::caller_args`.
        let mut scalars = run.scalars.iter();
        let mut buffers = run.buffers.iter().filter(|b| !b.scratch);
        let mut args: Vec<Arg> = Vec::new();
        for arg in self.spec.caller_args() {
            match arg {
                KernelArg::Buffer { .. } => {
                    if let Some(b) = buffers.next() {
                        args.push(b.view.arg());
                    }
                }
                KernelArg::Scalar { .. } => {
                    if let Some(s) = scalars.next() {
                        args.push(Arg::Scalar(*s));
                    }
                }
            }
        }
        let scratch: Vec<&kfoundry_rt::ocl::core::Mem> = run
            .buffers
            .iter()
            .filter(|b| b.scratch)
            .map(|b| b.view.mem())
            .collect();
        let timing = self
            .session
            .launch_with_scratch(&self.spec, kernel, params, sizes, &args, &scratch, profile)?;
        // Asked once its `__local` arguments are set, so that they count too.
        let used = self.session.local_mem_used(kernel).unwrap_or(u64::MAX);
        self.local_high.set(self.local_high.get().max(used));
        Ok(timing)
    }

    /// How much of each work-group's local memory the scrub before a candidate must fill:
    /// all of it on a GPU, where a work-group's local memory lies anywhere in its unit's. A
    /// CPU runtime lays out each work-group's local memory from the start of a per-thread
    /// arena (PoCL), and nothing but the kernels launched here wrote there: so what any of them
    /// used, and a margin for alignment and the runtime's own, holds everything a candidate
    /// could find left over (filling the whole 512 KiB 16 times per compute unit was half of
    /// a tune's time on PoCL).
    fn scrub_reach(&self) -> Option<u64> {
        const MARGIN: u64 = 64 * 1024;
        self.not_gpu
            .then(|| self.local_high.get().saturating_add(MARGIN))
    }

    /// Builds `params` (of `source`, a source-level variant with the same signature, when
    /// given), or reuses one of the last few builds; `None` for the reference itself. A failed
    /// build is logged.
    fn build(
        &mut self,
        params: &Params,
        source: Option<&str>,
    ) -> Result<Option<std::rc::Rc<Kernel>>, Rejection> {
        if *params == self.spec.reference && source.is_none() {
            return Ok(None);
        }
        self.build_as(params, source, false).map(Some)
    }

    /// The build of `params` (of `source` when given), its work-groups numbered in reverse
    /// when `reversed` ([`reversed_work_items`]), reused when it is one of the last few.
    fn build_as(
        &mut self,
        params: &Params,
        source: Option<&str>,
        reversed: bool,
    ) -> Result<std::rc::Rc<Kernel>, Rejection> {
        let key = (params.clone(), source.map(str::to_string), reversed);
        if let Some(i) = self.built.iter().position(|(k, _, _)| *k == key) {
            let entry = self.built.remove(i);
            let built = entry.1.clone();
            self.built.push(entry);
            return Ok(built);
        }
        let text = source.unwrap_or(&self.spec.source);
        let started = self
            .building
            .iter()
            .position(|(k, _)| *k == key)
            .map(|i| self.building.swap_remove(i).1);
        let input = self.build_input(text, params, reversed);
        // Reversed builds are the proof's own: never cached.
        let cache_key = match (&input, &self.program_cache) {
            (Ok((program, options)), Some(cache)) if !reversed => cache.key(program, options),
            _ => None,
        };
        let (program, from_disk) = match started {
            Some(background) => {
                let (program, from_binary) = background.wait(&self.session, &self.spec.id);
                self.farmed += usize::from(from_binary);
                (program, from_binary)
            }
            None => match input {
                Ok((program, options)) => self.compile(&program, &options, cache_key.as_deref()),
                Err(e) => (Err(e), false),
            },
        };
        if let (Ok(p), Some(cache), Some(k), false) =
            (&program, &self.program_cache, &cache_key, from_disk)
        {
            if let Ok(binary) = self.session.binary(p) {
                cache.store(k, &binary);
            }
        }
        // A generated source's diagnostics are kept only where they are about its own text:
        // they go into prompts and logs ([`diagnostics::own_diagnostics`]).
        let generated = source.is_some_and(|s| s != self.spec.source);
        // The kernel's own source is named as its file, not the driver's temporary copy.
        let place = self.settings.source_place.clone();
        let own = |log: String| match &place {
            _ if generated => diagnostics::own_diagnostics(&log, CANDIDATE_FILE),
            Some(place) => diagnostics::relocate(&log, place),
            None => log,
        };
        let built = program.and_then(|p| {
            let log = own(self.session.build_log(&p));
            if !log.is_empty() {
                self.build_warnings.push(log);
            }
            self.session.kernel(&p, &self.spec.signature.name)
        });
        match built {
            Ok(b) => {
                let b = std::rc::Rc::new(b);
                if self.built.len() >= BUILT_KEPT {
                    self.built.remove(0);
                }
                self.built.push((key, b.clone(), from_disk));
                Ok(b)
            }
            Err(e) => {
                let log = own(e.to_string());
                self.build_failures
                    .push((params.clone(), truncate(&log, 4000)));
                let line = build_error_line(&log);
                Err(Rejection::Build(if reversed {
                    format!("{line} (built with work-groups in reverse order)")
                } else {
                    line
                }))
            }
        }
    }

    /// Builds `program` with `options`: from the binary the program cache holds under `key`
    /// while builds may be read from it, else from source. Says whether it came from the cache
    /// (a cached binary the driver refuses is built from source instead).
    fn compile(
        &self,
        program: &str,
        options: &str,
        key: Option<&str>,
    ) -> (Result<Program, RtError>, bool) {
        if self.read_cache {
            let binary = key
                .zip(self.program_cache.as_ref())
                .and_then(|(k, c)| c.load(k));
            if let Some(Ok(built)) =
                binary.map(|b| self.session.build_binary(&self.spec.id, &b, options))
            {
                return (Ok(built), true);
            }
        }
        (self.session.build(&self.spec.id, program, options), false)
    }

    /// How many builds ahead are still under way ([`Bench::build_ahead`]).
    pub fn builds_ahead_running(&self) -> usize {
        self.building.iter().filter(|(_, b)| b.is_running()).count()
    }

    /// How many candidates were built from a binary the build farm made
    /// ([`Measurement::build_processes`]).
    pub fn farmed_builds(&self) -> usize {
        self.farmed
    }

    /// From now on every build comes from its source: builds read from the program cache are
    /// dropped and it is no longer read (still written). A proof and what follows it (the
    /// re-measurement of finalists) must see what the source compiles to, not a file.
    pub fn seal(&mut self) {
        self.read_cache = false;
        self.sealed = true;
        self.built.retain(|(_, _, from_disk)| !from_disk);
        // the farm's builds would be built from their binaries: gone with the farm
        self.building
            .retain(|(_, b)| !matches!(b, Background::Farmed { .. }));
        self.farm = None;
    }

    /// Starts building `upcoming` (configurations of the annotated source that may be
    /// evaluated next, likeliest first: a batch, or the engine's speculation) on threads of
    /// their own, so that they build at once and while the device runs other candidates;
    /// [`Bench::evaluate`] then takes each finished program. Builds already done or under way
    /// are not started again; at most `builders` run at once (the rest of
    /// `upcoming` is left), and of the finished ones never taken only the newest
    /// [`BUILT_AHEAD_KEPT`] are kept.
    pub fn build_ahead(&mut self, upcoming: &[Params]) {
        let processes = self.settings.build_processes.unwrap_or(0).min(MAX_BUILDERS);
        let farmed = processes > 0 && !self.sealed;
        if farmed && self.farm.is_none() {
            // (no identity: no farm; the builds ahead go to threads)
            if let Ok(identity) = self.session.build_identity() {
                self.farm = Some(farm::BuildFarm::start(self.device, &identity, processes));
            }
        }
        // A farm whose members are all broken leaves the builds ahead to threads again.
        let farm = (self.farm.as_ref()).filter(|f| farmed && f.size() > 0);
        let builders = farm.map_or(self.builders, |f| f.size());
        for params in upcoming {
            if self.builds_ahead_running() >= builders {
                break;
            }
            let key = (params.clone(), None, false);
            let known = self.built.iter().any(|(k, _, _)| *k == key)
                || self.building.iter().any(|(k, _)| *k == key);
            if *params == self.spec.reference || known || self.valid(params).is_err() {
                continue;
            }
            // Options that cannot be made fail the same way when the candidate is built.
            if let Ok((program, options)) = self.build_input(&self.spec.source, params, false) {
                // A build the cache holds is read when the candidate is evaluated.
                if self.read_cache
                    && (self.program_cache.as_ref())
                        .and_then(|c| Some(c.has(&c.key(&program, &options)?)))
                        .unwrap_or(false)
                {
                    continue;
                }
                let background = match farm {
                    Some(f) => Background::Farmed {
                        job: f.submit(&self.spec.id, &program, &options),
                        program,
                        options,
                    },
                    None => Background::Running(self.session.build_in_background(
                        &self.spec.id,
                        &program,
                        &options,
                    )),
                };
                self.building.push((key, background));
            }
        }
        // Finished builds nobody took, oldest first, beyond the few kept (a build still
        // running is kept: its thread would go on without anyone counting it).
        let mut finished = self
            .building
            .iter()
            .filter(|(_, b)| !b.is_running())
            .count();
        self.building.retain(|(_, b)| {
            let drop = finished > BUILT_AHEAD_KEPT && !b.is_running();
            if drop {
                finished -= 1;
            }
            !drop
        });
    }

    /// What the compiler is given for `params` of `source`: the program text and the build
    /// options (only declared parameters reach them,
    /// [`kfoundry_rt::opencl::launch::build_options_for`]).
    ///
    /// The annotated source as it is, or with [`reversed_work_items`] before it when `reversed`. A
    /// generated source (not the annotation's) is checked first as a source that did not come
    /// from the user ([`source_policy::check`]), then built after
    /// [`source_policy::generated_prelude`], the same a shipped program builds it with (its
    /// reversed flavour when `reversed`: the same names, work-groups in reverse order).
    fn build_input(
        &self,
        source: &str,
        params: &Params,
        reversed: bool,
    ) -> Result<(String, String), RtError> {
        let options = kfoundry_rt::opencl::launch::build_options_for(&self.spec, source, params)?;
        if source == self.spec.source {
            let program = if reversed {
                format!("{}#line 1\n{source}", reversed_work_items(source))
            } else {
                source.to_string()
            };
            return Ok((program, options));
        }
        source_policy::check(
            source,
            source_policy::Policy {
                allow_asm: !self.not_gpu,
            },
        )
        .map_err(|v| RtError::Build {
            kernel: self.spec.id.clone(),
            options: options.clone(),
            log: format!("refused before it was built: {v}"),
        })?;
        Ok((
            source_policy::generated_program(source, !self.not_gpu, reversed),
            options,
        ))
    }

    /// Waits for the builds under way (on devices where they would compete with a kernel
    /// being timed for the CPU).
    fn quiet(&mut self) {
        if self.not_gpu {
            self.building = std::mem::take(&mut self.building)
                .into_iter()
                .map(|(k, b)| match b {
                    Background::Running(_) => {
                        (k, Background::Done(b.wait(&self.session, &self.spec.id).0))
                    }
                    other => (k, other),
                })
                .collect();
            // A farm's builds run in other processes, on the same cores: waited for too (they
            // stay the farm's; a member that takes longer than the patience is left running).
            let started = Instant::now();
            while self.builds_ahead_running() > 0 && started.elapsed() < farm::PATIENCE {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }

    /// The reversed build of `params` when this bench checks work-group order and the kernel
    /// has local memory (`local_mem` bytes of its own, or `__local` arguments); else `None`.
    fn reversed_build(
        &mut self,
        params: &Params,
        source: Option<&str>,
        local_mem: u64,
    ) -> Result<Option<std::rc::Rc<Kernel>>, Rejection> {
        let local_args = self
            .spec
            .args_with_roles()
            .any(|(_, role)| role == ArgRole::LocalMemory);
        if !self.not_gpu || (local_mem == 0 && !local_args) {
            return Ok(None);
        }
        self.build_as(params, source, true).map(Some)
    }

    /// Limits that only the built kernel knows: its local memory and work-group limit.
    fn check_built(
        &self,
        kernel: &Kernel,
        params: &Params,
        sizes: &Sizes,
    ) -> Result<KernelInfo, Rejection> {
        let info = self.session.kernel_info(kernel);
        if info.local_mem_bytes > self.limits.local_mem_bytes {
            return Err(Rejection::Invalid(format!(
                "uses {} bytes of local memory, the device has {}",
                info.local_mem_bytes, self.limits.local_mem_bytes
            )));
        }
        let local = work_group_items(&self.spec, &self.limits, params, sizes);
        if let Some(local) = local.filter(|l| *l > info.work_group_size) {
            return Err(Rejection::Invalid(format!(
                "work-group size {local} exceeds this kernel's limit {} on the device",
                info.work_group_size
            )));
        }
        Ok(info)
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
        let candidate = match self.build(params, source) {
            Ok(b) => b,
            Err(rejection) => return rejection.evaluation(cost(start)),
        };
        // On a CPU device the builds ahead are done before this candidate runs and is timed.
        self.quiet();
        progress(Phase::Built);
        let kernel = candidate.as_deref().unwrap_or(&self.reference);
        let info = match self.check_built(kernel, params, &sizes) {
            Ok(info) => info,
            Err(rejection) => return rejection.evaluation(cost(start)),
        };
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
        if self.pool_fits.get() == Some(false) {
            return Ok(None);
        }
        let runtime = |e: String| Rejection::Runtime(e);
        let mut pool = self.pool.borrow_mut();
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
            if self.pool_fits.get().is_none() {
                let bytes: usize = prepared
                    .buffers
                    .iter()
                    .map(|b| b.front.len() + b.len * b.ty.size() + b.back.len())
                    .sum();
                let room = usize::try_from(self.limits.global_mem_bytes / 2).unwrap_or(usize::MAX);
                let fits =
                    self.limits.global_mem_bytes > 0 && bytes.saturating_mul(sets + 1) <= room;
                self.pool_fits.set(Some(fits));
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

    /// One verification on a fresh input set of `shape`: reference and candidate on the same
    /// inputs (the reference checked to stay within its buffers on them), then
    /// [`Bench::check_candidate`].
    fn verify(&self, kernel: &Kernel, params: &Params, shape: &Shape) -> SetOutcome {
        let runtime = |e: RtError| SetOutcome::Failed(Rejection::Runtime(e.to_string()));
        let key = self.reference_key(params, shape);
        let kept = key
            .as_ref()
            .and_then(|k| self.reference_runs.borrow_mut().get(k));
        let kept = match kept {
            Some(kept) => kept,
            None => match self.reference_on(params, shape) {
                Ok(kept) => {
                    let kept = std::rc::Rc::new(kept);
                    if let Some(key) = key {
                        self.reference_runs.borrow_mut().keep(
                            key,
                            kept.clone(),
                            self.limits.global_mem_bytes,
                        );
                    }
                    kept
                }
                Err(outcome) => return outcome,
            },
        };
        let (prepared, ref_run, slack) = (&kept.prepared, &kept.run, &kept.slack);
        let verdict = self.check_candidate(
            kernel,
            params,
            shape.sizes,
            prepared,
            ref_run,
            shape.values,
            slack,
        );
        if let Err(Rejection::Runtime(_) | Rejection::OutOfBounds(_)) = &verdict {
            // It may have reached the kept reference runs too.
            self.reference_runs.borrow_mut().clear();
        }
        match verdict {
            Ok((run, errors)) => SetOutcome::Passed(run, errors),
            // Before a candidate is blamed for differing: is the reference's result its inputs'
            // alone?
            Err(Rejection::Wrong(why)) => {
                match self.reference_reads_outside(shape.sizes, prepared, ref_run) {
                    Ok(Some(output)) => {
                        let message = format!(
                            "the reference at sizes {}: {}",
                            fmt_sizes(shape.sizes),
                            self.outside_message(&output)
                        );
                        SetOutcome::Unproven(Untrusted {
                            message,
                            annotation_fault: true,
                        })
                    }
                    Ok(None) => SetOutcome::Failed(Rejection::Wrong(why)),
                    Err(e) => runtime(e),
                }
            }
            Err(rejection) => SetOutcome::Failed(rejection),
        }
    }

    /// What makes the input set of `params` in `shape` the same as another's
    /// ([`reference_runs`]); `None` for an unseeded set (never drawn twice) or lengths that
    /// cannot be worked out (the draw refuses it).
    fn reference_key(&self, params: &Params, shape: &Shape) -> Option<reference_runs::Key> {
        let seed = shape.seed?;
        let lens = self
            .spec
            .args_with_roles()
            .filter(|(_, role)| matches!(role, ArgRole::CallerBuffer))
            .map(|(arg, _)| self.spec.buffer_len(arg.name(), params, shape.sizes).ok())
            .collect::<Option<Vec<usize>>>()?;
        Some(reference_runs::Key {
            seed,
            sizes: shape.sizes.clone(),
            scalars: shape.scalars.clone(),
            prefill: shape.prefill,
            values: shape.values,
            in_place: shape.in_place,
            lens,
        })
    }

    /// The reference's run on a fresh input set of `params` in `shape`, checked to stay within
    /// its buffers, with the slack its sensitivity gives there; or how the case ends without a
    /// candidate run (the set cannot be drawn, the reference cannot be trusted on it).
    fn reference_on(
        &self,
        params: &Params,
        shape: &Shape,
    ) -> Result<reference_runs::Kept, SetOutcome> {
        let runtime = |e: RtError| SetOutcome::Failed(Rejection::Runtime(e.to_string()));
        let mut rng = match shape.seed {
            Some(seed) => ChaCha8Rng::seed_from_u64(seed),
            None => self.fresh_rng(),
        };
        let reference_params = self.spec.reference.clone();
        let prepared = match self.timed(|t| &mut t.draw, || self.prepare(params, shape, &mut rng)) {
            Ok(p) => p,
            Err(e) => return Err(SetOutcome::Failed(Rejection::Invalid(e))),
        };
        let ref_run = match self.timed(
            |t| &mut t.upload,
            || self.upload_with_room(&prepared, &reference_params, shape.sizes),
        ) {
            Ok(r) => r,
            // Nothing has run yet: a device that cannot hold these buffers now proves
            // nothing either way (the tuned workload's buffers may be holding its memory).
            Err(e) if e.is_exhausted() => {
                return Err(SetOutcome::Unproven(Untrusted::device(format!(
                    "the device could not hold the buffers at sizes {}: {e}",
                    fmt_sizes(shape.sizes)
                ))))
            }
            Err(e) => return Err(runtime(e)),
        };
        if let Err(e) = self.timed(
            |t| &mut t.reference,
            || {
                self.launch(
                    &self.reference,
                    &reference_params,
                    shape.sizes,
                    &ref_run,
                    false,
                )
                .and_then(|_| self.session.finish())
            },
        ) {
            return Err(SetOutcome::Unproven(Untrusted::device(format!(
                "the reference failed there: {e}"
            ))));
        }
        // On inputs drawn as declared a reference that writes outside its buffers is the
        // annotation's mistake; on other values (far from the declared ones, edge values) it
        // only means that these inputs prove nothing.
        let declared = shape.values == Values::Declared;
        match self.touched_guard(&ref_run) {
            Ok(Some(why)) => {
                let message = format!(
                    "the reference at sizes {}, on {}: {}",
                    fmt_sizes(shape.sizes),
                    if declared {
                        "inputs drawn as declared"
                    } else {
                        "these inputs"
                    },
                    self.wrote_outside_message(&why)
                );
                return Err(SetOutcome::Unproven(Untrusted {
                    message,
                    annotation_fault: declared,
                }));
            }
            Ok(None) => {}
            Err(e) => return Err(runtime(e)),
        }
        match self.dirty_scratch(&ref_run) {
            Ok(Some((name, n))) => {
                return Err(SetOutcome::Unproven(Untrusted {
                    message: format!(
                        "the reference at sizes {}: it {}",
                        fmt_sizes(shape.sizes),
                        scratch_left_message(&name, n)
                    ),
                    annotation_fault: true,
                }))
            }
            Ok(None) => {}
            Err(e) => return Err(runtime(e)),
        }
        let slack = if shape.values.judged_by_sensitivity() {
            match self.timed(
                |t| &mut t.reference,
                || self.sensitivity(&prepared, shape, &ref_run, &mut rng),
            ) {
                Ok(Ok(slack)) => slack,
                Ok(Err(why)) => return Err(SetOutcome::Unproven(Untrusted::device(why))),
                Err(e) => return Err(runtime(e)),
            }
        } else {
            Slack::new()
        };
        Ok(reference_runs::Kept {
            prepared,
            run: ref_run,
            slack,
        })
    }

    /// How far the reference's checked outputs move when its float inputs move by one unit in
    /// the last place (each element up or down at random, then every element up), times
    /// [`SENSITIVITY_FACTOR`]: the slack a candidate gets on these inputs. `Err` (inner) when
    /// the reference's output is not finite on values far from the declared ones (it does not
    /// handle them: they prove nothing).
    fn sensitivity(
        &self,
        prepared: &Prepared,
        shape: &Shape,
        ref_run: &Run,
        rng: &mut ChaCha8Rng,
    ) -> Result<Result<Slack, String>, RtError> {
        if matches!(
            shape.values,
            Values::Offset { .. } | Values::Magnitude { .. }
        ) {
            for check in &self.spec.checks {
                let (ty, len, bytes) = self.host_copy(ref_run, &check.buffer)?;
                if let Some(i) = (0..len).find(|&i| !decode(ty, &bytes, i).is_finite()) {
                    return Ok(Err(format!(
                        "the reference's `{}` is not finite (element {i}) on {}: it does not handle them",
                        check.buffer,
                        shape.values.describe()
                    )));
                }
            }
        }
        let mut slack = Slack::new();
        for nudge in [Nudge::Random, Nudge::Up] {
            let mut moved = prepared.clone();
            for b in &mut moved.buffers {
                let input = b.read_only || self.spec.inputs.contains_key(&b.name);
                if let (true, Fill::Host(bytes)) = (input, &mut b.fill) {
                    perturb(b.ty, bytes, nudge, rng);
                }
            }
            let run = self.run_reference_on(&moved, shape.sizes)?;
            for check in &self.spec.checks {
                let moved_by = self
                    .compare_outputs(&check.buffer, &run, ref_run, 0.0, f64::INFINITY)?
                    .max_abs;
                let s = slack.entry(check.buffer.clone()).or_insert(0.0);
                *s = s.max(SENSITIVITY_FACTOR * moved_by);
            }
        }
        Ok(Ok(slack))
    }

    /// The candidate on its own copy of `prepared`, the device's local memory scrubbed right
    /// before it runs, then every checked output compared with the reference's run on the same
    /// inputs, every other buffer compared with how the reference left it, and every guard
    /// zone inspected. On inputs of large magnitude ([`Values::Large`]) the element-wise
    /// tolerance is the output's, not each element's: `rtol` of the largest finite reference
    /// value is added to `atol` (see [`large_case_tolerance`]).
    #[allow(clippy::too_many_arguments)]
    fn check_candidate(
        &self,
        kernel: &Kernel,
        params: &Params,
        sizes: &Sizes,
        prepared: &Prepared,
        ref_run: &Run,
        values: Values,
        slack: &Slack,
    ) -> Result<(Run, ErrorStats), Rejection> {
        let runtime = |e: RtError| Rejection::Runtime(e.to_string());
        let cand_run = self
            .timed(
                |t| &mut t.upload,
                || self.upload_with_room(prepared, params, sizes),
            )
            .map_err(runtime)?;
        let outside = self
            .timed(
                |t| &mut t.candidate,
                || {
                    self.device_data
                        .scrub_local_memory(&self.session, self.scrub_reach())?;
                    self.launch(kernel, params, sizes, &cand_run, false)?;
                    self.session.finish()?;
                    self.touched_guard(&cand_run)
                },
            )
            .map_err(runtime)?;
        if let Some(why) = outside {
            return Err(Rejection::OutOfBounds(why));
        }
        let started = Instant::now();
        let compared = self.compare_candidate(ref_run, &cand_run, values, slack);
        self.add_time(|t| &mut t.compare, started);
        compared.map(|errors| (cand_run, errors))
    }

    /// The comparisons of [`Bench::check_candidate`] once the candidate has run: every checked
    /// output against the reference's with its check, every other buffer unchanged.
    fn compare_candidate(
        &self,
        ref_run: &Run,
        cand_run: &Run,
        values: Values,
        slack: &Slack,
    ) -> Result<ErrorStats, Rejection> {
        let runtime = |e: RtError| Rejection::Runtime(e.to_string());
        let mut errors = ErrorStats::default();
        for check in &self.spec.checks {
            let name = &check.buffer;
            let w = check.whole;
            // Without an element-wise bound, only the special values must match element by
            // element (an infinite absolute tolerance for the finite ones).
            let (rtol, atol) = if w.only_whole {
                (0.0, f64::INFINITY)
            } else if matches!(values, Values::Magnitude { .. }) {
                // The check's `atol` was set for outputs of the declared inputs' magnitude:
                // at 1e-25 it would accept anything. The tolerance is the output's own.
                (check.rtol, 0.0)
            } else {
                (check.rtol, check.atol)
            };
            let mut cmp: Comparison = self
                .compare_outputs(name, cand_run, ref_run, rtol, atol)
                .map_err(runtime)?;
            let mut scaled = None;
            // Widened where the inputs are far from the declared ones; an exact check (an
            // integer output, an index) stays exact.
            let widened = !w.only_whole
                && match values {
                    Values::Large => rtol > 0.0,
                    v => v.judged_by_sensitivity() && (check.rtol > 0.0 || check.atol > 0.0),
                };
            if widened && !cmp.ok() {
                let base = large_case_tolerance(rtol, atol, cmp.ref_max);
                let wide = if values.judged_by_sensitivity() {
                    FAR_FACTOR * base + slack.get(name).copied().unwrap_or(0.0)
                } else {
                    base
                };
                cmp = self
                    .compare_outputs(name, cand_run, ref_run, rtol, wide)
                    .map_err(runtime)?;
                scaled = Some(wide);
            }
            let len = ref_run
                .buffers
                .iter()
                .find(|b| &b.name == name)
                .map_or(0, |b| b.len);
            let allowed = w
                .allclose
                .map_or(0, |f| ((1.0 - f) * len as f64).floor() as usize);
            let wrong = |why: String| Err(Rejection::Wrong(format!("`{name}`: {why}")));
            if cmp.mismatches > allowed {
                let (i, x, want) = cmp.first.unwrap_or((0, 0.0, 0.0));
                let mut rule = w.allclose.map_or(String::new(), |f| {
                    format!(" (the check allows {allowed}: `allclose = {f}`)")
                });
                if let Some(wide) = scaled {
                    rule += &format!(
                        " on {}, with atol {wide:.3e} (rtol of the largest reference value{})",
                        values.describe(),
                        if values.judged_by_sensitivity() {
                            format!(
                                ", times {FAR_FACTOR}, plus {SENSITIVITY_FACTOR} times how far the reference moves when its inputs move by one unit in the last place"
                            )
                        } else {
                            String::new()
                        }
                    );
                }
                return wrong(format!(
                    "{} of {len} elements differ{rule} (first at {i}: {x} vs {want}); max abs error {:.3e}",
                    cmp.mismatches, cmp.max_abs
                ));
            }
            if w.allclose.is_some() && cmp.mismatches > 0 {
                // Within the fraction allowed; NaN and infinities must still match.
                let special = self
                    .compare_outputs(name, cand_run, ref_run, 0.0, f64::INFINITY)
                    .map_err(runtime)?;
                if let (false, Some((i, x, want))) = (special.ok(), special.first) {
                    return wrong(format!("{} elements differ where one side is NaN or infinite (first at {i}: {x} vs {want})", special.mismatches));
                }
            }
            // Within the bound or refused: a NaN norm is refused too.
            let within = |n: &f64| cmp.rel_norm <= *n;
            if let Some(n) = w.norm.filter(|n| !within(n)) {
                return wrong(format!(
                    "relative error norm {:.3e} above the check's `norm = {n}`",
                    cmp.rel_norm
                ));
            }
            if let Some(c) = w.cosine {
                let cos = self.cosine(name, cand_run, ref_run).map_err(runtime)?;
                if cos.is_nan() || cos < c {
                    return wrong(format!(
                        "cosine similarity {cos:.9} below the check's `cosine = {c}`"
                    ));
                }
            }
            errors = errors.worst(ErrorStats {
                max_abs: cmp.max_abs,
                rel_norm: cmp.rel_norm,
            });
        }
        // Every other buffer must end exactly as the reference left it: a candidate may not use
        // an input as scratch space (the caller's data would be gone). An input a checked
        // output runs in place in is that output, compared above with its tolerance.
        let checked = |b: &RunBuffer| self.spec.checks.iter().any(|c| c.buffer == b.name);
        let in_place_output = |b: &RunBuffer| {
            cand_run
                .buffers
                .iter()
                .any(|o| o.alias && checked(o) && o.view.same_memory(&b.view))
        };
        for b in cand_run
            .buffers
            .iter()
            .filter(|b| !checked(b) && !in_place_output(b) && !b.scratch)
        {
            let same = self
                .unchanged(&b.name, cand_run, ref_run)
                .map_err(runtime)?;
            if !same.ok() {
                return Err(Rejection::Wrong(format!(
                    "changes `{}`, which it must leave as the reference does ({} elements differ)",
                    b.name, same.mismatches
                )));
            }
        }
        if let Some((name, n)) = self.dirty_scratch(cand_run).map_err(runtime)? {
            return Err(Rejection::Wrong(scratch_left_message(&name, n)));
        }
        Ok(errors)
    }

    /// `f`, its wall time added to the proof time's part `part`.
    fn timed<T>(&self, part: fn(&mut ProofTime) -> &mut f64, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        self.add_time(part, started);
        out
    }

    /// Adds the time since `started` to the proof time's part `part`.
    fn add_time(&self, part: fn(&mut ProofTime) -> &mut f64, started: Instant) {
        let mut t = self.proof_time.get();
        *part(&mut t) += started.elapsed().as_secs_f64();
        self.proof_time.set(t);
    }

    /// The proof time gathered since the last call, and a fresh start.
    pub fn take_proof_time(&self) -> ProofTime {
        self.proof_time.take()
    }

    /// Kernel time from profiling events: the median of at least `repeats` timed runs, more
    /// while the median still moves (by more than [`STABLE`] from one run to the next, twice
    /// running), up to [`MAX_REPEATS`] runs or [`TIMING_BUDGET_S`] seconds of kernel time.
    /// Returns the median and the noise: the spread of the middle half of the runs
    /// (interquartile range) relative to the median.
    fn time(
        &self,
        kernel: &Kernel,
        params: &Params,
        sizes: &Sizes,
        run: &Run,
    ) -> Result<(f64, f64), RtError> {
        for _ in 0..self.settings.warmup {
            self.launch(kernel, params, sizes, run, false)?;
        }
        let least = self.settings.repeats.max(1);
        let mut times = Vec::with_capacity(least);
        let (mut spent, mut steady, mut last) = (0.0, 0, f64::NAN);
        while times.len() < MAX_REPEATS.max(least) {
            if let Some(timing) = self.launch(kernel, params, sizes, run, true)? {
                let t = timing.seconds()?;
                spent += t;
                times.push(t);
            }
            let now = median(&mut times.clone());
            steady = if (now - last).abs() <= STABLE * now {
                steady + 1
            } else {
                0
            };
            last = now;
            if times.len() >= least && (steady >= 2 || spent >= TIMING_BUDGET_S) {
                break;
            }
        }
        Ok((median(&mut times), relative_spread(&mut times)))
    }
}

/// How little the median may move from one timed run to the next to count as steady.
pub const STABLE: f64 = 0.01;
/// Timed runs at most per measurement.
pub const MAX_REPEATS: usize = 50;
/// Kernel time per measurement after which no more runs are added (past the minimum).
pub const TIMING_BUDGET_S: f64 = 1.0;

/// Extra absolute tolerance for each checked output (by name) of one input set.
type Slack = std::collections::BTreeMap<String, f64>;

/// How many times its usual tolerance (`atol` plus `rtol` of the largest reference value) a
/// candidate may differ from the reference on inputs far from the declared ones: there a
/// correct kernel's rounding can also be amplified where the nudge of [`SENSITIVITY_FACTOR`]
/// does not show it (a sum of squared deviations that cancels, with an order of summation of
/// its own, on saturated values), while the slips these inputs are for are gross (a one-pass
/// variance off by 8x, NaN, infinity, zero).
pub const FAR_FACTOR: f64 = 16.0;

/// How many times the reference's own movement under a one-unit nudge of its inputs a
/// candidate may differ from it, on inputs far from the declared ones
/// ([`Values::judged_by_sensitivity`]): a kernel that rounds in another order is off by a few
/// such units; an unstable formulation (a one-pass variance at 1000 ± 1, a sum of squares
/// that overflows) by orders of magnitude more.
pub const SENSITIVITY_FACTOR: f64 = 16.0;

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
pub fn index_hint(spec: &KernelSpec) -> String {
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

/// Interquartile range over median (0 for fewer than 4 values).
pub fn relative_spread(v: &mut [f64]) -> f64 {
    if v.len() < 4 {
        return 0.0;
    }
    let m = median(v);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    if m > 0.0 {
        (q(0.75) - q(0.25)) / m
    } else {
        0.0
    }
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

pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
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
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
        assert_eq!(relative_spread(&mut [1.0, 1.0, 1.0]), 0.0);
        assert!((relative_spread(&mut [1.0, 2.0, 2.0, 2.0, 3.0]) - 0.0).abs() < 1e-12);
        assert!((relative_spread(&mut [1.0, 1.5, 2.0, 2.5, 3.0]) - 0.5).abs() < 1e-12);
    }

    /// y = 2x + y, with ITEMS=4 wrong at one element and ITEMS=8 wrong only where x > 0.99
    /// (a value-dependent bug: about one element in 200).
    fn bench() -> Bench {
        bench_with(Measurement::default())
    }

    /// [`bench`] measuring with `settings`.
    fn bench_with(settings: Measurement) -> Bench {
        bench_for(
            settings,
            r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) {
                for (int j = 0; j < ITEMS; ++j) {
                    int i = get_global_id(0) * ITEMS + j;
                    float v = 2.0f * x[i] + y[i];
                    if (ITEMS == 4 && i == 77) v += 1.0f;
                    if (ITEMS == 8 && x[i] > 0.99f) v += 1.0f;
                    y[i] = v;
                }
            }", params(ITEMS = [1, 2, 4, 8]), reference(ITEMS = 1), require(n % ITEMS == 0),
            global = n / ITEMS, buffers(x = n, y = n), inputs(y = uniform(-1.0, 1.0)), check(y), workloads(w(n = 4096))"#,
        )
    }

    /// A bench for `code` with one parameter `P` in 0..=1 (reference 0), y checked.
    fn bench_of(code: &str) -> Bench {
        bench_for(
            Measurement::default(),
            &format!(
                r#"code = {code:?}, params(P = [0, 1]), reference(P = 0), global = n, local = 64,
               buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
            ),
        )
    }

    /// A bench on the first OpenCL device for the annotation `args`, at its first workload.
    fn bench_for(settings: Measurement, args: &str) -> Bench {
        try_bench_for(settings, args).expect("a bench on the first OpenCL device (PoCL in CI)")
    }

    /// [`bench_for`], or why the bench could not be set up.
    fn try_bench_for(settings: Measurement, args: &str) -> Result<Bench, SetupError> {
        let item: syn::Item = syn::parse_str("pub struct K;").expect("item");
        let dir = std::env::temp_dir();
        let cx = kfoundry_tooling::annotation::Context {
            package: "t",
            manifest_dir: &dir,
        };
        let spec = kfoundry_tooling::annotation::parse(args.parse().expect("tokens"), &item, &cx)
            .map(|a| a.spec)
            .expect("spec");
        let sizes = spec.workloads[0].sizes.clone();
        Bench::new(&spec, &sizes, 0, settings)
    }

    /// y = 2x by way of a scratch buffer `ws` (`scratch(ws)`) of `n * (1 + P)` floats: P = 0
    /// (the reference) and P = 3 (all of its longer scratch) clear what they used; P = 1 leaves
    /// it dirty; P = 2 clears it but writes one element past its end; P = 4 leaves it dirty only
    /// when launched again on its own output (as the timed runs are). `keep` makes the
    /// reference leave it dirty too.
    fn scratch_annotation(keep: bool) -> String {
        let keep = if keep { "P == 0 || " } else { "" };
        format!(
            r#"code = "__kernel void k(const int n, __global const float* x, __global float* y, __global float* ws) {{
                int i = get_global_id(0);
                float prior = y[i];
                ws[i] = 2.0f * x[i];
                if (P == 3) ws[3 * n + i] = ws[i];
                float v = P == 3 ? ws[3 * n + i] : ws[i];
                if (!({keep}P == 1)) ws[i] = 0.0f;
                if (P == 3) ws[3 * n + i] = 0.0f;
                if (P == 2 && i == 0) ws[3 * n] = 1.0f;
                if (P == 4 && i == 0 && prior == v) ws[n] = 1.0f;
                y[i] = v;
            }}", params(P = [0, 1, 2, 3, 4]), reference(P = 0), global = n, local = 64,
            buffers(x = n, y = n, ws = n * (1 + P)), scratch(ws), check(y), workloads(w(n = 4096))"#
        )
    }

    /// Scratch buffers: each run gets its configuration's length, all zero; a candidate that
    /// leaves its scratch dirty is wrong, one that writes past it out of bounds; one that uses
    /// more scratch than the reference, and clears it, passes the proof and the search.
    #[test]
    fn scratch_must_be_left_all_zero_and_within_its_length() {
        let mut b = bench_for(Measurement::default(), &scratch_annotation(false));
        let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
        let sizes = b.sizes.clone();
        let mut verdict = |v: i64| {
            b.verify_at(&p(v), None, &Case::at(sizes.clone()), &mut |_| {})
                .expect("the reference can be trusted")
        };
        assert!(verdict(0).is_ok());
        assert!(verdict(3).is_ok(), "{:?}", verdict(3));
        match verdict(1) {
            Err(Rejection::Wrong(why)) => {
                assert!(why.contains("scratch `ws` not zero"), "{why}")
            }
            other => panic!("a dirty scratch passed: {other:?}"),
        }
        match verdict(2) {
            Err(Rejection::OutOfBounds(why)) => {
                assert!(why.contains("past the end of `ws`"), "{why}")
            }
            other => panic!("a write past the scratch passed: {other:?}"),
        }
        assert!(matches!(
            b.evaluate(&p(3), None, &mut |_| {}),
            Evaluation::Ok { .. }
        ));
        assert!(matches!(
            b.evaluate(&p(1), None, &mut |_| {}),
            Evaluation::Failed { .. }
        ));
        // Clean when verified, dirty once launched again: the timed runs catch it.
        let once = b.verify_at(&p(4), None, &Case::at(sizes.clone()), &mut |_| {});
        assert!(once.expect("the reference can be trusted").is_ok());
        match b.evaluate(&p(4), None, &mut |_| {}) {
            Evaluation::Failed { kind, reason, .. } => {
                assert_eq!(kind, FailureKind::Wrong);
                assert!(reason.contains("after its timed runs"), "{reason}");
            }
            other => panic!("dirty after its timed runs, yet {other:?}"),
        }
    }

    /// A reference that leaves its scratch dirty is the annotation's mistake, said at setup.
    #[test]
    fn a_reference_that_leaves_scratch_dirty_is_refused_at_setup() {
        match try_bench_for(Measurement::default(), &scratch_annotation(true)) {
            Err(SetupError::Reference { message, .. }) => {
                assert!(message.contains("scratch `ws` not zero"), "{message}")
            }
            Err(other) => panic!("another setup error: {other}"),
            Ok(_) => panic!("a reference leaving its scratch dirty was accepted"),
        }
    }

    /// No more builds ahead run at once than `build_jobs` says; the rest of the offer is
    /// left (the likeliest come first).
    #[test]
    fn builds_ahead_run_at_most_build_jobs_at_once() {
        let mut b = bench_with(Measurement {
            build_jobs: Some(1),
            ..Measurement::default()
        });
        b.build_ahead(&[items(2), items(4), items(8)]);
        assert_eq!(b.building.len(), 1);
        assert_eq!(b.building[0].0 .0, items(2), "the first offered is started");
        assert!(b.evaluate(&items(2), None, &mut |_| {}).time().is_some());
        assert!(b.building.is_empty(), "taken by its evaluation");
    }

    /// A build farm whose members cannot start (this test binary does not answer the worker's
    /// command) costs nothing but the farm's builds: each candidate is built from source, a
    /// wrong one is still wrong, and once every member is known broken the builds ahead go to
    /// threads again.
    #[test]
    fn a_broken_build_farm_falls_back_to_builds_from_source() {
        let mut b = bench_with(Measurement {
            build_processes: Some(2),
            ..Measurement::default()
        });
        b.build_ahead(&[items(2), items(4)]);
        assert!(b.evaluate(&items(2), None, &mut |_| {}).time().is_some());
        // Once every member is known to be broken, the builds ahead go to threads again.
        let started = Instant::now();
        while b.farm.as_ref().is_some_and(|f| f.size() > 0) && started.elapsed().as_secs() < 60 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(
            b.farm.as_ref().map(|f| f.size()),
            Some(0),
            "no member answered"
        );
        b.build_ahead(&[items(8)]);
        assert!(matches!(
            b.building.last(),
            Some((k, Background::Running(_))) if k.0 == items(8)
        ));
        assert!(matches!(
            b.evaluate(&items(4), None, &mut |_| {}),
            Evaluation::Failed {
                kind: FailureKind::Wrong,
                ..
            }
        ));
        assert_eq!(b.farmed_builds(), 0);
    }

    /// Builds started ahead are what the evaluation uses (not built again), and an evaluation
    /// of a configuration never announced still builds it.
    #[test]
    fn builds_ahead_are_taken_by_their_evaluations() {
        let mut b = bench();
        b.builders = 4;
        b.build_ahead(&[items(2), items(4), items(1)]);
        assert_eq!(b.building.len(), 2, "the reference is not built ahead");
        assert!(b.evaluate(&items(2), None, &mut |_| {}).time().is_some());
        assert_eq!(b.building.len(), 1);
        let wrong = b.evaluate(&items(4), None, &mut |_| {});
        assert!(
            matches!(
                wrong,
                Evaluation::Failed {
                    kind: FailureKind::Wrong,
                    ..
                }
            ),
            "{wrong:?}"
        );
        assert!(b.building.is_empty());
        b.build_ahead(&[items(2)]);
        assert!(b.building.is_empty(), "already built");
        // ITEMS=8, never announced: built now, and wrong where an input exceeds 0.99
        let late = b.evaluate(&items(8), None, &mut |_| {});
        assert!(
            matches!(
                late,
                Evaluation::Failed {
                    kind: FailureKind::Wrong,
                    ..
                }
            ),
            "{late:?}"
        );
    }

    /// P=1 reads a local tile that only work-group 0 fills. On a device where one thread runs
    /// the work-groups in turn, group 0 runs first and leaves the tile for the others, so the
    /// run is right (and may pass the search); numbered in reverse, the first group to run is
    /// the last one, which reads the scrubbed tile, so the proof of a finalist fails it. P=0
    /// (its own tile in every group, read after a barrier) passes.
    #[test]
    fn a_kernel_relying_on_work_group_order_fails_verification() {
        let mut b = bench_of(
            "__kernel void k(const int n, __global const float* x, __global float* y) {
                __local float tile[64];
                if (P == 0 || get_group_id(0) == 0) tile[get_local_id(0)] = 2.0f;
                barrier(CLK_LOCAL_MEM_FENCE);
                int i = get_global_id(0);
                y[i] = x[i] * tile[(get_local_id(0) + 1) % 64];
            }",
        );
        assert!(b.not_gpu, "PoCL is not a GPU");
        let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
        let sizes = b.sizes.clone();
        assert!(b
            .verify_at(&p(0), None, &Case::at(sizes.clone()), &mut |_| {})
            .unwrap()
            .is_ok());
        for round in 0..3 {
            let verdict = b
                .verify_at(&p(1), None, &Case::at(sizes.clone()), &mut |_| {})
                .unwrap();
            assert!(
                matches!(verdict, Err(Rejection::Wrong(_))),
                "round {round}: {verdict:?}"
            );
            b.built.clear();
        }
    }

    /// A softmax over one column is all ones whatever its inputs: a workload there is tuned (its
    /// output is legitimately constant, since the output varies at two columns), a candidate
    /// writing ones is right there and refused where the output varies; a reference whose
    /// output never varies is still refused at setup.
    #[test]
    fn a_legitimately_constant_output_is_proven_by_equality() {
        let softmax = |p1: &str| {
            format!(
                r#"code = "__kernel void k(const int rows, const int cols, __global const float* x, __global float* y) {{
                    int r = get_global_id(0);
                    float m = -INFINITY, s = 0.0f;
                    for (int c = 0; c < cols; c++) m = fmax(m, x[r * cols + c]);
                    for (int c = 0; c < cols; c++) s += exp(x[r * cols + c] - m);
                    for (int c = 0; c < cols; c++) y[r * cols + c] = {p1};
                }}", params(P = [0, 1]), reference(P = 0), global = rows,
                buffers(x = rows * cols, y = rows * cols), check(y), workloads(w(rows = 64, cols = 1))"#
            )
        };
        let mut b = bench_for(
            Measurement::default(),
            &softmax("P == 1 ? 1.0f : exp(x[r * cols + c] - m) / s"),
        );
        let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
        let at = |cols: i64| -> Case {
            Case::at([("rows".to_string(), 64), ("cols".to_string(), cols)].into())
        };
        assert!(b
            .verify_at(&p(1), None, &at(1), &mut |_| {})
            .unwrap()
            .is_ok());
        let verdict = b.verify_at(&p(1), None, &at(8), &mut |_| {}).unwrap();
        assert!(matches!(verdict, Err(Rejection::Wrong(_))), "{verdict:?}");
        assert!(b
            .verify_at(&p(0), None, &at(8), &mut |_| {})
            .unwrap()
            .is_ok());
        // an output that never varies: the annotation's mistake, refused at setup
        let constant = try_bench_for(
            Measurement::default(),
            &softmax("P == 1 ? 1.0f : 1.0f + 0.0f * s"),
        );
        assert!(
            matches!(constant, Err(SetupError::InsensitiveOutput(_))),
            "{:?}",
            constant.err()
        );
    }

    /// A seeded proof case met again (the next finalist, a portfolio's next candidate) compares
    /// against the reference's kept run on the same inputs, and a wrong candidate is refused
    /// there as on a fresh run; an unseeded case (the search's) is never kept.
    #[test]
    fn a_seeded_cases_reference_run_is_kept_for_the_next_finalist() {
        let mut b = bench_of(
            "__kernel void k(const int n, __global const float* x, __global float* y) {
                int i = get_global_id(0);
                y[i] = (P == 1 && i == n - 1) ? x[i] + 1.0f : 2.0f * x[i];
            }",
        );
        let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
        let mut case = Case::at(b.sizes.clone());
        case.seed = 42;
        assert!(b
            .verify_at(&p(0), None, &case, &mut |_| {})
            .unwrap()
            .is_ok());
        let first = b.take_proof_time();
        assert_eq!(b.reference_runs.borrow().hits, 0);
        let verdict = b.verify_at(&p(1), None, &case, &mut |_| {}).unwrap();
        assert!(matches!(verdict, Err(Rejection::Wrong(_))), "{verdict:?}");
        assert!(b.reference_runs.borrow().hits >= 1, "the kept run was used");
        assert!(b
            .verify_at(&p(0), None, &case, &mut |_| {})
            .unwrap()
            .is_ok());
        let again = b.take_proof_time();
        assert!(
            again.reference < first.reference,
            "no reference runs the second time: {} s, then {} s",
            first.reference,
            again.reference
        );
        // another seed: other inputs, a run of its own
        let hits = b.reference_runs.borrow().hits;
        case.seed = 43;
        assert!(b
            .verify_at(&p(0), None, &case, &mut |_| {})
            .unwrap()
            .is_ok());
        assert_eq!(b.reference_runs.borrow().hits, hits);
        // unseeded: never kept
        case.seed = 0;
        for _ in 0..2 {
            assert!(b
                .verify_at(&p(0), None, &case, &mut |_| {})
                .unwrap()
                .is_ok());
        }
        assert_eq!(b.reference_runs.borrow().hits, hits);
    }

    /// On inputs of large magnitude a correct kernel that rounds in another order is within
    /// the output's tolerance even where a normalization's `x̂ * g + b` cancels (an element's
    /// own tolerance refused it: kb-conv-gn's GroupNorm tuned on another machine), and a
    /// kernel right only on the declared range is still refused.
    #[test]
    fn large_inputs_are_judged_at_the_outputs_magnitude() {
        let mut b = bench_for(
            Measurement::default(),
            r#"code = "__kernel void k(const int n, __global const float* x, __global const float* g,
                                      __global const float* b, __global float* y) {
                int r = get_global_id(0);
                if (r * 48 >= n) return;
                __global const float* v = x + r * 48;
                float s = 0.0f, q = 0.0f;
                for (int j = 0; j < 48; ++j) s += v[P == 1 ? 47 - j : j];
                float m = s / 48.0f;
                for (int j = 0; j < 48; ++j) { float d = v[P == 1 ? 47 - j : j] - m; q += d * d; }
                float inv = rsqrt(q / 48.0f + 1e-5f);
                for (int j = 0; j < 48; ++j) {
                    float t = ((P == 2 ? clamp(v[j], -2.0f, 2.0f) : v[j]) - m) * inv;
                    y[r * 48 + j] = t * g[j] + b[j];
                }
            }", params(P = [0, 1, 2]), reference(P = 0), global = n / 48,
            buffers(x = n, g = 48, b = 48, y = n), check(y, rtol = 1e-4, atol = 1e-5),
            workloads(w(n = 49152))"#,
        );
        let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
        let sizes = b.sizes.clone();
        let large = Case {
            values: Values::Large,
            sets: 4,
            seed: 7,
            ..Case::at(sizes.clone())
        };
        for (variant, case) in [
            (1, Case::at(sizes.clone())),
            (1, large.clone()),
            (2, Case::at(sizes.clone())),
        ] {
            let verdict = b.verify_at(&p(variant), None, &case, &mut |_| {}).unwrap();
            assert!(verdict.is_ok(), "P = {variant}: {verdict:?}");
        }
        // The clamp changes nothing on the declared inputs: only large ones reveal it.
        let verdict = b.verify_at(&p(2), None, &large, &mut |_| {}).unwrap();
        assert!(
            matches!(&verdict, Err(Rejection::Wrong(w)) if w.contains("large magnitude")),
            "{verdict:?}"
        );
    }

    /// What the reference leaves in local memory is scrubbed before a candidate runs, also
    /// beyond the candidate's own `__local` arrays (on a CPU device the scrub reaches as far
    /// as any kernel launched here did, not the whole of local memory): a candidate that
    /// reads past its small tile into the reference's large one is refused.
    #[test]
    fn stale_local_memory_beyond_a_candidates_arrays_is_scrubbed() {
        let mut b = bench_of(
            "__kernel void k(const int n, __global const float* x, __global float* y) {
                int i = get_global_id(0), l = get_local_id(0);
            #if P == 0
                __local float big[32768];
                for (int j = l; j < 32768; j += 64) big[j] = 2.0f;
                barrier(CLK_LOCAL_MEM_FENCE);
                y[i] = x[i] * big[30000 + l];
            #else
                __local float t[64];
                /* Written somewhere (a tile never written would be undefined to the compiler,
                   which may fold its loads), read past its own 64 floats, where the
                   reference's 2.0 were. */
                if (n < 0) t[l] = 0.0f;
                barrier(CLK_LOCAL_MEM_FENCE);
                y[i] = x[i] * t[l + (n > 0 ? 30000 : 0)];
            #endif
            }",
        );
        let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
        let sizes = b.sizes.clone();
        let verdict = b
            .verify_at(&p(1), None, &Case::at(sizes.clone()), &mut |_| {})
            .unwrap();
        assert!(matches!(verdict, Err(Rejection::Wrong(_))), "{verdict:?}");
        if b.not_gpu {
            assert!(
                b.scrub_reach().is_some_and(|r| r >= 32768 * 4),
                "{:?}",
                b.scrub_reach()
            );
        }
    }

    fn items(v: i64) -> Params {
        [("ITEMS".to_string(), v)].into()
    }

    /// A successful evaluation reports the largest work-group the driver allows the build,
    /// and the work-group size the engine is given is the annotation's `local`.
    #[test]
    fn evaluations_report_the_work_group_limit_and_validity_the_group_size() {
        let mut b = bench();
        let Evaluation::Ok { descriptors, .. } = b.evaluate(&items(2), None, &mut |_| {}) else {
            panic!("the bench's kernel runs")
        };
        let limit = descriptors
            .iter()
            .find(|(n, _)| n == WORK_GROUP_LIMIT)
            .map(|(_, v)| *v);
        assert!(limit.is_some_and(|l| l >= 1.0), "{descriptors:?}");
        let sized = bench_for(
            Measurement::default(),
            r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) {
                if (get_global_id(1) == 0) y[get_global_id(0)] = 2.0f * x[get_global_id(0)];
            }", params(WG = [8, 16, 32], R = [1, 2]), reference(WG = 8, R = 1),
            global = (n, R), local = (WG, R), buffers(x = n, y = n), check(y), workloads(w(n = 64))"#,
        );
        let validity = |b: &Bench| Validity::new(b.spec.clone(), b.sizes.clone(), b.limits.clone());
        let size = validity(&sized).group_size();
        assert_eq!(size.of(&vec![16, 2]), Some(32));
        assert_eq!(size.of(&vec![32, 1]), Some(32));
        // No `local`: the driver chooses, and nothing is known.
        assert_eq!(validity(&b).group_size().of(&vec![2]), None);
        // Kept answers are the answers: asked twice, each configuration as checked afresh.
        let v = validity(&sized);
        for round in 0..2 {
            for wg in [8, 16, 32, 4096] {
                for r in [1, 2] {
                    let c = vec![wg, r];
                    let fresh = v.check(&params_of(&v.spec, &c)).is_ok();
                    assert_eq!(v.accepts(&c), fresh, "round {round}: {c:?}");
                    let want = fresh.then_some((wg * r) as u64);
                    assert_eq!(size.of(&c), want, "round {round}: {c:?}");
                }
            }
        }
        assert!(
            !v.accepts(&vec![4096, 1]),
            "a work-group of 4096 cannot launch at n = 64"
        );
        // A source that fixes its work-group reports no limit (its own work-group is not one).
        let mut pinned = bench_for(
            Measurement::default(),
            r#"code = "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
                void k(const int n, __global const float* x, __global float* y) {
                y[get_global_id(0)] = 2.0f * x[get_global_id(0)];
            }", params(WG = [8, 16]), reference(WG = 8),
            global = n, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 64))"#,
        );
        let wg = |v: i64| -> Params { [("WG".to_string(), v)].into() };
        let Evaluation::Ok { descriptors, .. } = pinned.evaluate(&wg(16), None, &mut |_| {}) else {
            panic!("the pinned kernel runs")
        };
        assert!(
            descriptors.iter().all(|(n, _)| n != WORK_GROUP_LIMIT),
            "{descriptors:?}"
        );
    }

    /// [`bench`] with the program cache in `dir`, read from.
    fn cached_bench(dir: &std::path::Path) -> Bench {
        bench_with(Measurement {
            program_cache: Some(ProgramCacheUse {
                dir: dir.to_path_buf(),
                read: true,
            }),
            ..Measurement::default()
        })
    }

    fn is_wrong(e: &Evaluation) -> bool {
        matches!(
            e,
            Evaluation::Failed {
                kind: FailureKind::Wrong,
                ..
            }
        )
    }

    /// Where the cache of `b` keeps the build of `params`.
    fn cache_file(b: &Bench, params: &Params) -> std::path::PathBuf {
        let (program, options) = b.build_input(&b.spec.source, params, false).unwrap();
        let cache = b.program_cache.as_ref().expect("a cache");
        cache.path(&cache.key(&program, &options).expect("a key"))
    }

    /// A second bench on the same cache reads the first one's build instead of compiling.
    #[test]
    fn a_build_kept_by_one_bench_is_read_by_the_next() {
        let dir = std::env::temp_dir().join(format!("kfoundry-cache-hit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut first = cached_bench(&dir);
        assert!(first
            .evaluate(&items(2), None, &mut |_| {})
            .time()
            .is_some());
        assert_eq!(first.built.last().map(|b| b.2), Some(false), "compiled");
        assert!(cache_file(&first, &items(2)).is_file(), "kept");
        let mut second = cached_bench(&dir);
        assert!(second
            .evaluate(&items(2), None, &mut |_| {})
            .time()
            .is_some());
        assert_eq!(second.built.last().map(|b| b.2), Some(true), "read");
        // Not read once sealed: the proof builds from source.
        second.seal();
        assert!(second.built.is_empty());
        assert!(second
            .verify_at(
                &items(2),
                None,
                &Case::at(second.sizes.clone()),
                &mut |_| {}
            )
            .unwrap()
            .is_ok());
        assert_eq!(second.built.last().map(|b| b.2), Some(false));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A wrong binary in the cache under a right candidate's key (a stale compiler, a file
    /// written by someone else) fails that candidate in the search, and cannot reach its
    /// proof, which builds from source.
    #[test]
    fn a_poisoned_cache_entry_never_reaches_the_proof() {
        let dir =
            std::env::temp_dir().join(format!("kfoundry-cache-poison-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut b = cached_bench(&dir);
        // ITEMS=4 builds (and is kept) but is wrong at one element.
        let wrong = b.evaluate(&items(4), None, &mut |_| {});
        assert!(is_wrong(&wrong), "{wrong:?}");
        std::fs::copy(cache_file(&b, &items(4)), cache_file(&b, &items(2))).unwrap();
        let mut b = cached_bench(&dir);
        let poisoned = b.evaluate(&items(2), None, &mut |_| {});
        assert!(
            is_wrong(&poisoned),
            "ITEMS=2 ran ITEMS=4's binary: {poisoned:?}"
        );
        assert!(b
            .verify_at(&items(2), None, &Case::at(b.sizes.clone()), &mut |_| {})
            .unwrap()
            .is_ok());
        // And what follows the proof (the re-measurement) runs the source's build too.
        assert!(b.evaluate(&items(2), None, &mut |_| {}).time().is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The search's candidates share pooled input sets (drawn, and run by the reference, once
    /// per POOL_REUSES candidates); a finalist's verification always draws fresh ones. Wrong
    /// candidates fail either way.
    #[test]
    fn pooled_input_sets_are_shared_and_verification_draws_fresh_ones() {
        let mut b = bench();
        let start = b.draws.get();
        for round in 0..4 {
            for v in [1, 2] {
                assert!(
                    b.evaluate(&items(v), None, &mut |_| {}).time().is_some(),
                    "ITEMS={v}, round {round}"
                );
            }
        }
        let pooled = b.draws.get() - start;
        // sets 0, 1, 2 start having served 0, 2 and 5 of their 8: set 2 is renewed at the 4th
        // candidate and set 1 at the 7th (fresh sets every time would be 24)
        assert_eq!(pooled, 5, "8 candidates × 3 sets drew {pooled} sets");
        let wrong = b.evaluate(&items(4), None, &mut |_| {});
        assert!(
            matches!(
                wrong,
                Evaluation::Failed {
                    kind: FailureKind::Wrong,
                    ..
                }
            ),
            "{wrong:?}"
        );
        // Verification at the workload's sizes: 3 fresh sets (the reference passed its check
        // there when the bench was set up, and is not checked again).
        let before = b.draws.get();
        assert!(b
            .verify_at(&items(2), None, &Case::at(b.sizes.clone()), &mut |_| {})
            .unwrap()
            .is_ok());
        assert_eq!(b.draws.get() - before, 3);
        // At other sizes: the reference checked first (two runs), once.
        let other: Sizes = b.sizes.iter().map(|(k, v)| (k.clone(), v / 2)).collect();
        for checked in [true, false] {
            let before = b.draws.get();
            assert!(b
                .verify_at(&items(2), None, &Case::at(other.clone()), &mut |_| {})
                .unwrap()
                .is_ok());
            assert_eq!(b.draws.get() - before, if checked { 5 } else { 3 });
        }
        // The value-dependent bug is caught on fresh inputs as on pooled ones (4096 elements,
        // 3 sets: about 60 elements above 0.99).
        let verdict = b
            .verify_at(&items(8), None, &Case::at(b.sizes.clone()), &mut |_| {})
            .unwrap();
        assert!(matches!(verdict, Err(Rejection::Wrong(_))), "{verdict:?}");
        let timed = b.evaluate(&items(1), None, &mut |_| {});
        assert!(
            timed
                .measured()
                .iter()
                .any(|(name, noise)| name == TIMING_NOISE && noise.is_finite() && *noise >= 0.0),
            "{timed:?}"
        );
    }
}
