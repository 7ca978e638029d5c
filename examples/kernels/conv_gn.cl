/*
 * conv_gn: the suite's fused Conv2d + bias + scale + sigmoid + GroupNorm (KernelBench level 2:
 * Conv2d 8 -> 32, 3 x 3, no padding, stride 1 on 128 x 8 x 256 x 256; + bias; * scale;
 * sigmoid; GroupNorm with 8 groups, affine).
 *
 *   v[s, o, y, x] = conv_bias[o] + sum_{ci, ky, kx} x[s, ci, y + ky, x + kx] * weight[o, ci, ky, kx]
 *   z = sigmoid((v + bias[o]) * scale[o])
 *   out[s, o, y, x] = (z - mu_{s,g}) / sqrt(var_{s,g} + eps) * gamma[o] + beta[o]
 * with g = o / (cout / groups), mu and var (biased) over the group's channels and pixels.
 *
 * One work-group per (sample, group), so the GroupNorm statistics need no second launch. Pass 1
 * computes z for the group's (cout / groups) x oh x ow outputs and sums z - 0.5 and (z - 0.5)^2
 * (sigmoid outputs lie in (0, 1); the shift keeps the variance from cancelling); a tree in
 * local memory gives the statistics; pass 2 normalises: either re-reading the z values this
 * item stored in pass 1 (RECOMPUTE = 0; an item reads only what it wrote, so no fence between
 * items is needed) or recomputing them (RECOMPUTE = 1: twice the FLOPs, a third of the
 * output traffic). The defaults are the reference.
 *
 *   WG         items per group (power of two)                  [64 .. 1024]   ref 256
 *   PX         output pixels along x per item (register tile)  [1, 2, 4, 8]   ref 1
 *   CB         output channels per item (register tile)        [1, 2, 4]      ref 1
 *   RECOMPUTE  pass 2 recomputes z instead of re-reading it    [0, 1]         ref 0
 *   WLOCAL     the group's weights are copied to local memory  [0, 1]         ref 0
 *
 * Launch (2-D): global = (WG * groups, n), local = (WG, 1). Requires h >= 3, w >= 3,
 * cout % groups == 0 and (cout / groups) % CB == 0. `wl` is a __local buffer of
 * max(1, WLOCAL * (cout / groups) * cin * 9) floats (allocated by the launcher).
 * The convolution sums in the same order (ci, ky, kx ascending, fma) in every configuration.
 */

#ifndef WG
#define WG 256
#endif
#ifndef PX
#define PX 1
#endif
#ifndef CB
#define CB 1
#endif
#ifndef RECOMPUTE
#define RECOMPUTE 0
#endif
#ifndef WLOCAL
#define WLOCAL 0
#endif

#if (WG & (WG - 1)) != 0
#error "WG must be a power of two"
#endif

#if WLOCAL
#define KF_W(idx) wl[(idx)]
#else
#define KF_W(idx) wg_[(idx)]
#endif

/* Computes z for channels o0 .. o0 + CB - 1 (group-relative c0) at row oy, pixels x0 .. x0 + PX - 1
   into z[CB][PX]. Pixels past ow are computed from clamped inputs and never used. */
#define KF_CONV(z, c0, oy, x0)                                                          \
    {                                                                                   \
        float acc[CB][PX];                                                              \
        for (int cc = 0; cc < CB; ++cc)                                                 \
            for (int q = 0; q < PX; ++q)                                                \
                acc[cc][q] = 0.0f;                                                      \
        for (int ci = 0; ci < cin; ++ci) {                                              \
            for (int ky = 0; ky < 3; ++ky) {                                            \
                __global const float* row = xs + ((size_t)ci * h + (oy) + ky) * (size_t)w; \
                float win[PX + 2];                                                      \
                for (int q = 0; q < PX + 2; ++q)                                        \
                    win[q] = row[min((x0) + q, w - 1)];                                 \
                for (int kx = 0; kx < 3; ++kx)                                          \
                    for (int cc = 0; cc < CB; ++cc) {                                   \
                        const float wv = KF_W((((c0) + cc) * cin + ci) * 9 + ky * 3 + kx); \
                        for (int q = 0; q < PX; ++q)                                    \
                            acc[cc][q] = fma(win[q + kx], wv, acc[cc][q]);              \
                    }                                                                   \
            }                                                                           \
        }                                                                               \
        for (int cc = 0; cc < CB; ++cc) {                                               \
            const int o = o_base + (c0) + cc;                                           \
            for (int q = 0; q < PX; ++q) {                                              \
                const float v = ((acc[cc][q] + conv_bias[o]) + bias[o]) * scale[o];     \
                z[cc][q] = 1.0f / (1.0f + exp(-v));                                     \
            }                                                                           \
        }                                                                               \
    }

