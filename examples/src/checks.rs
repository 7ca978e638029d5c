//! Runs the suite's kernels on small inputs and compares them with the CPU computations of
//! [`crate::cpu`]: through dispatch (the examples program) or at given parameter values (the
//! tests and the `validate` program, which sweeps each kernel's space).

use kfoundry::model::spec::{fmt_assignments, Params};
use kfoundry::ocl::{Buffer, OclPrm, Queue};

use crate::cpu::{self, ConvParams, ConvShape};
use crate::suite::*;

pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// How a kernel is launched: the dispatched variant (`launch`) or given parameters
/// (`launch_params`).
#[derive(Debug, Clone, Copy)]
pub enum How<'a> {
    Dispatch,
    Params(&'a Params),
}

/// The result of one check: what ran, and how many elements differ from the CPU.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// `<dispatch step> (<params>)` or `<params>`; for a two-stage problem both, joined by ` + `.
    pub ran: String,
    pub mismatches: usize,
    pub len: usize,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.mismatches == 0
    }
}

/// Input buffer holding `data` (f32, or u16 for the 16-bit kernels' bits).
pub fn input<T: OclPrm>(queue: &Queue, data: &[T]) -> Result<Buffer<T>> {
    Ok(Buffer::builder()
        .queue(queue.clone())
        .len(data.len())
        .copy_host_slice(data)
        .build()?)
}

/// Output buffer of `len` NaNs (an element a kernel forgets to write fails the check).
pub fn output(queue: &Queue, len: usize) -> Result<Buffer<f32>> {
    Ok(Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(len)
        .fill_val(f32::NAN)
        .build()?)
}

/// The buffer's contents.
pub fn read(b: &Buffer<f32>) -> Result<Vec<f32>> {
    let mut v = vec![0f32; b.len()];
    b.read(&mut v).enq()?;
    Ok(v)
}

/// Launches kernel `$k` with `$how`; evaluates to a description of what ran.
macro_rules! launch {
    ($k:ty, $how:expr, $queue:expr, [$($size:expr),*], $($arg:expr),*) => {{
        match $how {
            How::Dispatch => {
                <$k>::launch($queue, $($size,)* $($arg),*)?;
                let choice = <$k>::explain(&$queue.device(), $($size),*)?;
                format!("{} ({})", choice.step, fmt_assignments(&choice.params, ", "))
            }
            How::Params(p) => {
                // SAFETY: buffers are allocated with the annotation's lengths; running
                // configurations nobody verified and checking them against the CPU is what the
                // `validate` program is for (on a development machine).
                unsafe { <$k>::launch_params($queue, p, $($size,)* $($arg),*)? };
                fmt_assignments(p, ", ")
            }
        }
    }};
}

pub fn sgemm(queue: &Queue, how: How<'_>, m: usize, n: usize, k: usize) -> Result<Outcome> {
    let (a, b) = (cpu::data(m * k, 11), cpu::data(k * n, 12));
    let (ab, bb, cb) = (input(queue, &a)?, input(queue, &b)?, output(queue, m * n)?);
    let ran = launch!(SuiteSgemm, how, queue, [m, n, k], &ab, &bb, &cb);
    let want = cpu::gemm(&a, &b, m, n, k);
    Ok(Outcome {
        ran,
        mismatches: cpu::mismatches(&read(&cb)?, &want, 1e-4, 1e-4),
        len: m * n,
    })
}

/// The 16-bit GEMMs (`SuiteHgemm`, `SuiteBgemm`) on inputs rounded to their format, against
/// the FP64 product ([`cpu::gemm16_mismatches`]).
pub fn gemm16(
    queue: &Queue,
    how: How<'_>,
    format: cpu::Half,
    m: usize,
    n: usize,
    k: usize,
) -> Result<Outcome> {
    let a = format.encode_all(&cpu::data(m * k, 13));
    let b = format.encode_all(&cpu::data(k * n, 14));
    // A quiet NaN in both formats: an element left unwritten shows.
    let (ab, bb, cb) = (
        input(queue, &a)?,
        input(queue, &b)?,
        input(queue, &vec![cpu::HALF_NAN; m * n])?,
    );
    let ran = match format {
        cpu::Half::F16 => launch!(SuiteHgemm, how, queue, [m, n, k], &ab, &bb, &cb),
        cpu::Half::Bf16 => launch!(SuiteBgemm, how, queue, [m, n, k], &ab, &bb, &cb),
    };
    let mut got = vec![0u16; m * n];
    cb.read(&mut got).enq()?;
    Ok(Outcome {
        ran,
        mismatches: cpu::gemm16_mismatches(format, &a, &b, &got, (m, n, k)).len(),
        len: m * n,
    })
}

