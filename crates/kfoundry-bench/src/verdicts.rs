//! Verdicts: a candidate's run compared with the reference's on the same input set (every
//! output, every input it must leave alone), with tolerances from the reference's own
//! sensitivity, and the reference's kept runs on a proof's cases.

use super::*;

impl Bench {
    /// Compares output `name` of two finished runs: on the device for large buffers (floats
    /// with tolerances; any type when they must be exactly the same), else on the host.
    pub(super) fn compare_outputs(
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
    pub(super) fn unchanged(
        &self,
        name: &str,
        cand: &Run,
        refr: &Run,
    ) -> Result<Comparison, RtError> {
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
    pub(super) fn device_side(&self, bytes: usize) -> bool {
        if self.not_gpu {
            bytes >= device_data::MIN_BYTES
        } else {
            bytes > 0
        }
    }

    /// Output `name` of a run, read back to the host: its element type, length and bytes.
    pub(super) fn host_copy(
        &self,
        run: &Run,
        name: &str,
    ) -> Result<(ScalarType, usize, Vec<u8>), RtError> {
        let b = run.buffer(name)?;
        let mut bytes = vec![0u8; b.len * b.ty.size()];
        b.view.read(0, &mut bytes)?;
        Ok((b.ty, b.len, bytes))
    }

    /// The cosine similarity of output `name` of two runs (read back to the host).
    pub(super) fn cosine(&self, name: &str, cand: &Run, refr: &Run) -> Result<f64, RtError> {
        let ((ty, len, x), (_, _, y)) = (self.host_copy(cand, name)?, self.host_copy(refr, name)?);
        Ok(compare::cosine(
            len,
            |i| decode(ty, &x, i),
            |i| decode(ty, &y, i),
        ))
    }

    /// One verification on a fresh input set of `shape`: reference and candidate on the same
    /// inputs (the reference checked to stay within its buffers on them), then
    /// [`Bench::check_candidate`].
    pub(super) fn verify(&self, kernel: &Kernel, params: &Params, shape: &Shape) -> SetOutcome {
        let runtime = |e: RtError| SetOutcome::Failed(Rejection::Runtime(e.to_string()));
        let key = self.reference_key(params, shape);
        let kept = key
            .as_ref()
            .and_then(|k| self.known.runs.borrow_mut().get(k));
        let kept = match kept {
            Some(kept) => kept,
            None => match self.reference_on(params, shape) {
                Ok(kept) => {
                    let kept = std::rc::Rc::new(kept);
                    if let Some(key) = key {
                        self.known.runs.borrow_mut().keep(
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
            self.known.runs.borrow_mut().clear();
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
    pub(super) fn reference_key(
        &self,
        params: &Params,
        shape: &Shape,
    ) -> Option<reference_runs::Key> {
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
    pub(super) fn reference_on(
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
    pub(super) fn sensitivity(
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
    pub(super) fn check_candidate(
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
    pub(super) fn compare_candidate(
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
            // Within the bound or refused: a NaN norm is refused too. On inputs judged by the
            // reference's sensitivity (far from the declared ones, one repeated value, sorted)
            // the whole-output bounds are widened as the element-wise tolerance is: a sum of
            // 26727 equal products in another order than the reference's sequential one (the
            // less accurate of the two) differed by a relative norm of 2.4e-4 from it.
            let (factor, on) = if values.judged_by_sensitivity() {
                (
                    FAR_FACTOR,
                    format!(" times {FAR_FACTOR} on {}", values.describe()),
                )
            } else {
                (1.0, String::new())
            };
            let within = |n: &f64| cmp.rel_norm <= factor * *n;
            if let Some(n) = w.norm.filter(|n| !within(n)) {
                return wrong(format!(
                    "relative error norm {:.3e} above the check's `norm = {n}`{on}",
                    cmp.rel_norm
                ));
            }
            if let Some(c) = w.cosine {
                let cos = self.cosine(name, cand_run, ref_run).map_err(runtime)?;
                if cos.is_nan() || cos < 1.0 - factor * (1.0 - c) {
                    return wrong(format!(
                        "cosine similarity {cos:.9} below the check's `cosine = {c}`{on}"
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
}
