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

use kfoundry_rt::model::signature::ScalarType;
use kfoundry_rt::model::spec::Resolved;
use kfoundry_rt::opencl::device::Limits;
use kfoundry_rt::opencl::session::{DeviceBuffer, Kernel, Session};
use kfoundry_rt::{Arg, Error as RtError, Scalar};

use super::compare::{Comparison, SumSquares};
use super::inputs::{decode, large_scale, Values};

/// Buffers of at least this many bytes are drawn (float and integer inputs), poisoned, and
/// compared (floats with tolerances; any type where it must be exactly the same) on the
/// device.
pub(crate) const MIN_BYTES: usize = 1 << 24;

/// Element widths in bytes of the integer kernels, in their order.
const WIDTHS: [usize; 4] = [1, 2, 4, 8];

const GROUPS: usize = 1024;
const GROUP_SIZE: usize = 256;

const SOURCE: &str = r#"
uint kf_hash(uint x) {
    x ^= x >> 16; x *= 0x7feb352dU;
    x ^= x >> 15; x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}
/* 32 random bits from (seed, index, stream). */
uint kf_bits(uint seed_lo, uint seed_hi, ulong i, uint stream) {
    uint h = kf_hash((uint)i ^ seed_lo);
    h = kf_hash(h ^ (uint)(i >> 32) ^ seed_hi);
    return kf_hash(h + stream * 0x9E3779B9U);
}
/* A uniform in [0, 1) from (seed, index, stream): 24 random bits. */
float kf_unit(uint seed_lo, uint seed_hi, ulong i, uint stream) {
    return (float)(kf_bits(seed_lo, seed_hi, i, stream) >> 8) * (1.0f / 16777216.0f);
}
/* Integers of every width: uniform in [lo, lo + range) (range 0: all 2^64 values), stored
 * truncated to the element's width (two's complement: right for signed and unsigned types
 * alike when the range fits the type); and exact element-wise comparison, per work-group
 * the count of differing elements and the first such index. */
#define KF_INTS(T, W) \
__kernel void kf_uniform_int##W(__global T* out, const ulong n, const uint seed_lo, const uint seed_hi, const long lo, const ulong range) { \
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) { \
        ulong h = ((ulong)kf_bits(seed_lo, seed_hi, i, 3) << 32) | (ulong)kf_bits(seed_lo, seed_hi, i, 4); \
        out[i] = (T)(lo + (long)(range == 0 ? h : h % range)); \
    } \
} \
__kernel void kf_same##W(__global const T* a, __global const T* b, const ulong n, __global uint* bad, __global ulong* first) { \
    __local uint l_bad[GROUP_SIZE]; __local ulong l_first[GROUP_SIZE]; \
    uint nbad = 0; ulong f = (ulong)(-1); \
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) \
        if (a[i] != b[i]) { nbad++; if (i < f) f = i; } \
    uint l = get_local_id(0); \
    l_bad[l] = nbad; l_first[l] = f; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    for (uint s = GROUP_SIZE / 2; s > 0; s >>= 1) { \
        if (l < s) { l_bad[l] += l_bad[l + s]; l_first[l] = min(l_first[l], l_first[l + s]); } \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    if (l == 0) { bad[get_group_id(0)] = l_bad[0]; first[get_group_id(0)] = l_first[0]; } \
}
KF_INTS(uchar, 8)
KF_INTS(ushort, 16)
KF_INTS(uint, 32)
KF_INTS(ulong, 64)
/* Element i of a draw: uniform in [lo, hi), normal (mean, std). */
float kf_uniform_value(uint seed_lo, uint seed_hi, ulong i, float lo, float hi) {
    return lo + (hi - lo) * kf_unit(seed_lo, seed_hi, i, 0);
}
float kf_normal_value(uint seed_lo, uint seed_hi, ulong i, float mean, float std) {
    float u1 = 1.0f - kf_unit(seed_lo, seed_hi, i, 1);   /* (0, 1] */
    float u2 = kf_unit(seed_lo, seed_hi, i, 2);
    return mean + std * sqrt(-2.0f * log(u1)) * cos(6.283185307f * u2);
}
__kernel void kf_uniform(__global float* out, const ulong n, const uint seed_lo, const uint seed_hi, const float lo, const float hi) {
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        out[i] = kf_uniform_value(seed_lo, seed_hi, i, lo, hi);
}
__kernel void kf_normal(__global float* out, const ulong n, const uint seed_lo, const uint seed_hi, const float mean, const float std) {
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        out[i] = kf_normal_value(seed_lo, seed_hi, i, mean, std);
}
/* Poison: all bits set (NaN in every float format). A kernel rather than
 * clEnqueueFillBuffer, which did not finish on a 6.4 GB buffer through NVIDIA's OpenCL. */
