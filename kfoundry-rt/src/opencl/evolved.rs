//! An annotated kernel as embedded in a binary: its specification and tuned variants, and the
//! dispatch that picks, builds (once per context and device) and launches the right variant.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use ocl::core::{self, ClDeviceIdPtr};

use super::device::{describe, device_key, traits_from, traits_of};
use super::error::Error;
use super::launch::{build_program_from, create_kernel, Arg, LaunchPlan};
use super::session::Timing;
use crate::model::declared::declared_params;
use crate::model::device::{DeviceInfo, DeviceKey, DeviceTraits};
use crate::model::select::{choose, integer_scalars, Choice, Scalars, Step};
use crate::model::source_policy::{self, Policy};
use crate::model::spec::{KernelSpec, Params, Sizes};
use crate::model::variant::Variant;
use crate::model::variant::{check_unique, check_variant};

/// Identity of an OpenCL object by its handle. Cached programs retain their context and device,
/// so a handle cannot be reused by another object while it is a key here.
type Handle = usize;

/// An error about an embedded kernel: (kernel id when known, what was wrong).
type KernelError = (String, String);

/// One annotated kernel, as the `#[kfoundry::evolve]` macro embeds it: its specification, the
/// lockfile's variants for it and their generated sources, as JSON text in the binary (decoded
/// and checked against the annotation on first use). At each call, dispatch picks a variant
/// for the device and sizes ([`choose`]: exact device, same device, family, nearest device,
/// else the reference; only where a variant was proven), builds it once per context and device,
/// and launches it through a plan checked once per sizes. A variant that fails to build or
/// launch falls back to the reference; `explain` says what was chosen and why.
pub struct Evolved {
    spec_json: &'static str,
    variants_json: &'static str,
    /// Generated sources of source-level variants, as a JSON object hash → text.
    sources_json: &'static str,
    /// Decoded once; an error names the kernel (when known) and what was wrong.
    decoded: OnceLock<Result<Decoded, KernelError>>,
    /// Dispatch decisions by device and call sizes.
    choices: Mutex<BTreeMap<ChoiceKey, Arc<Choice>>>,
    /// Built kernels and launches ready to replay. One lock for both: a kernel object's
    /// arguments are shared state, so it is held while arguments are set and a kernel enqueued.
    built: Mutex<Built>,
}

type ProgramKey = (Handle, Handle, String, Vec<i64>);
/// Device, call sizes, and the call's integer scalars (`None` for `explain`).
type ChoiceKey = (Handle, Vec<i64>, Option<Vec<i64>>);

/// Entries a cache keyed by call sizes keeps before it starts afresh: a program that launches
/// at ever new sizes does not grow without bound.
pub const MAX_CACHED_SIZES: usize = 1024;

struct Built {
    /// Programs by context, device, source hash ("" for the annotated source) and params.
    programs: BTreeMap<ProgramKey, (core::Program, core::Kernel)>,
    /// What `launch` decided and checked on its first call with a context, device and sizes,
    /// by a hash of them: the step, the kernel and its [`LaunchPlan`]. Later calls with the
    /// same ones check only their arguments against the plan and enqueue.
    ready: BTreeMap<u64, Vec<Ready>>,
    ready_count: usize,
}

/// A dispatched launch ready to replay.
struct Ready {
    context: Handle,
    device: Handle,
    sizes: Vec<(String, usize)>,
    /// The call's integer scalars (dispatch depends on them).
    scalars: Vec<i64>,
    step: Step,
    kernel: core::Kernel,
    plan: LaunchPlan,
}

impl Built {
    fn ready(
        &self,
        context: Handle,
        device: Handle,
        sizes: &[(&str, usize)],
        scalars: &[i64],
    ) -> Option<&Ready> {
        let same = |r: &&Ready| {
            r.context == context
                && r.device == device
                && r.scalars == scalars
                && r.sizes.len() == sizes.len()
                && r.sizes
                    .iter()
                    .zip(sizes)
                    .all(|((a, x), (b, y))| a == b && x == y)
        };
        self.ready
            .get(&ready_hash(context, device, sizes, scalars))?
            .iter()
            .find(same)
    }

