//! Inputs drawn and outputs compared on the device, for large `float` buffers: a buffer of
//! gigabytes is neither generated on the host nor copied over the bus for every candidate.
//!
//! - Drawing: a counter-based generator (an integer hash of seed and index, as in Philox-style
//!   generators) fills the buffer from the annotation's distribution; a new seed per input set
//!   gives new inputs each check, and the same seed gives the same inputs to the reference and
//!   the candidate.
//! - Scrubbing: a kernel whose work-groups each fill as much `__local` memory as one may have
//!   with NaN, run on every compute unit many times over, right before a candidate runs, so
//!   that a candidate reading local memory it never wrote sees NaN instead of what an earlier
//!   work-group or kernel left there.
//! - Comparing: one pass over both outputs computes, per work-group, the number of elements
//!   outside the tolerance (with the same NaN/Inf rules as the host comparison), the first
//!   such index, the largest absolute difference and the sums of squares for the relative
//!   error norm; the host reduces the few partial results.

use kfoundry_rt::model::spec::Distribution;
use kfoundry_rt::opencl::device::Limits;
use kfoundry_rt::opencl::session::{DeviceBuffer, Kernel, Session};
use kfoundry_rt::{Arg, Error as RtError, Scalar};

use super::compare::Comparison;

/// Float buffers at least this long are drawn and compared on the device.
pub const MIN_LEN: usize = 1 << 22;

const GROUPS: usize = 1024;
const GROUP_SIZE: usize = 256;

const SOURCE: &str = r#"
uint kf_hash(uint x) {
    x ^= x >> 16; x *= 0x7feb352dU;
    x ^= x >> 15; x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}
/* A uniform in [0, 1) from (seed, index, stream): 24 random bits. */
float kf_unit(uint seed_lo, uint seed_hi, ulong i, uint stream) {
    uint h = kf_hash((uint)i ^ seed_lo);
    h = kf_hash(h ^ (uint)(i >> 32) ^ seed_hi);
    h = kf_hash(h + stream * 0x9E3779B9U);
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}
__kernel void kf_uniform(__global float* out, const ulong n, const uint seed_lo, const uint seed_hi, const float lo, const float hi) {
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        out[i] = lo + (hi - lo) * kf_unit(seed_lo, seed_hi, i, 0);
}
__kernel void kf_normal(__global float* out, const ulong n, const uint seed_lo, const uint seed_hi, const float mean, const float std) {
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        float u1 = 1.0f - kf_unit(seed_lo, seed_hi, i, 1);   /* (0, 1] */
        float u2 = kf_unit(seed_lo, seed_hi, i, 2);
        out[i] = mean + std * sqrt(-2.0f * log(u1)) * cos(6.283185307f * u2);
    }
}
/* Poison: all bits set (NaN in every float format). A kernel rather than
 * clEnqueueFillBuffer, which did not finish on a 6.4 GB buffer through NVIDIA's OpenCL. */
