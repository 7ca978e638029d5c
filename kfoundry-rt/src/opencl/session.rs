//! A session on one OpenCL device: one context and one in-order queue with profiling, and the
//! few things the tuner does with them: build programs, create kernels, move bytes, launch
//! (validated against a kernel's specification, or raw for kfoundry's own utility kernels) and
//! time launches with profiling events. The tuner's worker, the device-peak benchmarks and the
//! data kernels of the evaluator use only this; none of them calls `ocl` itself.

use ocl::core::{
    self, ArgVal, KernelWorkGroupInfo, KernelWorkGroupInfoResult, ProfilingInfo,
    ProfilingInfoResult,
};

use super::device::{limits_from, traits_of, Limits};
use super::error::Error;
use super::launch::{build_binary, build_source, Arg, LaunchPlan};
use crate::model::device::DeviceTraits;
use crate::model::spec::{KernelSpec, Params, Sizes};

/// One device, one context, one profiling queue.
pub struct Session {
    platform: ocl::Platform,
    device: ocl::Device,
    context: ocl::Context,
    queue: ocl::Queue,
    /// What constraints may read about the device: every launch re-checks them.
    traits: DeviceTraits,
}

/// A program built for the session's device.
pub struct Program {
    program: core::Program,
}

/// A kernel of a [`Program`]. Its arguments are set at each launch.
pub struct Kernel {
    kernel: core::Kernel,
    /// The program stays alive as long as its kernels.
    _program: core::Program,
}

/// What a built kernel reports about itself on the session's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelInfo {
    /// `CL_KERNEL_WORK_GROUP_SIZE`: the largest work-group this kernel can launch with.
    pub work_group_size: usize,
    /// `CL_KERNEL_LOCAL_MEM_SIZE`: local memory the kernel uses (its own `__local` arrays).
    pub local_mem_bytes: u64,
    /// `CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE` (warp, wavefront or SIMD width).
    pub preferred_multiple: Option<usize>,
}

/// Bytes on the device. Reads and writes are blocking.
#[derive(Clone)]
pub struct DeviceBuffer {
    mem: core::Mem,
    len: usize,
    queue: core::CommandQueue,
}

/// A launch recorded for profiling; [`Timing::seconds`] waits for it.
pub struct Timing {
    event: core::Event,
}

impl Session {
    /// A session on device number `index` of [`super::device::list_devices`].
    pub fn on_device(index: usize) -> Result<Session, Error> {
        let devices = super::device::list_devices()?;
        let (platform, device) = devices
            .get(index)
            .copied()
            .ok_or_else(|| Error::OpenCl(format!("no device #{index}")))?;
        Session::new(platform, device)
    }

    pub fn new(platform: ocl::Platform, device: ocl::Device) -> Result<Session, Error> {
        let context = ocl::Context::builder()
            .platform(platform)
            .devices(device)
            .build()?;
        let queue = ocl::Queue::new(
            &context,
            device,
            Some(ocl::CommandQueueProperties::PROFILING_ENABLE),
        )?;
        let traits = traits_of(&device)?;
        Ok(Session {
            platform,
            device,
            context,
            queue,
            traits,
        })
    }

    /// Whether the device is a GPU (`CL_DEVICE_TYPE` says so).
    pub fn is_gpu(&self) -> bool {
        matches!(self.device.info(ocl::enums::DeviceInfo::Type), Ok(ocl::enums::DeviceInfoResult::Type(t)) if t.contains(ocl::DeviceType::GPU))
    }

    /// The device's limits.
    pub fn limits(&self) -> Result<Limits, Error> {
        limits_from(&self.device, self.traits.clone())
    }

    /// Builds `source` with `options` for the device. A failure carries the compiler's log.
    pub fn build(&self, id: &str, source: &str, options: &str) -> Result<Program, Error> {
        Ok(Program {
            program: build_source(
                self.context.as_core(),
                self.device.as_core(),
                id,
                source,
                options,
            )?,
        })
    }

    /// What a program binary built here depends on besides its source and options: the
    /// platform's name and version, the device's name, vendor and OpenCL version and the
    /// driver's version, one per line. A binary is only loaded by a session with the same
    /// identity ([`Session::build_binary`]).
    pub fn build_identity(&self) -> Result<String, Error> {
        use ocl::enums::{DeviceInfo as D, PlatformInfo as P};
        // The raw strings: `CL_DEVICE_VERSION` parsed would lose its vendor's part.
        let device = |what: D| -> Result<String, Error> {
            let bytes = self.device.info_raw(what as u32)?;
            Ok(String::from_utf8_lossy(&bytes)
                .trim_end_matches('\0')
                .to_string())
        };
        let platform =
            |what: P| -> Result<String, Error> { Ok(self.platform.info(what)?.to_string()) };
        Ok([
            platform(P::Name)?,
            platform(P::Version)?,
            device(D::Name)?,
            device(D::Vendor)?,
            device(D::Version)?,
            device(D::DriverVersion)?,
        ]
        .map(|s| s.trim().to_string())
        .join("\n"))
    }

