//! Builds: candidates compiled from the program cache, ahead of their evaluation (threads or
//! the build farm) or now; kept for their proof and re-measure; and the reversed builds the
//! verifier runs on devices that are not GPUs.

use super::*;

/// Candidates built most recently, kept for their proof at other sizes and their re-measures.
pub(super) const BUILT_KEPT: usize = 4;

/// Finished builds ahead kept while no evaluation has taken them ([`Bench::build_ahead`]).
pub(super) const BUILT_AHEAD_KEPT: usize = 32;

/// Most builds ahead running at once, however many cores there are.
pub(super) const MAX_BUILDERS: usize = 32;

/// What a build is made of: parameters, the generated source when it is not the annotated one,
/// and whether its work-groups are numbered in reverse ([`reversed_work_items`]).
pub(super) type BuildKey = (Params, Option<String>, bool);

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

/// A build started ahead of its evaluation ([`Bench::build_ahead`]).
pub(super) enum Background {
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
    pub(super) fn is_running(&self) -> bool {
        match self {
            Background::Running(h) => !h.is_finished(),
            Background::Done(_) => false,
            Background::Farmed { job, .. } => job.is_running(),
        }
    }

    /// The program, once the build is done, built on `session` when it came from the farm as a
    /// binary; and whether it did (a build not made from source here, which [`Bench::seal`]
    /// drops).
    pub(super) fn wait(self, session: &Session, id: &str) -> (Result<Program, RtError>, bool) {
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

impl Bench {
    /// Builds `params` (of `source`, a source-level variant with the same signature, when
    /// given), or reuses one of the last few builds; `None` for the reference itself. A failed
    /// build is logged.
    pub(super) fn build(
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
    pub(super) fn build_as(
        &mut self,
        params: &Params,
        source: Option<&str>,
        reversed: bool,
    ) -> Result<std::rc::Rc<Kernel>, Rejection> {
        let key = (params.clone(), source.map(str::to_string), reversed);
        if let Some(i) = self.builds.built.iter().position(|(k, _, _)| *k == key) {
            let entry = self.builds.built.remove(i);
            let built = entry.1.clone();
            self.builds.built.push(entry);
            return Ok(built);
        }
        let text = source.unwrap_or(&self.spec.source);
        let started = self
            .builds
            .building
            .iter()
            .position(|(k, _)| *k == key)
            .map(|i| self.builds.building.swap_remove(i).1);
        let input = self.build_input(text, params, reversed);
        // Reversed builds are the proof's own: never cached.
        let cache_key = match (&input, &self.builds.program_cache) {
            (Ok((program, options)), Some(cache)) if !reversed => cache.key(program, options),
            _ => None,
        };
        let (program, from_disk) = match started {
            Some(background) => {
                let (program, from_binary) = background.wait(&self.session, &self.spec.id);
                self.builds.farmed += usize::from(from_binary);
                (program, from_binary)
            }
            None => match input {
                Ok((program, options)) => self.compile(&program, &options, cache_key.as_deref()),
                Err(e) => (Err(e), false),
            },
        };
        if let (Ok(p), Some(cache), Some(k), false) =
            (&program, &self.builds.program_cache, &cache_key, from_disk)
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
                if self.builds.built.len() >= BUILT_KEPT {
                    self.builds.built.remove(0);
                }
                self.builds.built.push((key, b.clone(), from_disk));
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
    pub(super) fn compile(
        &self,
        program: &str,
        options: &str,
        key: Option<&str>,
    ) -> (Result<Program, RtError>, bool) {
        if self.builds.read_cache {
            let binary = key
                .zip(self.builds.program_cache.as_ref())
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
        self.builds
            .building
            .iter()
            .filter(|(_, b)| b.is_running())
            .count()
    }

    /// How many candidates were built from a binary the build farm made
    /// ([`Measurement::build_processes`]).
    pub fn farmed_builds(&self) -> usize {
        self.builds.farmed
    }

    /// From now on every build comes from its source: builds read from the program cache are
    /// dropped and it is no longer read (still written). A proof and what follows it (the
    /// re-measurement of finalists) must see what the source compiles to, not a file.
    pub fn seal(&mut self) {
        self.builds.read_cache = false;
        self.builds.sealed = true;
        self.builds.built.retain(|(_, _, from_disk)| !from_disk);
        // the farm's builds would be built from their binaries: gone with the farm
        self.builds
            .building
            .retain(|(_, b)| !matches!(b, Background::Farmed { .. }));
        self.builds.farm = None;
    }

    /// Starts building `upcoming` (configurations of the annotated source that may be
    /// evaluated next, likeliest first: a batch, or the engine's speculation) on threads of
    /// their own, so that they build at once and while the device runs other candidates;
    /// [`Bench::evaluate`] then takes each finished program. Builds already done or under way
    /// are not started again; at most `builders` run at once (the rest of
    /// `upcoming` is left), and of the finished ones never taken only the newest
    /// `BUILT_AHEAD_KEPT` are kept.
    pub fn build_ahead(&mut self, upcoming: &[Params]) {
        let processes = self.settings.build_processes.unwrap_or(0).min(MAX_BUILDERS);
        let farmed = processes > 0 && !self.builds.sealed;
        if farmed && self.builds.farm.is_none() {
            // (no identity: no farm; the builds ahead go to threads)
            if let Ok(identity) = self.session.build_identity() {
                self.builds.farm = Some(farm::BuildFarm::start(
                    self.builds.device,
                    &identity,
                    processes,
                ));
            }
        }
        // A farm whose members are all broken leaves the builds ahead to threads again.
        let farm = (self.builds.farm.as_ref()).filter(|f| farmed && f.size() > 0);
        let builders = farm.map_or(self.builds.builders, |f| f.size());
        for params in upcoming {
            if self.builds_ahead_running() >= builders {
                break;
            }
            let key = (params.clone(), None, false);
            let known = self.builds.built.iter().any(|(k, _, _)| *k == key)
                || self.builds.building.iter().any(|(k, _)| *k == key);
            if *params == self.spec.reference || known || self.valid(params).is_err() {
                continue;
            }
            // Options that cannot be made fail the same way when the candidate is built.
            if let Ok((program, options)) = self.build_input(&self.spec.source, params, false) {
                // A build the cache holds is read when the candidate is evaluated.
                if self.builds.read_cache
                    && (self.builds.program_cache.as_ref())
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
                self.builds.building.push((key, background));
            }
        }
        // Finished builds nobody took, oldest first, beyond the few kept (a build still
        // running is kept: its thread would go on without anyone counting it).
        let mut finished = self
            .builds
            .building
            .iter()
            .filter(|(_, b)| !b.is_running())
            .count();
        self.builds.building.retain(|(_, b)| {
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
    pub(super) fn build_input(
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
    pub(super) fn quiet(&mut self) {
        if self.not_gpu {
            self.builds.building = std::mem::take(&mut self.builds.building)
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
    pub(super) fn reversed_build(
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

    /// `params` (of `source` when given) built for a run at `sizes`: its kernel (`None`: the
    /// reference's) and what the driver says of it, or why it cannot run there. On a CPU
    /// device the builds ahead are done first, so that what runs next is timed alone;
    /// `progress` hears [`Phase::Built`] then.
    pub(super) fn built_for(
        &mut self,
        params: &Params,
        source: Option<&str>,
        sizes: &Sizes,
        progress: &mut dyn FnMut(Phase),
    ) -> Result<(Option<std::rc::Rc<Kernel>>, KernelInfo), Rejection> {
        let candidate = self.build(params, source)?;
        self.quiet();
        progress(Phase::Built);
        let kernel = candidate.as_deref().unwrap_or(&self.reference);
        let info = self.check_built(kernel, params, sizes)?;
        Ok((candidate, info))
    }

    /// Limits that only the built kernel knows: its local memory and work-group limit.
    pub(super) fn check_built(
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
}
