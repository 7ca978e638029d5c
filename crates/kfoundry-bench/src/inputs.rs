//! Host data for a kernel's buffers and scalars: drawn from the annotation's distributions with
//! a seeded generator, kept as raw bytes so that every element type shares one code path.

use kfoundry_rt::model::signature::ScalarType;
use kfoundry_rt::model::spec::Resolved;
use kfoundry_rt::Scalar;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Draws one value. Integer types round and clamp into their range.
fn draw(dist: Resolved, rng: &mut ChaCha8Rng) -> f64 {
    match dist {
        Resolved::Uniform { lo, hi } => rng.gen_range(lo..hi),
        Resolved::Normal { mean, std } => {
            // Box–Muller: two uniforms in (0, 1] give one normal sample.
            let u1: f64 = 1.0 - rng.gen::<f64>();
            let u2: f64 = rng.gen::<f64>();
            mean + std * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }
        Resolved::Constant { value } => value,
        Resolved::Integers { lo, hi } => rng.gen_range(lo..hi) as f64,
        // Drawn as a whole buffer (`structured`); one value alone is its first.
        Resolved::Permutation => 0.0,
        Resolved::Monotone { lo, .. } => lo as f64,
    }
}

/// The buffers whose values are drawn as a whole, not element by element: a permutation of
/// `0..len`, or non-decreasing values from `lo` (first) to `hi` (last). With `specials`, about
/// half of a monotone buffer's steps are zero (empty rows of a CSR matrix).
fn structured(
    ty: ScalarType,
    len: usize,
    dist: Resolved,
    specials: bool,
    rng: &mut ChaCha8Rng,
) -> Option<Vec<u8>> {
    let values: Vec<f64> = match dist {
        Resolved::Permutation => {
            let mut v: Vec<f64> = (0..len).map(|i| i as f64).collect();
            rand::seq::SliceRandom::shuffle(&mut v[..], rng);
            v
        }
        Resolved::Monotone { lo, hi } => {
            let mut v: Vec<i64> = (0..len).map(|_| rng.gen_range(lo..=hi)).collect();
            v.sort_unstable();
            if specials {
                for i in 1..len {
                    if rng.gen_bool(0.5) {
                        v[i] = v[i - 1];
                    }
                }
            }
            if let Some(first) = v.first_mut() {
                *first = lo;
            }
            if len > 1 {
                v[len - 1] = hi;
            }
            v.into_iter().map(|x| x as f64).collect()
        }
        _ => return None,
    };
    let mut out = Vec::with_capacity(len * ty.size());
    for v in values {
        encode(ty, v, &mut out);
    }
    Some(out)
}

/// What a written output holds before a kernel runs. A candidate must write every element the
/// reference writes, whatever was there: NaN catches an element forgotten, zeros and random
/// values one left alone because it looked written already (a memo).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Prefill {
    /// NaN (floats) or the byte 0xA5 (integers).
    Poison,
    Zeros,
    /// Random bytes of this input set.
    Random,
}

impl Prefill {
    const ALL: [Prefill; 3] = [Prefill::Poison, Prefill::Zeros, Prefill::Random];

    /// The `k`-th prefill after this one (input set `k` of a case).
    pub fn nth(self, k: usize) -> Prefill {
        let at = Prefill::ALL.iter().position(|p| *p == self).unwrap_or(0);
        Prefill::ALL[(at + k) % Prefill::ALL.len()]
    }
}

