//! Building and enqueuing one configuration of a kernel: the primitives shared by dispatch in
//! shipped binaries and by the tuner's evaluator.

use ocl::core::{self, ArgVal};

use super::error::Error;
use crate::model::declared::declared_params;
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
pub fn build_source(context: &core::Context, device: &core::DeviceId, id: &str, source: &str, options: &str) -> Result<core::Program, Error> {
    let build_error = |log: String| Error::Build { kernel: id.to_string(), options: options.to_string(), log };
    let text = std::ffi::CString::new(source).map_err(|_| build_error("the source contains a NUL byte".into()))?;
    let opts = std::ffi::CString::new(options).map_err(|_| build_error("the options contain a NUL byte".into()))?;
    let program = core::create_program_with_source(context, &[text]).map_err(|e| build_error(e.to_string()))?;
    core::build_program(&program, Some(&[*device]), &opts, None, None).map_err(|e| build_error(e.to_string()))?;
    Ok(program)
}

/// The build options of configuration `params` of `spec` built from `source`: `params` must
/// name exactly the spec's parameters and those `source` itself declares
/// (`// kfoundry-params:`), so nothing else reaches the compiler's options.
pub fn build_options_for(spec: &KernelSpec, source: &str, params: &Params) -> Result<String, Error> {
    let declared = if source == spec.source {
        Vec::new()
    } else {
        declared_params(source)
            .map_err(|e| Error::Embedded { kernel: spec.id.clone(), message: format!("generated source, line {}: {}", e.line, e.problem) })?
    };
    spec.build_options(params, &declared).map_err(|source| Error::Sizes { kernel: spec.id.clone(), source })
}

/// Creates the kernel object of the spec's entry point.
pub fn create_kernel(spec: &KernelSpec, program: &core::Program) -> Result<core::Kernel, Error> {
    Ok(core::create_kernel(program, &spec.signature.name)?)
}

/// One kernel argument's value, checked against the spec at the call's sizes.
enum Bound<'a> {
    /// `__local` memory of this many bytes.
    Local(usize),
    Mem(&'a core::Mem),
    Scalar(Scalar),
}

