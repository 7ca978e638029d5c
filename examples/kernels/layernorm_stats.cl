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
 *   ITEMS  vectors per item per loop step    [1, 2, 4]      ref 1
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
#define KF_VLOAD(o, p) ((p)[(o)])
#define KF_HSUM(v) (v)
#else
#define KF_VTYPE KF_CAT(float, VEC)
#define KF_VLOAD(o, p) KF_CAT(vload, VEC)((o), (p))
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

#define KF_STEP1 (WG * VEC * ITEMS)
#define KF_STEP2 (WG * VEC)

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
    __global const float* p = x + (size_t)s * (size_t)d + start;
    const float shift = p[0];

    KF_VTYPE s1[ITEMS], s2[ITEMS];
    for (int it = 0; it < ITEMS; ++it) {
        s1[it] = (KF_VTYPE)(0.0f);
        s2[it] = (KF_VTYPE)(0.0f);
    }
    const int end1 = (cnt / KF_STEP1) * KF_STEP1;
    const int end2 = end1 + ((cnt - end1) / KF_STEP2) * KF_STEP2;
    for (int c0 = 0; c0 < end1; c0 += KF_STEP1) {
        for (int it = 0; it < ITEMS; ++it) {
            const KF_VTYPE v = KF_VLOAD(it * WG + lid, p + c0) - (KF_VTYPE)(shift);
            s1[it] += v;
            s2[it] = fma(v, v, s2[it]);
        }
    }
    for (int c0 = end1; c0 < end2; c0 += KF_STEP2) {
        const KF_VTYPE v = KF_VLOAD(lid, p + c0) - (KF_VTYPE)(shift);
        s1[0] += v;
        s2[0] = fma(v, v, s2[0]);
    }
    for (int it = 1; it < ITEMS; ++it) {
        s1[0] += s1[it];
        s2[0] += s2[it];
    }
    float t1 = KF_HSUM(s1[0]);
    float t2 = KF_HSUM(s2[0]);
    for (int i = end2 + lid; i < cnt; i += WG) {
        const float v = p[i] - shift;
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
        const float a = red_a[0], b = red_b[0];
        mean[s * nch + c] = shift + a / (float)cnt;
        m2[s * nch + c] = fmax(b - a * (a / (float)cnt), 0.0f);
    }
}
