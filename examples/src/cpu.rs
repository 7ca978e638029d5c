//! CPU computations (in f64) of the suite's problems, for checks in the examples program and
//! the tests. Plain loops, written for clarity, not speed: use them at the `small` sizes.

/// Deterministic test data in [-1, 1).
pub fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| {
            ((i.wrapping_mul(2654435761)
                .wrapping_add(seed.wrapping_mul(40503))
                >> 8)
                % 2000) as f32
                / 1000.0
                - 1.0
        })
        .collect()
}

/// Whether `got` differs from `want` by more than `atol + rtol * |want|`; NaN on either side
/// counts as a difference.
pub fn differs(got: f64, want: f64, rtol: f64, atol: f64) -> bool {
    let within = (got - want).abs() <= atol + rtol * want.abs();
    !within
}

/// Number of elements of `got` that differ from `want` by more than `atol + rtol * |want|`
/// (NaN counts as a difference).
pub fn mismatches(got: &[f32], want: &[f64], rtol: f64, atol: f64) -> usize {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .filter(|(g, w)| differs(**g as f64, **w, rtol, atol))
        .count()
}

/// C = A·B, row-major (A: m × k, B: k × n).
pub fn gemm(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p] as f64;
            for j in 0..n {
                c[i * n + j] += av * b[p * n + j] as f64;
            }
        }
    }
    c
}

/// A quiet NaN in both 16-bit formats: what the 16-bit checks fill an output with, so that an
/// element a kernel leaves unwritten shows.
pub const HALF_NAN: u16 = 0x7fc0;

/// A 16-bit float format of the suite's GEMMs: IEEE half or bfloat16.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Half {
    F16,
    Bf16,
}

impl Half {
    /// `x` rounded to nearest (even) in this format, as bits.
    pub fn encode(self, x: f64) -> u16 {
        match self {
            Half::F16 => half::f16::from_f64(x).to_bits(),
            Half::Bf16 => half::bf16::from_f64(x).to_bits(),
        }
    }

    /// Each of `xs` encoded.
    pub fn encode_all(self, xs: &[f32]) -> Vec<u16> {
        xs.iter().map(|x| self.encode(f64::from(*x))).collect()
    }

    pub fn decode(self, bits: u16) -> f64 {
        match self {
            Half::F16 => half::f16::from_bits(bits).to_f64(),
            Half::Bf16 => half::bf16::from_bits(bits).to_f64(),
        }
    }
}

/// Elements of the 16-bit product C = A·B (`got`, bits; A: m × k, B: k × n, bits) farther from
/// the FP64 product of the inputs than one unit in the last place (at the exact value's
/// nearest 16-bit value) plus what an FP32 sum of the k terms may round away
/// (k · 2^-24 · Σ|a·b|): the kernels accumulate in FP32 and round once.
pub fn gemm16_mismatches(
    format: Half,
    a: &[u16],
    b: &[u16],
    got: &[u16],
    (m, n, k): (usize, usize, usize),
) -> Vec<(usize, usize, f64, f64)> {
    let mut bad = Vec::new();
    for (e, &bits) in got.iter().enumerate().take(m * n) {
        let (i, j) = (e / n, e % n);
        let terms = (0..k).map(|p| format.decode(a[i * k + p]) * format.decode(b[p * n + j]));
        let exact: f64 = terms.clone().sum();
        let nearest = format.encode(exact);
        let unit = (format.decode(nearest.wrapping_add(1)) - format.decode(nearest)).abs();
        let fp32 = k as f64 * 2f64.powi(-24) * terms.map(f64::abs).sum::<f64>();
        let value = format.decode(bits);
        // NaN (an element left unwritten) is never within.
        let within = (value - exact).abs() <= unit + fp32;
        if !within {
            bad.push((i, j, value, exact));
        }
    }
    bad
}

/// Softmax of each row of a rows × cols matrix.
pub fn softmax(x: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let mut y = vec![0f64; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mx = row.iter().fold(f64::NEG_INFINITY, |m, v| m.max(*v as f64));
        let sum: f64 = row.iter().map(|v| (*v as f64 - mx).exp()).sum();
        for c in 0..cols {
            y[r * cols + c] = (row[c] as f64 - mx).exp() / sum;
        }
    }
    y
}