pub fn softmax(queue: &Queue, how: How<'_>, rows: usize, cols: usize) -> Result<Outcome> {
    let x = cpu::data(rows * cols, 21);
    let (xb, yb) = (input(queue, &x)?, output(queue, rows * cols)?);
    let ran = launch!(Softmax, how, queue, [rows, cols], &xb, &yb);
    let want = cpu::softmax(&x, rows, cols);
    Ok(Outcome {
        ran,
        mismatches: cpu::mismatches(&read(&yb)?, &want, 1e-4, 1e-9),
        len: rows * cols,
    })
}

/// Stage 1 of the softmax problem on its own, against the CPU's partials.
pub fn softmax_stats(
    queue: &Queue,
    how: How<'_>,
    rows: usize,
    cols: usize,
    chunk: usize,
) -> Result<Outcome> {
    let x: Vec<f32> = cpu::data(rows * cols, 23).iter().map(|v| v * 8.0).collect();
    let nch = cols.div_ceil(chunk);
    let (xb, mb, sb) = (
        input(queue, &x)?,
        output(queue, rows * nch)?,
        output(queue, rows * nch)?,
    );
    let ran = launch!(SoftmaxStats, how, queue, [rows, cols, chunk], &xb, &mb, &sb);
    let (pmax, psum) = cpu::softmax_partials(&x, rows, cols, chunk);
    let bad = cpu::mismatches(&read(&mb)?, &pmax, 0.0, 0.0)
        + cpu::mismatches(&read(&sb)?, &psum, 1e-5, 1e-6);
    Ok(Outcome {
        ran,
        mismatches: bad,
        len: 2 * rows * nch,
    })
}

/// Stage 2 of the softmax problem on its own, fed partials computed on the CPU (with partial
/// maxima spread over a range, so that the rescaling matters).
pub fn softmax_apply(
    queue: &Queue,
    how: How<'_>,
    rows: usize,
    cols: usize,
    chunk: usize,
) -> Result<Outcome> {
    let x: Vec<f32> = cpu::data(rows * cols, 24).iter().map(|v| v * 8.0).collect();
    let (pmax, psum) = cpu::softmax_partials(&x, rows, cols, chunk);
    let (pmax, psum): (Vec<f32>, Vec<f32>) = (
        pmax.iter().map(|v| *v as f32).collect(),
        psum.iter().map(|v| *v as f32).collect(),
    );
    let (xb, mb, sb, yb) = (
        input(queue, &x)?,
        input(queue, &pmax)?,
        input(queue, &psum)?,
        output(queue, rows * cols)?,
    );
    let ran = launch!(
        SoftmaxApply,
        how,
        queue,
        [rows, cols, chunk],
        &xb,
        &mb,
        &sb,
        &yb
    );
    let want = cpu::softmax_apply(&x, &pmax, &psum, rows, cols, chunk);
    Ok(Outcome {
        ran,
        mismatches: cpu::mismatches(&read(&yb)?, &want, 1e-5, 1e-12),
        len: rows * cols,
    })
}

