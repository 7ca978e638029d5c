/*
 * groupnorm_apply: stage 2 of the suite's Conv2d + ... + GroupNorm in two launches (problem 6).
 *
 *   out[s, o, y, x] = (z[s, o, y, x] - mu_{s,g}) / sqrt(var_{s,g} + eps) * gamma[o] + beta[o]
 *
 * with g = o / (cout / groups), over the (h - 2) x (w - 2) outputs of the convolution, and
 * mu, var (biased, as PyTorch) from conv_gn_stats.cl's partials: mean and m2 at
 * (s * groups + g) * nch + c, nch = ceil_div(h - 2, rows), chunk c holding
 * (cout / groups) * min(rows, h - 2 - c * rows) * (w - 2) values. A (sample, group)'s values
 * are one contiguous block of z; every work-group first combines its block's nch partials (a
 * fixed tree in local memory, so all work-groups of a block agree), then normalises ITEMS
 * vectors of VEC elements per item of the block.
 *
 *   WG     items per work-group (power of two)   [32 .. 1024]   ref 256
 *   VEC    vector width                          [1, 2, 4, 8]   ref 1
 *   ITEMS  vectors per item                      [1, 2, 4, 8]   ref 1
 *
 * Where (h - 2) * (w - 2) % VEC == 0 every vector lies in one channel and is VEC-aligned in
 * the buffers (whose start OpenCL aligns to at least 128 bytes), and goes through a VEC-wide
 * pointer type; otherwise each item takes its VEC elements one by one. Every configuration
 * computes each output with the same expression from mu and rstd.
 *
 * Launch (2-D): global = (ceil_div((cout / groups) * (h - 2) * (w - 2), WG * VEC * ITEMS) * WG,
 * n * groups), local = (WG, 1).
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
#else
#define KF_VTYPE KF_CAT(float, VEC)
#endif

/* The sum over the work-group of each item's t (every item takes part: call it from uniform
   control flow); red is free again when it returns. */
inline float kf_group_sum(float t, __local float* red)
{
    const int lid = (int)get_local_id(0);
    red[lid] = t;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = WG / 2; k > 0; k >>= 1) {
        if (lid < k)
            red[lid] += red[lid + k];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float sum = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return sum;
}

__kernel void groupnorm_apply(const int n, const int h, const int w, const int cout, const int groups, const int rows, const float eps, __global const float* z, __global const float* mean, __global const float* m2, __global const float* gamma, __global const float* beta, __global float* out)
{
    __local float red[WG];
    const int lid = (int)get_local_id(0);
    const int sg = (int)get_group_id(1); /* s * groups + g */
    const int cpg = cout / groups;
    const int o_base = (sg % groups) * cpg;
    const int oh = h - 2, ow = w - 2;
    const long hw = (long)oh * ow;
    const long len = (long)cpg * hw;
    const int nch = (oh + rows - 1) / rows;
    __global const float* pm = mean + (size_t)sg * nch;
    __global const float* pq = m2 + (size_t)sg * nch;

    /* mu = sum_c cnt_c * mean_c / len; M2 = sum_c (m2_c + cnt_c * (mean_c - mu)^2) */
    float t = 0.0f;
    for (int c = lid; c < nch; c += WG)
        t += (float)cpg * (float)min(rows, oh - c * rows) * (float)ow * pm[c];
    const float mu = kf_group_sum(t, red) / (float)len;
    t = 0.0f;
    for (int c = lid; c < nch; c += WG) {
        const float dm = pm[c] - mu;
        t += pq[c] + (float)cpg * (float)min(rows, oh - c * rows) * (float)ow * dm * dm;
    }
    const float rstd = 1.0f / sqrt(kf_group_sum(t, red) / (float)len + eps);

    const size_t blk = (size_t)sg * (size_t)len;
    __global const float* zb = z + blk;
    __global float* ob = out + blk;
    const long base = (long)get_group_id(0) * (WG * VEC * ITEMS);
    if (hw % VEC == 0) {
        /* len is a multiple of VEC too: whole vectors, each in one channel */
        KF_VTYPE v[ITEMS];
        for (int it = 0; it < ITEMS; ++it) {
            const long i = base + (long)(it * WG + lid) * VEC;
            v[it] = (KF_VTYPE)(0.0f);
            if (i < len)
                v[it] = ((__global const KF_VTYPE*)zb)[i / VEC];
        }
        for (int it = 0; it < ITEMS; ++it) {
            const long i = base + (long)(it * WG + lid) * VEC;
            if (i < len) {
                const int o = o_base + (int)(i / hw);
                ((__global KF_VTYPE*)ob)[i / VEC] = (v[it] - (KF_VTYPE)(mu)) * (KF_VTYPE)(rstd) * (KF_VTYPE)(gamma[o]) + (KF_VTYPE)(beta[o]);
            }
        }
    } else {
        for (int it = 0; it < ITEMS; ++it) {
            const long i = base + (long)(it * WG + lid) * VEC;
            for (long e = i; e < min(i + VEC, len); ++e) {
                const int o = o_base + (int)(e / hw);
                ob[e] = (zb[e] - mu) * rstd * gamma[o] + beta[o];
            }
        }
    }
}