/// Per (row, chunk) maximum and sum of exp(x - maximum), as `softmax_stats.cl` writes them.
pub fn softmax_partials(x: &[f32], rows: usize, cols: usize, chunk: usize) -> (Vec<f64>, Vec<f64>) {
    let nch = cols.div_ceil(chunk);
    let (mut pmax, mut psum) = (vec![0f64; rows * nch], vec![0f64; rows * nch]);
    for r in 0..rows {
        for c in 0..nch {
            let part = &x[r * cols + c * chunk..r * cols + ((c + 1) * chunk).min(cols)];
            let mx = part.iter().fold(f64::NEG_INFINITY, |m, v| m.max(*v as f64));
            pmax[r * nch + c] = mx;
            psum[r * nch + c] = part.iter().map(|v| (*v as f64 - mx).exp()).sum();
        }
    }
    (pmax, psum)
}

/// Softmax from given per-chunk partials (what `softmax_apply.cl` computes): the row's maximum
/// is the largest partial maximum, its sum the partial sums rescaled to it.
pub fn softmax_apply(
    x: &[f32],
    pmax: &[f32],
    psum: &[f32],
    rows: usize,
    cols: usize,
    chunk: usize,
) -> Vec<f64> {
    let nch = cols.div_ceil(chunk);
    let mut y = vec![0f64; rows * cols];
    for r in 0..rows {
        let (pm, ps) = (&pmax[r * nch..(r + 1) * nch], &psum[r * nch..(r + 1) * nch]);
        let mx = pm.iter().fold(f64::NEG_INFINITY, |m, v| m.max(*v as f64));
        let sum: f64 = pm
            .iter()
            .zip(ps)
            .map(|(m, s)| *s as f64 * (*m as f64 - mx).exp())
            .sum();
        for c in 0..cols {
            y[r * cols + c] = (x[r * cols + c] as f64 - mx).exp() / sum;
        }
    }
    y
}

/// Per (sample, chunk) mean and sum of squared deviations, as `layernorm_stats.cl` writes them.
pub fn layernorm_partials(x: &[f32], n: usize, d: usize, chunk: usize) -> (Vec<f64>, Vec<f64>) {
    let nch = d.div_ceil(chunk);
    let (mut mean, mut m2) = (vec![0f64; n * nch], vec![0f64; n * nch]);
    for s in 0..n {
        for c in 0..nch {
            let part = &x[s * d + c * chunk..s * d + ((c + 1) * chunk).min(d)];
            let mu = part.iter().map(|v| *v as f64).sum::<f64>() / part.len() as f64;
            mean[s * nch + c] = mu;
            m2[s * nch + c] = part.iter().map(|v| (*v as f64 - mu).powi(2)).sum();
        }
    }
    (mean, m2)
}

/// LayerNorm of each of n samples of d elements (biased variance), with elementwise affine.
pub fn layernorm(
    x: &[f32],
    weight: &[f32],
    bias: &[f32],
    n: usize,
    d: usize,
    eps: f64,
) -> Vec<f64> {
    let mut y = vec![0f64; n * d];
    for s in 0..n {
        let row = &x[s * d..(s + 1) * d];
        let mu = row.iter().map(|v| *v as f64).sum::<f64>() / d as f64;
        let var = row.iter().map(|v| (*v as f64 - mu).powi(2)).sum::<f64>() / d as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        for i in 0..d {
            y[s * d + i] = (row[i] as f64 - mu) * rstd * weight[i] as f64 + bias[i] as f64;
        }
    }
    y
}

/// LayerNorm from given per-chunk partials (what `layernorm_apply.cl` computes).
#[allow(clippy::too_many_arguments)]
pub fn layernorm_apply(
    x: &[f32],
    mean: &[f32],
    m2: &[f32],
    weight: &[f32],
    bias: &[f32],
    n: usize,
    d: usize,
    chunk: usize,
    eps: f64,
) -> Vec<f64> {
    let nch = d.div_ceil(chunk);
    let cnt = |c: usize| (chunk.min(d - c * chunk)) as f64;
    let mut y = vec![0f64; n * d];
    for s in 0..n {
        let mu = (0..nch)
            .map(|c| cnt(c) * mean[s * nch + c] as f64)
            .sum::<f64>()
            / d as f64;
        let tot: f64 = (0..nch)
            .map(|c| m2[s * nch + c] as f64 + cnt(c) * (mean[s * nch + c] as f64 - mu).powi(2))
            .sum();
        let rstd = 1.0 / (tot / d as f64 + eps).sqrt();
        for i in 0..d {
            y[s * d + i] = (x[s * d + i] as f64 - mu) * rstd * weight[i] as f64 + bias[i] as f64;
        }
    }
    y
}

