//! Building and enqueuing one configuration of a kernel: the primitives shared by dispatch in
//! shipped binaries and by the tuner's evaluator.

use std::ffi::CString;

use ocl::core::{self, ArgVal};

use super::error::Error;
use crate::model::declared::declared_params;
use crate::model::device::DeviceTraits;
use crate::model::signature::{KernelArg, ScalarType};
use crate::model::spec::{ArgRole, Geometry, KernelSpec, Params, Sizes};

/// A scalar kernel argument value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    F32(f32),
    F64(f64),
    I8(i8),
    U8(u8),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
}

impl Scalar {
    /// An integer converted to `ty`, or `None` when it does not fit.
    pub fn from_int(ty: ScalarType, v: i64) -> Option<Scalar> {
        Some(match ty {
            ScalarType::F32 => Scalar::F32(v as f32),
            ScalarType::F64 => Scalar::F64(v as f64),
            ScalarType::I8 => Scalar::I8(v.try_into().ok()?),
            ScalarType::U8 => Scalar::U8(v.try_into().ok()?),
            ScalarType::I16 => Scalar::I16(v.try_into().ok()?),
            ScalarType::U16 => Scalar::U16(v.try_into().ok()?),
            ScalarType::I32 => Scalar::I32(v.try_into().ok()?),
            ScalarType::U32 => Scalar::U32(v.try_into().ok()?),
            ScalarType::I64 => Scalar::I64(v),
            ScalarType::U64 => Scalar::U64(v.try_into().ok()?),
            // 16-bit floats are buffers only (the signature refuses them by value).
            ScalarType::F16 | ScalarType::Bf16 => return None,
        })
    }

    /// A real number converted to `ty` (integers are rounded; used for drawn inputs).
    pub fn from_f64(ty: ScalarType, v: f64) -> Scalar {
        match ty {
            ScalarType::F32 => Scalar::F32(v as f32),
            ScalarType::F64 => Scalar::F64(v),
            _ => Scalar::from_int(ty, v.round() as i64).unwrap_or(Scalar::I64(0)),
        }
    }

    pub(crate) fn arg_val(&self) -> ArgVal<'_> {
        match self {
            Scalar::F32(v) => ArgVal::scalar(v),
            Scalar::F64(v) => ArgVal::scalar(v),
            Scalar::I8(v) => ArgVal::scalar(v),
            Scalar::U8(v) => ArgVal::scalar(v),
            Scalar::I16(v) => ArgVal::scalar(v),
            Scalar::U16(v) => ArgVal::scalar(v),
            Scalar::I32(v) => ArgVal::scalar(v),
            Scalar::U32(v) => ArgVal::scalar(v),
            Scalar::I64(v) => ArgVal::scalar(v),
            Scalar::U64(v) => ArgVal::scalar(v),
        }
    }
}

impl Scalar {
    /// The kernel argument type this value has.
    pub fn ty(&self) -> ScalarType {
        match self {
            Scalar::F32(_) => ScalarType::F32,
            Scalar::F64(_) => ScalarType::F64,
            Scalar::I8(_) => ScalarType::I8,
            Scalar::U8(_) => ScalarType::U8,
            Scalar::I16(_) => ScalarType::I16,
            Scalar::U16(_) => ScalarType::U16,
            Scalar::I32(_) => ScalarType::I32,
            Scalar::U32(_) => ScalarType::U32,
            Scalar::I64(_) => ScalarType::I64,
            Scalar::U64(_) => ScalarType::U64,
        }
    }
}

/// An argument supplied by the caller: the spec's [`KernelSpec::caller_args`], in signature
/// order (every buffer except `__local` ones, and every scalar that is not a size).
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Buffer(&'a core::Mem),
    Scalar(Scalar),
}

/// Compiles `source` (the spec's own, or a generated source-level variant of it with the same
/// signature) with `params` as `-D` definitions for one device. `params` must name exactly the
/// spec's parameters and those the source itself declares (`// kfoundry-params:`): nothing
/// else reaches the compiler's options.
pub fn build_program_from(
    spec: &KernelSpec,
    source: &str,
    params: &Params,
    context: &core::Context,
    device: &core::DeviceId,
) -> Result<core::Program, Error> {
    let options = build_options_for(spec, source, params)?;
    build_source(context, device, &spec.id, source, &options)
}

