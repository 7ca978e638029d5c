//! Host data for a kernel's buffers and scalars: drawn from the annotation's distributions with
//! a seeded generator, kept as raw bytes so that every element type shares one code path.

use kfoundry_rt::model::signature::ScalarType;
use kfoundry_rt::model::spec::Distribution;
use kfoundry_rt::Scalar;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Draws one value. Integer types round and clamp into their range.
fn draw(dist: Distribution, rng: &mut ChaCha8Rng) -> f64 {
    match dist {
        Distribution::Uniform { lo, hi } => rng.gen_range(lo..hi),
        Distribution::Normal { mean, std } => {
            // Box–Muller: two uniforms in (0, 1] give one normal sample.
            let u1: f64 = 1.0 - rng.gen::<f64>();
            let u2: f64 = rng.gen::<f64>();
            mean + std * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }
        Distribution::Constant { value } => value,
    }
}

/// `len` elements of type `ty` drawn from `dist`, as native-endian bytes.
pub fn draw_buffer(ty: ScalarType, len: usize, dist: Distribution, rng: &mut ChaCha8Rng) -> Vec<u8> {
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
pub fn poison_buffer(ty: ScalarType, len: usize) -> Vec<u8> {
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
pub fn guard_pattern(ty: ScalarType) -> u8 {
    if ty.is_float() {
        0xFF
    } else {
        0xA5
    }
}

/// A scalar argument drawn from `dist`.
pub fn draw_scalar(ty: ScalarType, dist: Distribution, rng: &mut ChaCha8Rng) -> Scalar {
    Scalar::from_f64(ty, draw(dist, rng))
}

fn encode(ty: ScalarType, v: f64, out: &mut Vec<u8>) {
    match ty {
        ScalarType::F32 => out.extend_from_slice(&(v as f32).to_ne_bytes()),
        ScalarType::F64 => out.extend_from_slice(&v.to_ne_bytes()),
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
        let d = Distribution::Uniform { lo: 2.0, hi: 3.0 };
        let x = draw_buffer(ScalarType::F32, 100, d, &mut a);
        assert_eq!(x, draw_buffer(ScalarType::F32, 100, d, &mut b));
        assert!((0..100).all(|i| (2.0..3.0).contains(&decode(ScalarType::F32, &x, i))));
        let ints = draw_buffer(ScalarType::I32, 100, Distribution::Uniform { lo: -5.0, hi: 5.0 }, &mut a);
        assert!((0..100).all(|i| decode(ScalarType::I32, &ints, i).abs() <= 5.0));
        let n = draw_buffer(ScalarType::F64, 2000, Distribution::Normal { mean: 1.0, std: 0.5 }, &mut a);
        let mean: f64 = (0..2000).map(|i| decode(ScalarType::F64, &n, i)).sum::<f64>() / 2000.0;
        assert!((mean - 1.0).abs() < 0.05, "{mean}");
    }

    #[test]
    fn poison_is_nan_for_floats() {
        let p = poison_buffer(ScalarType::F32, 3);
        assert!(decode(ScalarType::F32, &p, 2).is_nan());
        let p = poison_buffer(ScalarType::U16, 3);
        assert_eq!(decode(ScalarType::U16, &p, 1), 0xA5A5 as f64);
    }
}