/// The whole softmax problem in two stages, against the CPU softmax.
pub fn softmax_stages(
    queue: &Queue,
    how: (How<'_>, How<'_>),
    rows: usize,
    cols: usize,
    chunk: usize,
) -> Result<Outcome> {
    let x: Vec<f32> = cpu::data(rows * cols, 25).iter().map(|v| v * 8.0).collect();
    let nch = cols.div_ceil(chunk);
    let (xb, mb, sb, yb) = (
        input(queue, &x)?,
        output(queue, rows * nch)?,
        output(queue, rows * nch)?,
        output(queue, rows * cols)?,
    );
    let ran1 = launch!(
        SoftmaxStats,
        how.0,
        queue,
        [rows, cols, chunk],
        &xb,
        &mb,
        &sb
    );
    let ran2 = launch!(
        SoftmaxApply,
        how.1,
        queue,
        [rows, cols, chunk],
        &xb,
        &mb,
        &sb,
        &yb
    );
    let want = cpu::softmax(&x, rows, cols);
    Ok(Outcome {
        ran: format!("{ran1} + {ran2}"),
        mismatches: cpu::mismatches(&read(&yb)?, &want, 1e-4, 1e-12),
        len: rows * cols,
    })
}

/// Stage 2 of the Linear problem on its own (same kernel source as [`softmax`]).
pub fn linear_softmax(queue: &Queue, how: How<'_>, rows: usize, cols: usize) -> Result<Outcome> {
    let x: Vec<f32> = cpu::data(rows * cols, 22).iter().map(|v| v * 6.0).collect();
    let (xb, yb) = (input(queue, &x)?, output(queue, rows * cols)?);
    let ran = launch!(LinearSoftmax, how, queue, [rows, cols], &xb, &yb);
    let want = cpu::softmax(&x, rows, cols);
    Ok(Outcome {
        ran,
        mismatches: cpu::mismatches(&read(&yb)?, &want, 1e-4, 1e-9),
        len: rows * cols,
    })
}

pub fn layernorm_stats(
    queue: &Queue,
    how: How<'_>,
    n: usize,
    d: usize,
    chunk: usize,
) -> Result<Outcome> {
    let x: Vec<f32> = cpu::data(n * d, 31).iter().map(|v| v + 3.0).collect();
    let nch = d.div_ceil(chunk);
    let (xb, mb, qb) = (
        input(queue, &x)?,
        output(queue, n * nch)?,
        output(queue, n * nch)?,
    );
    let ran = launch!(LayerNormStats, how, queue, [n, d, chunk], &xb, &mb, &qb);
    let (mean, m2) = cpu::layernorm_partials(&x, n, d, chunk);
    let bad = cpu::mismatches(&read(&mb)?, &mean, 1e-5, 1e-5)
        + cpu::mismatches(&read(&qb)?, &m2, 1e-3, 1e-3);
    Ok(Outcome {
        ran,
        mismatches: bad,
        len: 2 * n * nch,
    })
}

pub fn layernorm_apply(
    queue: &Queue,
    how: How<'_>,
    n: usize,
    d: usize,
    chunk: usize,
) -> Result<Outcome> {
    let x: Vec<f32> = cpu::data(n * d, 32).iter().map(|v| v + 3.0).collect();
    let (w, b) = (cpu::data(d, 33), cpu::data(d, 34));
    let (mean, m2) = cpu::layernorm_partials(&x, n, d, chunk);
    let (mean, m2): (Vec<f32>, Vec<f32>) = (
        mean.iter().map(|v| *v as f32).collect(),
        m2.iter().map(|v| *v as f32).collect(),
    );
    let bufs = (
        input(queue, &x)?,
        input(queue, &mean)?,
        input(queue, &m2)?,
        input(queue, &w)?,
        input(queue, &b)?,
    );
    let yb = output(queue, n * d)?;
    let ran = launch!(
        LayerNormApply,
        how,
        queue,
        [n, d, chunk],
        1e-5f32,
        &bufs.0,
        &bufs.1,
        &bufs.2,
        &bufs.3,
        &bufs.4,
        &yb
    );
    let want = cpu::layernorm_apply(&x, &mean, &m2, &w, &b, n, d, chunk, 1e-5);
    Ok(Outcome {
        ran,
        mismatches: cpu::mismatches(&read(&yb)?, &want, 1e-4, 1e-4),
        len: n * d,
    })
}