/// Compiles `source` with `options` for `device` (through `ocl`'s core calls, which return
/// every failure, the compiler's log included, as a value).
pub fn build_source(
    context: &core::Context,
    device: &core::DeviceId,
    id: &str,
    source: &str,
    options: &str,
) -> Result<core::Program, Error> {
    let fail = build_error(id, options);
    let text = std::ffi::CString::new(source)
        .map_err(|_| fail("the source contains a NUL byte".into()))?;
    let opts = options_text(options, &fail)?;
    let program =
        core::create_program_with_source(context, &[text]).map_err(|e| fail(e.to_string()))?;
    core::build_program(&program, Some(&[*device]), &opts, None, None)
        .map_err(|e| fail(e.to_string()))?;
    Ok(program)
}

/// Builds a program for `device` from `binary` (a program binary of the same device and
/// driver) with the `options` it was built from. A failure (a binary the driver does not
/// take) carries the driver's message.
pub fn build_binary(
    context: &core::Context,
    device: &core::DeviceId,
    id: &str,
    binary: &[u8],
    options: &str,
) -> Result<core::Program, Error> {
    let fail = build_error(id, options);
    let opts = options_text(options, &fail)?;
    let program = core::create_program_with_binary(context, &[*device], &[binary])
        .map_err(|e| fail(e.to_string()))?;
    core::build_program(&program, Some(&[*device]), &opts, None, None)
        .map_err(|e| fail(e.to_string()))?;
    Ok(program)
}

/// The [`Error::Build`] of kernel `id` built with `options`, from the compiler's (or the
/// driver's) message.
fn build_error<'a>(id: &'a str, options: &'a str) -> impl Fn(String) -> Error + 'a {
    move |log| Error::Build {
        kernel: id.to_string(),
        options: options.to_string(),
        log,
    }
}

/// `options` as the C string the compiler takes.
fn options_text(options: &str, fail: &impl Fn(String) -> Error) -> Result<CString, Error> {
    CString::new(options).map_err(|_| fail("the options contain a NUL byte".into()))
}

/// The build options of configuration `params` of `spec` built from `source`: `params` must
/// name exactly the spec's parameters and those `source` itself declares
/// (`// kfoundry-params:`), so nothing else reaches the compiler's options.
pub fn build_options_for(
    spec: &KernelSpec,
    source: &str,
    params: &Params,
) -> Result<String, Error> {
    let declared = if source == spec.source {
        Vec::new()
    } else {
        declared_params(source).map_err(|e| Error::Embedded {
            kernel: spec.id.clone(),
            message: format!("generated source, line {}: {}", e.line, e.problem),
        })?
    };
    spec.build_options(params, &declared)
        .map_err(|source| Error::Sizes {
            kernel: spec.id.clone(),
            source,
        })
}

/// Creates the kernel object of the spec's entry point.
pub fn create_kernel(spec: &KernelSpec, program: &core::Program) -> Result<core::Kernel, Error> {
    Ok(core::create_kernel(program, &spec.signature.name)?)
}

/// One kernel argument as a launch plan knows it.
enum Slot {
    /// `__local` memory of this many bytes.
    Local(usize),
    /// A size, from the call's sizes.
    Size(Scalar),
    /// The caller's next buffer: it must hold at least `bytes` (`len` elements of `elem`).
    /// `written`: the kernel may write it (not `const`); `in_place`: the buffer argument it may
    /// be exactly (`in_place(...)` of the annotation).
    Buffer {
        name: String,
        elem: ScalarType,
        len: usize,
        bytes: usize,
        written: bool,
        in_place: Option<String>,
    },
    /// The caller's next scalar: it must have type `ty`.
    Scalar { name: String, ty: ScalarType },
    /// A buffer the launcher owns (`scratch(...)`) of `bytes`, all zero at every launch.
    Scratch { name: String, bytes: usize },
}

impl Slot {
    /// Whether the caller supplies this argument.
    fn is_callers(&self) -> bool {
        matches!(self, Slot::Buffer { .. } | Slot::Scalar { .. })
    }
}