    /// The device's binary of `program` (what the driver gives back: PTX for NVIDIA's, an
    /// archive of its own for PoCL's).
    pub fn binary(&self, program: &Program) -> Result<Vec<u8>, Error> {
        match core::get_program_info(&program.program, core::ProgramInfo::Binaries)? {
            core::ProgramInfoResult::Binaries(mut binaries) if binaries.len() == 1 => {
                Ok(binaries.remove(0))
            }
            _ => Err(Error::OpenCl(
                "the program has no binary for exactly one device".into(),
            )),
        }
    }

    /// Builds a program from `binary` (one [`Session::binary`] gave, on a session of the same
    /// [`Session::build_identity`]) with the `options` it was built from. A failure (a binary
    /// the driver does not take) carries the driver's message.
    pub fn build_binary(&self, id: &str, binary: &[u8], options: &str) -> Result<Program, Error> {
        let program = build_binary(
            self.context.as_core(),
            self.device.as_core(),
            id,
            binary,
            options,
        )?;
        Ok(Program { program })
    }

    /// The compiler's log of a program that built (its warnings; empty when there were none).
    pub fn build_log(&self, program: &Program) -> String {
        match core::get_program_build_info(
            &program.program,
            self.device.as_core(),
            core::ProgramBuildInfo::BuildLog,
        ) {
            Ok(core::ProgramBuildInfoResult::BuildLog(log)) => log.trim().to_string(),
            _ => String::new(),
        }
    }

    /// [`Session::build`] on a thread of its own: the handle gives the program (or the
    /// compiler's log) when joined. OpenCL lets programs be built from several threads at once.
    pub fn build_in_background(
        &self,
        id: &str,
        source: &str,
        options: &str,
    ) -> std::thread::JoinHandle<Result<Program, Error>> {
        let (context, device) = (self.context.as_core().clone(), *self.device.as_core());
        let (id, source, options) = (id.to_string(), source.to_string(), options.to_string());
        std::thread::spawn(move || {
            Ok(Program {
                program: build_source(&context, &device, &id, &source, &options)?,
            })
        })
    }

    /// Builds configuration `params` of `spec` from `source` (the annotated source, or a
    /// generated source-level variant with the same signature): only declared parameters reach
    /// the options (see [`super::launch::build_options_for`]).
    pub fn build_spec(
        &self,
        spec: &KernelSpec,
        source: &str,
        params: &Params,
    ) -> Result<Program, Error> {
        let options = super::launch::build_options_for(spec, source, params)?;
        self.build(&spec.id, source, &options)
    }

    /// The kernel `name` of `program`.
    pub fn kernel(&self, program: &Program, name: &str) -> Result<Kernel, Error> {
        Ok(Kernel {
            kernel: core::create_kernel(&program.program, name)?,
            _program: program.program.clone(),
        })
    }

    /// What `kernel` reports about itself on this device (entries it cannot answer are left at
    /// their least committal value).
    pub fn kernel_info(&self, kernel: &Kernel) -> KernelInfo {
        let info =
            |what| core::get_kernel_work_group_info(&kernel.kernel, self.device.as_core(), what);
        KernelInfo {
            work_group_size: match info(KernelWorkGroupInfo::WorkGroupSize) {
                Ok(KernelWorkGroupInfoResult::WorkGroupSize(n)) => n,
                _ => usize::MAX,
            },
            local_mem_bytes: match info(KernelWorkGroupInfo::LocalMemSize) {
                Ok(KernelWorkGroupInfoResult::LocalMemSize(n)) => n,
                _ => 0,
            },
            preferred_multiple: match info(KernelWorkGroupInfo::PreferredWorkGroupSizeMultiple) {
                Ok(KernelWorkGroupInfoResult::PreferredWorkGroupSizeMultiple(n)) => Some(n),
                _ => None,
            },
        }
    }

    /// `CL_KERNEL_LOCAL_MEM_SIZE` of `kernel` as the driver reports it now: its own `__local`
    /// arrays and, once they are set, its `__local` arguments (`None`: not reported).
    pub fn local_mem_used(&self, kernel: &Kernel) -> Option<u64> {
        match core::get_kernel_work_group_info(
            &kernel.kernel,
            self.device.as_core(),
            KernelWorkGroupInfo::LocalMemSize,
        ) {
            Ok(KernelWorkGroupInfoResult::LocalMemSize(n)) => Some(n),
            _ => None,
        }
    }