/// The whole LayerNorm problem: stage 1 then stage 2, against the CPU LayerNorm.
pub fn layernorm(
    queue: &Queue,
    how: (How<'_>, How<'_>),
    n: usize,
    d: usize,
    chunk: usize,
) -> Result<Outcome> {
    let x: Vec<f32> = cpu::data(n * d, 35).iter().map(|v| v + 3.0).collect();
    let (w, b) = (cpu::data(d, 36), cpu::data(d, 37));
    let nch = d.div_ceil(chunk);
    let (xb, wb, bb) = (input(queue, &x)?, input(queue, &w)?, input(queue, &b)?);
    let (mb, qb, yb) = (
        output(queue, n * nch)?,
        output(queue, n * nch)?,
        output(queue, n * d)?,
    );
    let ran1 = launch!(LayerNormStats, how.0, queue, [n, d, chunk], &xb, &mb, &qb);
    let ran2 = launch!(
        LayerNormApply,
        how.1,
        queue,
        [n, d, chunk],
        1e-5f32,
        &xb,
        &mb,
        &qb,
        &wb,
        &bb,
        &yb
    );
    let want = cpu::layernorm(&x, &w, &b, n, d, 1e-5);
    Ok(Outcome {
        ran: format!("{ran1} + {ran2}"),
        mismatches: cpu::mismatches(&read(&yb)?, &want, 1e-4, 1e-4),
        len: n * d,
    })
}

pub fn sum_dim1(
    queue: &Queue,
    how: How<'_>,
    batch: usize,
    rows: usize,
    cols: usize,
) -> Result<Outcome> {
    let x = cpu::data(batch * rows * cols, 41);
    let (xb, ob) = (input(queue, &x)?, output(queue, batch * cols)?);
    let ran = launch!(SumDim1, how, queue, [batch, rows, cols], &xb, &ob);
    let want = cpu::sum_dim1(&x, batch, rows, cols);
    Ok(Outcome {
        ran,
        mismatches: cpu::mismatches(&read(&ob)?, &want, 1e-4, 1e-4),
        len: batch * cols,
    })
}

pub fn linear_gelu(queue: &Queue, how: How<'_>, m: usize, n: usize, k: usize) -> Result<Outcome> {
    let (x, w, b) = (cpu::data(m * k, 51), cpu::data(n * k, 52), cpu::data(n, 53));
    let (xb, wb, bb, yb) = (
        input(queue, &x)?,
        input(queue, &w)?,
        input(queue, &b)?,
        output(queue, m * n)?,
    );
    let ran = launch!(LinearGelu, how, queue, [m, n, k], &xb, &wb, &bb, &yb);
    let want = cpu::linear_gelu(&x, &w, &b, m, n, k);
    Ok(Outcome {
        ran,
        mismatches: cpu::mismatches(&read(&yb)?, &want, 1e-4, 5e-4),
        len: m * n,
    })
}

/// The whole Linear + GELU + softmax problem, against the CPU.
pub fn linear(
    queue: &Queue,
    how: (How<'_>, How<'_>),
    m: usize,
    n: usize,
    k: usize,
) -> Result<Outcome> {
    let (x, w, b) = (cpu::data(m * k, 54), cpu::data(n * k, 55), cpu::data(n, 56));
    let (xb, wb, bb) = (input(queue, &x)?, input(queue, &w)?, input(queue, &b)?);
    let (hb, yb) = (output(queue, m * n)?, output(queue, m * n)?);
    let ran1 = launch!(LinearGelu, how.0, queue, [m, n, k], &xb, &wb, &bb, &hb);
    let ran2 = launch!(LinearSoftmax, how.1, queue, [m, n], &hb, &yb);
    let h = cpu::linear_gelu(&x, &w, &b, m, n, k);
    let h32: Vec<f32> = h.iter().map(|v| *v as f32).collect();
    let want = cpu::softmax(&h32, m, n);
    Ok(Outcome {
        ran: format!("{ran1} + {ran2}"),
        mismatches: cpu::mismatches(&read(&yb)?, &want, 1e-3, 1e-9),
        len: m * n,
    })
}