/// One configuration of a kernel at one set of sizes, checked and computed once: the geometry
/// (constraints, positive sizes, local dividing global), the `__local` memory and size
/// arguments, and the length each caller buffer must have. Launching it again only checks
/// the caller's arguments against it, sets them and enqueues: this is what keeps dispatch in
/// a shipped binary cheap after the first call at given sizes (no expression is evaluated and
/// no map of names built per launch).
pub struct LaunchPlan {
    geometry: FixedGeometry,
    slots: Vec<Slot>,
    /// The buffers (and the queue's context) of the last call whose memory checks passed, and
    /// the [`watch::generation`] then: a later call with the same handles skips the checks while
    /// none of the watched buffers was destroyed (a destroyed buffer's handle could be reused
    /// by a new one with other memory).
    checked: std::sync::Mutex<Option<(Vec<usize>, u64)>>,
    /// The scratch buffers of each queue the plan was enqueued on (`scratch(...)`): made and
    /// zeroed at the first launch there, then left zero by every launch (the kernel's promise,
    /// the proof's check). A queue of its own each, so launches on two queues never share one.
    scratch: std::sync::Mutex<Vec<OwnedScratch>>,
}

/// The most queues a launch plan keeps scratch buffers for.
const MAX_SCRATCH_QUEUES: usize = 8;

/// The scratch buffers of one queue: the queue is held, so its handle is never another's.
struct OwnedScratch {
    queue: ocl::Queue,
    buffers: Vec<core::Mem>,
}

