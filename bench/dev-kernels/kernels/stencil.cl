/*
 * stencil: one step of a 2-D 13-point star stencil of radius 3 (a high-order Laplacian-like
 * operator) on a w x h row-major grid, edges clamped:
 *   dst(x, y) = c0 * in(x, y) + sum_{r = 1..3} c_r * (in(x-r, y) + in(x+r, y) + in(x, y-r) + in(x, y+r))
 * where in(x, y) reads src[clamp(y, 0, h-1) * w + clamp(x, 0, w-1)] and coef = (c0, c1, c2, c3).
 *
 * Tunable parameters (-D NAME=value); the defaults are the reference configuration:
 *   BX        work-group size along x                                  [16, 32, 64, 128]  ref 16
 *   BY        work-group size along y                                  [1, 2, 4, 8, 16]   ref 16
 *   WPTX      outputs per work item along x (strided by BX)            [1, 2, 4]          ref 1
 *   WPTY      outputs per work item along y (strided by BY)            [1, 2, 4, 8]       ref 1
 *   USE_LOCAL 1: the block's input tile with its halo is staged in
 *             local memory first; 0: every load from global memory    [0, 1]             ref 0
 *   PAD       extra floats per local-memory row (bank conflicts)       [0, 1]             ref 0
 *   BOUNDARY  0: every load clamps its indices; 1: work-groups whose
 *             halo lies inside the grid take a path without clamping  [0, 1]             ref 0
 *
 * A work-group computes a block of TW x TH outputs, TW = BX * WPTX, TH = BY * WPTY. Every
 * configuration sums the same terms in the same order with fma, so results are bit-identical.
 * Launch: global = (ceil_div(w, TW) * BX, ceil_div(h, TH) * BY), local = (BX, BY).
 */
#pragma OPENCL FP_CONTRACT OFF

#ifndef BX
#define BX 16
#endif
#ifndef BY
#define BY 16
#endif
#ifndef WPTX
#define WPTX 1
#endif
#ifndef WPTY
#define WPTY 1
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 0
#endif
#ifndef PAD
#define PAD 0
#endif
#ifndef BOUNDARY
#define BOUNDARY 0
#endif

#define KF_R 3
#define KF_TW (BX * WPTX)
#define KF_TH (BY * WPTY)
#define KF_LW (KF_TW + 2 * KF_R + PAD)

/* Loads from global memory: clamped, or raw where the caller knows the index is inside. */
#define KF_LD_CLAMP(X, Y) (src[clamp((Y), 0, h - 1) * w + clamp((X), 0, w - 1)])
#define KF_LD_RAW(X, Y) (src[(Y) * w + (X)])

/* The stencil at (X, Y) through the load L(x, y). */
#define KF_POINT(L, X, Y, acc)                                                              \
    do {                                                                                    \
        acc = c0 * L((X), (Y));                                                             \
        acc = fma(c1, ((L((X) - 1, (Y)) + L((X) + 1, (Y))) + L((X), (Y) - 1)) + L((X), (Y) + 1), acc); \
        acc = fma(c2, ((L((X) - 2, (Y)) + L((X) + 2, (Y))) + L((X), (Y) - 2)) + L((X), (Y) + 2), acc); \
        acc = fma(c3, ((L((X) - 3, (Y)) + L((X) + 3, (Y))) + L((X), (Y) - 3)) + L((X), (Y) + 3), acc); \
    } while (0)

/* Every output of this work item, reading through L with coordinates (lx, ly) offset by (ox, oy). */
#define KF_BLOCK(L, ox, oy)                                                                 \
    for (int j = 0; j < WPTY; j++) {                                      \
        for (int i = 0; i < WPTX; i++) {                                  \
            const int lx = tx + i * BX, ly = ty + j * BY;                                   \
            const int gx = gx0 + lx, gy = gy0 + ly;                                         \
            float acc;                                                                      \
            KF_POINT(L, (ox) + lx, (oy) + ly, acc);                                         \
            if (gx < w && gy < h) {                                                         \
                dst[gy * w + gx] = acc;                                                     \
            }                                                                               \
        }                                                                                   \
    }

__kernel void stencil(const int w, const int h, __global const float* src, __global const float* coef,
                      __global float* dst)
{
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int gx0 = get_group_id(0) * KF_TW, gy0 = get_group_id(1) * KF_TH;
    const float c0 = coef[0], c1 = coef[1], c2 = coef[2], c3 = coef[3];
#if BOUNDARY
    const int interior = gx0 >= KF_R && gx0 + KF_TW + KF_R <= w && gy0 >= KF_R && gy0 + KF_TH + KF_R <= h;
#endif

#if USE_LOCAL
    __local float tile[(KF_TH + 2 * KF_R) * KF_LW];
    const int tid = ty * BX + tx;
    const int span = KF_TW + 2 * KF_R;
#if BOUNDARY
    if (interior) {
        for (int e = tid; e < (KF_TH + 2 * KF_R) * span; e += BX * BY) {
            const int r = e / span, q = e - r * span;
            tile[r * KF_LW + q] = KF_LD_RAW(gx0 - KF_R + q, gy0 - KF_R + r);
        }
    } else
#endif
    {
        for (int e = tid; e < (KF_TH + 2 * KF_R) * span; e += BX * BY) {
            const int r = e / span, q = e - r * span;
            tile[r * KF_LW + q] = KF_LD_CLAMP(gx0 - KF_R + q, gy0 - KF_R + r);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#define KF_LD_TILE(X, Y) (tile[(Y) * KF_LW + (X)])
    KF_BLOCK(KF_LD_TILE, KF_R, KF_R)
#else
#if BOUNDARY
    if (interior) {
        KF_BLOCK(KF_LD_RAW, gx0, gy0)
    } else
#endif
    {
        KF_BLOCK(KF_LD_CLAMP, gx0, gy0)
    }
#endif
}
