/*
 * softmax_apply: stage 2 of the suite's row softmax.
 *   y[r, i] = exp(x[r, i] - max_r) / sum_r   (i < cols)
 * where max_r and sum_r come from the per-chunk partials of softmax_stats.cl: pmax[r * nch + c]
 * (the chunk's maximum) and psum[r * nch + c] (its sum of exp(x - pmax)), nch =
 * ceil_div(cols, chunk): max_r = max_c pmax and sum_r = sum_c psum * exp(pmax - max_r).
 *
 * Many work-groups share a row: group (g, r) writes the WG * VEC * ITEMS elements of row r
 * from g * WG * VEC * ITEMS on. Each group first combines its row's nch partials: items
 * 0..31 merge partials lid, lid + 32, ... in order, then a tree of fixed width 32 in local
 * memory (levels whose partners are all empty are skipped; they would change nothing). The
 * combination depends only on the sizes and the partials, never on the parameters, so every
 * group of a row and every configuration uses the same max_r and sum_r. Then each item loads
 * its ITEMS vectors of VEC elements (all loads first, so that they are in flight together)
 * and writes exp(x - max_r) * (1 / sum_r).
 *
 *   WG     items per group (power of two)    [32 .. 512]          ref 256
 *   VEC    vector width                      [1, 2, 4, 8]         ref 1
 *   ITEMS  vectors per item                  [1, 2, 4, 8, 16]     ref 1
 *
 * Vectors go through a VEC-wide pointer type at VEC-aligned positions of the whole buffer (as
 * in softmax_stats.cl); the few elements of a group's stretch before its first and after its
 * last whole vector are done one by one. Every configuration is correct for every
 * rows, cols, chunk >= 1.
 *
 * Launch (2-D): global = (ceil_div(cols, WG * VEC * ITEMS) * WG, rows), local = (WG, 1).
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
#if WG < 32
#error "WG must be at least the combination's width, 32"
#endif

#define KF_CAT_(p, q) p##q
#define KF_CAT(p, q) KF_CAT_(p, q)

#if VEC == 1
#define KF_VTYPE float
#elif VEC == 2 || VEC == 4 || VEC == 8
#define KF_VTYPE KF_CAT(float, VEC)
#else
#error "VEC must be 1, 2, 4 or 8"
#endif

/* Width of the combination of a row's partials (independent of WG, so that every
   configuration combines them in the same order). */
#define KF_CW 32

/* (m, s) pairs: s is a sum of exp(x - m); m = -INFINITY means "empty" (s = 0). */
inline float2 kf_merge(float2 p, float2 q)
{
    const float m = fmax(p.x, q.x);
    if (m == -INFINITY)
        return (float2)(-INFINITY, 0.0f);
    return (float2)(m, p.y * exp(p.x - m) + q.y * exp(q.x - m));
}

__kernel void softmax_apply(const int rows, const int cols, const int chunk, __global const float* x, __global const float* pmax, __global const float* psum, __global float* y)
{
    __local float red_m[KF_CW];
    __local float red_s[KF_CW];

    const int lid = (int)get_local_id(0);
    const int g = (int)get_group_id(0);
    /* rows is a multiple of the local size 1 along dimension 1: every group has a row. */
    const int r = (int)get_global_id(1);
    const int nch = (cols + chunk - 1) / chunk;

    /* The row's maximum and sum from its partials. */
    if (lid < KF_CW) {
        __global const float* pm = pmax + (size_t)r * (size_t)nch;
        __global const float* ps = psum + (size_t)r * (size_t)nch;
        float2 t = (float2)(-INFINITY, 0.0f);
        for (int c = lid; c < nch; c += KF_CW)
            t = kf_merge(t, (float2)(pm[c], ps[c]));
        red_m[lid] = t.x;
        red_s[lid] = t.y;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = KF_CW / 2; h > 0; h >>= 1) {
        if (h < nch) { /* uniform: every item takes the same branch */
            if (lid < h) {
                const float2 t = kf_merge((float2)(red_m[lid], red_s[lid]), (float2)(red_m[lid + h], red_s[lid + h]));
                red_m[lid] = t.x;
                red_s[lid] = t.y;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    const float mx = red_m[0];
    const float inv = 1.0f / red_s[0];

    /* The group's stretch is [a, b) of the flat buffer; whole vectors [va, vb). */
    const long start = (long)g * (WG * VEC * ITEMS);
    const long a = (long)r * cols + start;
    const long b = (long)r * cols + min((long)cols, start + WG * VEC * ITEMS);
    const long va = (a + VEC - 1) / VEC;
    const long vb = max(va, b / VEC);
    const long hend = min(va * VEC, b);    /* scalars [a, hend) before the first vector */
    const long tbeg = max(vb * VEC, hend); /* and [tbeg, b) after the last */
    const int nv = (int)(vb - va);         /* at most WG * ITEMS */
    __global const KF_VTYPE* xv = (__global const KF_VTYPE*)x + va;
    __global KF_VTYPE* yv = (__global KF_VTYPE*)y + va;

    KF_VTYPE v[ITEMS];
    for (int it = 0; it < ITEMS; ++it) {
        const int k = it * WG + lid;
        v[it] = (KF_VTYPE)(0.0f);
        if (k < nv)
            v[it] = xv[k];
    }
    for (int it = 0; it < ITEMS; ++it) {
        const int k = it * WG + lid;
        if (k < nv)
            yv[k] = exp(v[it] - (KF_VTYPE)(mx)) * inv;
    }
    for (long i = a + lid; i < hend; i += WG)
        y[i] = exp(x[i] - mx) * inv;
    for (long i = tbeg + lid; i < b; i += WG)
        y[i] = exp(x[i] - mx) * inv;
}