/// Where float inputs come from in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Values {
    /// The annotation's distributions.
    Declared,
    /// The distributions with, here and there, signed zeros and denormals, and (when
    /// `nonfinite`) a few infinities and NaNs. Integer inputs take the ends of their range more
    /// often.
    Specials { nonfinite: bool },
    /// Small integers times a large power of two (2^10 times the distribution's bound): far
    /// outside the distribution, exact in any order of summation, so that a correct kernel
    /// that sums in another order still matches and one that only works on the declared range
    /// (a polynomial `exp` for [-1, 1]) does not.
    Large,
    /// The declared draw moved far from zero: `x + shift` with `shift` = ±`OFFSET_SCALE` times
    /// the distribution's bound, so that each buffer is of one sign and its values are close
    /// together relative to their magnitude (what real data often is: 1000 ± 1). A one-pass
    /// variance (E\[x²\] − E\[x\]²) cancels catastrophically there, and a softmax whose running
    /// maximum starts at 0 underflows every exponential to zero.
    Offset { negative: bool },
    /// The declared draw scaled to either end of the element type's range
    /// (`magnitude_scale`): values whose squares overflow (`huge`) or underflow to zero. A
    /// sum of squares formed as it is gives infinity or zero there, a scaled one does not.
    Magnitude { huge: bool },
    /// Each input buffer holds one value, drawn as declared, repeated (a variance of zero,
    /// every index the same, ties everywhere).
    Constant,
    /// Each input buffer's declared draw sorted in increasing order.
    Sorted,
}

impl Values {
    /// Whether the outputs are judged with a tolerance that the reference's own sensitivity at
    /// these inputs widens (its outputs on inputs moved by one unit in the last place): values
    /// far from the declared ones, or arranged as no declared draw arranges them (sorted: a
    /// matrix product then sums terms of one sign, larger than the check's `atol` assumed),
    /// where a correct kernel that rounds in another order can be off by more than the check's
    /// `rtol`/`atol`, which were set for declared inputs.
    pub fn judged_by_sensitivity(self) -> bool {
        matches!(
            self,
            Values::Offset { .. } | Values::Magnitude { .. } | Values::Constant | Values::Sorted
        )
    }

    /// These inputs in words.
    pub fn describe(self) -> &'static str {
        match self {
            Values::Declared => "inputs drawn as declared",
            Values::Specials { nonfinite: true } => {
                "inputs with signed zeros, denormals, infinities and NaN"
            }
            Values::Specials { nonfinite: false } => "inputs with signed zeros and denormals",
            Values::Large => "inputs of large magnitude",
            Values::Offset { negative: false } => "inputs shifted far above zero",
            Values::Offset { negative: true } => "inputs shifted far below zero",
            Values::Magnitude { huge: true } => "inputs near the top of the format's range",
            Values::Magnitude { huge: false } => "inputs near the bottom of the format's range",
            Values::Constant => "inputs of one repeated value",
            Values::Sorted => "sorted inputs",
        }
    }

    /// Whether these inputs are drawn on the host whatever the buffer's size: those judged by
    /// the reference's sensitivity, whose bytes are nudged on the host (`perturb`; the
    /// device draws only declared values and edge values).
    pub fn host_only(self) -> bool {
        self.judged_by_sensitivity()
    }
}

/// How far an offset case moves a distribution: 2^10 times its bound (1000 ± 1 for values
/// within ±1).
pub(crate) const OFFSET_SCALE: f64 = 1024.0;

/// The factor a magnitude case multiplies a draw of `dist` by, for elements of type `ty`:
/// the draw's bound then lies at 2^(emax/2 + 2) (`huge`: squares overflow, for `float`
/// 2^66 ≈ 7e19) or at 2^(2·emin/3) (squares underflow to zero, for `float` 2^-84 ≈ 5e-26).
pub(crate) fn magnitude_scale(ty: ScalarType, dist: Resolved, huge: bool) -> f64 {
    let (emin, emax) = match ty {
        ScalarType::F16 => (-14, 16),
        ScalarType::F64 => (-1022, 1024),
        _ => (-126, 128),
    };
    let target = if huge { emax / 2 + 2 } else { 2 * emin / 3 };
    2f64.powi(target) / bound(dist).max(f64::MIN_POSITIVE)
}