    fn remember(&mut self, ready: Ready) {
        if self.ready_count >= MAX_CACHED_SIZES {
            self.ready.clear();
            self.ready_count = 0;
        }
        let sizes: Vec<(&str, usize)> = ready.sizes.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let hash = ready_hash(ready.context, ready.device, &sizes, &ready.scalars);
        self.ready.entry(hash).or_default().push(ready);
        self.ready_count += 1;
    }
}

/// Keeps a dispatch decision, starting the cache afresh once it holds [`MAX_CACHED_SIZES`].
fn remember_choice(
    choices: &mut BTreeMap<ChoiceKey, Arc<Choice>>,
    key: ChoiceKey,
    choice: Arc<Choice>,
) {
    if choices.len() >= MAX_CACHED_SIZES && !choices.contains_key(&key) {
        choices.clear();
    }
    choices.insert(key, choice);
}

fn ready_hash(context: Handle, device: Handle, sizes: &[(&str, usize)], scalars: &[i64]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (context, device, sizes, scalars).hash(&mut h);
    h.finish()
}

/// The call's integer scalar arguments that are not sizes, in signature order (dispatch runs a
/// variant only at values it was verified with). A value of a `ulong` above `i64::MAX` is
/// taken as `i64::MAX`: no proof draws it.
fn call_scalars(spec: &KernelSpec, args: &[Arg<'_>]) -> Vec<i64> {
    use super::launch::Scalar;
    let mut out = Vec::new();
    for (arg, given) in spec.caller_args().zip(args) {
        if let (crate::model::signature::KernelArg::Scalar { ty, .. }, Arg::Scalar(s)) =
            (arg, given)
        {
            if ty.is_float() {
                continue;
            }
            out.push(match *s {
                Scalar::I8(v) => v.into(),
                Scalar::U8(v) => v.into(),
                Scalar::I16(v) => v.into(),
                Scalar::U16(v) => v.into(),
                Scalar::I32(v) => v.into(),
                Scalar::U32(v) => v.into(),
                Scalar::I64(v) => v,
                Scalar::U64(v) => i64::try_from(v).unwrap_or(i64::MAX),
                // a float given for an integer argument: the plan refuses the call
                Scalar::F32(_) | Scalar::F64(_) => 0,
            });
        }
    }
    out
}

/// The integer scalars of a call by name, for the dispatch rules.
fn scalars_by_name(spec: &KernelSpec, values: &[i64]) -> Scalars {
    integer_scalars(spec)
        .map(|(name, _)| name.to_string())
        .zip(values.iter().copied())
        .collect()
}

struct Decoded {
    spec: KernelSpec,
    variants: Vec<Variant>,
    sources: BTreeMap<String, String>,
}

/// What dispatch needs to know about a device: its key, when the driver reports it its
/// hardware description (`None`: the nearest-device step is skipped), and the properties
/// constraints read (every variant's constraints are re-checked against them).
#[derive(Clone)]
struct Identity {
    key: DeviceKey,
    info: Option<DeviceInfo>,
    traits: DeviceTraits,
}

fn identities() -> &'static Mutex<HashMap<Handle, Identity>> {
    static IDS: OnceLock<Mutex<HashMap<Handle, Identity>>> = OnceLock::new();
    IDS.get_or_init(Default::default)
}

/// The key and description of `device`, computed once per process.
fn identity(device: &ocl::Device) -> Result<Identity, Error> {
    let handle = device.as_core().as_ptr() as Handle;
    if let Some(id) = identities().lock().map_err(poisoned)?.get(&handle) {
        return Ok(id.clone());
    }
    let info = describe(device).ok();
    let traits = match &info {
        Some(described) => traits_from(device, described)?,
        None => traits_of(device)?,
    };
    let id = Identity {
        key: device_key(device)?,
        info,
        traits,
    };
    identities()
        .lock()
        .map_err(poisoned)?
        .insert(handle, id.clone());
    Ok(id)
}