/// Sum over dimension 1 of a batch × rows × cols tensor (keepdim: batch × 1 × cols).
pub fn sum_dim1(x: &[f32], batch: usize, rows: usize, cols: usize) -> Vec<f64> {
    let mut out = vec![0f64; batch * cols];
    for b in 0..batch {
        for i in 0..rows {
            for j in 0..cols {
                out[b * cols + j] += x[(b * rows + i) * cols + j] as f64;
            }
        }
    }
    out
}

/// The error function (series below |x| = 4, where 1 - erf(4) < 2e-8).
pub fn erf(x: f64) -> f64 {
    if x.abs() >= 4.0 {
        return x.signum() * (1.0 - erfc_tail(x.abs()));
    }
    // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
    let (mut term, mut sum, x2) = (x, x, x * x);
    for n in 1..200 {
        term *= -x2 / n as f64;
        let t = term / (2 * n + 1) as f64;
        sum += t;
        if t.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// erfc(x) for x >= 4 by its continued fraction.
fn erfc_tail(x: f64) -> f64 {
    let mut f = 0.0;
    for k in (1..60).rev() {
        f = (k as f64 / 2.0) / (x + f);
    }
    (-x * x).exp() / std::f64::consts::PI.sqrt() / (x + f)
}

/// Exact GELU.
pub fn gelu(v: f64) -> f64 {
    0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2))
}

/// GELU(x·wᵀ + bias): x is m × k, w is n × k (PyTorch Linear weight), result m × n.
pub fn linear_gelu(x: &[f32], w: &[f32], bias: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut y = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k)
                .map(|p| x[i * k + p] as f64 * w[j * k + p] as f64)
                .sum();
            y[i * n + j] = gelu(dot + bias[j] as f64);
        }
    }
    y
}

/// Shapes of the fused convolution problem.
#[derive(Debug, Clone, Copy)]
pub struct ConvShape {
    pub n: usize,
    pub cin: usize,
    pub h: usize,
    pub w: usize,
    pub cout: usize,
    pub groups: usize,
}

/// The parameters of the convolution problem, in PyTorch's layouts.
pub struct ConvParams<'a> {
    pub weight: &'a [f32],
    pub conv_bias: &'a [f32],
    pub bias: &'a [f32],
    pub scale: &'a [f32],
    pub gamma: &'a [f32],
    pub beta: &'a [f32],
}

/// Conv2d (3 × 3, valid, stride 1) + conv bias, + bias, × scale, sigmoid, GroupNorm (affine).
pub fn conv_gn(x: &[f32], p: &ConvParams<'_>, s: ConvShape, eps: f64) -> Vec<f64> {
    let mut z = conv_sigmoid(x, p, s);
    let (oh, ow) = (s.h - 2, s.w - 2);
    let cpg = s.cout / s.groups;
    for b in 0..s.n {
        for g in 0..s.groups {
            let block =
                &mut z[(b * s.cout + g * cpg) * oh * ow..(b * s.cout + (g + 1) * cpg) * oh * ow];
            let cnt = block.len() as f64;
            let mu = block.iter().sum::<f64>() / cnt;
            let var = block.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / cnt;
            let rstd = 1.0 / (var + eps).sqrt();
            for (i, v) in block.iter_mut().enumerate() {
                let o = g * cpg + i / (oh * ow);
                *v = (*v - mu) * rstd * p.gamma[o] as f64 + p.beta[o] as f64;
            }
        }
    }
    z
}

/// The convolution problem before its GroupNorm: Conv2d (3 × 3, valid, stride 1) + conv bias,
/// + bias, × scale, sigmoid (what `ConvGnStats` stores as `z`).
pub fn conv_sigmoid(x: &[f32], p: &ConvParams<'_>, s: ConvShape) -> Vec<f64> {
    let (oh, ow) = (s.h - 2, s.w - 2);
    let mut z = vec![0f64; s.n * s.cout * oh * ow];
    for b in 0..s.n {
        for o in 0..s.cout {
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = p.conv_bias[o] as f64;
                    for ci in 0..s.cin {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                acc += x[((b * s.cin + ci) * s.h + y + ky) * s.w + xx + kx] as f64
                                    * p.weight[((o * s.cin + ci) * 3 + ky) * 3 + kx] as f64;
                            }
                        }
                    }
                    let v = (acc + p.bias[o] as f64) * p.scale[o] as f64;
                    z[((b * s.cout + o) * oh + y) * ow + xx] = 1.0 / (1.0 + (-v).exp());
                }
            }
        }
    }
    z
}