/// The largest magnitude a draw of `dist` takes (a normal one's at four deviations).
fn bound(dist: Resolved) -> f64 {
    match dist {
        Resolved::Uniform { lo, hi } => lo.abs().max(hi.abs()),
        Resolved::Normal { mean, std } => mean.abs() + 4.0 * std,
        Resolved::Constant { value } => value.abs(),
        Resolved::Integers { lo, hi } | Resolved::Monotone { lo, hi } => {
            (lo as f64).abs().max((hi as f64).abs())
        }
        Resolved::Permutation => 1.0,
    }
}

/// How often (1 in this many elements) a special value replaces a drawn one.
pub(crate) const SPECIAL_EVERY: u64 = 16;
/// How often an infinity or NaN does.
pub(crate) const NONFINITE_EVERY: u64 = 1024;
/// Large values are `k · scale` with `k` in `-LARGE_K..=LARGE_K`: products of two stay exact
/// in sums of up to 2^18 terms.
pub(crate) const LARGE_K: i64 = 8;

/// The power of two that large edge values are multiples of: at least 2^10 times the
/// distribution's bound, at most 2^40.
pub(crate) fn large_scale(dist: Resolved) -> f64 {
    let wanted = (bound(dist).max(1.0) * 1024.0)
        .log2()
        .ceil()
        .clamp(10.0, 40.0);
    2f64.powi(wanted as i32)
}

/// The special values, by index: signed zeros, the smallest and a large denormal of each sign
/// (for `f32`; `f64` takes the same `f32` values, which are normal there), the smallest
/// normal of each sign, and (last three) the infinities and NaN.
const SPECIALS: [f32; 8] = [
    0.0,
    -0.0,
    1.0e-45,
    -1.0e-45,
    5.0e-39,
    -5.0e-39,
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
];
const NONFINITE: [f32; 3] = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN];

/// The special values of a float type, as [`SPECIALS`] (whose denormals are zeros in half, and
/// the smallest one in bfloat16): for `half` and `bfloat16` their own smallest and a large
/// denormal and smallest normal (the device draws the same: `device_data.rs`).
fn specials(ty: ScalarType) -> [f64; 8] {
    let signed = |tiny: f64, denormal: f64, normal: f64| {
        [0.0, -0.0, tiny, -tiny, denormal, -denormal, normal, -normal]
    };
    match ty {
        ScalarType::F16 => signed(2f64.powi(-24), 2f64.powi(-15), 2f64.powi(-14)),
        ScalarType::Bf16 => signed(2f64.powi(-133), 2f64.powi(-127), 2f64.powi(-126)),
        _ => SPECIALS.map(|x| x as f64),
    }
}

