/*
 * layernorm_stats: stage 1 of the suite's LayerNorm (KernelBench level 1: normalise each of the
 * n = 16 samples of a 16 x 64 x 256 x 256 tensor over its d = 64 * 256 * 256 elements).
 *
 * Sample s is cut into chunks of `chunk` elements (a size, fixed by the caller; the last chunk
 * may be shorter). For chunk c, one work-group writes
 *     mean[s * nch + c] = the chunk's mean,
 *     m2[s * nch + c]   = the chunk's sum of squared deviations from that mean,
 * where nch = ceil_div(d, chunk). The output's layout depends only on the sizes, never on the
 * tuning parameters; layernorm_apply.cl combines the partials (Chan et al.) and normalises.
 * Sums are taken around a shift (the chunk's first element), so that a large mean does not
 * cancel the variance.
 *
 *   WG     items per chunk (power of two)    [32 .. 1024]   ref 256
 *   VEC    vector width of the loads         [1, 2, 4, 8]   ref 1
 *   ITEMS  vectors per item per loop step    [1, 2, 4, 8]   ref 1
 *
 * Vector loads go through a VEC-wide pointer type (vloadN only promises element alignment, so
 * a compiler may split it into scalar loads): vectors are taken at VEC-aligned positions of
 * the whole buffer (whose start OpenCL aligns to at least 128 bytes), and the elements of the
 * chunk before the first and after the last whole vector (fewer than VEC each) are read one
 * by one. Every configuration is correct for every n, d, chunk >= 1.
 *
 * Launch (2-D): global = (WG * ceil_div(d, chunk), n), local = (WG, 1).
 */

#ifndef WG
#define WG 256
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

#if (WG & (WG - 1)) != 0
#error "WG must be a power of two"
#endif

#define KF_CAT_(p, q) p##q
#define KF_CAT(p, q) KF_CAT_(p, q)

#if VEC == 1
#define KF_VTYPE float
#define KF_HSUM(v) (v)
#else
#define KF_VTYPE KF_CAT(float, VEC)
#if VEC == 2
#define KF_HSUM(v) ((v).s0 + (v).s1)
#elif VEC == 4
#define KF_HSUM(v) (((v).s0 + (v).s1) + ((v).s2 + (v).s3))
#elif VEC == 8
#define KF_HSUM(v) ((((v).s0 + (v).s1) + ((v).s2 + (v).s3)) + (((v).s4 + (v).s5) + ((v).s6 + (v).s7)))
#else
#error "VEC must be 1, 2, 4 or 8"
#endif
#endif

__kernel void layernorm_stats(const int n, const int d, const int chunk, __global const float* x, __global float* mean, __global float* m2)
{
    __local float red_a[WG];
    __local float red_b[WG];

    const int lid = (int)get_local_id(0);
    const int c = (int)get_group_id(0);
    const int s = (int)get_global_id(1);
    const int nch = (d + chunk - 1) / chunk;
    const int start = c * chunk;
    const int cnt = min(chunk, d - start);
    /* The chunk is [a, b) of the flat buffer; whole vectors [va, vb) (in units of VEC). */
    const long a = (long)s * d + start;
    const long b = a + cnt;
    const long va = (a + VEC - 1) / VEC;
    const long vb = max(va, b / VEC);
    const long hend = min(va * VEC, b);    /* scalars [a, hend) before the first vector */
    const long tbeg = max(vb * VEC, hend); /* and [tbeg, b) after the last */
    const int nv = (int)(vb - va);
    __global const KF_VTYPE* xv = (__global const KF_VTYPE*)x + va;
    const float shift = x[a];

    KF_VTYPE s1[ITEMS], s2[ITEMS];
    for (int it = 0; it < ITEMS; ++it) {
        s1[it] = (KF_VTYPE)(0.0f);
        s2[it] = (KF_VTYPE)(0.0f);
    }
    const int end1 = (nv / (WG * ITEMS)) * (WG * ITEMS);
    for (int k0 = 0; k0 < end1; k0 += WG * ITEMS) {
        for (int it = 0; it < ITEMS; ++it) {
            const KF_VTYPE v = xv[k0 + it * WG + lid] - (KF_VTYPE)(shift);
            s1[it] += v;
            s2[it] = fma(v, v, s2[it]);
        }
    }
    for (int k = end1 + lid; k < nv; k += WG) {
        const KF_VTYPE v = xv[k] - (KF_VTYPE)(shift);
        s1[0] += v;
        s2[0] = fma(v, v, s2[0]);
    }
    for (int it = 1; it < ITEMS; ++it) {
        s1[0] += s1[it];
        s2[0] += s2[it];
    }
    float t1 = KF_HSUM(s1[0]);
    float t2 = KF_HSUM(s2[0]);
    for (long i = a + lid; i < hend; i += WG) {
        const float v = x[i] - shift;
        t1 += v;
        t2 = fma(v, v, t2);
    }
    for (long i = tbeg + lid; i < b; i += WG) {
        const float v = x[i] - shift;
        t1 += v;
        t2 = fma(v, v, t2);
    }

    red_a[lid] = t1;
    red_b[lid] = t2;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h >>= 1) {
        if (lid < h) {
            red_a[lid] += red_a[lid + h];
            red_b[lid] += red_b[lid + h];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        const float t = red_a[0], q = red_b[0];
        mean[s * nch + c] = shift + t / (float)cnt;
        m2[s * nch + c] = fmax(q - t * (t / (float)cnt), 0.0f);
    }
}
