//! The reference on a bench: its guard zones and sensitivity checked when the bench is set
//! up, its runs on an input set, and what a read outside its buffers means (the annotation's
//! mistake, never a candidate's).

use super::*;

impl Bench {
    /// The front guard relies on the driver: a sub-buffer must share its parent's memory, so
    /// that a write before the sub-buffer's start lands in the guard before it. (NVIDIA's
    /// driver did not, for buffers created from host memory.) Checked once per bench with each
    /// way a run's buffers are filled: a deliberate write before the start must be seen.
    pub(super) fn check_guards(&self) -> Result<(), SetupError> {
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
    pub(super) fn check_reference(&self, sizes: &Sizes) -> Result<(), SetupError> {
        if self.known.checked.borrow().contains(sizes) {
            return Ok(());
        }
        match self.check_reference_afresh(sizes) {
            Ok(()) => self.known.varies.set(true),
            Err(SetupError::InsensitiveOutput(_)) if self.known.varies.get() => {}
            Err(e) => return Err(e),
        }
        self.known.checked.borrow_mut().insert(sizes.clone());
        Ok(())
    }

    /// At a workload where the reference's outputs do not react to its inputs: whether they do
    /// at larger sizes (each size twice, four and sixteen times the workload's, where those
    /// fit the device) or at another workload's that fits. If so that workload's output is
    /// legitimately constant ([`Bench::check_reference`]); if not, the annotation checks an
    /// output that never depends on the inputs, and nothing could be verified.
    pub(super) fn reference_varies_elsewhere(&self, sizes: &Sizes) -> bool {
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
            if self.check_reference(&other).is_ok() && self.known.varies.get() {
                return true;
            }
        }
        false
    }

    /// [`Bench::check_reference`]'s checks, run.
    pub(super) fn check_reference_afresh(&self, sizes: &Sizes) -> Result<(), SetupError> {
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

    /// The reference run on `prepared` at `sizes`, to its end.
    pub(super) fn run_reference_on(
        &self,
        prepared: &Prepared,
        sizes: &Sizes,
    ) -> Result<Run, RtError> {
        let run = self.upload(prepared, &self.spec.reference, sizes)?;
        self.launch(&self.reference, &self.spec.reference, sizes, &run, false)?;
        self.session.finish()?;
        Ok(run)
    }

    /// The reference on a fresh input set at `sizes` (and the inputs), or why it does not run
    /// there (outer `Err`), or how it wrote outside its buffers (inner `Err`).
    pub(super) fn reference_run(
        &self,
        sizes: &Sizes,
    ) -> Result<Result<(Run, Prepared), String>, String> {
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
    pub(super) fn reference_reads_outside(
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
    pub(super) fn outside_message(&self, output: &str) -> String {
        format!(
            "its output `{output}` changed when only the memory past the ends of its inputs did: it reads outside the lengths `buffers(...)` declares{}",
            index_hint(&self.spec)
        )
    }

    /// What to fix when the reference wrote outside its buffers (`why`: where).
    pub(super) fn wrote_outside_message(&self, why: &str) -> String {
        format!(
            "it {why}; the annotation's `buffers(...)` must cover what the kernel touches{}",
            index_hint(&self.spec)
        )
    }
}