/// `len` elements of type `ty` drawn from `dist` with the edge values of `values`.
pub(crate) fn draw_values(
    ty: ScalarType,
    len: usize,
    dist: Resolved,
    values: Values,
    rng: &mut ChaCha8Rng,
) -> Vec<u8> {
    if let Some(whole) = structured(
        ty,
        len,
        dist,
        matches!(values, Values::Specials { .. }),
        rng,
    ) {
        return whole;
    }
    match values {
        Values::Declared => draw_buffer(ty, len, dist, rng),
        Values::Specials { nonfinite } => {
            let mut out = Vec::with_capacity(len * ty.size());
            let (lo, hi) = int_range(dist, len);
            // every special value at least once (at a random place), however short the buffer
            let mut forced: Vec<f64> = if ty.is_float() {
                let mut v: Vec<f64> = specials(ty).to_vec();
                if nonfinite {
                    v.extend(NONFINITE.iter().map(|x| *x as f64));
                }
                v
            } else {
                vec![lo, hi]
            };
            forced.truncate(len);
            let mut at: Vec<usize> =
                rand::seq::index::sample(rng, len.max(1), forced.len().min(len)).into_vec();
            at.sort_unstable();
            let mut next = 0;
            for i in 0..len {
                if next < at.len() && at[next] == i {
                    encode(ty, forced[next], &mut out);
                    next += 1;
                    continue;
                }
                let v = if !ty.is_float() {
                    match rng.gen_range(0..4) {
                        0 => lo,
                        1 => hi,
                        _ => draw(dist, rng).round(),
                    }
                } else if nonfinite && rng.gen_range(0..NONFINITE_EVERY) == 0 {
                    NONFINITE[rng.gen_range(0..NONFINITE.len())] as f64
                } else if rng.gen_range(0..SPECIAL_EVERY) == 0 {
                    specials(ty)[rng.gen_range(0..SPECIALS.len())]
                } else {
                    draw(dist, rng)
                };
                encode(ty, v, &mut out);
            }
            out
        }
        Values::Large if ty.is_float() => {
            let scale = large_scale(dist);
            let mut out = Vec::with_capacity(len * ty.size());
            for _ in 0..len {
                encode(
                    ty,
                    rng.gen_range(-LARGE_K..=LARGE_K) as f64 * scale,
                    &mut out,
                );
            }
            out
        }
        Values::Large => draw_buffer(ty, len, dist, rng),
        Values::Offset { negative } if ty.is_float() => {
            let shift = if negative {
                -OFFSET_SCALE
            } else {
                OFFSET_SCALE
            } * bound(dist).max(1.0);
            map_draws(ty, len, dist, rng, |x| x + shift)
        }
        Values::Magnitude { huge } if ty.is_float() => {
            let scale = magnitude_scale(ty, dist, huge);
            map_draws(ty, len, dist, rng, |x| x * scale)
        }
        Values::Offset { .. } | Values::Magnitude { .. } => draw_buffer(ty, len, dist, rng),
        Values::Constant => {
            let one = draw_buffer(ty, 1, dist, rng);
            one.repeat(len)
        }
        Values::Sorted => {
            let bytes = draw_buffer(ty, len, dist, rng);
            let mut v: Vec<f64> = (0..len).map(|i| decode(ty, &bytes, i)).collect();
            v.sort_by(f64::total_cmp);
            let mut out = Vec::with_capacity(len * ty.size());
            for x in v {
                encode(ty, x, &mut out);
            }
            out
        }
    }
}

/// `len` declared draws of `dist`, each mapped by `f`, as elements of `ty`.
fn map_draws(
    ty: ScalarType,
    len: usize,
    dist: Resolved,
    rng: &mut ChaCha8Rng,
    f: impl Fn(f64) -> f64,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(len * ty.size());
    for _ in 0..len {
        encode(ty, f(draw(dist, rng)), &mut out);
    }
    out
}

/// How [`perturb`] moves each element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nudge {
    /// Each element one unit in the last place up or down, at random.
    Random,
    /// Every element one unit in the last place toward +infinity (a shift of a buffer of
    /// values close together: what a shift-invariant output must not notice, so that its
    /// change is the reference's own rounding).
    Up,
}

/// Moves each finite, non-zero float element of `bytes` (of type `ty`) by one unit in the last
/// place as `nudge` says (an element that would become infinite stays). Integers stay.
pub(crate) fn perturb(ty: ScalarType, bytes: &mut [u8], nudge: Nudge, rng: &mut ChaCha8Rng) {
    if !ty.is_float() {
        return;
    }
    let size = ty.size();
    for chunk in bytes.chunks_exact_mut(size) {
        let x = decode(ty, chunk, 0);
        if !x.is_finite() || x == 0.0 {
            continue;
        }
        // A step of one in the bit pattern moves a finite non-zero value one unit away from
        // zero (+1) or toward it (-1).
        let away = match nudge {
            Nudge::Random => rng.gen_bool(0.5),
            Nudge::Up => x > 0.0,
        };
        let step = |bits: u64| if away { bits + 1 } else { bits - 1 };
        let mut moved = chunk.to_vec();
        match size {
            2 => moved.copy_from_slice(
                &(step(u16::from_ne_bytes([chunk[0], chunk[1]]).into()) as u16).to_ne_bytes(),
            ),
            4 => moved.copy_from_slice(
                &(step(u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]).into()) as u32)
                    .to_ne_bytes(),
            ),
            _ => {
                let mut a = [0u8; 8];
                a.copy_from_slice(chunk);
                moved.copy_from_slice(&step(u64::from_ne_bytes(a)).to_ne_bytes());
            }
        }
        if decode(ty, &moved, 0).is_finite() {
            chunk.copy_from_slice(&moved);
        }
    }
}

