/*
 * conv_gn_stats: stage 1 of the suite's Conv2d + bias + scale + sigmoid + GroupNorm in two
 * launches (problem 6; conv_gn.cl is the one-launch form). It computes
 *
 *   z[s, o, y, x] = sigmoid(((conv_bias[o] + sum_{ci, ky, kx} x[s, ci, y + ky, x + kx]
 *                            * weight[o, ci, ky, kx]) + bias[o]) * scale[o])
 *
 * and, for each sample s, group g and chunk c of `rows` output rows (the last chunk may be
 * shorter), the moments of the chunk's z values over the group's cout / groups channels:
 *
 *   mean[(s * groups + g) * nch + c] = their mean,
 *   m2[(s * groups + g) * nch + c]   = their sum of squared deviations from it,
 *
 * nch = ceil_div(h - 2, rows). The partials' layout depends on the sizes only, never on the
 * tuning parameters; groupnorm_apply.cl combines them (Chan et al.) and normalises z. Moments
 * are summed around 0.5 (sigmoid outputs lie in (0, 1)), so that the variance does not
 * cancel.
 *
 * Why two launches: conv_gn.cl gives each (sample, group) one work-group, which must hold its
 * whole block through two passes (1,024 work-groups at the suite's size, few of them resident
 * at once when the tensor-core path's registers limit occupancy); here every (sample, group,
 * chunk) is a work-group of its own (32,768 at the suite's size) and the normalisation is a
 * streaming kernel of its own.
 *
 *   WG      items per work-group (power of two)                [32 .. 512]   ref 256
 *   PX      output pixels along x per item (register tile)     [1, 2, 4, 8]  ref 1
 *   CB      output channels per item (register tile)           [1, 2, 4]     ref 1
 *   RY      output rows per item (register tile; the RY + 2
 *           input rows of a channel are read once)             [1, 2, 4]     ref 1
 *   WLOCAL  the group's weights are copied to local memory     [0, 1]        ref 0
 *
 * Every configuration sums each output in the same order (ci, ky, kx ascending, fma), so z is
 * the same bit for bit in all of them; the partials' sums depend on WG. Tiles past the chunk
 * or the image are computed from clamped inputs and never stored or counted.
 *
 * Launch (2-D): global = (WG * groups * ceil_div(h - 2, rows), n), local = (WG, 1).
 * Requires h >= 3, w >= 3, cout % groups == 0 and (cout / groups) % CB == 0. `wl` is a
 * __local buffer of max(1, WLOCAL * (cout / groups) * cin * 9) floats.
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
#ifndef RY
#define RY 1
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

__kernel void conv_gn_stats(const int n, const int cin, const int h, const int w, const int cout, const int groups, const int rows, __global const float* x, __global const float* weight, __global const float* conv_bias, __global const float* bias, __global const float* scale, __global float* z, __global float* mean, __global float* m2, __local float* wl)
{
    __local float red_a[WG];
    __local float red_b[WG];

    const int lid = (int)get_local_id(0);
    const int s = (int)get_global_id(1);
    const int oh = h - 2, ow = w - 2;
    const int nch = (oh + rows - 1) / rows;
    const int g = (int)get_group_id(0) / nch, c = (int)get_group_id(0) % nch;
    const int cpg = cout / groups;
    const int o_base = g * cpg;
    const int y0 = c * rows;
    const int rws = min(rows, oh - y0);
    __global const float* xs = x + (size_t)s * cin * h * w;
    __global const float* wg_ = weight + (size_t)o_base * cin * 9;

#if WLOCAL
    for (int i = lid; i < cpg * cin * 9; i += WG)
        wl[i] = wg_[i];
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    /* Work units: CB channels x RY rows x PX pixels, pixels fastest (neighbouring items store
       neighbouring pixels). */
    const int npx = (ow + PX - 1) / PX, nry = (rws + RY - 1) / RY;
    const int units = (cpg / CB) * nry * npx;
    float t1 = 0.0f, t2 = 0.0f;
    for (int u = lid; u < units; u += WG) {
        const int x0 = (u % npx) * PX;
        const int yl = ((u / npx) % nry) * RY; /* chunk-relative */
        const int c0 = (u / (npx * nry)) * CB; /* group-relative */
        float acc[RY][CB][PX];
        for (int r = 0; r < RY; ++r)
            for (int cc = 0; cc < CB; ++cc)
                for (int q = 0; q < PX; ++q)
                    acc[r][cc][q] = 0.0f;
        for (int ci = 0; ci < cin; ++ci) {
            for (int iy = 0; iy < RY + 2; ++iy) {
                const int gy = min(y0 + yl + iy, h - 1);
                __global const float* row = xs + ((size_t)ci * h + gy) * (size_t)w;
                float win[PX + 2];
                for (int q = 0; q < PX + 2; ++q)
                    win[q] = row[min(x0 + q, w - 1)];
                /* input row iy is tap ky of output row r = iy - ky: for each output, ky
                   ascends with iy, so the order is (ci, ky, kx) as in the reference */
                for (int ky = 0; ky < 3; ++ky) {
                    const int r = iy - ky;
                    if (r < 0 || r >= RY)
                        continue;
                    for (int kx = 0; kx < 3; ++kx)
                        for (int cc = 0; cc < CB; ++cc) {
                            const float wv = KF_W(((c0 + cc) * cin + ci) * 9 + ky * 3 + kx);
                            for (int q = 0; q < PX; ++q)
                                acc[r][cc][q] = fma(win[q + kx], wv, acc[r][cc][q]);
                        }
                }
            }
        }
        for (int r = 0; r < RY; ++r) {
            if (yl + r >= rws)
                continue;
            for (int cc = 0; cc < CB; ++cc) {
                const int o = o_base + c0 + cc;
                __global float* zr = z + (((size_t)s * cout + o) * oh + (y0 + yl + r)) * (size_t)ow;
                for (int q = 0; q < PX; ++q) {
                    if (x0 + q >= ow)
                        continue;
                    const float v = ((acc[r][cc][q] + conv_bias[o]) + bias[o]) * scale[o];
                    const float zz = 1.0f / (1.0f + exp(-v));
                    zr[x0 + q] = zz;
                    const float d = zz - 0.5f;
                    t1 += d;
                    t2 = fma(d, d, t2);
                }
            }
        }
    }

    red_a[lid] = t1;
    red_b[lid] = t2;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = WG / 2; k > 0; k >>= 1) {
        if (lid < k) {
            red_a[lid] += red_a[lid + k];
            red_b[lid] += red_b[lid + k];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        const float cnt = (float)cpg * (float)rws * (float)ow;
        const float t = red_a[0], q = red_b[0];
        const size_t at = ((size_t)s * groups + g) * nch + c;
        mean[at] = 0.5f + t / cnt;
        m2[at] = fmax(q - t * (t / cnt), 0.0f);
    }
}