/// A call's sizes as the model's (i64) sizes.
fn sizes_of(spec: &KernelSpec, sizes: &[(&str, usize)]) -> Result<Sizes, Error> {
    sizes
        .iter()
        .map(|(k, v)| {
            let v = i64::try_from(*v).map_err(|_| Error::Argument {
                kernel: spec.id.clone(),
                arg: k.to_string(),
                message: format!("size {v} is too large"),
            })?;
            Ok((k.to_string(), v))
        })
        .collect()
}

/// The device and context of `queue`, as error values (`ocl::Queue::device()` and `context()`
/// unwrap inside `ocl`).
fn queue_parts(queue: &ocl::Queue) -> Result<(ocl::Device, ocl::Context), Error> {
    let core = queue.as_core();
    Ok((
        ocl::Device::from(core.device()?),
        ocl::Context::from(core.context()?),
    ))
}

fn poisoned<T>(_: std::sync::PoisonError<T>) -> Error {
    Error::OpenCl("a kfoundry cache lock was poisoned by a panic in another thread".into())
}

/// A configuration of a kernel built for one device ([`Evolved::configure`]).
pub struct Configuration<'a> {
    spec: &'a KernelSpec,
    params: Params,
    kernel: core::Kernel,
    /// The properties of the device it was built for: each launch re-checks the constraints.
    traits: DeviceTraits,
    /// The plan of the last sizes launched (so that repeated launches at the same sizes share
    /// its checks and its scratch buffers).
    last: Mutex<Option<(Sizes, Arc<LaunchPlan>)>>,
    _program: core::Program,
}

impl Configuration<'_> {
    /// Enqueues the configuration at `sizes` on `queue` (which must have profiling enabled),
    /// every argument checked as by [`Evolved::launch`]; the returned [`Timing`] gives its run
    /// time on the device.
    ///
    /// # Safety
    ///
    /// As for [`Evolved::launch_params`]: unless the configuration is the reference or a
    /// variant the tuner verified at these sizes, the caller promises that it stays within the
    /// buffers the annotation declares.
    pub unsafe fn enqueue_profiled(
        &self,
        queue: &ocl::Queue,
        sizes: &[(&str, usize)],
        args: &[Arg<'_>],
    ) -> Result<Timing, Error> {
        let sizes = sizes_of(self.spec, sizes)?;
        let mut last = self.last.lock().map_err(poisoned)?;
        let plan = match last.as_ref() {
            Some((s, plan)) if *s == sizes => plan.clone(),
            _ => {
                let plan = Arc::new(LaunchPlan::new(
                    self.spec,
                    &self.params,
                    &sizes,
                    Some(&self.traits),
                )?);
                *last = Some((sizes, plan.clone()));
                plan
            }
        };
        let mut event = core::Event::null();
        plan.enqueue(self.spec, &self.kernel, queue, args, Some(&mut event))?;
        Ok(Timing::of(event))
    }
}

impl Evolved {
    /// Used by generated code: the spec as JSON and the variants (already filtered to the
    /// spec's fingerprint) as a JSON array.
    pub const fn new(spec_json: &'static str, variants_json: &'static str) -> Evolved {
        Evolved::with_sources(spec_json, variants_json, "{}")
    }

    /// Used by generated code: as [`Evolved::new`], plus the generated sources that
    /// source-level variants reference (a JSON object hash → OpenCL C text).
    pub const fn with_sources(
        spec_json: &'static str,
        variants_json: &'static str,
        sources_json: &'static str,
    ) -> Evolved {
        Evolved {
            spec_json,
            variants_json,
            sources_json,
            decoded: OnceLock::new(),
            choices: Mutex::new(BTreeMap::new()),
            built: Mutex::new(Built {
                programs: BTreeMap::new(),
                ready: BTreeMap::new(),
                ready_count: 0,
            }),
        }
    }

