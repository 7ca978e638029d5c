//! Evaluation of candidates on a real OpenCL device, as the spec demands: build with `-D`
//! parameters, run on fresh random inputs with poisoned outputs, compare with the reference's
//! output on the same inputs, then time with profiling events (warm-up, median of repeats).
//!
//! One [`Bench`] serves one kernel at one workload on one device. It lives in a worker process
//! ([`worker`]); the tuner's [`supervisor::Supervised`] talks to it and is what the search
//! engine sees, as a [`kfoundry_search::Evaluator`].

pub mod compare;
pub mod device_data;
pub mod inputs;
pub mod probe;
pub mod supervisor;
pub mod worker;

use std::time::Instant;

use kfoundry_rt::model::signature::{AddressSpace, KernelArg, ScalarType};
use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes};
use kfoundry_rt::opencl::launch::{build_program, build_program_from, create_kernel, enqueue, Arg, Scalar};
use kfoundry_rt::Error as RtError;
use kfoundry_search::{Config, Evaluation, FailureKind};
use ocl::core::{self, KernelWorkGroupInfo, KernelWorkGroupInfoResult, ProfilingInfo, ProfilingInfoResult};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use self::compare::{compare, Comparison};
use self::device_data::DeviceData;
use rand::Rng as _;
use self::inputs::{decode, draw_buffer, draw_scalar, poison_buffer};

/// How candidates are checked and timed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    /// Fresh input sets each candidate must pass (each with a new seed).
    pub input_sets: usize,
    /// Untimed runs before timing.
    pub warmup: usize,
    /// Timed runs; the median is the candidate's time.
    pub repeats: usize,
    /// Seed of the input generator.
    pub seed: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { input_sets: 3, warmup: 1, repeats: 5, seed: 0 }
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
        ErrorStats { max_abs: self.max_abs.max(other.max_abs), rel_norm: self.rel_norm.max(other.rel_norm) }
    }
}

/// Device limits checked before a candidate is built.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    pub max_work_group_size: usize,
    pub max_work_item_sizes: Vec<usize>,
    pub local_mem_bytes: u64,
    /// The reference kernel's preferred work-group size multiple (warp, wavefront or SIMD
    /// width), for the language model's description of the device.
    #[serde(default)]
    pub preferred_multiple: Option<u64>,
    /// Whether the device offers sub-groups (`cl_khr_subgroups` or `cl_intel_subgroups`).
    #[serde(default)]
    pub sub_groups: bool,
}

/// Constraints, geometry and device limits of one kernel at one workload.
pub struct Validity {
    spec: KernelSpec,
    sizes: Sizes,
    limits: Limits,
}

impl Validity {
    pub fn new(spec: KernelSpec, sizes: Sizes, limits: Limits) -> Validity {
        Validity { spec, sizes, limits }
    }

    pub fn check(&self, params: &Params) -> Result<(), String> {
        let g = self.spec.geometry(params, &self.sizes).map_err(|e| e.to_string())?;
        if let Some(local) = &g.local {
            let total: usize = local.iter().product();
            if total > self.limits.max_work_group_size {
                return Err(format!("work-group size {total} exceeds the device's {}", self.limits.max_work_group_size));
            }
            for (d, l) in local.iter().enumerate() {
                if self.limits.max_work_item_sizes.get(d).is_some_and(|m| l > m) {
                    return Err(format!("local size {l} in dimension {d} exceeds the device's limit"));
                }
            }
        }
        Ok(())
    }

    /// The engine's form: a configuration in parameter order.
    pub fn accepts(&self, config: &Config) -> bool {
        self.check(&params_of(&self.spec, config)).is_ok()
    }
}

struct Built {
    /// Kept alive for the kernel object.
    _program: ocl::Program,
    kernel: core::Kernel,
}

/// How one buffer is filled before a run.
enum Fill {
    /// Bytes from the host (small buffers).
    Host(Vec<u8>),
    /// Drawn on the device from a distribution with a seed (large float inputs).
    Draw { dist: kfoundry_rt::model::spec::Distribution, seed: u64 },
    /// Poisoned on the device (large outputs).
    Poison,
}

/// What one input set is made of: per buffer its name, type, length and filling.
struct Prepared {
    buffers: Vec<(String, ScalarType, usize, Fill)>,
    scalars: Vec<Scalar>,
}