/// The values of (sample, group, chunk of `rows` output rows) of `z` (n × cout × oh × ow),
/// chunk by chunk: `ConvGnStats`'s partials are their mean and sum of squared deviations.
fn group_chunks(
    z: &[f64],
    s: ConvShape,
    rows: usize,
) -> impl Iterator<Item = impl Iterator<Item = f64> + Clone + '_> + '_ {
    let (oh, ow) = (s.h - 2, s.w - 2);
    let cpg = s.cout / s.groups;
    let nch = oh.div_ceil(rows);
    (0..s.n * s.groups * nch).map(move |at| {
        let (sg, c) = (at / nch, at % nch);
        let (b, g) = (sg / s.groups, sg % s.groups);
        let ys = c * rows..((c + 1) * rows).min(oh);
        (g * cpg..(g + 1) * cpg).flat_map(move |o| {
            let ys = ys.clone();
            ys.flat_map(move |y| {
                let row = ((b * s.cout + o) * oh + y) * ow;
                z[row..row + ow].iter().copied()
            })
        })
    })
}

/// `ConvGnStats`'s partials of `z`: the mean and the sum of squared deviations of each
/// (sample, group, chunk of `rows` output rows), at (sample × groups + group) × nch + chunk.
pub fn conv_gn_partials(z: &[f64], s: ConvShape, rows: usize) -> (Vec<f64>, Vec<f64>) {
    group_chunks(z, s, rows)
        .map(|part| {
            let cnt = part.clone().count() as f64;
            let mu = part.clone().sum::<f64>() / cnt;
            (mu, part.map(|v| (v - mu).powi(2)).sum::<f64>())
        })
        .unzip()
}

/// `GroupNormApply`: each (sample, group)'s mean and variance from the partials of its chunks
/// (as [`conv_gn_partials`] lays them out), then out = (z − mean) / sqrt(var + eps) · gamma + beta.
pub fn groupnorm_apply(
    z: &[f32],
    mean: &[f32],
    m2: &[f32],
    p: &ConvParams<'_>,
    s: ConvShape,
    rows: usize,
    eps: f64,
) -> Vec<f64> {
    let (oh, ow) = (s.h - 2, s.w - 2);
    let cpg = s.cout / s.groups;
    let nch = oh.div_ceil(rows);
    let count = |c: usize| (cpg * rows.min(oh - c * rows) * ow) as f64;
    let len = cpg * oh * ow;
    let mut out = vec![0f64; z.len()];
    for sg in 0..s.n * s.groups {
        let part = |c: usize| (mean[sg * nch + c] as f64, m2[sg * nch + c] as f64);
        let mu = (0..nch).map(|c| count(c) * part(c).0).sum::<f64>() / len as f64;
        let var = (0..nch)
            .map(|c| part(c).1 + count(c) * (part(c).0 - mu).powi(2))
            .sum::<f64>()
            / len as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        for i in 0..len {
            let o = (sg % s.groups) * cpg + i / (oh * ow);
            out[sg * len + i] =
                (z[sg * len + i] as f64 - mu) * rstd * p.gamma[o] as f64 + p.beta[o] as f64;
        }
    }
    out
}

/// The counter-based generator of the GPU suite (`kernels/suite_util.cl`, `hash_fill`): a
/// uniform float in [-1, 1) from (seed, index). Exact, so every implementation agrees bit for bit.
pub fn hash_uniform(seed: u32, index: u32) -> f32 {
    fn mix(mut x: u32) -> u32 {
        x ^= x >> 16;
        x = x.wrapping_mul(0x7feb_352d);
        x ^= x >> 15;
        x = x.wrapping_mul(0x846c_a68b);
        x ^= x >> 16;
        x
    }
    let h = mix(mix(index).wrapping_add(mix(seed)));
    ((h >> 8) as i32 - (1 << 23)) as f32 * (1.0 / (1u32 << 23) as f32)
}