/// The ends of an integer input's range (rounded), for a buffer of `len` elements.
fn int_range(dist: Resolved, len: usize) -> (f64, f64) {
    if let Some((lo, hi)) = integer_bounds(dist, len) {
        return (lo as f64, hi as f64);
    }
    match dist {
        Resolved::Uniform { lo, hi } => (lo.round(), hi.round()),
        Resolved::Normal { mean, std } => ((mean - 3.0 * std).round(), (mean + 3.0 * std).round()),
        Resolved::Constant { value } => (value.round(), value.round()),
        Resolved::Integers { .. } | Resolved::Permutation | Resolved::Monotone { .. } => {
            unreachable!("integer_bounds covers them")
        }
    }
}

/// The smallest and largest value the integer-only distributions give a buffer of `len`
/// elements (`None` for the others).
fn integer_bounds(dist: Resolved, len: usize) -> Option<(i128, i128)> {
    match dist {
        Resolved::Integers { lo, hi } => Some((lo.into(), i128::from(hi) - 1)),
        Resolved::Monotone { lo, hi } => Some((lo.into(), hi.into())),
        Resolved::Permutation => Some((0, len as i128 - 1)),
        _ => None,
    }
}

/// Whether the values of `dist` (at a run's sizes) fit a buffer of `len` elements of `ty`, for
/// the input `name`: an index range wider than the type would wrap, and the kernel see other
/// indices than declared.
pub(crate) fn fits_elements(
    name: &str,
    ty: ScalarType,
    len: usize,
    dist: Resolved,
) -> Result<(), String> {
    let (Some((min, max)), Some((lo, hi))) = (ty.int_range(), integer_bounds(dist, len)) else {
        return Ok(());
    };
    if lo < min || hi > max {
        return Err(format!(
            "input `{name}`: values {lo}..={hi} at these sizes do not fit `{}`",
            ty.opencl_name()
        ));
    }
    Ok(())
}

/// A float scalar under `values`: zero, minus zero or a large value half of the time.
pub(crate) fn draw_scalar_values(
    ty: ScalarType,
    dist: Resolved,
    values: Values,
    rng: &mut ChaCha8Rng,
) -> Scalar {
    if !ty.is_float()
        || !matches!(values, Values::Specials { .. } | Values::Large)
        || matches!(dist, Resolved::Constant { .. })
        || rng.gen_bool(0.5)
    {
        return draw_scalar(ty, dist, rng);
    }
    let v = match (values, rng.gen_range(0..3)) {
        (_, 0) => 0.0,
        (_, 1) => -0.0,
        _ => rng.gen_range(1..=LARGE_K) as f64 * large_scale(dist),
    };
    Scalar::from_f64(ty, v)
}

/// `len` elements of type `ty` as an output holds them before a run.
pub(crate) fn prefill_buffer(
    ty: ScalarType,
    len: usize,
    prefill: Prefill,
    rng: &mut ChaCha8Rng,
) -> Vec<u8> {
    match prefill {
        Prefill::Poison => poison_buffer(ty, len),
        Prefill::Zeros => vec![0u8; len * ty.size()],
        Prefill::Random => {
            let mut bytes = vec![0u8; len * ty.size()];
            rng.fill(&mut bytes[..]);
            bytes
        }
    }
}