/// Device buffers and scalars of one run.
struct Run {
    buffers: Vec<(String, ScalarType, ocl::Buffer<u8>)>,
    scalars: Vec<Scalar>,
}

/// Evaluates configurations of one kernel at one workload on one device.
pub struct Bench {
    pub spec: KernelSpec,
    pub sizes: Sizes,
    context: ocl::Context,
    queue: ocl::Queue,
    device: ocl::Device,
    limits: Limits,
    reference: Built,
    /// On-device drawing and comparison of large float buffers.
    device_data: DeviceData,
    settings: Settings,
    /// Input sets drawn so far (each gets its own seed).
    draws: std::cell::Cell<u64>,
    /// Build logs of failed candidates: (parameters, log).
    pub build_failures: Vec<(Params, String)>,
    /// Errors of the last candidate that passed verification.
    pub last_errors: Option<ErrorStats>,
}

/// Why a bench could not be set up (the reference itself is broken at this workload).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0}")]
    OpenCl(#[from] RtError),
    #[error("the reference does not run at workload sizes {sizes}: {message}")]
    Reference { sizes: String, message: String },
    #[error("the reference's output `{0}` does not change when the inputs change: a kernel writing constants would pass verification; check the annotation's inputs and check(...)")]
    InsensitiveOutput(String),
}

impl Bench {
    pub fn new(spec: &KernelSpec, sizes: &Sizes, platform: ocl::Platform, device: ocl::Device, settings: Settings) -> Result<Bench, SetupError> {
        let context = ocl::Context::builder().platform(platform).devices(device).build().map_err(RtError::from)?;
        let queue = ocl::Queue::new(&context, device, Some(ocl::CommandQueueProperties::PROFILING_ENABLE)).map_err(RtError::from)?;
        let limits = limits(&device)?;
        let reference_err = |message: String| SetupError::Reference { sizes: fmt_sizes(sizes), message };
        let program = build_program(spec, &spec.reference, &context, &device)?;
        let device_data = DeviceData::new(&context, &device, &queue)?;
        let kernel = create_kernel(spec, &program)?;
        let mut limits = limits;
        if let Ok(KernelWorkGroupInfoResult::PreferredWorkGroupSizeMultiple(m)) =
            core::get_kernel_work_group_info(&kernel, device.as_core(), KernelWorkGroupInfo::PreferredWorkGroupSizeMultiple)
        {
            limits.preferred_multiple = Some(m as u64);
        }
        let bench = Bench {
            spec: spec.clone(),
            sizes: sizes.clone(),
            context,
            queue,
            device,
            limits,
            reference: Built { _program: program, kernel },
            device_data,
            settings,
            draws: std::cell::Cell::new(0),
            build_failures: Vec::new(),
            last_errors: None,
        };
        bench.valid(&spec.reference).map_err(reference_err)?;
        // The reference must react to its inputs, or verification proves nothing.
        let a = bench.reference_run().map_err(reference_err)?;
        let b = bench.reference_run().map_err(reference_err)?;
        for check in &bench.spec.checks {
            let same = bench.compare_outputs(&check.buffer, &a, &b, 0.0, 0.0).map_err(|e| reference_err(e.to_string()))?;
            if same.ok() {
                return Err(SetupError::InsensitiveOutput(check.buffer.clone()));
            }
        }
        Ok(bench)
    }