    fn decoded(&self) -> Result<&Decoded, Error> {
        let d = self.decoded.get_or_init(|| {
            let spec: KernelSpec = serde_json::from_str(self.spec_json)
                .map_err(|e| ("?".to_string(), format!("spec: {e}")))?;
            let fail = |message: String| (spec.id.clone(), message);
            if let Some(e) = spec.validate().into_iter().next() {
                return Err(fail(format!("spec: {e}")));
            }
            let variants: Vec<Variant> = serde_json::from_str(self.variants_json)
                .map_err(|e| fail(format!("variants: {e}")))?;
            let sources: BTreeMap<String, String> = serde_json::from_str(self.sources_json)
                .map_err(|e| fail(format!("generated sources: {e}")))?;
            // The macro embeds only checked variants; checked again here for `Evolved`s built by hand.
            check_unique(&variants).map_err(|twins| fail(twins.join("; ")))?;
            for v in &variants {
                let located = |e: String| {
                    fail(format!(
                        "variant for `{}` at `{}`: {e}",
                        v.device, v.workload
                    ))
                };
                let declared = match v.source.as_ref().and_then(|h| sources.get(h)) {
                    Some(text) => declared_params(text).map_err(|e| {
                        located(format!("generated source, line {}: {}", e.line, e.problem))
                    })?,
                    None => Vec::new(),
                };
                check_variant(&spec, v, &declared).map_err(located)?;
                if let Some(text) = v.source.as_ref().and_then(|h| sources.get(h)) {
                    let gpu = v.device_info.as_ref().is_some_and(|d| d.kind == "gpu");
                    source_policy::check(text, Policy { allow_asm: gpu })
                        .map_err(|e| located(format!("generated source, {e}")))?;
                }
            }
            Ok(Decoded {
                spec,
                variants,
                sources,
            })
        });
        d.as_ref().map_err(|(kernel, message)| Error::Embedded {
            kernel: kernel.clone(),
            message: message.clone(),
        })
    }

    /// The kernel's specification.
    pub fn spec(&self) -> Result<&KernelSpec, Error> {
        Ok(&self.decoded()?.spec)
    }

    /// The tuned variants embedded from `Kfoundry.lock` (all devices).
    pub fn variants(&self) -> Result<&[Variant], Error> {
        Ok(&self.decoded()?.variants)
    }

    /// The source a variant runs: its generated source, or the annotated one.
    fn source_of(&self, variant: Option<usize>) -> Result<(String, &str), Error> {
        let d = self.decoded()?;
        match variant
            .and_then(|i| d.variants.get(i))
            .and_then(|v| v.source.as_ref())
        {
            None => Ok((String::new(), d.spec.source.as_str())),
            Some(hash) => match d.sources.get(hash) {
                Some(text) => Ok((hash.clone(), text.as_str())),
                None => Err(Error::Embedded {
                    kernel: d.spec.id.clone(),
                    message: format!("generated source {hash} was not embedded"),
                }),
            },
        }
    }

    /// Which variant runs on `device` at `sizes`, and why (including a fallback to the
    /// reference after a foreign variant failed here).
    ///
    /// The call's integer scalar arguments are not known here: a variant that was verified with
    /// some values of them only is named with those values among the reasons (a call with
    /// other values runs the reference).
    ///
    /// Sizes that [`Evolved::launch`] refuses are refused here with the same error: a size that
    /// does not fit the kernel's integer argument, buffers whose byte counts overflow, a
    /// geometry that cannot be launched (the launch plan of what would run, made as a launch
    /// makes it before building anything).
    pub fn explain(&self, device: &ocl::Device, sizes: &[(&str, usize)]) -> Result<Choice, Error> {
        let spec = self.spec()?;
        let sizes = sizes_of(spec, sizes)?;
        let choice = self.choice(device, spec, &sizes, None)?;
        let traits = identity(device)?.traits;
        match LaunchPlan::new(spec, &choice.params, &sizes, Some(&traits)) {
            Ok(_) => {}
            Err(e) if e.is_callers() || choice.step == Step::Reference => return Err(e),
            // A variant that cannot be planned here is replaced by the reference for the call.
            Err(_) => {
                LaunchPlan::new(spec, &spec.reference, &sizes, Some(&traits))?;
            }
        }
        Ok(choice.as_ref().clone())
    }