impl LaunchPlan {
    /// The plan of `params` at `sizes` on a device with `device`'s properties (`None`: the
    /// constraints that read device properties are not checked), or why it cannot be launched
    /// there.
    pub fn new(
        spec: &KernelSpec,
        params: &Params,
        sizes: &Sizes,
        device: Option<&DeviceTraits>,
    ) -> Result<LaunchPlan, Error> {
        let geometry = spec
            .geometry(params, sizes, device)
            .map_err(|source| Error::Sizes {
                kernel: spec.id.clone(),
                source,
            })?;
        let geometry = FixedGeometry::of(spec, &geometry)?;
        let arg_error = |arg: &str, message: String| Error::Argument {
            kernel: spec.id.clone(),
            arg: arg.to_string(),
            message,
        };
        let mut slots = Vec::with_capacity(spec.signature.args.len());
        for (arg, role) in spec.args_with_roles() {
            let name = arg.name();
            let bytes_of = |elem: &ScalarType| -> Result<(usize, usize), Error> {
                let len = spec
                    .buffer_len(name, params, sizes)
                    .map_err(|e| arg_error(name, e.to_string()))?;
                let bytes = len.checked_mul(elem.size()).ok_or_else(|| {
                    arg_error(name, format!("{len} elements overflow a byte count"))
                })?;
                Ok((len, bytes))
            };
            slots.push(match (arg, role) {
                (KernelArg::Buffer { elem, .. }, ArgRole::LocalMemory) => {
                    Slot::Local(bytes_of(elem)?.1)
                }
                (KernelArg::Buffer { elem, .. }, ArgRole::Scratch) => Slot::Scratch {
                    name: name.to_string(),
                    bytes: bytes_of(elem)?.1,
                },
                (KernelArg::Scalar { ty, .. }, ArgRole::Size) => {
                    let v = sizes
                        .get(name)
                        .copied()
                        .ok_or_else(|| arg_error(name, "size not given".into()))?;
                    let s = Scalar::from_int(*ty, v).ok_or_else(|| {
                        arg_error(
                            name,
                            format!("size {v} does not fit the kernel's `{}`", ty.opencl_name()),
                        )
                    })?;
                    Slot::Size(s)
                }
                (
                    KernelArg::Buffer {
                        elem, read_only, ..
                    },
                    _,
                ) => {
                    let (len, bytes) = bytes_of(elem)?;
                    let in_place = spec.in_place.get(name).cloned();
                    Slot::Buffer {
                        name: name.to_string(),
                        elem: *elem,
                        len,
                        bytes,
                        written: !read_only,
                        in_place,
                    }
                }
                (KernelArg::Scalar { ty, .. }, _) => Slot::Scalar {
                    name: name.to_string(),
                    ty: *ty,
                },
            });
        }
        Ok(LaunchPlan {
            geometry,
            slots,
            checked: std::sync::Mutex::new(None),
            scratch: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The bytes of each scratch buffer (`scratch(...)`) in signature order, by name.
    pub fn scratch_bytes(&self) -> impl Iterator<Item = (&str, usize)> {
        self.slots.iter().filter_map(|s| match s {
            Slot::Scratch { name, bytes } => Some((name.as_str(), *bytes)),
            _ => None,
        })
    }

    /// The plan's own scratch buffers on `queue` (none for a kernel without `scratch(...)`),
    /// made (all zero) at the first launch there. An out-of-order queue is refused: two
    /// launches of the plan could run at once on one scratch.
    fn owned_scratch(
        &self,
        spec: &KernelSpec,
        queue: &ocl::Queue,
    ) -> Result<Vec<core::Mem>, Error> {
        if self.scratch_bytes().next().is_none() {
            return Ok(Vec::new());
        }
        let mut owned = self
            .scratch
            .lock()
            .map_err(|_| Error::OpenCl("a scratch lock was poisoned".into()))?;
        let handle = queue.as_core().as_ptr();
        if let Some(o) = owned.iter().find(|o| o.queue.as_core().as_ptr() == handle) {
            return Ok(o.buffers.clone());
        }
        if let core::CommandQueueInfoResult::Properties(p) =
            core::get_command_queue_info(queue.as_core(), core::CommandQueueInfo::Properties)?
        {
            if p.contains(core::CommandQueueProperties::OUT_OF_ORDER_EXEC_MODE_ENABLE) {
                return Err(Error::Argument {
                    kernel: spec.id.clone(),
                    arg: "(queue)".into(),
                    message: "the kernel has scratch buffers (`scratch(...)`), which two launches must not share: launch it on an in-order queue".into(),
                });
            }
        }
        let context = queue.context();
        let mut buffers = Vec::new();
        for (_, bytes) in self.scratch_bytes() {
            let bytes = bytes.max(4);
            let zeros = vec![0u8; bytes];
            // SAFETY: `zeros` is `bytes` long and outlives the call (COPY_HOST_PTR copies it
            // before the call returns).
            let mem = unsafe {
                core::create_buffer(
                    &context,
                    core::MEM_READ_WRITE | core::MEM_COPY_HOST_PTR,
                    bytes,
                    Some(&zeros),
                )?
            };
            buffers.push(mem);
        }
        // Queues nobody else holds any more are let go with their scratch (a program that makes
        // a queue per request does not keep them all), and at most MAX_SCRATCH_QUEUES are kept
        // (a dropped set is made anew, all zero, if its queue comes back; OpenCL frees it only
        // once the launches using it are done).
        owned.retain(|o| {
            !matches!(
                core::get_command_queue_info(
                    o.queue.as_core(),
                    core::CommandQueueInfo::ReferenceCount
                ),
                Ok(core::CommandQueueInfoResult::ReferenceCount(1))
            )
        });
        if owned.len() >= MAX_SCRATCH_QUEUES {
            owned.remove(0);
        }
        owned.push(OwnedScratch {
            queue: queue.clone(),
            buffers: buffers.clone(),
        });
        Ok(buffers)
    }

    /// Checks `args` (the caller's arguments in signature order) against the plan, then sets
    /// every argument of `kernel` and enqueues it on `queue`. With `event`, the launch is
    /// recorded in it (for profiling). Nothing is set or enqueued unless every check passes.
    /// `spec` is the plan's (for the messages).
    pub fn enqueue(
        &self,
        spec: &KernelSpec,
        kernel: &core::Kernel,
        queue: &ocl::Queue,
        args: &[Arg<'_>],
        event: Option<&mut core::Event>,
    ) -> Result<(), Error> {
        self.enqueue_using(spec, kernel, queue, args, None, event)
    }

    /// As [`LaunchPlan::enqueue`], with the scratch buffers given (the tuner's, with guard
    /// zones around them) instead of the plan's own: one for each of the plan's
    /// ([`LaunchPlan::scratch_bytes`]) in order, each at least that long and all zero, which
    /// the caller promises.
    pub fn enqueue_with_scratch(
        &self,
        spec: &KernelSpec,
        kernel: &core::Kernel,
        queue: &ocl::Queue,
        args: &[Arg<'_>],
        scratch: &[&core::Mem],
        event: Option<&mut core::Event>,
    ) -> Result<(), Error> {
        self.enqueue_using(spec, kernel, queue, args, Some(scratch), event)
    }

    /// Checks the caller's arguments and the scratch buffers (`given`, or the plan's own on
    /// `queue`), then sets every argument and enqueues.
    fn enqueue_using(
        &self,
        spec: &KernelSpec,
        kernel: &core::Kernel,
        queue: &ocl::Queue,
        args: &[Arg<'_>],
        given: Option<&[&core::Mem]>,
        event: Option<&mut core::Event>,
    ) -> Result<(), Error> {
        self.check(spec, args)?;
        self.check_memory(spec, queue, args)?;
        let owned;
        let scratch: Vec<&core::Mem> = match given {
            Some(scratch) => {
                self.check_scratch(spec, scratch)?;
                scratch.to_vec()
            }
            None => {
                owned = self.owned_scratch(spec, queue)?;
                owned.iter().collect()
            }
        };
        self.set_and_enqueue(kernel, queue, args, &scratch, event)
    }

    /// `scratch` has one buffer for each of the plan's scratch buffers, each long enough.
    fn check_scratch(&self, spec: &KernelSpec, scratch: &[&core::Mem]) -> Result<(), Error> {
        let wanted: Vec<(&str, usize)> = self.scratch_bytes().collect();
        if wanted.len() != scratch.len() {
            return Err(Error::OpenCl(format!(
                "{} scratch buffer(s) given, kernel `{}` has {}",
                scratch.len(),
                spec.id,
                wanted.len()
            )));
        }
        for ((name, bytes), mem) in wanted.iter().zip(scratch) {
            let given = match core::get_mem_object_info(mem, core::MemInfo::Size)? {
                core::MemInfoResult::Size(b) => b,
                _ => 0,
            };
            if given < *bytes {
                return Err(Error::Argument {
                    kernel: spec.id.clone(),
                    arg: name.to_string(),
                    message: format!("scratch of {given} bytes given, the launch needs {bytes}"),
                });
            }
        }
        Ok(())
    }

    /// Sets every argument (`args` checked by the caller) and enqueues the kernel.
    fn set_and_enqueue(
        &self,
        kernel: &core::Kernel,
        queue: &ocl::Queue,
        args: &[Arg<'_>],
        scratch: &[&core::Mem],
        event: Option<&mut core::Event>,
    ) -> Result<(), Error> {
        let mut supplied = args.iter();
        let mut scratch = scratch.iter();
        for (index, slot) in self.slots.iter().enumerate() {
            let index = u32::try_from(index)
                .map_err(|_| Error::OpenCl("too many kernel arguments".into()))?;
            match slot {
                Slot::Local(bytes) => {
                    core::set_kernel_arg(kernel, index, ArgVal::local::<u8>(bytes))?
                }
                Slot::Size(s) => core::set_kernel_arg(kernel, index, s.arg_val())?,
                Slot::Scratch { .. } => match scratch.next() {
                    Some(mem) => core::set_kernel_arg(kernel, index, ArgVal::mem(mem))?,
                    None => return Err(Error::OpenCl("fewer scratch buffers than checked".into())),
                },
                Slot::Buffer { .. } | Slot::Scalar { .. } => match supplied.next() {
                    Some(Arg::Buffer(mem)) => {
                        core::set_kernel_arg(kernel, index, ArgVal::mem(mem))?
                    }
                    Some(Arg::Scalar(s)) => core::set_kernel_arg(kernel, index, s.arg_val())?,
                    None => return Err(Error::OpenCl("fewer arguments than checked".into())),
                },
            }
        }
        // SAFETY: `check` found, before any argument was set, that `args` are exactly the
        // caller's arguments: each buffer a live memory object (borrowed for this call) holding
        // at least the annotation's length at the plan's sizes, each scalar of the kernel's
        // type; `__local` memory and sizes come from the plan, scratch buffers from the plan or
        // checked as long as it needs, so every argument of `kernel` is set. The plan's
        // geometry was checked against the spec (1 to 3 positive dimensions, local dividing
        // global, the constraints holding). What the kernel then touches is the annotation's
        // promise for the reference; for a dispatched variant, what the tuner
        // verified (guard zones before and after every buffer) at sizes spanning those it may
        // run at; for `launch_params`, the promise its `unsafe` caller made.
        unsafe {
            let g = &self.geometry;
            core::enqueue_kernel(
                queue.as_core(),
                kernel,
                g.dims,
                None,
                &g.global,
                g.local,
                None::<core::Event>,
                event,
            )?;
        }
        Ok(())
    }

    /// `args` are exactly the caller's arguments of the plan: their number, each scalar's
    /// type, and each buffer's size (as OpenCL reports the memory object's size).
    fn check(&self, spec: &KernelSpec, args: &[Arg<'_>]) -> Result<(), Error> {
        let arg_error = |arg: &str, message: String| Error::Argument {
            kernel: spec.id.clone(),
            arg: arg.to_string(),
            message,
        };
        let callers = self.slots.iter().filter(|s| s.is_callers()).count();
        if args.len() != callers {
            return Err(arg_error(
                "(all)",
                format!(
                    "{} argument(s) given, the kernel takes {callers} from the caller ({})",
                    args.len(),
                    caller_names(spec)
                ),
            ));
        }
        for (slot, arg) in self.slots.iter().filter(|s| s.is_callers()).zip(args) {
            match (slot, arg) {
                (
                    Slot::Buffer {
                        name,
                        elem,
                        len,
                        bytes,
                        ..
                    },
                    Arg::Buffer(mem),
                ) => {
                    let given = match core::get_mem_object_info(mem, core::MemInfo::Size)? {
                        core::MemInfoResult::Size(bytes) => bytes,
                        _ => 0,
                    };
                    if given < *bytes {
                        let length = spec
                            .buffers
                            .get(name)
                            .map(|e| format!(" (`{e}`)"))
                            .unwrap_or_default();
                        return Err(Error::BufferTooSmall {
                            kernel: spec.id.clone(),
                            arg: name.clone(),
                            elem: elem.opencl_name(),
                            needed: *len,
                            given: given / elem.size(),
                            length,
                        });
                    }
                }
                (Slot::Buffer { name, elem, .. }, Arg::Scalar(_)) => {
                    return Err(arg_error(
                        name,
                        format!("expected a buffer of `{}`", elem.opencl_name()),
                    ))
                }
                (Slot::Scalar { ty, .. }, Arg::Scalar(s)) if s.ty() == *ty => {}
                (Slot::Scalar { name, ty }, Arg::Scalar(s)) => {
                    return Err(arg_error(
                        name,
                        format!(
                            "expected a `{}`, given a `{}`",
                            ty.opencl_name(),
                            s.ty().opencl_name()
                        ),
                    ))
                }
                (Slot::Scalar { name, ty }, Arg::Buffer(_)) => {
                    return Err(arg_error(
                        name,
                        format!("expected a scalar `{}`", ty.opencl_name()),
                    ))
                }
                (Slot::Local(_) | Slot::Size(_) | Slot::Scratch { .. }, _) => {}
            }
        }
        Ok(())
    }
    /// The caller's buffers belong to the queue's context, and no buffer the kernel writes is,
    /// or overlaps, another buffer argument (except the exact aliasing `in_place(...)` declares):
    /// the tuner verified every variant with buffers of their own, and a variant right out of
    /// place can be wrong in place. Overlap is of the bytes the call uses (the annotation's
    /// lengths) within one memory object (sub-buffers share their parent's), or of the host
    /// memory two buffers were created over (`CL_MEM_USE_HOST_PTR`).
    fn check_memory(
        &self,
        spec: &KernelSpec,
        queue: &ocl::Queue,
        args: &[Arg<'_>],
    ) -> Result<(), Error> {
        let context = queue.as_core().context_ptr()? as usize;
        // The same buffers as the last call that passed, none destroyed since: what was
        // checked still holds (a memory object's context, parent, offset and host memory never
        // change).
        let mut key: Vec<usize> = args
            .iter()
            .filter_map(|a| {
                if let Arg::Buffer(m) = a {
                    Some(m.as_ptr() as usize)
                } else {
                    None
                }
            })
            .collect();
        key.push(context);
        let generation = watch::generation();
        if self.checked.lock().ok().is_some_and(|c| {
            c.as_ref()
                .is_some_and(|(k, g)| *k == key && *g == generation)
        }) {
            return Ok(());
        }
        self.check_memory_now(spec, context, args)?;
        for a in args {
            if let Arg::Buffer(m) = a {
                watch::watch(m);
            }
        }
        if let Ok(mut c) = self.checked.lock() {
            *c = Some((key, generation));
        }
        Ok(())
    }

    fn check_memory_now(
        &self,
        spec: &KernelSpec,
        context: usize,
        args: &[Arg<'_>],
    ) -> Result<(), Error> {
        let buffers: Vec<(&Slot, &core::Mem)> = self
            .slots
            .iter()
            .filter(|s| s.is_callers())
            .zip(args)
            .filter_map(|(slot, arg)| match (slot, arg) {
                (Slot::Buffer { .. }, Arg::Buffer(mem)) => Some((slot, *mem)),
                _ => None,
            })
            .collect();
        let mut regions = Vec::with_capacity(buffers.len());
        for (slot, mem) in &buffers {
            let Slot::Buffer { name, bytes, .. } = slot else {
                continue;
            };
            let owner = match core::get_mem_object_info(mem, core::MemInfo::Context)? {
                core::MemInfoResult::Context(c) => c.as_ptr() as usize,
                _ => 0,
            };
            if owner != context {
                return Err(Error::Argument {
                    kernel: spec.id.clone(),
                    arg: name.clone(),
                    message: "the buffer belongs to another OpenCL context than the queue's".into(),
                });
            }
            regions.push(Region::of(mem, *bytes)?);
        }
        if !buffers
            .iter()
            .any(|(s, _)| matches!(s, Slot::Buffer { written: true, .. }))
        {
            return Ok(());
        }
        for (i, (slot, _)) in buffers.iter().enumerate() {
            let Slot::Buffer {
                name: written,
                written: true,
                in_place,
                ..
            } = slot
            else {
                continue;
            };
            for (j, (other, _)) in buffers.iter().enumerate() {
                let Slot::Buffer {
                    name: other_name, ..
                } = other
                else {
                    continue;
                };
                if i == j {
                    continue;
                }
                let (a, b) = (&regions[i], &regions[j]);
                let how = if a.same_start(b) {
                    "is the same memory as"
                } else if a.overlaps(b) {
                    "overlaps"
                } else {
                    continue;
                };
                let declared = in_place.as_deref() == Some(other_name.as_str())
                    || matches!(other, Slot::Buffer { in_place: Some(w), .. } if w == written);
                if declared && how == "is the same memory as" {
                    continue;
                }
                let hint = if declared {
                    String::new()
                } else {
                    format!(", or declare `in_place({written} = {other_name})` in the annotation if the kernel is written to run in place")
                };
                return Err(Error::Aliasing {
                    kernel: spec.id.clone(),
                    written: written.clone(),
                    other: other_name.clone(),
                    how,
                    hint,
                });
            }
        }
        Ok(())
    }
}

/// Which memory objects are watched for their destruction, and how many watched ones were
/// destroyed so far: a launch plan's cache of checked buffers holds while that count stands.
mod watch {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    use ocl::core::{self, ffi};

    static DESTROYED: AtomicU64 = AtomicU64::new(0);
    static WATCHED: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

    /// Bumped whenever a watched memory object is destroyed.
    pub fn generation() -> u64 {
        DESTROYED.load(Ordering::Acquire)
    }

    /// Asks the driver to say when `mem` is destroyed (once per memory object). When the
    /// driver cannot, the generation is bumped at once, so that nothing is taken on trust.
    pub fn watch(mem: &core::Mem) {
        let handle = mem.as_ptr() as usize;
        let Ok(mut set) = WATCHED.lock() else { return };
        if !set.get_or_insert_with(HashSet::new).insert(handle) {
            return;
        }
        // SAFETY: `mem` is a live memory object (borrowed for the call); the callback is a
        // plain function that touches only this module's statics, and no user data.
        let status = unsafe {
            ffi::clSetMemObjectDestructorCallback(
                mem.as_ptr(),
                Some(destroyed),
                std::ptr::null_mut(),
            )
        };
        if status != 0 {
            if let Some(s) = set.as_mut() {
                s.remove(&handle);
            }
            DESTROYED.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Called by the driver (on a thread of its own) when a watched object is destroyed,
    /// before its handle can be reused.
    extern "C" fn destroyed(mem: ffi::cl_mem, _: *mut std::ffi::c_void) {
        DESTROYED.fetch_add(1, Ordering::AcqRel);
        if let Ok(mut set) = WATCHED.lock() {
            if let Some(s) = set.as_mut() {
                s.remove(&(mem as usize));
            }
        }
    }
}

/// The bytes a buffer argument gives the kernel: within its memory object's root allocation
/// (a sub-buffer's parent), and within host memory when it was created over some.
struct Region {
    root: usize,
    start: usize,
    end: usize,
    host: Option<(usize, usize)>,
}

impl Region {
    fn of(mem: &core::Mem, used: usize) -> Result<Region, Error> {
        let parent = match core::get_mem_object_info(mem, core::MemInfo::AssociatedMemobject)? {
            core::MemInfoResult::AssociatedMemobject(p) => p,
            _ => None,
        };
        let offset = match parent {
            Some(_) => match core::get_mem_object_info(mem, core::MemInfo::Offset)? {
                core::MemInfoResult::Offset(o) => o,
                _ => 0,
            },
            None => 0,
        };
        let root = parent
            .as_ref()
            .map_or(mem.as_ptr() as usize, |p| p.as_ptr() as usize);
        let host = match core::get_mem_object_info(mem, core::MemInfo::HostPtr)? {
            core::MemInfoResult::HostPtr(Some((ptr, _))) => {
                Some((ptr as usize, (ptr as usize).saturating_add(used)))
            }
            _ => None,
        };
        Ok(Region {
            root,
            start: offset,
            end: offset.saturating_add(used),
            host,
        })
    }

    fn same_start(&self, other: &Region) -> bool {
        (self.root == other.root && self.start == other.start)
            || matches!((self.host, other.host), (Some(a), Some(b)) if a.0 == b.0)
    }

    fn overlaps(&self, other: &Region) -> bool {
        let within = |a: (usize, usize), b: (usize, usize)| a.0 < b.1 && b.0 < a.1;
        (self.root == other.root && within((self.start, self.end), (other.start, other.end)))
            || matches!((self.host, other.host), (Some(a), Some(b)) if within(a, b))
    }
}

fn caller_names(spec: &KernelSpec) -> String {
    spec.caller_args()
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A launch's geometry as OpenCL takes it: the number of dimensions and three of each.
struct FixedGeometry {
    dims: u32,
    global: [usize; 3],
    local: Option<[usize; 3]>,
}

impl FixedGeometry {
    fn of(spec: &KernelSpec, g: &Geometry) -> Result<FixedGeometry, Error> {
        let dims = g.global.len();
        if !(1..=3).contains(&dims) || g.local.as_ref().is_some_and(|l| l.len() != dims) {
            return Err(Error::Embedded {
                kernel: spec.id.clone(),
                message: format!("a launch needs 1 to 3 dimensions, the spec has {dims}"),
            });
        }
        let mut global = [1usize; 3];
        global[..dims].copy_from_slice(&g.global);
        let local = g.local.as_ref().map(|l| {
            let mut out = [1usize; 3];
            out[..dims].copy_from_slice(l);
            out
        });
        Ok(FixedGeometry {
            dims: dims as u32,
            global,
            local,
        })
    }
}
