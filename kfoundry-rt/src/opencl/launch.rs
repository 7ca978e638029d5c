//! Building and enqueuing one configuration of a kernel: the primitives shared by dispatch in
//! shipped binaries and by the tuner's evaluator.

use ocl::core::{self, ArgVal};

use super::error::Error;
use crate::model::signature::{AddressSpace, KernelArg, ScalarType};
use crate::model::spec::{Geometry, KernelSpec, Params, Sizes};

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

    fn arg_val(&self) -> ArgVal<'_> {
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

/// An argument supplied by the caller: every buffer except `__local` ones, and every scalar
/// that is not a size (sizes are passed from the call's sizes), in signature order.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Buffer(&'a core::Mem),
    Scalar(Scalar),
}

/// Compiles `spec`'s source with `params` as `-D` definitions for one device.
pub fn build_program(
    spec: &KernelSpec,
    params: &Params,
    context: &ocl::Context,
    device: &ocl::Device,
) -> Result<ocl::Program, Error> {
    build_program_from(spec, &spec.source, params, context, device)
}

/// Compiles `source` (the spec's own, or a generated source-level variant of it with the same
/// signature) with `params` as `-D` definitions for one device.
pub fn build_program_from(
    spec: &KernelSpec,
    source: &str,
    params: &Params,
    context: &ocl::Context,
    device: &ocl::Device,
) -> Result<ocl::Program, Error> {
    let options = spec.build_options(params);
    ocl::Program::builder()
        .src(source)
        .devices(*device)
        .cmplr_opt(options.as_str())
        .build(context)
        .map_err(|e| Error::Build { kernel: spec.id.clone(), options, log: e.to_string() })
}

/// Creates the kernel object of the spec's entry point.
pub fn create_kernel(spec: &KernelSpec, program: &ocl::Program) -> Result<core::Kernel, Error> {
    Ok(core::create_kernel(program.as_core(), &spec.signature.name)?)
}

/// Sets every argument of `kernel` (local memory and sizes computed here, the rest from
/// `args`) and enqueues it with the geometry of `params` at `sizes`. With `event`, the launch
/// is recorded in it (for profiling).
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
    set_args(spec, kernel, params, sizes, args)?;
    enqueue_geometry(queue, kernel, &geometry, event)
}

fn set_args(spec: &KernelSpec, kernel: &core::Kernel, params: &Params, sizes: &Sizes, args: &[Arg<'_>]) -> Result<(), Error> {
    let arg_error = |arg: &str, message: String| Error::Argument { kernel: spec.id.clone(), arg: arg.to_string(), message };
    let mut supplied = args.iter();
    for (index, arg) in spec.signature.args.iter().enumerate() {
        let index = index as u32;
        match arg {
            KernelArg::Buffer { name, space: AddressSpace::Local, elem, .. } => {
                let len = spec
                    .buffer_len(name, params, sizes)
                    .map_err(|e| arg_error(name, e.to_string()))?;
                let bytes = len * elem.size();
                core::set_kernel_arg(kernel, index, ArgVal::local::<u8>(&bytes))?;
            }
            KernelArg::Scalar { name, ty } if spec.sizes.contains(name) => {
                let v = sizes.get(name).copied().ok_or_else(|| arg_error(name, "size not given".into()))?;
                let s = Scalar::from_int(*ty, v)
                    .ok_or_else(|| arg_error(name, format!("size {v} does not fit the kernel's `{}`", ty.opencl_name())))?;
                core::set_kernel_arg(kernel, index, s.arg_val())?;
            }
            KernelArg::Buffer { name, .. } => match supplied.next() {
                Some(Arg::Buffer(mem)) => core::set_kernel_arg(kernel, index, ArgVal::mem(mem))?,
                _ => return Err(arg_error(name, "expected a buffer".into())),
            },
            KernelArg::Scalar { name, .. } => match supplied.next() {
                Some(Arg::Scalar(s)) => core::set_kernel_arg(kernel, index, s.arg_val())?,
                _ => return Err(arg_error(name, "expected a scalar".into())),
            },
        }
    }
    if supplied.next().is_some() {
        return Err(arg_error("(extra)", "more arguments than the kernel takes".into()));
    }
    Ok(())
}

fn enqueue_geometry(queue: &ocl::Queue, kernel: &core::Kernel, g: &Geometry, event: Option<&mut core::Event>) -> Result<(), Error> {
    let mut global = [1usize; 3];
    global[..g.global.len()].copy_from_slice(&g.global);
    let local = g.local.as_ref().map(|l| {
        let mut out = [1usize; 3];
        out[..l.len()].copy_from_slice(l);
        out
    });
    // SAFETY: every argument of `kernel` was set above from live buffers and values; the
    // geometry was validated against the spec (positive, local divides global).
    unsafe {
        core::enqueue_kernel(
            queue.as_core(),
            kernel,
            g.global.len() as u32,
            None,
            &global,
            local,
            None::<core::Event>,
            event,
        )?;
    }
    Ok(())
}
