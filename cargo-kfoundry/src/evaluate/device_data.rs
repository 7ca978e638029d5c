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
use kfoundry_rt::Error as RtError;

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
    queue: ocl::Queue,
    program: ocl::Program,
    /// The local-memory scrub; `None` when no size of it could be built and run here.
    scrub: Option<ocl::Kernel>,
}

impl DeviceData {
    pub fn new(context: &ocl::Context, device: &ocl::Device, queue: &ocl::Queue, limits: &super::Limits) -> Result<DeviceData, RtError> {
        let program = ocl::Program::builder()
            .src(SOURCE)
            .devices(*device)
            .cmplr_opt(format!("-D GROUP_SIZE={GROUP_SIZE}"))
            .build(context)
            .map_err(|e| RtError::OpenCl(format!("kfoundry's device data kernels: {e}")))?;
        let scrub = scrub_kernel(context, device, queue, limits);
        Ok(DeviceData { queue: queue.clone(), program, scrub })
    }

    /// Fills the device's `__local` memory with NaN (as far as one kernel can reach it).
    pub fn scrub_local_memory(&self) -> Result<(), RtError> {
        if let Some(k) = &self.scrub {
            // SAFETY: the kernel writes only its own local memory; `sink[0]` (a 4-byte buffer)
            // only under a condition its argument never meets.
            unsafe { k.enq()? };
        }
        Ok(())
    }

    /// Fills `buf` (a float buffer of `len` elements, as bytes) from `dist` with `seed`.
    pub fn draw(&self, buf: &ocl::Buffer<u8>, len: usize, dist: Distribution, seed: u64) -> Result<(), RtError> {
        let (name, a, b) = match dist {
            Distribution::Uniform { lo, hi } => ("kf_uniform", lo as f32, hi as f32),
            Distribution::Normal { mean, std } => ("kf_normal", mean as f32, std as f32),
            // Scalars only, by the annotation's rules; a constant buffer all the same.
            Distribution::Constant { value } => ("kf_uniform", value as f32, value as f32),
        };
        let k = ocl::Kernel::builder()
            .program(&self.program)
            .name(name)
            .queue(self.queue.clone())
            .global_work_size(GROUPS * GROUP_SIZE)
            .local_work_size(GROUP_SIZE)
            .arg(buf)
            .arg(len as u64)
            .arg(seed as u32)
            .arg((seed >> 32) as u32)
            .arg(a)
            .arg(b)
            .build()?;
        // SAFETY: the kernel writes out[i] for i < n only, and n is the buffer's length.
        unsafe { k.enq()? };
        Ok(())
    }

    /// Sets every bit of `buf` (`bytes` long, a multiple of 4): NaN in every float format.
    pub fn poison(&self, buf: &ocl::Buffer<u8>, bytes: usize) -> Result<(), RtError> {
        let k = ocl::Kernel::builder()
            .program(&self.program)
            .name("kf_poison")
            .queue(self.queue.clone())
            .global_work_size(GROUPS * GROUP_SIZE)
            .local_work_size(GROUP_SIZE)
            .arg(buf)
            .arg((bytes / 4) as u64)
            .build()?;
        // SAFETY: writes out[i] for i < bytes / 4 only, within the buffer.
        unsafe { k.enq()? };
        Ok(())
    }