/* Writes just before the start of the buffer it is given: the guard self-test. */
__kernel void kf_write_before(__global uint* p) {
    if (get_global_id(0) == 0) p[-1] = 0x600DF00DU;
}
__kernel void kf_poison(__global uint* out, const ulong n, const uint word) {
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        out[i] = word;
}
/* Edge values (see inputs.rs, `Values`): mode 1, the uniform draw with here and there a
 * special value (signed zeros, the smallest and a large denormal, the smallest normal, of the
 * element's format), and with `nonfinite` a few infinities and NaN; mode 2, small integers k
 * in [-8, 8] times `scale`. */
__constant float KF_SPECIALS[8] = {0.0f, -0.0f, 1.0e-45f, -1.0e-45f, 5.0e-39f, -5.0e-39f, 1.17549435e-38f, -1.17549435e-38f};
__constant float KF_SPECIALS_HALF[8] = {0.0f, -0.0f, 0x1p-24f, -0x1p-24f, 0x1p-15f, -0x1p-15f, 0x1p-14f, -0x1p-14f};
__constant float KF_SPECIALS_BF16[8] = {0.0f, -0.0f, 0x1p-133f, -0x1p-133f, 0x1p-127f, -0x1p-127f, 0x1p-126f, -0x1p-126f};
float kf_edge_value(uint seed_lo, uint seed_hi, ulong i, float lo, float hi, uint mode, uint nonfinite, float scale,
                    __constant float* specials) {
    uint h = kf_bits(seed_lo, seed_hi, i, 5);
    if (mode == 2)
        return (float)((int)(h % 17u) - 8) * scale;
    if (nonfinite && h % 1024u == 0) {
        uint k = (h >> 10) % 3u;
        return k == 0 ? INFINITY : k == 1 ? -INFINITY : NAN;
    }
    if ((h >> 20) % 16u == 0)
        return specials[(h >> 24) % 8u];
    return kf_uniform_value(seed_lo, seed_hi, i, lo, hi);
}
__kernel void kf_edges(__global float* out, const ulong n, const uint seed_lo, const uint seed_hi, const float lo, const float hi,
                       const uint mode, const uint nonfinite, const float scale) {
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        out[i] = kf_edge_value(seed_lo, seed_hi, i, lo, hi, mode, nonfinite, scale, KF_SPECIALS);
}
/* 16-bit floats (half, bfloat16): the float drawn as above (mode 0: uniform, or normal when
 * `normal`; modes 1 and 2: edge values), rounded to nearest even; NaN stays NaN. */
ushort kf_bf16(float x) {
    uint u = as_uint(x);
    if (isnan(x))
        return (ushort)((u >> 16) | 0x40u);
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#define KF_STORE_HALF(v, i, p) vstore_half_rte((v), (i), (__global half*)(p))
#define KF_STORE_BF16(v, i, p) ((p)[i] = kf_bf16(v))
#define KF_DRAW16(NAME, STORE, SPECIALS) \
__kernel void NAME(__global ushort* out, const ulong n, const uint seed_lo, const uint seed_hi, const float a, const float b, \
                   const uint normal, const uint mode, const uint nonfinite, const float scale) { \
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) { \
        float v = mode ? kf_edge_value(seed_lo, seed_hi, i, a, b, mode, nonfinite, scale, SPECIALS) \
                : normal ? kf_normal_value(seed_lo, seed_hi, i, a, b) : kf_uniform_value(seed_lo, seed_hi, i, a, b); \
        STORE(v, i, out); \
    } \
}
KF_DRAW16(kf_draw_half, KF_STORE_HALF, KF_SPECIALS_HALF)
KF_DRAW16(kf_draw_bf16, KF_STORE_BF16, KF_SPECIALS_BF16)
/* A sum of squares as (scale, ssq), worth scale^2 * ssq with scale the largest magnitude
 * added, so that no square is formed (none overflows float nor underflows it): b added to a.
 * The host's SumSquares (compare.rs) merges the work-groups' pairs the same way. */
