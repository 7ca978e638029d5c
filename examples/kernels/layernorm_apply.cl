/*
 * layernorm_apply: stage 2 of the suite's LayerNorm.
 *   y[s, i] = (x[s, i] - mu_s) / sqrt(var_s + eps) * weight[i] + bias[i]   (i < d)
 * where mu_s and var_s (biased, as PyTorch) come from the per-chunk partials of
 * layernorm_stats.cl: mean[s * nch + c] and m2[s * nch + c], nch = ceil_div(d, chunk), chunk c
 * holding min(chunk, d - c * chunk) elements. Every work-group first combines the nch
 * partials of each of its samples (a fixed tree in local memory, so all groups of a sample
 * agree), then normalises ITEMS vectors of VEC elements per item in each of its NS samples.
 *
 *   WG     items per group (power of two)    [32 .. 1024]   ref 256
 *   VEC    vector width                      [1, 2, 4, 8]   ref 1
 *   ITEMS  vectors per item                  [1, 2, 4, 8]   ref 1
 *   NS     samples per group: weight and bias
 *          are read once for NS samples      [1, 2, 4, 8, 16] ref 1
 *   REV    0: blocks in launch order; 1: in the reverse order  [0, 1]  ref 0
 *   SFAST  0: a sample group's d-blocks are neighbours in the launch order;
 *          1: the sample groups of a d-block are               [0, 1]  ref 0
 *
 * weight and bias (d elements each) are shared by all samples: with NS = 1 and SFAST = 0 each
 * sample's groups read them again (at the suite's full size 16 x 32 MiB, more than x itself,
 * since the L2 cache cannot hold them across a 256 MiB sweep of x); with NS = n once. With
 * SFAST = 1 the groups that share a d-block run at about the same time, so that block of
 * weight and bias comes from DRAM once and from the L2 cache for the other sample groups.
 *
 * REV: the stats stage reads x in launch order (sample 0 first, chunk by chunk), so what it
 * read last (the end of the last samples, up to the size of the L2 cache, 50 MB on an H200)
 * may still be in the L2 cache when this stage starts; REV = 1 starts there. Both REV and
 * SFAST only renumber the blocks: group number l in launch order (dimension 0 fastest, as
 * GPUs dispatch them; OpenCL promises no order, so this is a performance hint, never a
 * matter of correctness) becomes L = l or (groups - 1 - l), and block (bx, by) = (L % ngx,
 * L / ngx), or (L / ngy, L % ngy) with SFAST: a one-to-one map of the grid onto itself, so
 * every block is still done exactly once and the output is identical.
 *
 * Loads: each item first loads its ITEMS vectors of a sample (all in flight together), then
 * normalises and stores them. Where d % VEC == 0 every vector is VEC-aligned in the buffers
 * (whose start OpenCL aligns to at least 128 bytes) and goes through a VEC-wide pointer type
 * (vloadN only promises element alignment, so a compiler may split it into scalar loads);
 * otherwise x and y go through vloadN / vstoreN. weight and bias are always aligned.
 *
 * Launch (2-D): global = (ceil_div(d, WG * VEC * ITEMS) * WG, ceil_div(n, NS)), local = (WG, 1).
 * Every configuration computes each output with the same expression from the same mu and
 * rstd: all are bit-identical.
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
#ifndef NS
#define NS 1
#endif
#ifndef REV
#define REV 0
#endif
#ifndef SFAST
#define SFAST 0
#endif

#if (WG & (WG - 1)) != 0
#error "WG must be a power of two"
#endif

#define KF_CAT_(p, q) p##q
#define KF_CAT(p, q) KF_CAT_(p, q)

#if VEC == 1
#define KF_VTYPE float
#define KF_VLOAD(o, p) ((p)[(o)])
#define KF_VSTORE(v, o, p) ((p)[(o)] = (v))
#else
#define KF_VTYPE KF_CAT(float, VEC)
#define KF_VLOAD(o, p) KF_CAT(vload, VEC)((o), (p))
#define KF_VSTORE(v, o, p) KF_CAT(vstore, VEC)((v), (o), (p))
#endif
/* The same through a VEC-wide pointer: p must be VEC-aligned. */
#define KF_ALOAD(o, p) (((__global const KF_VTYPE*)(p))[(o)])
#define KF_ASTORE(v, o, p) (((__global KF_VTYPE*)(p))[(o)] = (v))

/* One sample's part of the block: ITEMS loads, then ITEMS normalised stores (LOAD and STORE:
   the macros above). */