/// The convolution problem's inputs (the same values for every form of it): x, the weights
/// and the six per-channel vectors (conv bias, bias, scale, gamma, beta).
struct ConvInputs {
    x: Vec<f32>,
    weight: Vec<f32>,
    per: [Vec<f32>; 5],
}

impl ConvInputs {
    fn new(s: ConvShape) -> Self {
        let weight = cpu::data(s.cout * s.cin * 9, 62)
            .iter()
            .map(|v| v * 0.3)
            .collect();
        let per = |seed| cpu::data(s.cout, seed);
        ConvInputs {
            x: cpu::data(s.n * s.cin * s.h * s.w, 61),
            weight,
            per: [per(63), per(64), per(65), per(66), per(67)],
        }
    }

    fn params(&self) -> ConvParams<'_> {
        let [cb, bi, sc, ga, be] = &self.per;
        ConvParams {
            weight: &self.weight,
            conv_bias: cb,
            bias: bi,
            scale: sc,
            gamma: ga,
            beta: be,
        }
    }

    /// x, then weight, conv bias, bias, scale, gamma and beta on the device.
    fn upload(&self, queue: &Queue) -> Result<(Buffer<f32>, [Buffer<f32>; 6])> {
        let [cb, bi, sc, ga, be] = &self.per;
        Ok((
            input(queue, &self.x)?,
            [
                input(queue, &self.weight)?,
                input(queue, cb)?,
                input(queue, bi)?,
                input(queue, sc)?,
                input(queue, ga)?,
                input(queue, be)?,
            ],
        ))
    }
}

pub fn conv_gn(queue: &Queue, how: How<'_>, s: ConvShape) -> Result<Outcome> {
    let inputs = ConvInputs::new(s);
    let (xb, bufs) = inputs.upload(queue)?;
    let len = s.n * s.cout * (s.h - 2) * (s.w - 2);
    let ob = output(queue, len)?;
    let ran = launch!(
        ConvGroupNorm,
        how,
        queue,
        [s.n, s.cin, s.h, s.w, s.cout, s.groups],
        1e-5f32,
        &xb,
        &bufs[0],
        &bufs[1],
        &bufs[2],
        &bufs[3],
        &bufs[4],
        &bufs[5],
        &ob
    );
    let want = cpu::conv_gn(&inputs.x, &inputs.params(), s, 1e-5);
    Ok(Outcome {
        ran,
        mismatches: cpu::mismatches(&read(&ob)?, &want, 1e-3, 1e-3),
        len,
    })
}

/// `ConvGnStats` with chunks of `rows` output rows on uploaded inputs: what ran, and z, the means
/// and the sums of squared deviations on the device.
fn launch_conv_gn_stats(
    queue: &Queue,
    how: How<'_>,
    s: ConvShape,
    rows: usize,
    (xb, bufs): &(Buffer<f32>, [Buffer<f32>; 6]),
) -> Result<(String, [Buffer<f32>; 3])> {
    let len = s.n * s.cout * (s.h - 2) * (s.w - 2);
    let parts = s.n * s.groups * (s.h - 2).div_ceil(rows);
    let out = [
        output(queue, len)?,
        output(queue, parts)?,
        output(queue, parts)?,
    ];
    let ran = launch!(
        ConvGnStats,
        how,
        queue,
        [s.n, s.cin, s.h, s.w, s.cout, s.groups, rows],
        xb,
        &bufs[0],
        &bufs[1],
        &bufs[2],
        &bufs[3],
        &out[0],
        &out[1],
        &out[2]
    );
    Ok((ran, out))
}

/// Problem 6's first stage (`ConvGnStats`) with chunks of `rows` output rows: z and the
/// partials against the CPU's.
pub fn conv_gn_stats(queue: &Queue, how: How<'_>, s: ConvShape, rows: usize) -> Result<Outcome> {
    let inputs = ConvInputs::new(s);
    let (ran, [zb, mb, qb]) = launch_conv_gn_stats(queue, how, s, rows, &inputs.upload(queue)?)?;
    let z = cpu::conv_sigmoid(&inputs.x, &inputs.params(), s);
    let (mean, m2) = cpu::conv_gn_partials(&z, s, rows);
    let bad = cpu::mismatches(&read(&zb)?, &z, 1e-5, 1e-6)
        + cpu::mismatches(&read(&mb)?, &mean, 1e-5, 1e-5)
        + cpu::mismatches(&read(&qb)?, &m2, 1e-3, 1e-3);
    Ok(Outcome {
        ran,
        mismatches: bad,
        len: z.len() + 2 * mean.len(),
    })
}