    /// `bytes` bytes on the device (at least one), not initialised.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, Error> {
        let len = bytes.max(1);
        // SAFETY: no host memory is involved; the device memory is only ever read back into
        // byte vectors.
        let mem = unsafe {
            core::create_buffer::<_, u8>(
                self.context.as_core(),
                core::MemFlags::new().read_write(),
                len,
                None,
            )?
        };
        Ok(DeviceBuffer {
            mem,
            len,
            queue: self.queue.as_core().clone(),
        })
    }

    /// A copy of `data` on the device: allocated, then written. Not `CL_MEM_COPY_HOST_PTR`:
    /// NVIDIA's driver (580, on an H200) gives the sub-buffers of a buffer created that way
    /// memory of their own, so a kernel's write before a sub-buffer's start never reaches the
    /// parent, and the evaluator's front guard would not see it.
    pub fn upload(&self, data: &[u8]) -> Result<DeviceBuffer, Error> {
        let buffer = self.alloc(data.len())?;
        buffer.write(0, data)?;
        Ok(buffer)
    }

    /// Waits until everything enqueued has run.
    pub fn finish(&self) -> Result<(), Error> {
        Ok(self.queue.finish()?)
    }

    /// Launches configuration `params` of `spec` at `sizes`, every argument checked as in
    /// [`LaunchPlan`]; with `profile`, the launch's timing.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        spec: &KernelSpec,
        kernel: &Kernel,
        params: &Params,
        sizes: &Sizes,
        args: &[Arg<'_>],
        profile: bool,
    ) -> Result<Option<Timing>, Error> {
        self.launch_as(spec, kernel, params, sizes, args, profile, &self.traits)
    }

    /// As [`Session::launch`], the constraints that read device properties checked against
    /// `traits` instead of this device's: for tests that run one device's paths on another
    /// (the tensor-core paths, their warp instructions emulated, on a CPU).
    #[allow(clippy::too_many_arguments)]
    pub fn launch_as(
        &self,
        spec: &KernelSpec,
        kernel: &Kernel,
        params: &Params,
        sizes: &Sizes,
        args: &[Arg<'_>],
        profile: bool,
        traits: &DeviceTraits,
    ) -> Result<Option<Timing>, Error> {
        self.launch_using(spec, kernel, params, sizes, args, None, profile, traits)
    }

    /// As [`Session::launch`], the kernel's scratch buffers (`scratch(...)`) given: one for
    /// each in signature order, at least as long as the launch needs and all zero
    /// ([`LaunchPlan::enqueue_with_scratch`]). The tuner's runs, whose scratch has guard zones.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_with_scratch(
        &self,
        spec: &KernelSpec,
        kernel: &Kernel,
        params: &Params,
        sizes: &Sizes,
        args: &[Arg<'_>],
        scratch: &[&core::Mem],
        profile: bool,
    ) -> Result<Option<Timing>, Error> {
        let traits = &self.traits;
        self.launch_using(
            spec,
            kernel,
            params,
            sizes,
            args,
            Some(scratch),
            profile,
            traits,
        )
    }

    /// A launch with the scratch buffers given, or the plan's own.
    #[allow(clippy::too_many_arguments)]
    fn launch_using(
        &self,
        spec: &KernelSpec,
        kernel: &Kernel,
        params: &Params,
        sizes: &Sizes,
        args: &[Arg<'_>],
        scratch: Option<&[&core::Mem]>,
        profile: bool,
        traits: &DeviceTraits,
    ) -> Result<Option<Timing>, Error> {
        let mut event = core::Event::null();
        let plan = LaunchPlan::new(spec, params, sizes, Some(traits))?;
        let event_out = profile.then_some(&mut event);
        match scratch {
            Some(s) => {
                plan.enqueue_with_scratch(spec, &kernel.kernel, &self.queue, args, s, event_out)?
            }
            None => plan.enqueue(spec, &kernel.kernel, &self.queue, args, event_out)?,
        }
        Ok(profile.then_some(Timing { event }))
    }

    /// Launches one of kfoundry's own utility kernels (peaks, data generation, comparison,
    /// scrubbing) with `args` in order over `global` work-items in groups of `local`.
    ///
    /// # Safety
    ///
    /// Nothing checks what the kernel touches: the caller promises that, with these arguments
    /// and this geometry, it stays within the buffers it is given.
    pub unsafe fn launch_raw(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        args: &[Arg<'_>],
        profile: bool,
    ) -> Result<Option<Timing>, Error> {
        let dims = global.len();
        if !(1..=3).contains(&dims) || local.is_some_and(|l| l.len() != dims) || global.contains(&0)
        {
            return Err(Error::OpenCl(format!(
                "a launch needs 1 to 3 positive dimensions, given {global:?}"
            )));
        }
        for (index, arg) in args.iter().enumerate() {
            let index = u32::try_from(index)
                .map_err(|_| Error::OpenCl("too many kernel arguments".into()))?;
            match arg {
                Arg::Buffer(mem) => core::set_kernel_arg(&kernel.kernel, index, ArgVal::mem(mem))?,
                Arg::Scalar(s) => core::set_kernel_arg(&kernel.kernel, index, s.arg_val())?,
            }
        }
        let mut g = [1usize; 3];
        g[..dims].copy_from_slice(global);
        let l = local.map(|l| {
            let mut out = [1usize; 3];
            out[..dims].copy_from_slice(l);
            out
        });
        let mut event = core::Event::null();
        // SAFETY: every argument was set above; the geometry has 1 to 3 positive dimensions;
        // what the kernel touches is the caller's promise.
        unsafe {
            core::enqueue_kernel(
                self.queue.as_core(),
                &kernel.kernel,
                dims as u32,
                None,
                &g,
                l,
                None::<core::Event>,
                profile.then_some(&mut event),
            )?;
        }
        Ok(profile.then_some(Timing { event }))
    }
}

impl DeviceBuffer {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether `other` is this very memory object (a run in place hands one to two arguments).
    pub fn same_memory(&self, other: &DeviceBuffer) -> bool {
        self.mem.as_ptr() == other.mem.as_ptr()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads `out.len()` bytes from `offset`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), Error> {
        if out.is_empty() {
            return Ok(());
        }
        self.check(offset, out.len())?;
        // SAFETY: a blocking read into a live slice, within the buffer (checked above).
        unsafe {
            core::enqueue_read_buffer(
                &self.queue,
                &self.mem,
                true,
                offset,
                out,
                None::<core::Event>,
                None::<&mut core::Event>,
            )?
        };
        Ok(())
    }

    /// Writes `data` at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), Error> {
        if data.is_empty() {
            return Ok(());
        }
        self.check(offset, data.len())?;
        // SAFETY: a blocking write from a live slice, within the buffer (checked above).
        unsafe {
            core::enqueue_write_buffer(
                &self.queue,
                &self.mem,
                true,
                offset,
                data,
                None::<core::Event>,
                None::<&mut core::Event>,
            )?
        };
        Ok(())
    }

    /// The `len` bytes from `offset`, as a buffer of their own (sharing the memory), which a
    /// kernel sees as starting at `offset`. `offset` must be a multiple of the device's base
    /// address alignment ([`Limits::base_align_bytes`]).
    pub fn sub(&self, offset: usize, len: usize) -> Result<DeviceBuffer, Error> {
        let len = len.max(1);
        self.check(offset, len)?;
        let mem = core::create_sub_buffer::<u8>(
            &self.mem,
            core::MemFlags::new().read_write(),
            &core::BufferRegion::new(offset, len),
        )?;
        Ok(DeviceBuffer {
            mem,
            len,
            queue: self.queue.clone(),
        })
    }

    /// The buffer as a kernel argument.
    pub fn arg(&self) -> Arg<'_> {
        Arg::Buffer(&self.mem)
    }

    /// The OpenCL memory object (a scratch buffer given to [`Session::launch_with_scratch`]).
    pub fn mem(&self) -> &core::Mem {
        &self.mem
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), Error> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::OpenCl(format!(
                "bytes {offset}..+{len} lie outside a buffer of {} bytes",
                self.len
            ))),
        }
    }
}

impl Timing {
    /// The timing of the launch recorded in `event`.
    pub(crate) fn of(event: core::Event) -> Timing {
        Timing { event }
    }

    /// The launch's run time on the device (waits for it to finish).
    pub fn seconds(&self) -> Result<f64, Error> {
        core::wait_for_event(&self.event)?;
        let start = match core::get_event_profiling_info(&self.event, ProfilingInfo::Start)? {
            ProfilingInfoResult::Start(t) => t,
            _ => 0,
        };
        let end = match core::get_event_profiling_info(&self.event, ProfilingInfo::End)? {
            ProfilingInfoResult::End(t) => t,
            _ => 0,
        };
        Ok(end.saturating_sub(start) as f64 * 1e-9)
    }
}