    /// Is `params` launchable here: constraints, geometry and the device's work-group limits.
    pub fn valid(&self, params: &Params) -> Result<(), String> {
        self.validity().check(params)
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The validity check, detached from the bench (the search engine asks it before every
    /// evaluation, while the bench itself is busy evaluating).
    pub fn validity(&self) -> Validity {
        Validity { spec: self.spec.clone(), sizes: self.sizes.clone(), limits: self.limits.clone() }
    }

    fn fresh_rng(&self) -> ChaCha8Rng {
        let draw = self.draws.get() + 1;
        self.draws.set(draw);
        // A distinct stream per input set: never the same inputs twice.
        ChaCha8Rng::seed_from_u64(self.settings.seed ^ draw.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// How each buffer of one run of `params` is filled: inputs drawn (on the device when
    /// large), outputs poisoned; and the drawn scalars.
    fn prepare(&self, params: &Params, rng: &mut ChaCha8Rng) -> Result<Prepared, String> {
        let mut buffers = Vec::new();
        let mut scalars = Vec::new();
        for arg in &self.spec.signature.args {
            match arg {
                KernelArg::Buffer { space: AddressSpace::Local, .. } => {}
                KernelArg::Buffer { name, elem, read_only, .. } => {
                    let len = self.spec.buffer_len(name, params, &self.sizes).map_err(|e| e.to_string())?;
                    let on_device = *elem == ScalarType::F32 && len >= device_data::MIN_LEN;
                    let input = *read_only || self.spec.inputs.contains_key(name);
                    let fill = match (input, on_device) {
                        (true, true) => Fill::Draw { dist: self.spec.distribution(name), seed: rng.gen() },
                        (true, false) => Fill::Host(draw_buffer(*elem, len, self.spec.distribution(name), rng)),
                        (false, true) => Fill::Poison,
                        (false, false) => Fill::Host(poison_buffer(*elem, len)),
                    };
                    buffers.push((name.clone(), *elem, len, fill));
                }
                KernelArg::Scalar { name, .. } if self.spec.sizes.contains(name) => {}
                KernelArg::Scalar { name, ty } => scalars.push(draw_scalar(*ty, self.spec.distribution(name), rng)),
            }
        }
        Ok(Prepared { buffers, scalars })
    }

    /// Device buffers filled as prepared: the same preparation always gives the same contents.
    fn upload(&self, prepared: &Prepared) -> Result<Run, RtError> {
        let mut buffers = Vec::new();
        for (name, ty, len, fill) in &prepared.buffers {
            let builder = ocl::Buffer::<u8>::builder().queue(self.queue.clone()).len(len * ty.size());
            let b = match fill {
                Fill::Host(data) => builder.copy_host_slice(data).build()?,
                Fill::Draw { dist, seed } => {
                    let b = builder.build()?;
                    self.device_data.draw(&b, *len, *dist, *seed)?;
                    b
                }
                Fill::Poison => {
                    let b = builder.build()?;
                    self.device_data.poison(&b, len * ty.size())?;
                    b
                }
            };
            buffers.push((name.clone(), *ty, b));
        }
        Ok(Run { buffers, scalars: prepared.scalars.clone() })
    }

    /// Compares output `name` of two finished runs: on the device for large float buffers,
    /// else on the host.
    fn compare_outputs(&self, name: &str, cand: &Run, refr: &Run, rtol: f64, atol: f64) -> Result<Comparison, RtError> {
        let find = |run: &Run| {
            run.buffers.iter().find(|(n, _, _)| n == name).map(|(_, ty, b)| (*ty, b.clone())).ok_or_else(|| RtError::OpenCl(format!("no buffer `{name}`")))
        };
        let ((ty, c), (_, r)) = (find(cand)?, find(refr)?);
        let len = c.len() / ty.size();
        if ty == ScalarType::F32 && len >= device_data::MIN_LEN {
            return self.device_data.compare(&c, &r, len, rtol, atol);
        }
        let (mut x, mut y) = (vec![0u8; c.len()], vec![0u8; r.len()]);
        c.read(&mut x).enq()?;
        r.read(&mut y).enq()?;
        Ok(compare(len, |i| decode(ty, &x, i), |i| decode(ty, &y, i), rtol, atol))
    }

    /// One run of the reference on a fresh input set.
    fn reference_run(&self) -> Result<Run, String> {
        let mut rng = self.fresh_rng();
        let params = self.spec.reference.clone();
        let prepared = self.prepare(&params, &mut rng)?;
        let run = self.upload(&prepared).map_err(|e| e.to_string())?;
        self.launch(&self.reference.kernel, &params, &run, None).map_err(|e| e.to_string())?;
        self.queue.finish().map_err(|e| e.to_string())?;
        Ok(run)
    }

    fn launch(&self, kernel: &core::Kernel, params: &Params, run: &Run, event: Option<&mut core::Event>) -> Result<(), RtError> {
        let mut args: Vec<Arg> = Vec::new();
        let mut scalars = run.scalars.iter();
        let mut buffers = run.buffers.iter();
        for arg in &self.spec.signature.args {
            match arg {
                KernelArg::Buffer { space: AddressSpace::Local, .. } => {}
                KernelArg::Buffer { .. } => {
                    if let Some((_, _, b)) = buffers.next() {
                        args.push(Arg::Buffer(b.as_core()));
                    }
                }
                KernelArg::Scalar { name, .. } if self.spec.sizes.contains(name) => {}
                KernelArg::Scalar { .. } => {
                    if let Some(s) = scalars.next() {
                        args.push(Arg::Scalar(*s));
                    }
                }
            }
        }
        enqueue(&self.spec, kernel, &self.queue, params, &self.sizes, &args, event)
    }

    /// Builds, verifies and times `params` of the annotated source, or of `source` (a
    /// source-level variant with the same signature) when given.
    pub fn evaluate(&mut self, params: &Params, source: Option<&str>) -> Evaluation {
        let start = Instant::now();
        let cost = |start: Instant| start.elapsed().as_secs_f64();
        if let Err(reason) = self.valid(params) {
            return Evaluation::failed(FailureKind::Invalid, reason, cost(start));
        }
        let built = if *params == self.spec.reference && source.is_none() {
            None
        } else {
            let source = source.unwrap_or(&self.spec.source);
            match build_program_from(&self.spec, source, params, &self.context, &self.device).and_then(|p| {
                let k = create_kernel(&self.spec, &p)?;
                Ok(Built { _program: p, kernel: k })
            }) {
                Ok(b) => Some(b),
                Err(e) => {
                    let log = e.to_string();
                    self.build_failures.push((params.clone(), truncate(&log, 4000)));
                    return Evaluation::failed(FailureKind::Build, first_line(&log), cost(start));
                }
            }
        };
        let kernel = built.as_ref().map_or(&self.reference.kernel, |b| &b.kernel);
        let local_mem = match kernel_local_mem(kernel, &self.device) {
            Ok(bytes) if bytes > self.limits.local_mem_bytes => {
                return Evaluation::failed(
                    FailureKind::Invalid,
                    format!("uses {bytes} bytes of local memory, the device has {}", self.limits.local_mem_bytes),
                    cost(start),
                )
            }
            Ok(bytes) => bytes,
            Err(_) => 0,
        };
        if let Some(reason) = self.kernel_work_group_limit(kernel, params) {
            return Evaluation::failed(FailureKind::Invalid, reason, cost(start));
        }
        self.last_errors = None;
        let mut last_run = None;
        let mut errors = ErrorStats::default();
        for _ in 0..self.settings.input_sets.max(1) {
            match self.verify(kernel, params) {
                Ok((run, e)) => {
                    last_run = Some(run);
                    errors = errors.worst(e);
                }
                Err((kind, reason)) => return Evaluation::failed(kind, reason, cost(start)),
            }
        }
        self.last_errors = Some(errors);
        let Some(run) = last_run else {
            return Evaluation::failed(FailureKind::Runtime, "no run", cost(start));
        };
        match self.time(kernel, params, &run) {
            Ok(seconds) => Evaluation::Ok {
                time: seconds,
                cost: cost(start),
                descriptors: vec![("local_mem_bytes".to_string(), local_mem as f64)],
            },
            Err(e) => Evaluation::failed(FailureKind::Runtime, e.to_string(), cost(start)),
        }
    }

    fn kernel_work_group_limit(&self, kernel: &core::Kernel, params: &Params) -> Option<String> {
        let g = self.spec.geometry(params, &self.sizes).ok()?;
        let local: usize = g.local?.iter().product();
        match core::get_kernel_work_group_info(kernel, self.device.as_core(), KernelWorkGroupInfo::WorkGroupSize) {
            Ok(KernelWorkGroupInfoResult::WorkGroupSize(max)) if local > max => {
                Some(format!("work-group size {local} exceeds this kernel's limit {max} on the device"))
            }
            _ => None,
        }
    }

    /// One verification on a fresh input set: reference and candidate on the same inputs.
    fn verify(&self, kernel: &core::Kernel, params: &Params) -> Result<(Run, ErrorStats), (FailureKind, String)> {
        let runtime = |e: RtError| (FailureKind::Runtime, e.to_string());
        let mut rng = self.fresh_rng();
        let reference_params = self.spec.reference.clone();
        let prepared = self.prepare(params, &mut rng).map_err(|e| (FailureKind::Invalid, e))?;
        let ref_run = self.upload(&prepared).map_err(runtime)?;
        self.launch(&self.reference.kernel, &reference_params, &ref_run, None).map_err(runtime)?;
        let cand_run = self.upload(&prepared).map_err(runtime)?;
        self.launch(kernel, params, &cand_run, None).map_err(runtime)?;
        self.queue.finish().map_err(|e| runtime(e.into()))?;
        let mut errors = ErrorStats::default();
        for check in &self.spec.checks {
            let name = &check.buffer;
            let cmp: Comparison = self.compare_outputs(name, &cand_run, &ref_run, check.rtol, check.atol).map_err(runtime)?;
            let len = ref_run.buffers.iter().find(|(n, _, _)| n == name).map_or(0, |(_, ty, b)| b.len() / ty.size());
            if !cmp.ok() {
                let (i, x, want) = cmp.first.unwrap_or((0, 0.0, 0.0));
                return Err((
                    FailureKind::Wrong,
                    format!("`{name}`: {} of {len} elements differ (first at {i}: {x} vs {want}); max abs error {:.3e}", cmp.mismatches, cmp.max_abs),
                ));
            }
            errors = errors.worst(ErrorStats { max_abs: cmp.max_abs, rel_norm: cmp.rel_norm });
        }
        Ok((cand_run, errors))
    }

    /// Median kernel time over the repeats, in seconds, from profiling events.
    fn time(&self, kernel: &core::Kernel, params: &Params, run: &Run) -> Result<f64, RtError> {
        for _ in 0..self.settings.warmup {
            self.launch(kernel, params, run, None)?;
        }
        let mut times = Vec::with_capacity(self.settings.repeats);
        for _ in 0..self.settings.repeats.max(1) {
            let mut event = core::Event::null();
            self.launch(kernel, params, run, Some(&mut event))?;
            core::wait_for_event(&event)?;
            let start = match core::get_event_profiling_info(&event, ProfilingInfo::Start)? {
                ProfilingInfoResult::Start(t) => t,
                _ => 0,
            };
            let end = match core::get_event_profiling_info(&event, ProfilingInfo::End)? {
                ProfilingInfoResult::End(t) => t,
                _ => 0,
            };
            times.push(end.saturating_sub(start) as f64 * 1e-9);
        }
        Ok(median(&mut times))
    }

}

/// The engine's configuration (values in the spec's parameter order) as named parameters.
pub fn params_of(spec: &KernelSpec, config: &Config) -> Params {
    spec.params.iter().zip(config).map(|(p, v)| (p.name.clone(), *v)).collect()
}

/// The named parameters in the spec's order (the engine's form).
pub fn config_of(spec: &KernelSpec, params: &Params) -> Config {
    spec.params.iter().map(|p| params.get(&p.name).copied().unwrap_or(0)).collect()
}

fn limits(device: &ocl::Device) -> Result<Limits, RtError> {
    use ocl::core::{DeviceInfo as I, DeviceInfoResult as R};
    let get = |what| ocl::core::get_device_info(device.as_core(), what).map_err(RtError::from);
    let max_work_group_size = match get(I::MaxWorkGroupSize)? {
        R::MaxWorkGroupSize(v) => v,
        _ => 1,
    };
    let max_work_item_sizes = match get(I::MaxWorkItemSizes)? {
        R::MaxWorkItemSizes(v) => v,
        _ => vec![],
    };
    let local_mem_bytes = match get(I::LocalMemSize)? {
        R::LocalMemSize(v) => v,
        _ => 0,
    };
    let sub_groups = match get(I::Extensions) {
        Ok(R::Extensions(e)) => e.contains("cl_khr_subgroups") || e.contains("cl_intel_subgroups"),
        _ => false,
    };
    Ok(Limits { max_work_group_size, max_work_item_sizes, local_mem_bytes, preferred_multiple: None, sub_groups })
}

fn kernel_local_mem(kernel: &core::Kernel, device: &ocl::Device) -> Result<u64, RtError> {
    match core::get_kernel_work_group_info(kernel, device.as_core(), KernelWorkGroupInfo::LocalMemSize)? {
        KernelWorkGroupInfoResult::LocalMemSize(v) => Ok(v),
        _ => Ok(0),
    }
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

fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| l.contains("error")).or_else(|| text.lines().next()).unwrap_or("build failed");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }
}