/// `len` elements of type `ty` drawn from `dist`, as native-endian bytes.
pub(crate) fn draw_buffer(
    ty: ScalarType,
    len: usize,
    dist: Resolved,
    rng: &mut ChaCha8Rng,
) -> Vec<u8> {
    if let Some(whole) = structured(ty, len, dist, false, rng) {
        return whole;
    }
    let mut out = Vec::with_capacity(len * ty.size());
    for _ in 0..len {
        let v = draw(dist, rng);
        // Integer inputs drawn from a real range are rounded (uniform(0, 10) gives 0..=10).
        encode(ty, if ty.is_float() { v } else { v.round() }, &mut out);
    }
    out
}

/// `len` elements of NaN (floats) or a recognisable pattern (integers): what an output holds
/// before a kernel runs, so that an element the kernel forgets to write is caught.
pub(crate) fn poison_buffer(ty: ScalarType, len: usize) -> Vec<u8> {
    if !ty.is_float() {
        return vec![0xA5; len * ty.size()];
    }
    let mut out = Vec::with_capacity(len * ty.size());
    for _ in 0..len {
        encode(ty, f64::NAN, &mut out);
    }
    out
}

/// The byte that fills guard zones after buffers of type `ty`: all bits set for floats (NaN
/// in every float format, so a read past the end poisons the result), 0xA5 for integers.
pub(crate) fn guard_pattern(ty: ScalarType) -> u8 {
    if ty.is_float() {
        0xFF
    } else {
        0xA5
    }
}

/// A scalar argument drawn from `dist`.
pub(crate) fn draw_scalar(ty: ScalarType, dist: Resolved, rng: &mut ChaCha8Rng) -> Scalar {
    Scalar::from_f64(ty, draw(dist, rng))
}

fn encode(ty: ScalarType, v: f64, out: &mut Vec<u8>) {
    match ty {
        ScalarType::F32 => out.extend_from_slice(&(v as f32).to_ne_bytes()),
        ScalarType::F64 => out.extend_from_slice(&v.to_ne_bytes()),
        // Rounded to nearest even, as `vstore_half` rounds by default.
        ScalarType::F16 => out.extend_from_slice(&half::f16::from_f64(v).to_bits().to_ne_bytes()),
        ScalarType::Bf16 => out.extend_from_slice(&half::bf16::from_f64(v).to_bits().to_ne_bytes()),
        ScalarType::I8 => out.extend_from_slice(&(v as i8).to_ne_bytes()),
        ScalarType::U8 => out.extend_from_slice(&(v as u8).to_ne_bytes()),
        ScalarType::I16 => out.extend_from_slice(&(v as i16).to_ne_bytes()),
        ScalarType::U16 => out.extend_from_slice(&(v as u16).to_ne_bytes()),
        ScalarType::I32 => out.extend_from_slice(&(v as i32).to_ne_bytes()),
        ScalarType::U32 => out.extend_from_slice(&(v as u32).to_ne_bytes()),
        ScalarType::I64 => out.extend_from_slice(&(v as i64).to_ne_bytes()),
        ScalarType::U64 => out.extend_from_slice(&(v as u64).to_ne_bytes()),
    }
}