float2 kf_ssq_merge(float2 a, float2 b) {
    if (b.x == 0.0f || b.y == 0.0f) return a;
    if (b.x > a.x) { float q = a.x / b.x; return (float2)(b.x, b.y + a.y * q * q); }
    float q = a.x == b.x ? 1.0f : b.x / a.x;
    return (float2)(a.x, a.y + b.y * q * q);
}
/* Compares two outputs element by element (decoded to float by LOAD): per work-group the
 * elements outside the tolerance, the first such index, the largest absolute difference and
 * finite |reference| (max_abs's x and y), and the sums of squares (as kf_ssq_merge pairs) for
 * the relative error norm. */
#define KF_COMPARE(NAME, T, LOAD) \
__kernel void NAME(__global const T* cand, __global const T* ref, const ulong n, \
                   const float rtol, const float atol, \
                   __global uint* bad, __global ulong* first, __global float2* max_abs, \
                   __global float2* diff2, __global float2* ref2) { \
    __local uint l_bad[GROUP_SIZE]; __local ulong l_first[GROUP_SIZE]; \
    __local float2 l_max[GROUP_SIZE], l_d2[GROUP_SIZE], l_r2[GROUP_SIZE]; \
    uint nbad = 0; ulong f = (ulong)(-1); float2 m = (float2)(0.0f); \
    float2 d2 = (float2)(0.0f), r2 = (float2)(0.0f); \
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) { \
        float x = LOAD(cand, i), r = LOAD(ref, i); \
        int ok; \
        if (isfinite(r)) { \
            float d = fabs(x - r); \
            m.y = fmax(m.y, fabs(r)); \
            if (isfinite(x)) { \
                m.x = fmax(m.x, d); \
                d2 = kf_ssq_merge(d2, (float2)(d, 1.0f)); \
                r2 = kf_ssq_merge(r2, (float2)(fabs(r), 1.0f)); \
            } \
            ok = isfinite(x) && d <= atol + rtol * fabs(r); \
        } else if (isnan(r)) { \
            ok = isnan(x); \
        } else { \
            ok = x == r; \
        } \
        if (!ok) { nbad++; if (i < f) f = i; } \
    } \
    uint l = get_local_id(0); \
    l_bad[l] = nbad; l_first[l] = f; l_max[l] = m; l_d2[l] = d2; l_r2[l] = r2; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    for (uint s = GROUP_SIZE / 2; s > 0; s >>= 1) { \
        if (l < s) { \
            l_bad[l] += l_bad[l + s]; \
            l_first[l] = min(l_first[l], l_first[l + s]); \
            l_max[l] = fmax(l_max[l], l_max[l + s]); \
            l_d2[l] = kf_ssq_merge(l_d2[l], l_d2[l + s]); \
            l_r2[l] = kf_ssq_merge(l_r2[l], l_r2[l + s]); \
        } \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    if (l == 0) { \
        uint g = get_group_id(0); \
        bad[g] = l_bad[0]; first[g] = l_first[0]; max_abs[g] = l_max[0]; diff2[g] = l_d2[0]; ref2[g] = l_r2[0]; \
    } \
}
#define KF_LOAD_FLOAT(p, i) (p)[i]
#define KF_LOAD_HALF(p, i) vload_half((i), (__global const half*)(p))
#define KF_LOAD_BF16(p, i) as_float((uint)(p)[i] << 16)
KF_COMPARE(kf_compare, float, KF_LOAD_FLOAT)
KF_COMPARE(kf_compare_half, ushort, KF_LOAD_HALF)
KF_COMPARE(kf_compare_bf16, ushort, KF_LOAD_BF16)
"#;

const SCRUB_SOURCE: &str = r#"
/* state[0]: a sink never written; state[1]: how many work-groups have started (zeroed before
 * each launch); state[2]: how many stopped waiting for the others without seeing them. */
