//! One run of a kernel: an input set prepared (drawn on the host or on the device),
//! uploaded with guard zones around every buffer, launched, and its scratch buffers and guard
//! zones checked afterwards.

use super::*;

/// How one buffer is filled before a run (its guard zone is always poisoned).
#[derive(Clone)]
pub(super) enum Fill {
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
pub(super) struct PreparedBuffer {
    pub(super) name: String,
    /// A `const` buffer: its guard zones hold a fixed pattern, not random bytes.
    pub(super) read_only: bool,
    pub(super) ty: ScalarType,
    pub(super) len: usize,
    pub(super) fill: Fill,
    pub(super) front: Vec<u8>,
    pub(super) back: Vec<u8>,
}

/// What one input set is made of.
#[derive(Clone)]
pub(super) struct Prepared {
    pub(super) buffers: Vec<PreparedBuffer>,
    pub(super) scalars: Vec<Scalar>,
}

/// A device buffer of a run: one allocation of front guard, `len` elements and back guard;
/// the kernel gets `view`, a sub-buffer that starts at the elements (so the front guard lies
/// before what it was given, in the same allocation). In place, a written buffer is its
/// input's (`alias`).
pub(super) struct RunBuffer {
    pub(super) name: String,
    pub(super) alias: bool,
    /// A scratch buffer (`scratch(...)`): the launcher's, not the caller's.
    pub(super) scratch: bool,
    pub(super) ty: ScalarType,
    pub(super) len: usize,
    pub(super) whole: DeviceBuffer,
    pub(super) view: DeviceBuffer,
    pub(super) front: Vec<u8>,
    pub(super) back: Vec<u8>,
}

impl RunBuffer {
    /// Another handle on the same memory.
    pub(super) fn shared(&self) -> RunBuffer {
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
pub(super) struct Run {
    pub(super) buffers: Vec<RunBuffer>,
    pub(super) scalars: Vec<Scalar>,
}

impl Run {
    /// Buffer `name` of the run.
    pub(super) fn buffer(&self, name: &str) -> Result<&RunBuffer, RtError> {
        self.buffers
            .iter()
            .find(|b| b.name == name)
            .ok_or_else(|| RtError::OpenCl(format!("no buffer `{name}`")))
    }
}

impl Bench {
    pub(super) fn fresh_rng(&self) -> ChaCha8Rng {
        let draw = self.inputs.draws.get() + 1;
        self.inputs.draws.set(draw);
        // A distinct stream per input set: never the same inputs twice.
        ChaCha8Rng::seed_from_u64(self.settings.seed ^ draw.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// How each caller buffer of one run of `params` in `shape` is filled (inputs drawn, on
    /// the device when large; outputs pre-filled; in place, a written buffer is its input's)
    /// and guarded, and the scalars (integer ones the shape gives, the others drawn). Guards
    /// of read-only buffers hold poison (a read past the end sees NaN, or 0xA5 bytes); guards
    /// of the others hold random bytes of this run, which no computation reproduces by chance.
    pub(super) fn prepare(
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
    pub(super) fn guard_lens(&self, len: usize, ty: ScalarType) -> (usize, usize) {
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
    pub(super) fn upload(
        &self,
        prepared: &Prepared,
        params: &Params,
        sizes: &Sizes,
    ) -> Result<Run, RtError> {
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
    pub(super) fn upload_with_room(
        &self,
        prepared: &Prepared,
        params: &Params,
        sizes: &Sizes,
    ) -> Result<Run, RtError> {
        match self.upload(prepared, params, sizes) {
            Err(e) if e.is_exhausted() && !self.known.runs.borrow().is_empty() => {
                self.known.runs.borrow_mut().clear();
                self.upload(prepared, params, sizes)
            }
            uploaded => uploaded,
        }
    }

    /// Scratch buffer `p` for a run of `params` at `sizes`: that configuration's length, all
    /// zero, between guard zones of never-zero bytes no computation reproduces by chance (a
    /// stream of their own, new each run: scratch never draws from the input stream, so that a
    /// kernel with scratch gets the same inputs as one without).
    pub(super) fn upload_scratch(
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
    pub(super) fn dirty_scratch(&self, run: &Run) -> Result<Option<(String, usize)>, RtError> {
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
    pub(super) fn touched_guard(&self, run: &Run) -> Result<Option<String>, RtError> {
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

    /// The integer inputs and how they are drawn: the usual cause of a reference out of
    /// bounds on declared inputs is an input of indices drawn outside the range it indexes.
    pub(super) fn launch(
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
    pub(super) fn scrub_reach(&self) -> Option<u64> {
        const MARGIN: u64 = 64 * 1024;
        self.not_gpu
            .then(|| self.local_high.get().saturating_add(MARGIN))
    }
}