    /// Compares two float buffers of `len` elements on the device.
    pub fn compare(&self, cand: &ocl::Buffer<u8>, refr: &ocl::Buffer<u8>, len: usize, rtol: f64, atol: f64) -> Result<Comparison, RtError> {
        let q = self.queue.clone();
        let bad = ocl::Buffer::<u32>::builder().queue(q.clone()).len(GROUPS).build()?;
        let first = ocl::Buffer::<u64>::builder().queue(q.clone()).len(GROUPS).build()?;
        let max_abs = ocl::Buffer::<f32>::builder().queue(q.clone()).len(GROUPS).build()?;
        let diff2 = ocl::Buffer::<f32>::builder().queue(q.clone()).len(GROUPS).build()?;
        let ref2 = ocl::Buffer::<f32>::builder().queue(q.clone()).len(GROUPS).build()?;
        let k = ocl::Kernel::builder()
            .program(&self.program)
            .name("kf_compare")
            .queue(q.clone())
            .global_work_size(GROUPS * GROUP_SIZE)
            .local_work_size(GROUP_SIZE)
            .arg(cand)
            .arg(refr)
            .arg(len as u64)
            .arg(rtol as f32)
            .arg(atol as f32)
            .arg(&bad)
            .arg(&first)
            .arg(&max_abs)
            .arg(&diff2)
            .arg(&ref2)
            .build()?;
        // SAFETY: reads cand[i], ref[i] for i < n (both buffers hold n floats) and writes one
        // element per work-group of the GROUPS-long result buffers.
        unsafe { k.enq()? };
        let read_u32 = |b: &ocl::Buffer<u32>| -> Result<Vec<u32>, RtError> {
            let mut v = vec![0; GROUPS];
            b.read(&mut v).enq()?;
            Ok(v)
        };
        let read_f32 = |b: &ocl::Buffer<f32>| -> Result<Vec<f32>, RtError> {
            let mut v = vec![0.0; GROUPS];
            b.read(&mut v).enq()?;
            Ok(v)
        };
        let mut firsts = vec![0u64; GROUPS];
        first.read(&mut firsts).enq()?;
        let mismatches: usize = read_u32(&bad)?.iter().map(|&b| b as usize).sum();
        let max_abs = read_f32(&max_abs)?.iter().fold(0.0f64, |m, &x| m.max(x as f64));
        let d2: f64 = read_f32(&diff2)?.iter().map(|&x| x as f64).sum();
        let r2: f64 = read_f32(&ref2)?.iter().map(|&x| x as f64).sum();
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
fn scrub_kernel(context: &ocl::Context, device: &ocl::Device, queue: &ocl::Queue, limits: &super::Limits) -> Option<ocl::Kernel> {
    use ocl::core::{DeviceInfo as I, DeviceInfoResult as R};
    let units = match ocl::core::get_device_info(device.as_core(), I::MaxComputeUnits) {
        Ok(R::MaxComputeUnits(u)) => u.max(1) as usize,
        _ => 1,
    };
    let group = limits.max_work_group_size.clamp(1, 256);
    let sink = ocl::Buffer::<u32>::builder().queue(queue.clone()).len(1).build().ok()?;
    let mut words = (limits.local_mem_bytes / 4).saturating_sub(256);
    while words >= MIN_SCRUB_WORDS {
        let attempt = (|| -> Result<ocl::Kernel, RtError> {
            let program = ocl::Program::builder().src(SCRUB_SOURCE).devices(*device).cmplr_opt(format!("-D SCRUB_WORDS={words}")).build(context)?;
            let k = ocl::Kernel::builder()
                .program(&program)
                .name("kf_scrub")
                .queue(queue.clone())
                .global_work_size(units * SCRUB_GROUPS_PER_UNIT * group)
                .local_work_size(group)
                .arg(&sink)
                .arg(0u32)
                .build()?;
            // SAFETY: as in `scrub_local_memory`.
            unsafe { k.enq()? };
            queue.finish()?;
            Ok(k)
        })();
        match attempt {
            Ok(k) => return Some(k),
            Err(_) => words /= 2,
        }
    }
    None
}

fn read_at(buf: &ocl::Buffer<u8>, i: usize) -> Result<f64, RtError> {
    let mut b = [0u8; 4];
    buf.read(&mut b[..]).offset(i * 4).enq()?;
    Ok(f32::from_ne_bytes(b) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (ocl::Context, ocl::Queue, DeviceData) {
        let devices = kfoundry_rt::list_devices().expect("devices");
        let (platform, device) = devices.first().copied().expect("an OpenCL device (PoCL in CI)");
        let context = ocl::Context::builder().platform(platform).devices(device).build().expect("context");
        let queue = ocl::Queue::new(&context, device, None).expect("queue");
        let limits = super::super::limits(&device).expect("limits");
        let dd = DeviceData::new(&context, &device, &queue, &limits).expect("kernels");
        assert!(dd.scrub.is_some(), "the local-memory scrub builds and runs on this device");
        dd.scrub_local_memory().expect("scrub");
        (context, queue, dd)
    }

    fn read(b: &ocl::Buffer<u8>) -> Vec<f32> {
        let mut bytes = vec![0u8; b.len()];
        b.read(&mut bytes).enq().expect("read");
        bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    #[test]
    fn draws_are_seeded_in_range_and_compared_like_on_the_host() {
        let (_cx, q, dd) = setup();
        let n = MIN_LEN;
        let buf = || ocl::Buffer::<u8>::builder().queue(q.clone()).len(n * 4).build().expect("buffer");
        let (a, b, c) = (buf(), buf(), buf());
        let uniform = Distribution::Uniform { lo: -2.0, hi: 3.0 };
        dd.draw(&a, n, uniform, 42).unwrap();
        dd.draw(&b, n, uniform, 42).unwrap();
        dd.draw(&c, n, uniform, 43).unwrap();
        let (va, vc) = (read(&a), read(&c));
        assert!(va.iter().all(|&x| (-2.0..3.0).contains(&x)));
        let mean = va.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
        assert_eq!(va, read(&b), "same seed, same inputs");
        assert!(va.iter().zip(&vc).filter(|(x, y)| x == y).count() < n / 1000, "another seed, other inputs");

        let same = dd.compare(&a, &b, n, 0.0, 0.0).unwrap();
        assert!(same.ok() && same.max_abs == 0.0 && same.rel_norm == 0.0, "{same:?}");
        let other = dd.compare(&c, &a, n, 1e-5, 0.0).unwrap();
        assert!(other.mismatches > n / 2 && other.rel_norm > 0.1, "{other:?}");

        // A NaN where the reference is finite, and a small error within tolerance.
        let mut v = va.clone();
        v[123_457] = f32::NAN;
        v[9] *= 1.0 + 1e-7;
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let d_bytes = ocl::Buffer::<u8>::builder().queue(q.clone()).len(n * 4).copy_host_slice(&bytes).build().unwrap();
        let one = dd.compare(&d_bytes, &a, n, 1e-5, 0.0).unwrap();
        assert_eq!(one.mismatches, 1, "{one:?}");
        assert_eq!(one.first.map(|f| f.0), Some(123_457));
        assert!(one.first.is_some_and(|f| f.1.is_nan()));

        // Poisoned (all bits set) outputs are NaN: nothing written means everything differs.
        dd.poison(&a, n * 4).unwrap();
        assert_eq!(dd.compare(&a, &b, n, 1e-3, 1e-3).unwrap().mismatches, n);
    }
}