__kernel void kf_scrub(__global uint* state, const uint never, const uint vecs, const uint units) {
    __local volatile uint4 scratch[SCRUB_VECS];
    for (uint i = get_local_id(0); i < min(vecs, (uint)SCRUB_VECS); i += get_local_size(0))
        scratch[i] = (uint4)(0xFFFFFFFFU);
    barrier(CLK_LOCAL_MEM_FENCE);
    /* Off a GPU (units > 1): each work-group waits, a bounded time, until `units` have
     * started, so that a runtime thread cannot take every work-group before the others wake:
     * each of the `units` threads runs one, in its own local memory. */
    if (units > 1 && get_local_id(0) == 0) {
        volatile __global uint* started = state + 1;
        atomic_inc(started);
        for (uint s = 0; s < SCRUB_SPIN && atomic_add(started, 0u) < units; ++s)
            ;
        if (atomic_add(started, 0u) < units) atomic_inc(state + 2);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (never == 1234567u && get_local_id(0) == 0) state[0] = scratch[0].x;
}
"#;

/// Smallest scrub tried (words) before giving up on scrubbing.
const MIN_SCRUB_WORDS: u64 = 256;
/// Work-groups of the scrub per compute unit (on a GPU several are resident on one at a time,
/// each in its own part of the unit's local memory; a CPU runtime takes them in any order).
const SCRUB_GROUPS_PER_UNIT: usize = 16;
/// How long (polls of a counter) a work-group of the scrub off a GPU waits for the others to
/// start: tens of milliseconds at most, where a runtime thread is busy elsewhere.
const SCRUB_SPIN: u32 = 1 << 22;

/// The generator, comparison and scrub kernels, built once per bench.
pub(crate) struct DeviceData {
    uniform: Kernel,
    normal: Kernel,
    poison: Kernel,
    edges: Kernel,
    compare: Kernel,
    /// Draws and comparisons of 16-bit floats: half, bfloat16.
    draw16: [Kernel; 2],
    compare16: [Kernel; 2],
    /// Integer draws and exact comparisons, by element width ([`WIDTHS`]).
    int_uniform: Vec<Kernel>,
    same: Vec<Kernel>,
    write_before: Kernel,
    /// The local-memory scrub; `None` when no size of it could be built and run here.
    scrub: Option<Scrub>,
}

/// The geometry of the data kernels: a grid-stride loop over the buffer.
const GLOBAL: [usize; 1] = [GROUPS * GROUP_SIZE];
const LOCAL: [usize; 1] = [GROUP_SIZE];

impl DeviceData {
    pub fn new(session: &Session, limits: &Limits) -> Result<DeviceData, RtError> {
        let program = session
            .build(
                "kfoundry data kernels",
                SOURCE,
                &format!("-D GROUP_SIZE={GROUP_SIZE}"),
            )
            .map_err(|e| RtError::OpenCl(format!("kfoundry's device data kernels: {e}")))?;
        Ok(DeviceData {
            uniform: session.kernel(&program, "kf_uniform")?,
            normal: session.kernel(&program, "kf_normal")?,
            poison: session.kernel(&program, "kf_poison")?,
            edges: session.kernel(&program, "kf_edges")?,
            compare: session.kernel(&program, "kf_compare")?,
            draw16: [
                session.kernel(&program, "kf_draw_half")?,
                session.kernel(&program, "kf_draw_bf16")?,
            ],
            compare16: [
                session.kernel(&program, "kf_compare_half")?,
                session.kernel(&program, "kf_compare_bf16")?,
            ],
            int_uniform: WIDTHS
                .iter()
                .map(|w| session.kernel(&program, &format!("kf_uniform_int{}", w * 8)))
                .collect::<Result<_, _>>()?,
            same: WIDTHS
                .iter()
                .map(|w| session.kernel(&program, &format!("kf_same{}", w * 8)))
                .collect::<Result<_, _>>()?,
            write_before: session.kernel(&program, "kf_write_before")?,
            scrub: scrub_kernel(session, limits),
        })
    }

    /// Fills the device's `__local` memory with NaN (as far as one kernel can reach it), or its
    /// first `reach` bytes in each work-group when given.
    pub fn scrub_local_memory(&self, session: &Session, reach: Option<u64>) -> Result<(), RtError> {
        match &self.scrub {
            Some(scrub) => scrub.launch(session, reach.map(|bytes| bytes.div_ceil(16))),
            None => Ok(()),
        }
    }

    /// Writes the 4 bytes before the start of `view`, a sub-buffer that starts at least 4
    /// bytes into its parent: the guard self-test's deliberate overrun.
    pub fn write_before(&self, session: &Session, view: &DeviceBuffer) -> Result<(), RtError> {
        // SAFETY: the caller gives a sub-buffer whose parent holds at least 4 bytes before it,
        // and the kernel writes only those (from one work-item).
        unsafe { session.launch_raw(&self.write_before, &[1], None, &[view.arg()], false)? };
        Ok(())
    }

    /// Whether [`DeviceData::draw`] draws elements of `ty` from `dist`: floats of 32 and 16
    /// bits (half, bfloat16) from a uniform, normal or constant distribution, integers from a
    /// uniform or constant one or a range of integers (permutations and monotone buffers are
    /// drawn on the host).
    pub fn draws(ty: ScalarType, dist: Resolved) -> bool {
        match (ty, dist) {
            (_, Resolved::Permutation | Resolved::Monotone { .. }) | (ScalarType::F64, _) => false,
            (ScalarType::F32 | ScalarType::F16 | ScalarType::Bf16, Resolved::Integers { .. }) => {
                false
            }
            (ScalarType::F32 | ScalarType::F16 | ScalarType::Bf16, _) => true,
            (_, dist) => !matches!(dist, Resolved::Normal { .. }),
        }
    }

    /// Fills the first `len` elements of type `ty` of `buf` from `dist` with `seed` (integers:
    /// uniform over the whole numbers from `lo` to `hi`, both rounded, as on the host).
    pub fn draw(
        &self,
        session: &Session,
        buf: &DeviceBuffer,
        ty: ScalarType,
        len: usize,
        dist: Resolved,
        seed: u64,
    ) -> Result<(), RtError> {
        if !Self::draws(ty, dist) {
            return Err(RtError::OpenCl(format!(
                "{dist:?} is not drawn on the device for `{}`",
                ty.opencl_name()
            )));
        }
        if len.saturating_mul(ty.size()) > buf.len() {
            return Err(RtError::OpenCl(format!(
                "{len} elements of `{}` do not fit a buffer of {} bytes",
                ty.opencl_name(),
                buf.len()
            )));
        }
        if ty.is_half() {
            return self.draw_values(session, buf, ty, len, dist, Values::Declared, seed);
        }
        let mut args = vec![
            buf.arg(),
            Arg::Scalar(Scalar::U64(len as u64)),
            Arg::Scalar(Scalar::U32(seed as u32)),
            Arg::Scalar(Scalar::U32((seed >> 32) as u32)),
        ];
        let kernel = if ty == ScalarType::F32 {
            let (kernel, a, b) = match dist {
                Resolved::Uniform { lo, hi } => (&self.uniform, lo as f32, hi as f32),
                Resolved::Normal { mean, std } => (&self.normal, mean as f32, std as f32),
                // Scalars only, by the annotation's rules; a constant buffer all the same.
                Resolved::Constant { value } => (&self.uniform, value as f32, value as f32),
                other => unreachable!("refused above: {other:?}"),
            };
            args.extend([Arg::Scalar(Scalar::F32(a)), Arg::Scalar(Scalar::F32(b))]);
            kernel
        } else {
            let (lo, hi) = match dist {
                Resolved::Uniform { lo, hi } => (lo.round(), hi.round()),
                Resolved::Constant { value } => (value.round(), value.round()),
                Resolved::Integers { lo, hi } => (lo as f64, (hi - 1) as f64),
                other => unreachable!("refused above: {other:?}"),
            };
            // Whole numbers lo..=hi; a range of 2^64 (or more) is passed as 0: every value.
            let (lo, hi) = (lo as i128, (hi as i128).max(lo as i128));
            let range = u64::try_from(hi - lo + 1).unwrap_or(0);
            args.extend([
                Arg::Scalar(Scalar::I64(lo as i64)),
                Arg::Scalar(Scalar::U64(range)),
            ]);
            self.by_width(&self.int_uniform, ty)?
        };
        // SAFETY: the kernel writes out[i] for i < n only, and n elements fit the buffer (checked).
        unsafe { session.launch_raw(kernel, &GLOBAL, Some(&LOCAL), &args, false)? };
        Ok(())
    }

    fn by_width<'k>(&self, kernels: &'k [Kernel], ty: ScalarType) -> Result<&'k Kernel, RtError> {
        WIDTHS
            .iter()
            .position(|w| *w == ty.size())
            .and_then(|i| kernels.get(i))
            .ok_or_else(|| {
                RtError::OpenCl(format!(
                    "no device kernel for elements of {} bytes",
                    ty.size()
                ))
            })
    }

    /// Compares the first `len` elements of type `ty` of two buffers for exact equality, bit
    /// for bit (the check that a candidate left a buffer as the reference did).
    pub fn same(
        &self,
        session: &Session,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        ty: ScalarType,
        len: usize,
    ) -> Result<Comparison, RtError> {
        if len.saturating_mul(ty.size()) > a.len().min(b.len()) {
            return Err(RtError::OpenCl(format!(
                "{len} elements do not fit the buffers compared"
            )));
        }
        let bad = session.alloc(GROUPS * 4)?;
        let first = session.alloc(GROUPS * 8)?;
        let args = [
            a.arg(),
            b.arg(),
            Arg::Scalar(Scalar::U64(len as u64)),
            bad.arg(),
            first.arg(),
        ];
        // SAFETY: reads a[i], b[i] for i < n (both hold n elements, checked) and writes one
        // element per work-group of the GROUPS-long result buffers.
        unsafe {
            session.launch_raw(
                self.by_width(&self.same, ty)?,
                &GLOBAL,
                Some(&LOCAL),
                &args,
                false,
            )?
        };
        mismatches(&bad, &first, (a, b), ty, len)
    }

    /// Sets every bit of the first `bytes` bytes of `buf` (a multiple of 4): NaN in every float
    /// format.
    pub fn poison(
        &self,
        session: &Session,
        buf: &DeviceBuffer,
        bytes: usize,
    ) -> Result<(), RtError> {
        self.fill_words(session, buf, bytes, 0xFFFF_FFFF)
    }

    /// Sets each 4-byte word of the first `bytes` bytes of `buf` to `word`.
    pub fn fill_words(
        &self,
        session: &Session,
        buf: &DeviceBuffer,
        bytes: usize,
        word: u32,
    ) -> Result<(), RtError> {
        let words = bytes.min(buf.len()) / 4;
        let args = [
            buf.arg(),
            Arg::Scalar(Scalar::U64(words as u64)),
            Arg::Scalar(Scalar::U32(word)),
        ];
        // SAFETY: writes out[i] for i < words only, within the buffer.
        unsafe { session.launch_raw(&self.poison, &GLOBAL, Some(&LOCAL), &args, false)? };
        Ok(())
    }

    /// Random bytes (whole words) in the first `bytes` bytes of `buf`, from `seed`.
    pub fn random_words(
        &self,
        session: &Session,
        buf: &DeviceBuffer,
        bytes: usize,
        seed: u64,
    ) -> Result<(), RtError> {
        let words = bytes.min(buf.len()) / 4;
        self.draw(
            session,
            buf,
            ScalarType::U32,
            words,
            Resolved::Uniform {
                lo: 0.0,
                hi: u32::MAX as f64,
            },
            seed,
        )
    }

    /// Fills the first `len` floats (of 32 or 16 bits, `ty`) of `buf` with the edge values of
    /// `values` around `dist` ([`Values::Declared`] draws as [`DeviceData::draw`] does).
    #[allow(clippy::too_many_arguments)]
    pub fn draw_values(
        &self,
        session: &Session,
        buf: &DeviceBuffer,
        ty: ScalarType,
        len: usize,
        dist: Resolved,
        values: Values,
        seed: u64,
    ) -> Result<(), RtError> {
        let (mode, nonfinite) = match values {
            Values::Declared if ty == ScalarType::F32 => {
                return self.draw(session, buf, ty, len, dist, seed)
            }
            Values::Declared => (0u32, 0u32),
            Values::Specials { nonfinite } => (1, u32::from(nonfinite)),
            Values::Large => (2, 0),
            // Drawn on the host (`Values::host_only`).
            other => {
                return Err(RtError::OpenCl(format!(
                    "{other:?} inputs are drawn on the host"
                )))
            }
        };
        let draw16 = self.half_kernel(&self.draw16, ty)?;
        if len.saturating_mul(ty.size()) > buf.len() {
            return Err(RtError::OpenCl(format!(
                "{len} elements of `{}` do not fit a buffer of {} bytes",
                ty.opencl_name(),
                buf.len()
            )));
        }
        // Edge values are drawn uniformly between the distribution's ends (a normal one's at
        // two deviations); a declared normal draw takes its mean and deviation.
        let ((a, b), normal) = match (dist, mode) {
            (Resolved::Uniform { lo, hi }, _) => ((lo, hi), false),
            (Resolved::Normal { mean, std }, 0) => ((mean, std), true),
            (Resolved::Normal { mean, std }, _) => ((mean - 2.0 * std, mean + 2.0 * std), false),
            (Resolved::Constant { value }, _) => ((value, value), false),
            // Integer buffers only (the annotation's rules), never a float buffer's.
            (other, _) => unreachable!("drawn for integer buffers only: {other:?}"),
        };
        let mut args = vec![
            buf.arg(),
            Arg::Scalar(Scalar::U64(len as u64)),
            Arg::Scalar(Scalar::U32(seed as u32)),
            Arg::Scalar(Scalar::U32((seed >> 32) as u32)),
            Arg::Scalar(Scalar::F32(a as f32)),
            Arg::Scalar(Scalar::F32(b as f32)),
        ];
        if draw16.is_some() {
            args.push(Arg::Scalar(Scalar::U32(u32::from(normal))));
        }
        args.extend([
            Arg::Scalar(Scalar::U32(mode)),
            Arg::Scalar(Scalar::U32(nonfinite)),
            Arg::Scalar(Scalar::F32(large_scale(dist) as f32)),
        ]);
        let kernel = draw16.unwrap_or(&self.edges);
        // SAFETY: the kernel writes out[i] for i < n only, and n elements fit the buffer
        // (checked).
        unsafe { session.launch_raw(kernel, &GLOBAL, Some(&LOCAL), &args, false)? };
        Ok(())
    }

    /// The kernel of `kernels` (half, bfloat16) for 16-bit `ty`; `None` for `float`; an error
    /// for any other type.
    fn half_kernel<'k>(
        &self,
        kernels: &'k [Kernel; 2],
        ty: ScalarType,
    ) -> Result<Option<&'k Kernel>, RtError> {
        match ty {
            ScalarType::F32 => Ok(None),
            ScalarType::F16 => Ok(Some(&kernels[0])),
            ScalarType::Bf16 => Ok(Some(&kernels[1])),
            other => Err(RtError::OpenCl(format!(
                "`{}` is not a float type the device draws and compares",
                other.opencl_name()
            ))),
        }
    }

    /// Compares two float buffers (32 or 16 bits, `ty`) of `len` elements on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn compare(
        &self,
        session: &Session,
        cand: &DeviceBuffer,
        refr: &DeviceBuffer,
        ty: ScalarType,
        len: usize,
        rtol: f64,
        atol: f64,
    ) -> Result<Comparison, RtError> {
        let kernel = self
            .half_kernel(&self.compare16, ty)?
            .unwrap_or(&self.compare);
        if len.saturating_mul(ty.size()) > cand.len().min(refr.len()) {
            return Err(RtError::OpenCl(format!(
                "{len} elements do not fit the buffers compared"
            )));
        }
        let bad = session.alloc(GROUPS * 4)?;
        let first = session.alloc(GROUPS * 8)?;
        let max_abs = session.alloc(GROUPS * 8)?;
        let diff2 = session.alloc(GROUPS * 8)?;
        let ref2 = session.alloc(GROUPS * 8)?;
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
        // SAFETY: reads cand[i], ref[i] for i < n (both hold n elements, checked) and writes one
        // element per work-group of the GROUPS-long result buffers.
        unsafe { session.launch_raw(kernel, &GLOBAL, Some(&LOCAL), &args, false)? };
        let words = |b: &DeviceBuffer, size: usize| -> Result<Vec<u8>, RtError> {
            let mut bytes = vec![0u8; GROUPS * size];
            b.read(0, &mut bytes)?;
            Ok(bytes)
        };
        let f32s = |bytes: Vec<u8>| {
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect::<Vec<_>>()
        };
        let counted = mismatches(&bad, &first, (cand, refr), ty, len)?;
        let maxima = f32s(words(&max_abs, 8)?);
        let largest = |k: usize| {
            maxima
                .iter()
                .skip(k)
                .step_by(2)
                .fold(0.0f64, |m, &x| m.max(x))
        };
        let (max_abs, ref_max) = (largest(0), largest(1));
        let sum = |pairs: Vec<f64>| {
            let mut total = SumSquares::default();
            for p in pairs.chunks_exact(2) {
                total.merge(SumSquares {
                    scale: p[0],
                    ssq: p[1],
                });
            }
            total
        };
        let d2 = sum(f32s(words(&diff2, 8)?));
        let r2 = sum(f32s(words(&ref2, 8)?));
        let rel_norm = d2.relative_to(r2);
        Ok(Comparison {
            max_abs,
            rel_norm,
            ref_max,
            ..counted
        })
    }
}

