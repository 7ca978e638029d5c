//! Timing: a candidate timed with profiling events until its median is stable, and where a
//! proof's time went (the tune's `phases`).

use super::*;

/// How little the median may move from one timed run to the next to count as steady.
pub const STABLE: f64 = 0.01;

/// Timed runs at most per measurement.
pub const MAX_REPEATS: usize = 50;

/// Kernel time per measurement after which no more runs are added (past the minimum).
pub const TIMING_BUDGET_S: f64 = 1.0;

/// Interquartile range over median (0 for fewer than 4 values).
pub fn relative_spread(v: &mut [f64]) -> f64 {
    if v.len() < 4 {
        return 0.0;
    }
    let m = median(v);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    if m > 0.0 {
        (q(0.75) - q(0.25)) / m
    } else {
        0.0
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

impl Bench {
    /// `f`, its wall time added to the proof time's part `part`.
    pub(super) fn timed<T>(
        &self,
        part: fn(&mut ProofTime) -> &mut f64,
        f: impl FnOnce() -> T,
    ) -> T {
        let started = Instant::now();
        let out = f();
        self.add_time(part, started);
        out
    }

    /// Adds the time since `started` to the proof time's part `part`.
    pub(super) fn add_time(&self, part: fn(&mut ProofTime) -> &mut f64, started: Instant) {
        let mut t = self.proof_time.get();
        *part(&mut t) += started.elapsed().as_secs_f64();
        self.proof_time.set(t);
    }

    /// The proof time gathered since the last call, and a fresh start.
    pub fn take_proof_time(&self) -> ProofTime {
        self.proof_time.take()
    }

    /// Kernel time from profiling events: the median of at least `repeats` timed runs, more
    /// while the median still moves (by more than [`STABLE`] from one run to the next, twice
    /// running), up to [`MAX_REPEATS`] runs or [`TIMING_BUDGET_S`] seconds of kernel time.
    /// Returns the median and the noise: the spread of the middle half of the runs
    /// (interquartile range) relative to the median.
    pub(super) fn time(
        &self,
        kernel: &Kernel,
        params: &Params,
        sizes: &Sizes,
        run: &Run,
    ) -> Result<(f64, f64), RtError> {
        for _ in 0..self.settings.warmup {
            self.launch(kernel, params, sizes, run, false)?;
        }
        let least = self.settings.repeats.max(1);
        let mut times = Vec::with_capacity(least);
        let (mut spent, mut steady, mut last) = (0.0, 0, f64::NAN);
        while times.len() < MAX_REPEATS.max(least) {
            if let Some(timing) = self.launch(kernel, params, sizes, run, true)? {
                let t = timing.seconds()?;
                spent += t;
                times.push(t);
            }
            let now = median(&mut times.clone());
            steady = if (now - last).abs() <= STABLE * now {
                steady + 1
            } else {
                0
            };
            last = now;
            if times.len() >= least && (steady >= 2 || spent >= TIMING_BUDGET_S) {
                break;
            }
        }
        Ok((median(&mut times), relative_spread(&mut times)))
    }
}
