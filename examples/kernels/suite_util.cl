/*
 * Helpers of the GPU suite harness (src/bin/suite.rs); not tuned.
 *
 * hash_fill: out[i] = a uniform float in [-1, 1) from a counter-based hash of (seed, i):
 *     h = mix(mix(i) + mix(seed))   (32-bit, wrapping; mix = "lowbias32", a bijection)
 *     out[i] = ((int)(h >> 8) - 2^23) * 2^-23
 * Exact in fp32, so bench/torch_suite.py reproduces it bit for bit with int64 tensor ops.
 * Indices must be below 2^32.
 *
 * gather_stride: dst[j] = src[j * stride] for j < count (a deterministic sample of an output).
 */

inline uint kf_mix(uint x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

__kernel void hash_fill(const uint seed, const ulong n, __global float* out)
{
    const ulong i = get_global_id(0);
    if (i < n) {
        const uint h = kf_mix(kf_mix((uint)i) + kf_mix(seed));
        out[i] = (float)((int)(h >> 8) - 8388608) * (1.0f / 8388608.0f);
    }
}

/* NaN everywhere (instead of clEnqueueFillBuffer, which did not finish on a 6.4 GB buffer
 * through NVIDIA's OpenCL). */
__kernel void nan_fill(const ulong n, __global float* out)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        out[i] = NAN;
}

__kernel void gather_stride(const ulong stride, const ulong count, __global const float* src, __global float* dst)
{
    const ulong j = get_global_id(0);
    if (j < count)
        dst[j] = src[j * stride];
}