/* Writes just before the start of the buffer it is given: the guard self-test. */
__kernel void kf_write_before(__global uint* p) {
    if (get_global_id(0) == 0) p[-1] = 0x600DF00DU;
}
__kernel void kf_poison(__global uint* out, const ulong n) {
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        out[i] = 0xFFFFFFFFU;
}
__kernel void kf_compare(__global const float* cand, __global const float* ref, const ulong n,
                         const float rtol, const float atol,
                         __global uint* bad, __global ulong* first, __global float* max_abs,
                         __global float* diff2, __global float* ref2) {
    __local uint l_bad[GROUP_SIZE]; __local ulong l_first[GROUP_SIZE];
    __local float l_max[GROUP_SIZE], l_d2[GROUP_SIZE], l_r2[GROUP_SIZE];
    uint nbad = 0; ulong f = (ulong)(-1); float m = 0.0f, d2 = 0.0f, r2 = 0.0f;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        float x = cand[i], r = ref[i];
        int ok;
        if (isfinite(r)) {
            float d = fabs(x - r);
            if (isfinite(x)) { m = fmax(m, d); d2 += d * d; r2 += r * r; }
            ok = isfinite(x) && d <= atol + rtol * fabs(r);
        } else if (isnan(r)) {
            ok = isnan(x);
        } else {
            ok = x == r;
        }
        if (!ok) { nbad++; if (i < f) f = i; }
    }
    uint l = get_local_id(0);
    l_bad[l] = nbad; l_first[l] = f; l_max[l] = m; l_d2[l] = d2; l_r2[l] = r2;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = GROUP_SIZE / 2; s > 0; s >>= 1) {
        if (l < s) {
            l_bad[l] += l_bad[l + s];
            l_first[l] = min(l_first[l], l_first[l + s]);
            l_max[l] = fmax(l_max[l], l_max[l + s]);
            l_d2[l] += l_d2[l + s];
            l_r2[l] += l_r2[l + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) {
        uint g = get_group_id(0);
        bad[g] = l_bad[0]; first[g] = l_first[0]; max_abs[g] = l_max[0]; diff2[g] = l_d2[0]; ref2[g] = l_r2[0];
    }
}
"#;

const SCRUB_SOURCE: &str = r#"
__kernel void kf_scrub(__global uint* sink, const uint never) {
    __local volatile uint scratch[SCRUB_WORDS];
    for (uint i = get_local_id(0); i < SCRUB_WORDS; i += get_local_size(0))
        scratch[i] = 0xFFFFFFFFU;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (never == 1234567u && get_local_id(0) == 0) sink[0] = scratch[0];
}
"#;

/// Smallest scrub tried (words) before giving up on scrubbing.
const MIN_SCRUB_WORDS: u64 = 256;
/// Work-groups of the scrub per compute unit.
const SCRUB_GROUPS_PER_UNIT: usize = 16;

/// The generator, comparison and scrub kernels, built once per bench.
pub struct DeviceData {
    uniform: Kernel,
    normal: Kernel,
    poison: Kernel,
    compare: Kernel,
    write_before: Kernel,
    /// The local-memory scrub; `None` when no size of it could be built and run here.
    scrub: Option<(Kernel, DeviceBuffer, [usize; 2])>,
}

/// The geometry of the data kernels: a grid-stride loop over the buffer.
const GLOBAL: [usize; 1] = [GROUPS * GROUP_SIZE];
const LOCAL: [usize; 1] = [GROUP_SIZE];

impl DeviceData {
    pub fn new(session: &Session, limits: &Limits) -> Result<DeviceData, RtError> {
        let program = session
            .build("kfoundry data kernels", SOURCE, &format!("-D GROUP_SIZE={GROUP_SIZE}"))
            .map_err(|e| RtError::OpenCl(format!("kfoundry's device data kernels: {e}")))?;
        Ok(DeviceData {
            uniform: session.kernel(&program, "kf_uniform")?,
            normal: session.kernel(&program, "kf_normal")?,
            poison: session.kernel(&program, "kf_poison")?,
            compare: session.kernel(&program, "kf_compare")?,
            write_before: session.kernel(&program, "kf_write_before")?,
            scrub: scrub_kernel(session, limits),
        })
    }

    /// Fills the device's `__local` memory with NaN (as far as one kernel can reach it).
    pub fn scrub_local_memory(&self, session: &Session) -> Result<(), RtError> {
        if let Some((k, sink, [global, local])) = &self.scrub {
            // SAFETY: the kernel writes only its own local memory, and `sink[0]` (a 4-byte
            // buffer) only under a condition its argument never meets.
            unsafe { session.launch_raw(k, &[*global], Some(&[*local]), &[sink.arg(), Arg::Scalar(Scalar::U32(0))], false)? };
        }
        Ok(())
    }

    /// Writes the 4 bytes before the start of `view`, a sub-buffer that starts at least 4
    /// bytes into its parent: the guard self-test's deliberate overrun.
    pub fn write_before(&self, session: &Session, view: &DeviceBuffer) -> Result<(), RtError> {
        // SAFETY: the caller gives a sub-buffer whose parent holds at least 4 bytes before it,
        // and the kernel writes only those (from one work-item).
        unsafe { session.launch_raw(&self.write_before, &[1], None, &[view.arg()], false)? };
        Ok(())
    }

    /// Fills the first `len` floats of `buf` from `dist` with `seed`.
    pub fn draw(&self, session: &Session, buf: &DeviceBuffer, len: usize, dist: Distribution, seed: u64) -> Result<(), RtError> {
        let (kernel, a, b) = match dist {
            Distribution::Uniform { lo, hi } => (&self.uniform, lo as f32, hi as f32),
            Distribution::Normal { mean, std } => (&self.normal, mean as f32, std as f32),
            // Scalars only, by the annotation's rules; a constant buffer all the same.
            Distribution::Constant { value } => (&self.uniform, value as f32, value as f32),
        };
        if len.saturating_mul(4) > buf.len() {
            return Err(RtError::OpenCl(format!("{len} floats do not fit a buffer of {} bytes", buf.len())));
        }
        let args = [
            buf.arg(),
            Arg::Scalar(Scalar::U64(len as u64)),
            Arg::Scalar(Scalar::U32(seed as u32)),
            Arg::Scalar(Scalar::U32((seed >> 32) as u32)),
            Arg::Scalar(Scalar::F32(a)),
            Arg::Scalar(Scalar::F32(b)),
        ];
        // SAFETY: the kernel writes out[i] for i < n only, and n floats fit the buffer (checked).
        unsafe { session.launch_raw(kernel, &GLOBAL, Some(&LOCAL), &args, false)? };
        Ok(())
    }

    /// Sets every bit of the first `bytes` bytes of `buf` (a multiple of 4): NaN in every float
    /// format.
    pub fn poison(&self, session: &Session, buf: &DeviceBuffer, bytes: usize) -> Result<(), RtError> {
        let words = bytes.min(buf.len()) / 4;
        // SAFETY: writes out[i] for i < words only, within the buffer.
        unsafe { session.launch_raw(&self.poison, &GLOBAL, Some(&LOCAL), &[buf.arg(), Arg::Scalar(Scalar::U64(words as u64))], false)? };
        Ok(())
    }

    /// Compares two float buffers of `len` elements on the device.
    pub fn compare(
        &self,
        session: &Session,
        cand: &DeviceBuffer,
        refr: &DeviceBuffer,
        len: usize,
        rtol: f64,
        atol: f64,
    ) -> Result<Comparison, RtError> {
        if len.saturating_mul(4) > cand.len().min(refr.len()) {
            return Err(RtError::OpenCl(format!("{len} floats do not fit the buffers compared")));
        }
        let bad = session.alloc(GROUPS * 4)?;
        let first = session.alloc(GROUPS * 8)?;
        let max_abs = session.alloc(GROUPS * 4)?;
        let diff2 = session.alloc(GROUPS * 4)?;
        let ref2 = session.alloc(GROUPS * 4)?;
        let args = [
            cand.arg(),
            refr.arg(),
            Arg::Scalar(Scalar::U64(len as u64)),
            Arg::Scalar(Scalar::F32(rtol as f32)),
            Arg::Scalar(Scalar::F32(atol as f32)),
            bad.arg(),
            first.arg(),
            max_abs.arg(),
            diff2.arg(),
            ref2.arg(),
        ];
        // SAFETY: reads cand[i], ref[i] for i < n (both hold n floats, checked) and writes one
        // element per work-group of the GROUPS-long result buffers.
        unsafe { session.launch_raw(&self.compare, &GLOBAL, Some(&LOCAL), &args, false)? };
        let words = |b: &DeviceBuffer, size: usize| -> Result<Vec<u8>, RtError> {
            let mut bytes = vec![0u8; GROUPS * size];
            b.read(0, &mut bytes)?;
            Ok(bytes)
        };
        let u32s = |bytes: Vec<u8>| bytes.chunks_exact(4).map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<_>>();
        let f32s = |bytes: Vec<u8>| bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as f64).collect::<Vec<_>>();
        let firsts: Vec<u64> =
            words(&first, 8)?.chunks_exact(8).map(|c| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect();
        let mismatches: usize = u32s(words(&bad, 4)?).iter().map(|&b| b as usize).sum();
        let max_abs = f32s(words(&max_abs, 4)?).iter().fold(0.0f64, |m, &x| m.max(x));
        let d2: f64 = f32s(words(&diff2, 4)?).iter().sum();
        let r2: f64 = f32s(words(&ref2, 4)?).iter().sum();
        let first = match firsts.iter().min() {
            Some(&i) if mismatches > 0 && (i as usize) < len => {
                let i = i as usize;
                Some((i, read_at(cand, i)?, read_at(refr, i)?))
            }
            _ => None,
        };
        let rel_norm = if r2 > 0.0 { (d2 / r2).sqrt() } else { d2.sqrt() };
        Ok(Comparison { mismatches, first, max_abs, rel_norm })
    }
}

/// The largest scrub that builds and runs: as many words as the device's local memory holds
/// (less a margin), halved until one works.
fn scrub_kernel(session: &Session, limits: &Limits) -> Option<(Kernel, DeviceBuffer, [usize; 2])> {
    let group = limits.max_work_group_size.clamp(1, 256);
    let global = (limits.compute_units.max(1) as usize) * SCRUB_GROUPS_PER_UNIT * group;
    let sink = session.alloc(4).ok()?;
    let mut words = (limits.local_mem_bytes / 4).saturating_sub(256);
    while words >= MIN_SCRUB_WORDS {
        let attempt = (|| -> Result<Kernel, RtError> {
            let program = session.build("kfoundry local-memory scrub", SCRUB_SOURCE, &format!("-D SCRUB_WORDS={words}"))?;
            let k = session.kernel(&program, "kf_scrub")?;
            // SAFETY: as in `scrub_local_memory`.
            unsafe { session.launch_raw(&k, &[global], Some(&[group]), &[sink.arg(), Arg::Scalar(Scalar::U32(0))], false)? };
            session.finish()?;
            Ok(k)
        })();
        match attempt {
            Ok(k) => return Some((k, sink, [global, group])),
            Err(_) => words /= 2,
        }
    }
    None
}

fn read_at(buf: &DeviceBuffer, i: usize) -> Result<f64, RtError> {
    let mut b = [0u8; 4];
    buf.read(i * 4, &mut b)?;
    Ok(f32::from_ne_bytes(b) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (Session, DeviceData) {
        let session = Session::on_device(0).expect("an OpenCL device (PoCL in CI)");
        let limits = session.limits().expect("limits");
        let dd = DeviceData::new(&session, &limits).expect("kernels");
        assert!(dd.scrub.is_some(), "the local-memory scrub builds and runs on this device");
        dd.scrub_local_memory(&session).expect("scrub");
        (session, dd)
    }

    fn read(b: &DeviceBuffer) -> Vec<f32> {
        let mut bytes = vec![0u8; b.len()];
        b.read(0, &mut bytes).expect("read");
        bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    #[test]
    fn draws_are_seeded_in_range_and_compared_like_on_the_host() {
        let (session, dd) = setup();
        let n = MIN_LEN;
        let buf = || session.alloc(n * 4).expect("buffer");
        let (a, b, c) = (buf(), buf(), buf());
        let uniform = Distribution::Uniform { lo: -2.0, hi: 3.0 };
        dd.draw(&session, &a, n, uniform, 42).unwrap();
        dd.draw(&session, &b, n, uniform, 42).unwrap();
        dd.draw(&session, &c, n, uniform, 43).unwrap();
        let (va, vc) = (read(&a), read(&c));
        assert!(va.iter().all(|&x| (-2.0..3.0).contains(&x)));
        let mean = va.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
        assert_eq!(va, read(&b), "same seed, same inputs");
        assert!(va.iter().zip(&vc).filter(|(x, y)| x == y).count() < n / 1000, "another seed, other inputs");

        let same = dd.compare(&session, &a, &b, n, 0.0, 0.0).unwrap();
        assert!(same.ok() && same.max_abs == 0.0 && same.rel_norm == 0.0, "{same:?}");
        let other = dd.compare(&session, &c, &a, n, 1e-5, 0.0).unwrap();
        assert!(other.mismatches > n / 2 && other.rel_norm > 0.1, "{other:?}");

        // A NaN where the reference is finite, and a small error within tolerance.
        let mut v = va.clone();
        v[123_457] = f32::NAN;
        v[9] *= 1.0 + 1e-7;
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let d_bytes = session.upload(&bytes).unwrap();
        let one = dd.compare(&session, &d_bytes, &a, n, 1e-5, 0.0).unwrap();
        assert_eq!(one.mismatches, 1, "{one:?}");
        assert_eq!(one.first.map(|f| f.0), Some(123_457));
        assert!(one.first.is_some_and(|f| f.1.is_nan()));

        // Poisoned (all bits set) outputs are NaN: nothing written means everything differs.
        dd.poison(&session, &a, n * 4).unwrap();
        assert_eq!(dd.compare(&session, &a, &b, n, 1e-3, 1e-3).unwrap().mismatches, n);
        // A buffer too short for what is asked is an error, not a launch.
        assert!(dd.draw(&session, &session.alloc(16).unwrap(), n, uniform, 1).is_err());
    }
}