/// The local-memory scrub kernel and how it is launched.
struct Scrub {
    kernel: Kernel,
    /// `[sink, work-groups started, waits given up]`.
    state: DeviceBuffer,
    global: usize,
    local: usize,
    /// The 16-byte words each work-group can write (the kernel's local array).
    most: u64,
    /// Runtime threads every one of which must run a work-group (1 on a GPU: no waiting).
    units: u32,
}

impl Scrub {
    /// Launches the scrub writing `vecs` 16-byte words per work-group (`None`: all it can).
    fn launch(&self, session: &Session, vecs: Option<u64>) -> Result<(), RtError> {
        let vecs = vecs.map_or(self.most, |v| v.min(self.most));
        if self.units > 1 {
            self.state.write(4, &[0u8; 8])?;
        }
        // SAFETY: the kernel writes its own local memory, `state[1]` and `state[2]` (counted
        // atomically) and `state[0]` only under a condition its argument never meets; `state`
        // holds 12 bytes.
        unsafe {
            session.launch_raw(
                &self.kernel,
                &[self.global],
                Some(&[self.local]),
                &[
                    self.state.arg(),
                    Arg::Scalar(Scalar::U32(0)),
                    Arg::Scalar(Scalar::U32(u32::try_from(vecs).unwrap_or(u32::MAX))),
                    Arg::Scalar(Scalar::U32(self.units)),
                ],
                false,
            )?
        };
        Ok(())
    }
}