/// Sets every argument of `kernel` (local memory and sizes computed here, the rest from
/// `args`) and enqueues it with the geometry of `params` at `sizes`. With `event`, the launch
/// is recorded in it (for profiling).
///
/// Nothing is set or enqueued unless every check passes: the geometry is valid (constraints
/// hold, sizes positive, local divides global, 1 to 3 dimensions); `args` are exactly the
/// caller's arguments in order; each scalar has the kernel's type; each buffer holds at least
/// the annotation's length at these sizes (in bytes, as OpenCL reports the memory object's
/// size); every length and byte count is computed with overflow checks.
pub fn enqueue(
    spec: &KernelSpec,
    kernel: &core::Kernel,
    queue: &ocl::Queue,
    params: &Params,
    sizes: &Sizes,
    args: &[Arg<'_>],
    event: Option<&mut core::Event>,
) -> Result<(), Error> {
    let geometry = spec.geometry(params, sizes).map_err(|source| Error::Sizes { kernel: spec.id.clone(), source })?;
    let bound = bind(spec, params, sizes, args)?;
    for (index, value) in bound.iter().enumerate() {
        let index = u32::try_from(index).map_err(|_| Error::OpenCl("too many kernel arguments".into()))?;
        match value {
            Bound::Local(bytes) => core::set_kernel_arg(kernel, index, ArgVal::local::<u8>(bytes))?,
            Bound::Mem(mem) => core::set_kernel_arg(kernel, index, ArgVal::mem(mem))?,
            Bound::Scalar(s) => core::set_kernel_arg(kernel, index, s.arg_val())?,
        }
    }
    enqueue_geometry(spec, queue, kernel, &geometry, event)
}

/// Checks `args` against the spec at `sizes` and gives every kernel argument its value.
fn bind<'a>(spec: &KernelSpec, params: &Params, sizes: &Sizes, args: &[Arg<'a>]) -> Result<Vec<Bound<'a>>, Error> {
    let arg_error = |arg: &str, message: String| Error::Argument { kernel: spec.id.clone(), arg: arg.to_string(), message };
    let expected = spec.caller_args().count();
    if args.len() != expected {
        return Err(arg_error(
            "(all)",
            format!("{} argument(s) given, the kernel takes {expected} from the caller ({})", args.len(), caller_names(spec)),
        ));
    }
    let mut supplied = args.iter();
    let mut out = Vec::with_capacity(spec.signature.args.len());
    for (arg, role) in spec.args_with_roles() {
        let name = arg.name();
        let value = match (arg, role) {
            (KernelArg::Buffer { elem, .. }, ArgRole::LocalMemory) => {
                let len = spec.buffer_len(name, params, sizes).map_err(|e| arg_error(name, e.to_string()))?;
                let bytes = len.checked_mul(elem.size()).ok_or_else(|| arg_error(name, format!("{len} elements overflow a byte count")))?;
                Bound::Local(bytes)
            }
            (KernelArg::Scalar { ty, .. }, ArgRole::Size) => {
                let v = sizes.get(name).copied().ok_or_else(|| arg_error(name, "size not given".into()))?;
                let s =
                    Scalar::from_int(*ty, v).ok_or_else(|| arg_error(name, format!("size {v} does not fit the kernel's `{}`", ty.opencl_name())))?;
                Bound::Scalar(s)
            }
            (KernelArg::Buffer { elem, .. }, _) => match supplied.next() {
                Some(Arg::Buffer(mem)) => {
                    let len = spec.buffer_len(name, params, sizes).map_err(|e| arg_error(name, e.to_string()))?;
                    let needed = len.checked_mul(elem.size()).ok_or_else(|| arg_error(name, format!("{len} elements overflow a byte count")))?;
                    let given = match core::get_mem_object_info(mem, core::MemInfo::Size)? {
                        core::MemInfoResult::Size(bytes) => bytes,
                        _ => 0,
                    };
                    if given < needed {
                        let length = spec.buffers.get(name).map(|e| format!(" (`{e}`)")).unwrap_or_default();
                        return Err(Error::BufferTooSmall {
                            kernel: spec.id.clone(),
                            arg: name.to_string(),
                            elem: elem.opencl_name(),
                            needed: len,
                            given: given / elem.size(),
                            length,
                        });
                    }
                    Bound::Mem(mem)
                }
                _ => return Err(arg_error(name, format!("expected a buffer of `{}`", elem.opencl_name()))),
            },
            (KernelArg::Scalar { ty, .. }, _) => match supplied.next() {
                Some(Arg::Scalar(s)) if s.ty() == *ty => Bound::Scalar(*s),
                Some(Arg::Scalar(s)) => {
                    return Err(arg_error(name, format!("expected a `{}`, given a `{}`", ty.opencl_name(), s.ty().opencl_name())))
                }
                _ => return Err(arg_error(name, format!("expected a scalar `{}`", ty.opencl_name()))),
            },
        };
        out.push(value);
    }
    Ok(out)
}

fn caller_names(spec: &KernelSpec) -> String {
    spec.caller_args().map(|a| a.name()).collect::<Vec<_>>().join(", ")
}

fn enqueue_geometry(
    spec: &KernelSpec,
    queue: &ocl::Queue,
    kernel: &core::Kernel,
    g: &Geometry,
    event: Option<&mut core::Event>,
) -> Result<(), Error> {
    let dims = g.global.len();
    if !(1..=3).contains(&dims) || g.local.as_ref().is_some_and(|l| l.len() != dims) {
        return Err(Error::Embedded { kernel: spec.id.clone(), message: format!("a launch needs 1 to 3 dimensions, the spec has {dims}") });
    }
    let mut global = [1usize; 3];
    global[..dims].copy_from_slice(&g.global);
    let local = g.local.as_ref().map(|l| {
        let mut out = [1usize; 3];
        out[..dims].copy_from_slice(l);
        out
    });
    // SAFETY: `bind` checked, before any argument was set, that every argument of `kernel` is
    // set: `__local` memory with the annotation's length, sizes from the call, and each
    // caller's buffer a live memory object (borrowed for this call) holding at least the
    // annotation's length at these sizes, each scalar of the kernel's type. The geometry was
    // checked against the spec (1 to 3 positive dimensions, local dividing global, the
    // constraints holding). What the kernel then touches is the annotation's promise for the
    // reference; for a dispatched variant, what the tuner verified (guard zones before and
    // after every buffer) at sizes spanning those it may run at; for `launch_params`, the
    // promise its `unsafe` caller made.
    unsafe {
        core::enqueue_kernel(queue.as_core(), kernel, dims as u32, None, &global, local, None::<core::Event>, event)?;
    }
    Ok(())
}
