/*
 * softmax_stats: stage 1 of the suite's row softmax (KernelBench level 1, rows x cols =
 * 4096 x 393216, row-major): y[r, :] = exp(x[r, :] - max_r) / sum(exp(x[r, :] - max_r)).
 *
 * Row r is cut into chunks of `chunk` elements (a size, fixed by the caller; the last chunk of
 * a row may be shorter). For chunk c, one work-group writes
 *     pmax[r * nch + c] = the chunk's maximum,
 *     psum[r * nch + c] = the sum over the chunk of exp(x - pmax[r * nch + c]),
 * where nch = ceil_div(cols, chunk). The output's layout depends only on the sizes, never on
 * the tuning parameters; softmax_apply.cl combines a row's partials (rescaling each partial
 * sum by exp(pmax - max)) and writes y. The two stages read x twice and write y once: the
 * three-pass floor, since a 1.5 MiB row cannot stay on chip between the passes.
 *
 * Each item keeps a running (m, s): the maximum of what it has read and the sum of
 * exponentials relative to m. A step loads ITEMS vectors of VEC elements (all loads first, so
 * that they are in flight together), raises m to their maximum if that is larger (rescaling s
 * by exp(m_old - m_new): rare once m has settled, so about one exp per element), then adds
 * their exponentials. The WG pairs are merged by a tree in local memory.
 *
 *   WG     items per chunk (power of two)    [32 .. 512]     ref 256
 *   VEC    vector width of the loads         [1, 2, 4, 8]    ref 1
 *   ITEMS  vectors per item per loop step    [1, 2, 4, 8]    ref 1
 *
 * Vector loads go through a VEC-wide pointer type (vloadN only promises element alignment, so
 * a compiler may split it into scalar loads): vectors are taken at VEC-aligned positions of
 * the whole buffer (whose start OpenCL aligns to at least 128 bytes), and the elements of the
 * chunk before the first and after the last whole vector (fewer than VEC each) are read one
 * by one. Every configuration is correct for every rows, cols, chunk >= 1.
 *
 * A chunk of -INFINITY only (a masked stretch) gives pmax = -INFINITY and psum = 0, which
 * softmax_apply.cl treats as empty.
 *
 * Launch (2-D): global = (WG * ceil_div(cols, chunk), rows), local = (WG, 1).
 * Summation order depends on the configuration: compare psum with a relative tolerance; pmax
 * is exact in every configuration.
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
#define KF_HMAX(v) (v)
#define KF_HSUM(v) (v)
#else
#define KF_VTYPE KF_CAT(float, VEC)
#if VEC == 2
#define KF_HMAX(v) fmax((v).s0, (v).s1)
#define KF_HSUM(v) ((v).s0 + (v).s1)
#elif VEC == 4
#define KF_HMAX(v) fmax(fmax((v).s0, (v).s1), fmax((v).s2, (v).s3))
#define KF_HSUM(v) (((v).s0 + (v).s1) + ((v).s2 + (v).s3))
#elif VEC == 8
#define KF_HMAX(v) fmax(fmax(fmax((v).s0, (v).s1), fmax((v).s2, (v).s3)), fmax(fmax((v).s4, (v).s5), fmax((v).s6, (v).s7)))
#define KF_HSUM(v) ((((v).s0 + (v).s1) + ((v).s2 + (v).s3)) + (((v).s4 + (v).s5) + ((v).s6 + (v).s7)))
#else
#error "VEC must be 1, 2, 4 or 8"
#endif
#endif

/* (m, s) pairs: s is a sum of exp(x - m); m = -INFINITY means "empty" (s = 0). */
inline float2 kf_merge(float2 p, float2 q)
{
    const float m = fmax(p.x, q.x);
    if (m == -INFINITY)
        return (float2)(-INFINITY, 0.0f);
    return (float2)(m, p.y * exp(p.x - m) + q.y * exp(q.x - m));
}

/* Raises the running maximum *m to mv if that is larger, rescaling the running sum; returns
   the value to subtract before exp (0 while everything read was -INFINITY, so that those
   values add exp(-INFINITY) = 0 rather than NaN). */
inline float kf_raise(float mv, float* m, float* s)
{
    if (mv > *m) {
        *s *= exp(*m - mv);
        *m = mv;
    }
    return *m == -INFINITY ? 0.0f : *m;
}

__kernel void softmax_stats(const int rows, const int cols, const int chunk, __global const float* x, __global float* pmax, __global float* psum)
{
    __local float red_m[WG];
    __local float red_s[WG];

    const int lid = (int)get_local_id(0);
    const int c = (int)get_group_id(0);
    /* rows is a multiple of the local size 1 along dimension 1: every group has a row. */
    const int r = (int)get_global_id(1);
    const int nch = (cols + chunk - 1) / chunk;

    /* The chunk is [a, b) of the flat buffer; whole vectors [va, vb) (in units of VEC). */
    const long start = (long)c * chunk;
    const long a = (long)r * cols + start;
    const long b = (long)r * cols + min((long)cols, start + chunk);
    const long va = (a + VEC - 1) / VEC;
    const long vb = max(va, b / VEC);
    const long hend = min(va * VEC, b);    /* scalars [a, hend) before the first vector */
    const long tbeg = max(vb * VEC, hend); /* and [tbeg, b) after the last */
    const int nv = (int)(vb - va);
    __global const KF_VTYPE* xv = (__global const KF_VTYPE*)x + va;

    float m = -INFINITY, s = 0.0f;
    const int end1 = (nv / (WG * ITEMS)) * (WG * ITEMS);
    for (int k0 = 0; k0 < end1; k0 += WG * ITEMS) {
        KF_VTYPE v[ITEMS];
        for (int it = 0; it < ITEMS; ++it)
            v[it] = xv[k0 + it * WG + lid];
        float mv = KF_HMAX(v[0]);
        for (int it = 1; it < ITEMS; ++it)
            mv = fmax(mv, KF_HMAX(v[it]));
        const float mr = kf_raise(mv, &m, &s);
        KF_VTYPE e = exp(v[0] - (KF_VTYPE)(mr));
        for (int it = 1; it < ITEMS; ++it)
            e += exp(v[it] - (KF_VTYPE)(mr));
        s += KF_HSUM(e);
    }
    for (int k = end1 + lid; k < nv; k += WG) {
        const KF_VTYPE v = xv[k];
        const float mr = kf_raise(KF_HMAX(v), &m, &s);
        s += KF_HSUM(exp(v - (KF_VTYPE)(mr)));
    }
    for (long i = a + lid; i < hend; i += WG) {
        const float v = x[i];
        const float mr = kf_raise(v, &m, &s);
        s += exp(v - mr);
    }
    for (long i = tbeg + lid; i < b; i += WG) {
        const float v = x[i];
        const float mr = kf_raise(v, &m, &s);
        s += exp(v - mr);
    }

    red_m[lid] = m;
    red_s[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h >>= 1) {
        if (lid < h) {
            const float2 t = kf_merge((float2)(red_m[lid], red_s[lid]), (float2)(red_m[lid + h], red_s[lid + h]));
            red_m[lid] = t.x;
            red_s[lid] = t.y;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        pmax[(size_t)r * (size_t)nch + c] = red_m[0];
        psum[(size_t)r * (size_t)nch + c] = red_s[0];
    }
}