/// The largest scrub that builds and runs: as many words as the device's local memory holds
/// (less a margin), halved until one works. Off a GPU every compute unit (a runtime thread
/// of PoCL's) must run one of its work-groups: each waits for as many to have started; where
/// that wait is given up on an idle device (a runtime that runs fewer work-groups at once than
/// it has compute units), the scrub does not wait again.
fn scrub_kernel(session: &Session, limits: &Limits) -> Option<Scrub> {
    let local = limits.max_work_group_size.clamp(1, 256);
    let units = limits.compute_units.max(1);
    let global = units as usize * SCRUB_GROUPS_PER_UNIT * local;
    let state = session.alloc(12).ok()?;
    let units = if session.is_gpu() { 1 } else { units };
    let mut words = (limits.local_mem_bytes / 4).saturating_sub(256);
    while words >= MIN_SCRUB_WORDS {
        let attempt = (|| -> Result<Scrub, RtError> {
            // Written 16 bytes at a time.
            let program = session.build(
                "kfoundry local-memory scrub",
                SCRUB_SOURCE,
                &format!("-D SCRUB_VECS={} -D SCRUB_SPIN={SCRUB_SPIN}u", words / 4),
            )?;
            let mut scrub = Scrub {
                kernel: session.kernel(&program, "kf_scrub")?,
                state: state.clone(),
                global,
                local,
                most: words / 4,
                units,
            };
            scrub.launch(session, None)?;
            session.finish()?;
            let mut gave_up = [0u8; 4];
            scrub.state.read(8, &mut gave_up)?;
            if u32::from_ne_bytes(gave_up) > 0 {
                scrub.units = 1;
            }
            Ok(scrub)
        })();
        match attempt {
            Ok(scrub) => return Some(scrub),
            Err(_) => words /= 2,
        }
    }
    None
}