#define KF_NORMALISE(LOAD, STORE)                                                                \
    {                                                                                            \
        KF_VTYPE v[ITEMS];                                                                       \
        for (int it = 0; it < ITEMS; ++it) {                                                     \
            const int i = base + (it * WG + lid) * VEC;                                          \
            v[it] = (KF_VTYPE)(0.0f);                                                            \
            if (i + VEC <= d)                                                                    \
                v[it] = LOAD(0, x + row + i);                                                    \
        }                                                                                        \
        for (int it = 0; it < ITEMS; ++it) {                                                     \
            const int i = base + (it * WG + lid) * VEC;                                          \
            if (i + VEC <= d) {                                                                  \
                const KF_VTYPE r = (v[it] - (KF_VTYPE)(mu[q])) * (KF_VTYPE)(rstd[q]) * w[it] + b[it]; \
                STORE(r, 0, y + row + i);                                                        \
            } else {                                                                             \
                for (int e = i; e < d; ++e)                                                      \
                    y[row + e] = (x[row + e] - mu[q]) * rstd[q] * weight[e] + bias[e];           \
            }                                                                                    \
        }                                                                                        \
    }

/* The mean and 1 / std of sample s from its partials, with every item of the group taking
   part (the barriers are uniform: call it from uniform control flow). */
inline float2 kf_sample_stats(const int s, const int d, const int chunk, const float eps, __global const float* mean, __global const float* m2, __local float* red)
{
    const int lid = (int)get_local_id(0);
    const int nch = (d + chunk - 1) / chunk;
    __global const float* pm = mean + (size_t)s * nch;
    __global const float* pq = m2 + (size_t)s * nch;

    /* mu = sum_c cnt_c * mean_c / d */
    float t = 0.0f;
    for (int c = lid; c < nch; c += WG)
        t += (float)min(chunk, d - c * chunk) * pm[c];
    red[lid] = t;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h >>= 1) {
        if (lid < h)
            red[lid] += red[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mu = red[0] / (float)d;
    barrier(CLK_LOCAL_MEM_FENCE);

    /* M2 = sum_c (m2_c + cnt_c * (mean_c - mu)^2) */
    t = 0.0f;
    for (int c = lid; c < nch; c += WG) {
        const float dm = pm[c] - mu;
        t += pq[c] + (float)min(chunk, d - c * chunk) * dm * dm;
    }
    red[lid] = t;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h >>= 1) {
        if (lid < h)
            red[lid] += red[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float rstd = 1.0f / sqrt(red[0] / (float)d + eps);
    barrier(CLK_LOCAL_MEM_FENCE);
    return (float2)(mu, rstd);
}

__kernel void layernorm_apply(const int n, const int d, const int chunk, const float eps, __global const float* x, __global const float* mean, __global const float* m2, __global const float* weight, __global const float* bias, __global float* y)
{
    __local float red[WG];
    const int lid = (int)get_local_id(0);

    /* This group's block (bx, by) from its place l in the launch order (see REV, SFAST). */
    const long ngx = (long)get_num_groups(0), ngy = (long)get_num_groups(1);
    long l = (long)get_group_id(1) * ngx + (long)get_group_id(0);
#if REV
    l = ngx * ngy - 1 - l;
#endif
#if SFAST
    const int bx = (int)(l / ngy), by = (int)(l % ngy);
#else
    const int bx = (int)(l % ngx), by = (int)(l / ngx);
#endif

    const int s0 = by * NS;
    const int ns = min(NS, n - s0);
    float mu[NS], rstd[NS];
    for (int q = 0; q < NS; ++q) {
        if (q < ns) {
            const float2 st = kf_sample_stats(s0 + q, d, chunk, eps, mean, m2, red);
            mu[q] = st.x;
            rstd[q] = st.y;
        }
    }

    const int base = bx * (WG * VEC * ITEMS);
    KF_VTYPE w[ITEMS], b[ITEMS];
    for (int it = 0; it < ITEMS; ++it) {
        const int i = base + (it * WG + lid) * VEC;
        w[it] = (KF_VTYPE)(0.0f);
        b[it] = (KF_VTYPE)(0.0f);
        if (i + VEC <= d) {
            w[it] = KF_ALOAD(0, weight + i);
            b[it] = KF_ALOAD(0, bias + i);
        }
    }
    if (d % VEC == 0) {
        for (int q = 0; q < ns; ++q) {
            const size_t row = (size_t)(s0 + q) * (size_t)d;
            KF_NORMALISE(KF_ALOAD, KF_ASTORE)
        }
    } else {
        for (int q = 0; q < ns; ++q) {
            const size_t row = (size_t)(s0 + q) * (size_t)d;
            KF_NORMALISE(KF_VLOAD, KF_VSTORE)
        }
    }
}
