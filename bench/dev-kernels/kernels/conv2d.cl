/*
 * conv2d: a 2-D convolution (correlation) of an (w + 2 FR) x (h + 2 FR) row-major image with a
 * (2 FR + 1) x (2 FR + 1) filter, no padding of the image (the caller passes the halo), after
 * Kernel Tuner's convolution example:
 *   out(x, y) = sum_{j, i = 0..2 FR} in(x + i, y + j) * filter(i, j)
 *
 * Tunable parameters (-D NAME=value); the defaults are the reference configuration:

 * FR, the filter radius, is not tuned: conv2d_15.cl and conv2d_5.cl define it and include this
 * file.
 *
 *   BX        work-group size along x                                  [16, 32, 64, 128]  ref 16
 *   BY        work-group size along y                                  [1, 2, 4, 8, 16]   ref 16
 *   TX        outputs per work item along x (strided by BX)            [1, 2, 4]          ref 1
 *   TY        outputs per work item along y (strided by BY)            [1, 2, 4, 8]       ref 1
 *   USE_LOCAL 1: the block's input tile with its halo is staged in
 *             local memory first; 0: every load from global memory    [0, 1]             ref 0
 *   PAD       extra floats per local-memory row (bank conflicts)       [0, 1]             ref 0
 *   FLOCAL    1: the work-group copies the filter to local memory
 *             first; 0: every item reads it from global memory        [0, 1]             ref 0
 *
 * A work-group computes TW x TH outputs, TW = BX * TX, TH = BY * TY. Every configuration sums
 * the same products in the same order (j, then i, ascending) with fma: results are
 * bit-identical. Launch: global = (ceil_div(w, TW) * BX, ceil_div(h, TH) * BY), local = (BX, BY).
 */
#pragma OPENCL FP_CONTRACT OFF

#ifndef FR
#error "FR (the filter radius) must be defined: include this file from conv2d_15.cl or conv2d_5.cl"
#endif
#ifndef BX
#define BX 16
#endif
#ifndef BY
#define BY 16
#endif
#ifndef TX
#define TX 1
#endif
#ifndef TY
#define TY 1
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 0
#endif
#ifndef PAD
#define PAD 0
#endif
#ifndef FLOCAL
#define FLOCAL 0
#endif

#define KF_FW (2 * FR + 1)
#define KF_TW (BX * TX)
#define KF_TH (BY * TY)
#define KF_LW (KF_TW + 2 * FR + PAD)

__kernel void conv2d(const int w, const int h, __global const float* image, __global const float* filter,
                     __global float* out)
{
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int gx0 = get_group_id(0) * KF_TW, gy0 = get_group_id(1) * KF_TH;
    const int iw = w + 2 * FR, ih = h + 2 * FR;
    float acc[TY][TX];
    for (int b = 0; b < TY; b++)
        for (int a = 0; a < TX; a++)
            acc[b][a] = 0.0f;

#if FLOCAL
    __local float lfilter[KF_FW * KF_FW];
    for (int e = ty * BX + tx; e < KF_FW * KF_FW; e += BX * BY)
        lfilter[e] = filter[e];
#if !USE_LOCAL
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
#define KF_F(e) lfilter[e]
#else
#define KF_F(e) filter[e]
#endif
#if USE_LOCAL
    __local float tile[(KF_TH + 2 * FR) * KF_LW];
    const int span = KF_TW + 2 * FR;
    for (int e = ty * BX + tx; e < (KF_TH + 2 * FR) * span; e += BX * BY) {
        const int r = e / span, q = e - r * span;
        const int gx = gx0 + q, gy = gy0 + r;
        tile[r * KF_LW + q] = (gx < iw && gy < ih) ? image[gy * iw + gx] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#define KF_IN(X, Y) tile[(Y) * KF_LW + (X)]
#define KF_OX 0
#define KF_OY 0
#else
#define KF_IN(X, Y) image[(Y) * iw + (X)]
#define KF_OX gx0
#define KF_OY gy0
#endif

    for (int j = 0; j < KF_FW; j++) {
        for (int i = 0; i < KF_FW; i++) {
            const float f = KF_F(j * KF_FW + i);
            for (int b = 0; b < TY; b++) {
                for (int a = 0; a < TX; a++) {
                    const int lx = tx + a * BX, ly = ty + b * BY;
#if !USE_LOCAL
                    /* Outputs past the edge would read past the image: they read its last pixel
                       instead and are not written. */
                    const int x = min(KF_OX + lx + i, iw - 1), y = min(KF_OY + ly + j, ih - 1);
                    acc[b][a] = fma(KF_IN(x, y), f, acc[b][a]);
#else
                    acc[b][a] = fma(KF_IN(lx + i, ly + j), f, acc[b][a]);
#endif
                }
            }
        }
    }

    for (int b = 0; b < TY; b++) {
        for (int a = 0; a < TX; a++) {
            const int gx = gx0 + tx + a * BX, gy = gy0 + ty + b * BY;
            if (gx < w && gy < h)
                out[gy * w + gx] = acc[b][a];
        }
    }
}