/// Element `i` of type `ty` of `buf`, as a number.
fn element_at(buf: &DeviceBuffer, ty: ScalarType, i: usize) -> Result<f64, RtError> {
    let mut b = vec![0u8; ty.size()];
    buf.read(i * ty.size(), &mut b)?;
    Ok(decode(ty, &b, 0))
}

/// The per-work-group counts of differing elements and first differing indices, reduced: how
/// many elements of the `len` compared differ, and the first one with both values (the error
/// norms left at 0 for the caller that has them).
fn mismatches(
    bad: &DeviceBuffer,
    first: &DeviceBuffer,
    (a, b): (&DeviceBuffer, &DeviceBuffer),
    ty: ScalarType,
    len: usize,
) -> Result<Comparison, RtError> {
    let (mut counts, mut firsts) = (vec![0u8; GROUPS * 4], vec![0u8; GROUPS * 8]);
    bad.read(0, &mut counts)?;
    first.read(0, &mut firsts)?;
    let mismatches = counts
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .sum();
    let index = firsts
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .min();
    let first = match index.and_then(|f| usize::try_from(f).ok()) {
        Some(i) if mismatches > 0 && i < len => {
            Some((i, element_at(a, ty, i)?, element_at(b, ty, i)?))
        }
        _ => None,
    };
    Ok(Comparison {
        mismatches,
        first,
        max_abs: 0.0,
        rel_norm: 0.0,
        ref_max: 0.0,
    })
}

#[cfg(test)]
mod tests;