    /// A kernel without integer scalars has one decision per device and sizes, whether a call
    /// or `explain` asks.
    fn choice_key(device: &ocl::Device, sizes: &Sizes, scalars: Option<&[i64]>) -> ChoiceKey {
        (
            device.as_core().as_ptr() as Handle,
            sizes.values().copied().collect(),
            scalars.filter(|s| !s.is_empty()).map(<[i64]>::to_vec),
        )
    }

    fn choice(
        &self,
        device: &ocl::Device,
        spec: &KernelSpec,
        sizes: &Sizes,
        scalars: Option<&[i64]>,
    ) -> Result<Arc<Choice>, Error> {
        let cache_key = Self::choice_key(device, sizes, scalars);
        if let Some(c) = self.choices.lock().map_err(poisoned)?.get(&cache_key) {
            return Ok(c.clone());
        }
        let here = identity(device)?;
        let named = scalars.map(|v| scalars_by_name(spec, v));
        let choice = Arc::new(
            choose(
                spec,
                self.variants()?,
                &here.key,
                here.info.as_ref(),
                Some(&here.traits),
                sizes,
                named.as_ref(),
            )
            .map_err(|source| Error::Sizes {
                kernel: spec.id.clone(),
                source,
            })?,
        );
        remember_choice(
            &mut *self.choices.lock().map_err(poisoned)?,
            cache_key,
            choice.clone(),
        );
        Ok(choice)
    }