/// Element `i` of a byte buffer of type `ty`, as f64.
pub fn decode(ty: ScalarType, bytes: &[u8], i: usize) -> f64 {
    let s = ty.size();
    let b = &bytes[i * s..(i + 1) * s];
    let arr = |n: usize| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&b[..n]);
        a
    };
    match ty {
        ScalarType::F32 => f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64,
        ScalarType::F64 => f64::from_ne_bytes(arr(8)),
        ScalarType::F16 => half::f16::from_bits(u16::from_ne_bytes([b[0], b[1]])).to_f64(),
        ScalarType::Bf16 => half::bf16::from_bits(u16::from_ne_bytes([b[0], b[1]])).to_f64(),
        ScalarType::I8 => b[0] as i8 as f64,
        ScalarType::U8 => b[0] as f64,
        ScalarType::I16 => i16::from_ne_bytes([b[0], b[1]]) as f64,
        ScalarType::U16 => u16::from_ne_bytes([b[0], b[1]]) as f64,
        ScalarType::I32 => i32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64,
        ScalarType::U32 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64,
        ScalarType::I64 => i64::from_ne_bytes(arr(8)) as f64,
        ScalarType::U64 => u64::from_ne_bytes(arr(8)) as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn draws_are_seeded_and_in_range() {
        let mut a = ChaCha8Rng::seed_from_u64(7);
        let mut b = ChaCha8Rng::seed_from_u64(7);
        let d = Resolved::Uniform { lo: 2.0, hi: 3.0 };
        let x = draw_buffer(ScalarType::F32, 100, d, &mut a);
        assert_eq!(x, draw_buffer(ScalarType::F32, 100, d, &mut b));
        assert!((0..100).all(|i| (2.0..3.0).contains(&decode(ScalarType::F32, &x, i))));
        let ints = draw_buffer(
            ScalarType::I32,
            100,
            Resolved::Uniform { lo: -5.0, hi: 5.0 },
            &mut a,
        );
        assert!((0..100).all(|i| decode(ScalarType::I32, &ints, i).abs() <= 5.0));
        let n = draw_buffer(
            ScalarType::F64,
            2000,
            Resolved::Normal {
                mean: 1.0,
                std: 0.5,
            },
            &mut a,
        );
        let mean: f64 = (0..2000)
            .map(|i| decode(ScalarType::F64, &n, i))
            .sum::<f64>()
            / 2000.0;
        assert!((mean - 1.0).abs() < 0.05, "{mean}");
    }

    #[test]
    fn integer_ranges_permutations_and_monotone_buffers() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let values = |bytes: &[u8], n: usize| {
            (0..n)
                .map(|i| decode(ScalarType::I32, bytes, i) as i64)
                .collect::<Vec<_>>()
        };
        for v in [
            Values::Declared,
            Values::Specials { nonfinite: true },
            Values::Large,
        ] {
            // [lo, hi): never hi itself, both ends in the edge-value case.
            let ids = values(
                &draw_values(
                    ScalarType::I32,
                    4000,
                    Resolved::Integers { lo: 3, hi: 9 },
                    v,
                    &mut rng,
                ),
                4000,
            );
            assert!(ids.iter().all(|x| (3..9).contains(x)), "{v:?}");
            assert!(ids.contains(&3) && ids.contains(&8), "{v:?}");
            let mut p = values(
                &draw_values(ScalarType::I32, 257, Resolved::Permutation, v, &mut rng),
                257,
            );
            assert_ne!(p, (0..257).collect::<Vec<_>>(), "shuffled");
            p.sort_unstable();
            assert_eq!(p, (0..257).collect::<Vec<_>>(), "each index once");
            let m = values(
                &draw_values(
                    ScalarType::I32,
                    33,
                    Resolved::Monotone { lo: 5, hi: 400 },
                    v,
                    &mut rng,
                ),
                33,
            );
            assert!(
                m.windows(2).all(|w| w[0] <= w[1]) && m[0] == 5 && m[32] == 400,
                "{m:?}"
            );
        }
        // Empty rows (equal neighbours) in the edge-value case.
        let m = values(
            &draw_values(
                ScalarType::I32,
                100,
                Resolved::Monotone { lo: 0, hi: 1 << 20 },
                Values::Specials { nonfinite: false },
                &mut rng,
            ),
            100,
        );
        assert!(m.windows(2).any(|w| w[0] == w[1]));
    }

    #[test]
    fn index_ranges_must_fit_their_buffers_type() {
        assert!(fits_elements(
            "ids",
            ScalarType::U8,
            10,
            Resolved::Integers { lo: 0, hi: 256 }
        )
        .is_ok());
        let e = fits_elements(
            "ids",
            ScalarType::U8,
            10,
            Resolved::Integers { lo: 0, hi: 257 },
        )
        .unwrap_err();
        assert!(e.contains("values 0..=256") && e.contains("`uchar`"), "{e}");
        assert!(fits_elements("p", ScalarType::I16, 40000, Resolved::Permutation).is_err());
        assert!(fits_elements(
            "r",
            ScalarType::I32,
            3,
            Resolved::Monotone { lo: 0, hi: 1 << 40 }
        )
        .is_err());
        assert!(fits_elements(
            "x",
            ScalarType::F32,
            3,
            Resolved::Uniform { lo: 0.0, hi: 1e30 }
        )
        .is_ok());
    }

    #[test]
    fn edge_values_and_prefills() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let d = Resolved::Uniform { lo: -1.0, hi: 1.0 };
        let n = 1 << 16;
        let x = draw_values(
            ScalarType::F32,
            n,
            d,
            Values::Specials { nonfinite: true },
            &mut rng,
        );
        let v: Vec<f64> = (0..n).map(|i| decode(ScalarType::F32, &x, i)).collect();
        assert!(
            v.iter().any(|x| x.is_nan())
                && v.contains(&f64::INFINITY)
                && v.contains(&f64::NEG_INFINITY)
        );
        assert!(
            v.iter().any(|x| *x == 0.0 && x.is_sign_negative()),
            "minus zero"
        );
        assert!(
            v.iter()
                .any(|x| *x != 0.0 && x.abs() < f32::MIN_POSITIVE as f64),
            "denormals"
        );
        let nonfinite = v.iter().filter(|x| !x.is_finite()).count();
        assert!(
            nonfinite < n / 512,
            "{nonfinite}: rare, so that most rows of a reduction stay finite"
        );
        let finite = draw_values(
            ScalarType::F32,
            n,
            d,
            Values::Specials { nonfinite: false },
            &mut rng,
        );
        assert!((0..n).all(|i| decode(ScalarType::F32, &finite, i).is_finite()));
        let large = draw_values(ScalarType::F32, 1000, d, Values::Large, &mut rng);
        for i in 0..1000 {
            let x = decode(ScalarType::F32, &large, i);
            assert!(x % 1024.0 == 0.0 && x.abs() <= 8.0 * 1024.0, "{x}");
        }
        assert_eq!(
            large_scale(Resolved::Uniform { lo: 0.0, hi: 100.0 }),
            131072.0
        );
        let ints = draw_values(
            ScalarType::I32,
            1000,
            Resolved::Uniform { lo: 0.0, hi: 9.0 },
            Values::Specials { nonfinite: true },
            &mut rng,
        );
        let ends = (0..1000)
            .filter(|i| matches!(decode(ScalarType::I32, &ints, *i) as i64, 0 | 9))
            .count();
        assert!(ends > 400, "{ends}: the ends of an index range come often");
        assert_eq!(
            prefill_buffer(ScalarType::F32, 4, Prefill::Zeros, &mut rng),
            vec![0u8; 16]
        );
        assert!(decode(
            ScalarType::F32,
            &prefill_buffer(ScalarType::F32, 4, Prefill::Poison, &mut rng),
            3
        )
        .is_nan());
        assert_ne!(
            prefill_buffer(ScalarType::U8, 64, Prefill::Random, &mut rng),
            vec![0u8; 64]
        );
        assert_eq!(Prefill::Zeros.nth(2), Prefill::Poison);
    }

    #[test]
    fn poison_is_nan_for_floats() {
        let p = poison_buffer(ScalarType::F32, 3);
        assert!(decode(ScalarType::F32, &p, 2).is_nan());
        let p = poison_buffer(ScalarType::U16, 3);
        assert_eq!(decode(ScalarType::U16, &p, 1), 0xA5A5 as f64);
    }
}