__kernel void conv_gn(const int n, const int cin, const int h, const int w, const int cout, const int groups, const float eps, __global const float* x, __global const float* weight, __global const float* conv_bias, __global const float* bias, __global const float* scale, __global const float* gamma, __global const float* beta, __global float* out, __local float* wl)
{
    __local float red_a[WG];
    __local float red_b[WG];

    const int lid = (int)get_local_id(0);
    const int g = (int)get_group_id(0);
    const int s = (int)get_global_id(1);
    const int cpg = cout / groups;
    const int oh = h - 2, ow = w - 2;
    const int o_base = g * cpg;
    const int xblocks = (ow + PX - 1) / PX;
    const int tasks = (cpg / CB) * oh * xblocks;

    __global const float* xs = x + (size_t)s * cin * (size_t)h * (size_t)w;
    __global const float* wg_ = weight + (size_t)o_base * cin * 9;
    __global float* os = out + ((size_t)s * cout + o_base) * (size_t)oh * (size_t)ow;
#if WLOCAL
    for (int i = lid; i < cpg * cin * 9; i += WG)
        wl[i] = wg_[i];
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    /* pass 1: z and its shifted sums */
    float s1 = 0.0f, s2 = 0.0f;
    for (int t = lid; t < tasks; t += WG) {
        const int xb = t % xblocks;
        const int oy = (t / xblocks) % oh;
        const int c0 = (t / (xblocks * oh)) * CB;
        const int x0 = xb * PX;
        float z[CB][PX];
        KF_CONV(z, c0, oy, x0)
        for (int cc = 0; cc < CB; ++cc)
            for (int q = 0; q < PX; ++q)
                if (x0 + q < ow) {
                    const float d = z[cc][q] - 0.5f;
                    s1 += d;
                    s2 = fma(d, d, s2);
#if !RECOMPUTE
                    os[((size_t)(c0 + cc) * oh + oy) * ow + x0 + q] = z[cc][q];
#endif
                }
    }
    red_a[lid] = s1;
    red_b[lid] = s2;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int hh = WG / 2; hh > 0; hh >>= 1) {
        if (lid < hh) {
            red_a[lid] += red_a[lid + hh];
            red_b[lid] += red_b[lid + hh];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float cnt = (float)cpg * (float)oh * (float)ow;
    const float m1 = red_a[0] / cnt;
    const float mu = 0.5f + m1;
    const float var = fmax(red_b[0] / cnt - m1 * m1, 0.0f);
    const float rstd = 1.0f / sqrt(var + eps);

    /* pass 2: normalise */
    for (int t = lid; t < tasks; t += WG) {
        const int xb = t % xblocks;
        const int oy = (t / xblocks) % oh;
        const int c0 = (t / (xblocks * oh)) * CB;
        const int x0 = xb * PX;
        float z[CB][PX];
#if RECOMPUTE
        KF_CONV(z, c0, oy, x0)
#endif
        for (int cc = 0; cc < CB; ++cc) {
            const int o = o_base + c0 + cc;
            const float ga = gamma[o] * rstd, be = beta[o];
            for (int q = 0; q < PX; ++q)
                if (x0 + q < ow) {
                    __global float* po = os + ((size_t)(c0 + cc) * oh + oy) * ow + x0 + q;
#if RECOMPUTE
                    *po = (z[cc][q] - mu) * ga + be;
#else
                    *po = (*po - mu) * ga + be;
#endif
                }
        }
    }
}