    /// Runs the kernel on `queue`'s device: the variant chosen for that device and these sizes
    /// (built on first use in this context), else the reference. A tuned variant that fails to
    /// build here is replaced by the reference, for this call and every later one at these
    /// sizes (`explain` says why); one whose launch fails is replaced for this call. A mistake
    /// of the caller (a short buffer, a wrong argument, invalid sizes) is returned as an error,
    /// never run. Returns the dispatch step.
    pub fn launch(
        &self,
        queue: &ocl::Queue,
        sizes: &[(&str, usize)],
        args: &[Arg<'_>],
    ) -> Result<Step, Error> {
        let spec = self.spec()?;
        // The queue's context and device as handles (no reference counts touched).
        let handles = (
            queue.as_core().context_ptr()? as Handle,
            queue.as_core().device()?.as_ptr() as Handle,
        );
        let scalars = call_scalars(spec, args);
        {
            // After the first call with these sizes (and integer scalars) on this device: the
            // arguments checked against the plan, and the kernel enqueued.
            let built = self.built.lock().map_err(poisoned)?;
            if let Some(ready) = built.ready(handles.0, handles.1, sizes, &scalars) {
                match ready.plan.enqueue(spec, &ready.kernel, queue, args, None) {
                    Ok(()) => return Ok(ready.step),
                    Err(e) if e.is_callers() || ready.step == Step::Reference => return Err(e),
                    // A launch that failed may have met a passing shortage: the reference runs
                    // for this call only.
                    Err(_) => {
                        drop(built);
                        let (device, context) = queue_parts(queue)?;
                        let sizes = sizes_of(spec, sizes)?;
                        self.run(
                            queue,
                            &context,
                            &device,
                            spec,
                            None,
                            &spec.reference,
                            &sizes,
                            args,
                        )?;
                        return Ok(Step::Reference);
                    }
                }
            }
        }
        let (device, context) = queue_parts(queue)?;
        let call_sizes = sizes;
        let sizes = sizes_of(spec, sizes)?;
        let choice = self.choice(&device, spec, &sizes, Some(&scalars))?;
        // The first launch of `params` at these sizes here: built, planned, enqueued, and
        // remembered for the next calls (also when the caller's arguments were refused: the
        // plan holds for the sizes).
        let first = |step: Step, variant: Option<usize>, params: &Params| -> Result<(), Error> {
            let plan = LaunchPlan::new(spec, params, &sizes, Some(&identity(&device)?.traits))?;
            let kernel = self.kernel(&context, &device, spec, variant, params)?;
            let mut built = self.built.lock().map_err(poisoned)?;
            let result = plan.enqueue(spec, &kernel, queue, args, None);
            let sizes = call_sizes
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect();
            built.remember(Ready {
                context: handles.0,
                device: handles.1,
                sizes,
                scalars: scalars.clone(),
                step,
                kernel,
                plan,
            });
            result
        };
        let chosen = first(choice.step, choice.variant, &choice.params);
        match chosen {
            Err(e) if choice.step != Step::Reference && !e.is_callers() => {
                // A variant that does not build here never will: the reference from now on at
                // these sizes. A launch that failed may have met a passing shortage: this call
                // only.
                if matches!(e, Error::Build { .. }) {
                    let mut reasons = choice.reasons.clone();
                    reasons.push(format!(
                        "{}: failed to build on this device ({e}); the reference runs instead",
                        choice.step
                    ));
                    let fallback = Choice {
                        step: Step::Reference,
                        variant: None,
                        params: spec.reference.clone(),
                        reasons,
                    };
                    let fallback = Arc::new(fallback);
                    let mut choices = self.choices.lock().map_err(poisoned)?;
                    remember_choice(
                        &mut choices,
                        Self::choice_key(&device, &sizes, Some(&scalars)),
                        fallback.clone(),
                    );
                    // `explain` (which knows no scalars) says so too
                    remember_choice(
                        &mut choices,
                        Self::choice_key(&device, &sizes, None),
                        fallback,
                    );
                    drop(choices);
                    return first(Step::Reference, None, &spec.reference).map(|()| Step::Reference);
                }
                self.run(
                    queue,
                    &context,
                    &device,
                    spec,
                    None,
                    &spec.reference,
                    &sizes,
                    args,
                )?;
                Ok(Step::Reference)
            }
            result => result.map(|()| choice.step),
        }
    }

    /// Runs the plain reference kernel (for tests and benchmarks that compare against it). The
    /// reference is the annotation's own promise: it stays within the declared buffers.
    pub fn launch_reference(
        &self,
        queue: &ocl::Queue,
        sizes: &[(&str, usize)],
        args: &[Arg<'_>],
    ) -> Result<(), Error> {
        let spec = self.spec()?;
        // SAFETY: the reference parameters are the annotation's; what the reference kernel
        // touches is what its `buffers(...)` declare.
        unsafe { self.launch_params(queue, &spec.reference, sizes, args) }
    }

    /// Runs the configuration `params` (for tests and benchmarks that compare variants):
    /// exactly the kernel's parameters, each a value of its domain. Every argument is checked
    /// as by [`Evolved::launch`].
    ///
    /// # Safety
    ///
    /// Nothing has verified this configuration: unlike a dispatched variant, it was not checked
    /// by the tuner to stay within its buffers at these sizes. The caller promises that the
    /// kernel compiled with these parameters touches only what the annotation's `buffers(...)`
    /// declare (and writes nothing it should not).
    pub unsafe fn launch_params(
        &self,
        queue: &ocl::Queue,
        params: &Params,
        sizes: &[(&str, usize)],
        args: &[Arg<'_>],
    ) -> Result<(), Error> {
        let spec = self.spec()?;
        spec.check_params(params, &[])
            .map_err(|message| Error::Argument {
                kernel: spec.id.clone(),
                arg: "params".into(),
                message,
            })?;
        let sizes = sizes_of(spec, sizes)?;
        let (device, context) = queue_parts(queue)?;
        self.run(queue, &context, &device, spec, None, params, &sizes, args)
    }

    /// Builds configuration `params` (exactly the kernel's parameters, each of its domain) for
    /// `queue`'s device, to launch it again and again with profiling (benchmarks that time
    /// configurations; dispatch does not use it).
    pub fn configure(
        &self,
        queue: &ocl::Queue,
        params: &Params,
    ) -> Result<Configuration<'_>, Error> {
        let spec = self.spec()?;
        spec.check_params(params, &[])
            .map_err(|message| Error::Argument {
                kernel: spec.id.clone(),
                arg: "params".into(),
                message,
            })?;
        let (device, context) = queue_parts(queue)?;
        let program = build_program_from(
            spec,
            &spec.source,
            params,
            context.as_core(),
            device.as_core(),
        )?;
        let kernel = create_kernel(spec, &program)?;
        Ok(Configuration {
            spec,
            params: params.clone(),
            kernel,
            traits: identity(&device)?.traits,
            last: Mutex::new(None),
            _program: program,
        })
    }

    /// Launch plans kept (one per context, device and call sizes, at most
    /// [`MAX_CACHED_SIZES`]: a program calling at ever new sizes does not grow without bound).
    pub fn cached_launches(&self) -> usize {
        self.built.lock().map(|b| b.ready_count).unwrap_or(0)
    }

    /// Programs built so far (one per context, device and variant): dispatch after the first
    /// call of a variant reuses its program.
    pub fn cached_programs(&self) -> usize {
        self.built.lock().map(|b| b.programs.len()).unwrap_or(0)
    }

    /// The kernel of `variant` (`None`: the annotated source) with `params` for this context
    /// and device, built on first use.
    fn kernel(
        &self,
        context: &ocl::Context,
        device: &ocl::Device,
        spec: &KernelSpec,
        variant: Option<usize>,
        params: &Params,
    ) -> Result<core::Kernel, Error> {
        let (hash, source) = self.source_of(variant)?;
        let generated = !hash.is_empty();
        let key = (
            context.as_core().as_ptr() as Handle,
            device.as_core().as_ptr() as Handle,
            hash,
            params.values().copied().collect::<Vec<_>>(),
        );
        if let Some((_, kernel)) = self.built.lock().map_err(poisoned)?.programs.get(&key) {
            return Ok(kernel.clone());
        }
        // Built without the lock held: other kernels' launches go on meanwhile. When another
        // thread built the same one meanwhile, its kernel is kept and used. A generated source
        // is built after its prelude (what pasting could spell defined away, inline assembly too
        // on a device that is not a GPU), exactly as the tuner built it when it verified it.
        let guarded;
        let text = if generated {
            guarded = source_policy::generated_program(
                source,
                identity(device)?.traits.kind == "gpu",
                false,
            );
            guarded.as_str()
        } else {
            source
        };
        let program = build_program_from(spec, text, params, context.as_core(), device.as_core())?;
        let kernel = create_kernel(spec, &program)?;
        let mut built = self.built.lock().map_err(poisoned)?;
        Ok(built
            .programs
            .entry(key)
            .or_insert((program, kernel))
            .1
            .clone())
    }

    /// Launches `params` of `variant` once (no plan kept).
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        queue: &ocl::Queue,
        context: &ocl::Context,
        device: &ocl::Device,
        spec: &KernelSpec,
        variant: Option<usize>,
        params: &Params,
        sizes: &Sizes,
        args: &[Arg<'_>],
    ) -> Result<(), Error> {
        // Planned before it is built: what cannot run here (its constraints on this device,
        // its sizes) is never compiled.
        let plan = LaunchPlan::new(spec, params, sizes, Some(&identity(device)?.traits))?;
        let kernel = self.kernel(context, device, spec, variant, params)?;
        // The lock is held while arguments are set and the kernel enqueued: a kernel object's
        // arguments are shared state.
        let _built = self.built.lock().map_err(poisoned)?;
        plan.enqueue(spec, &kernel, queue, args, None)
    }
}
