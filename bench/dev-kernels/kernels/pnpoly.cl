/*
 * pnpoly: point-in-polygon test of n points against one polygon of v vertices
 * (even-odd rule, W. Randolph Franklin's crossing test), written for kfoundry after the
 * idea of Kernel Tuner's pnpoly example:
 *   inside[i] = 1 if (px[i], py[i]) lies inside the polygon (vx, vy), else 0.
 * The polygon is closed (edge k joins vertex k-1 to vertex k, edge 0 joins v-1 to 0) and
 * may intersect itself.
 *
 * Tunable parameters (-D NAME=value); the defaults are the reference configuration:
 *   BLOCK_SIZE_X            work-group size                                       ref 256
 *   TILE                    points per work item (strided by BLOCK_SIZE_X)        ref 1
 *   BETWEEN_METHOD          how "the edge spans the point's y" is computed:       ref 0
 *                           0 (a > y) != (b > y), 1 xor of the two tests,
 *                           2 sum of the two tests == 1, 3 min(a,b) <= y < max(a,b)
 *   USE_PRECOMPUTED_SLOPES  1: each work-group first computes every edge's slope  ref 0
 *                           (dx / dy) into local memory, with its end points;
 *                           0: the slope is computed in the loop from global memory
 *   USE_METHOD              how a crossing toggles the result:                    ref 0
 *                           0 branch (slope only computed when the edge spans y),
 *                           1 xor of a branch-free test, 2 count crossings, parity
 *
 * Every configuration computes bit-identical results: the four BETWEEN_METHODs are the same
 * predicate for finite inputs, and the crossing abscissa is always fma(slope, y - vky, vkx)
 * with slope = (vjx - vkx) / (vjy - vky) computed by the same IEEE operations wherever it is
 * computed (FP_CONTRACT off, correctly rounded division: see the annotation's options).
 *
 * Launch: global = ceil_div(n, BLOCK_SIZE_X * TILE) * BLOCK_SIZE_X, local = BLOCK_SIZE_X.
 * `edges` is a __local buffer of 4 * v floats (used with USE_PRECOMPUTED_SLOPES = 1).
 */
#pragma OPENCL FP_CONTRACT OFF

#ifndef BLOCK_SIZE_X
#define BLOCK_SIZE_X 256
#endif
#ifndef TILE
#define TILE 1
#endif
#ifndef BETWEEN_METHOD
#define BETWEEN_METHOD 0
#endif
#ifndef USE_PRECOMPUTED_SLOPES
#define USE_PRECOMPUTED_SLOPES 0
#endif
#ifndef USE_METHOD
#define USE_METHOD 0
#endif

/* 1 when exactly one of a, b lies above y. */
inline int kf_between(const float a, const float b, const float y)
{
#if BETWEEN_METHOD == 0
    return (a > y) != (b > y);
#elif BETWEEN_METHOD == 1
    return (a > y) ^ (b > y);
#elif BETWEEN_METHOD == 2
    return ((int)(a > y) + (int)(b > y)) == 1;
#else
    const float lo = a < b ? a : b;
    const float hi = a < b ? b : a;
    return (lo <= y) & (y < hi);
#endif
}

__kernel void pnpoly(const int n, const int v, __global const float* px, __global const float* py,
                     __global const float* vx, __global const float* vy, __global int* inside,
                     __local float* edges)
{
    const int lid = get_local_id(0);
    const int base = get_group_id(0) * (BLOCK_SIZE_X * TILE) + lid;

#if USE_PRECOMPUTED_SLOPES
    /* edges[4k .. 4k+3] = vkx, vky, vjy, slope of edge k (from vertex j = k - 1 to k). */
    for (int k = lid; k < v; k += BLOCK_SIZE_X) {
        const int j = k == 0 ? v - 1 : k - 1;
        const float vkx = vx[k], vky = vy[k], vjx = vx[j], vjy = vy[j];
        edges[4 * k + 0] = vkx;
        edges[4 * k + 1] = vky;
        edges[4 * k + 2] = vjy;
        edges[4 * k + 3] = (vjx - vkx) / (vjy - vky);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    float x[TILE], y[TILE];
    int c[TILE];
#pragma unroll
    for (int t = 0; t < TILE; t++) {
        const int i = min(base + t * BLOCK_SIZE_X, n - 1);
        x[t] = px[i];
        y[t] = py[i];
        c[t] = 0;
    }

    for (int k = 0, j = v - 1; k < v; j = k++) {
#if USE_PRECOMPUTED_SLOPES
        const float vkx = edges[4 * k + 0];
        const float vky = edges[4 * k + 1];
        const float vjy = edges[4 * k + 2];
#define KF_SLOPE (edges[4 * k + 3])
#else
        const float vkx = vx[k], vky = vy[k], vjx = vx[j], vjy = vy[j];
#define KF_SLOPE ((vjx - vkx) / (vjy - vky))
#endif
#pragma unroll
        for (int t = 0; t < TILE; t++) {
            const int b = kf_between(vjy, vky, y[t]);
#if USE_METHOD == 0
            if (b) {
                if (x[t] < fma(KF_SLOPE, y[t] - vky, vkx)) {
                    c[t] = !c[t];
                }
            }
#elif USE_METHOD == 1
            c[t] ^= b & (x[t] < fma(KF_SLOPE, y[t] - vky, vkx));
#else
            c[t] += b & (x[t] < fma(KF_SLOPE, y[t] - vky, vkx));
#endif
        }
#undef KF_SLOPE
    }

#pragma unroll
    for (int t = 0; t < TILE; t++) {
        const int i = base + t * BLOCK_SIZE_X;
        if (i < n) {
            inside[i] = c[t] & 1;
        }
    }
}