/// Problem 6's second stage (`GroupNormApply`) on the CPU's z and partials.
pub fn groupnorm_apply(queue: &Queue, how: How<'_>, s: ConvShape, rows: usize) -> Result<Outcome> {
    let inputs = ConvInputs::new(s);
    let z = cpu::conv_sigmoid(&inputs.x, &inputs.params(), s);
    let (mean, m2) = cpu::conv_gn_partials(&z, s, rows);
    let f32s = |v: &[f64]| v.iter().map(|v| *v as f32).collect::<Vec<f32>>();
    let (z, mean, m2) = (f32s(&z), f32s(&mean), f32s(&m2));
    let [_, _, _, ga, be] = &inputs.per;
    let bufs = [
        input(queue, &z)?,
        input(queue, &mean)?,
        input(queue, &m2)?,
        input(queue, ga)?,
        input(queue, be)?,
    ];
    let ob = output(queue, z.len())?;
    let ran = launch!(
        GroupNormApply,
        how,
        queue,
        [s.n, s.h, s.w, s.cout, s.groups, rows],
        1e-5f32,
        &bufs[0],
        &bufs[1],
        &bufs[2],
        &bufs[3],
        &bufs[4],
        &ob
    );
    let want = cpu::groupnorm_apply(&z, &mean, &m2, &inputs.params(), s, rows, 1e-5);
    Ok(Outcome {
        ran,
        mismatches: cpu::mismatches(&read(&ob)?, &want, 1e-4, 1e-4),
        len: z.len(),
    })
}

/// The whole problem 6 in two launches (`ConvGnStats`, then `GroupNormApply`), against the CPU's
/// fused convolution and GroupNorm.
pub fn conv_gn_staged(
    queue: &Queue,
    how: (How<'_>, How<'_>),
    s: ConvShape,
    rows: usize,
) -> Result<Outcome> {
    let inputs = ConvInputs::new(s);
    let uploaded = inputs.upload(queue)?;
    let (ran1, [zb, mb, qb]) = launch_conv_gn_stats(queue, how.0, s, rows, &uploaded)?;
    let bufs = &uploaded.1;
    let len = s.n * s.cout * (s.h - 2) * (s.w - 2);
    let ob = output(queue, len)?;
    let ran2 = launch!(
        GroupNormApply,
        how.1,
        queue,
        [s.n, s.h, s.w, s.cout, s.groups, rows],
        1e-5f32,
        &zb,
        &mb,
        &qb,
        &bufs[4],
        &bufs[5],
        &ob
    );
    let want = cpu::conv_gn(&inputs.x, &inputs.params(), s, 1e-5);
    Ok(Outcome {
        ran: format!("{ran1} + {ran2}"),
        mismatches: cpu::mismatches(&read(&ob)?, &want, 1e-3, 1e-3),
        len,
    })
}

pub mod small {
    use crate::cpu::ConvShape;
    pub const SGEMM: (usize, usize, usize) = (128, 128, 128);
    pub const SOFTMAX: (usize, usize) = (64, 4096);
    /// rows, cols, chunk of the two-stage softmax.
    pub const SOFTMAX_STAGES: (usize, usize, usize) = (64, 4096, 1024);
    pub const LAYERNORM: (usize, usize, usize) = (4, 8192, 1024);
    pub const SUM: (usize, usize, usize) = (4, 256, 255);
    pub const LINEAR: (usize, usize, usize) = (64, 256, 256);
    pub const CONV: ConvShape = ConvShape {
        n: 2,
        cin: 8,
        h: 34,
        w: 34,
        cout: 32,
        groups: 8,
    };
    /// Output rows a chunk of the two-launch form's partials holds.
    pub const CONV_ROWS: usize = 8;
}
