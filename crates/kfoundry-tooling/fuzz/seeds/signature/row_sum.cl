/*
 * row_sum: out[r] = sum_{c < cols} m[r * cols + c]   (rows x cols, row-major)
 *
 * Reference kernel for kfoundry. Tunable parameters arrive as preprocessor
 * definitions (-D NAME=value); the defaults below are the reference
 * configuration (one work item per row, a plain serial loop).
 *
 *   WG     work items per row (power of two)   [1, 2, 4, ..., 256]   ref 1
 *   RPG    rows per work-group                 [1, 2, 4, 8, 16]      ref 1
 *   VEC    vector width of the loads (vloadN)  [1, 2, 4, 8]          ref 1
 *   ITEMS  vectors per work item per loop step,
 *          each into its own accumulator       [1, 2, 4, 8]          ref 1
 *
 * Launch (2-D): global = (WG, ceil_div(rows, RPG) * RPG), local = (WG, RPG).
 * Dimension 0 runs along a row, dimension 1 over rows. A work-group holds
 * RPG rows of WG items each; each item strides through its row, then the WG
 * partial sums of a row are combined by a tree reduction in local memory.
 * Every configuration is correct for every rows >= 1, cols >= 0: rows past
 * the end take part in the barriers but read and write nothing, and columns
 * that do not fill a whole step are summed by shorter loops.
 *
 * Summation order depends on the configuration: compare with a relative
 * tolerance (draw inputs from a positive range to avoid cancellation).
 */

#ifndef WG
#define WG 1
#endif
#ifndef RPG
#define RPG 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef ITEMS
#define ITEMS 1
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

#if (WG & (WG - 1)) != 0
#error "WG must be a power of two"
#endif

__kernel void row_sum(const int rows, const int cols, __global const float* m, __global float* out)
{
    __local float scratch[RPG * WG];

    const int lid = (int)get_local_id(0);
    const int slot = (int)get_local_id(1) * WG;
    const int row = (int)get_global_id(1);

    float sum = 0.0f;
    if (row < rows) {
        __global const float* p = m + (size_t)row * (size_t)cols;

        KF_VTYPE acc[ITEMS];
        for (int it = 0; it < ITEMS; ++it) {
            acc[it] = (KF_VTYPE)(0.0f);
        }

        /* 1. whole steps of WG * VEC * ITEMS elements, ITEMS accumulators */
        const int step = WG * VEC * ITEMS;
        const int end1 = (cols / step) * step;
        for (int c0 = 0; c0 < end1; c0 += step) {
            __global const float* q = p + c0;
            for (int it = 0; it < ITEMS; ++it) {
                acc[it] += KF_VLOAD(it * WG + lid, q);
            }
        }

        /* 2. whole steps of WG * VEC elements */
        const int end2 = end1 + ((cols - end1) / (WG * VEC)) * (WG * VEC);
        for (int c0 = end1; c0 < end2; c0 += WG * VEC) {
            acc[0] += KF_VLOAD(lid, p + c0);
        }

        for (int it = 1; it < ITEMS; ++it) {
            acc[0] += acc[it];
        }
        sum = KF_HSUM(acc[0]);

        /* 3. the remaining elements, one at a time */
        for (int c = end2 + lid; c < cols; c += WG) {
            sum += p[c];
        }
    }

    scratch[slot + lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) {
            scratch[slot + lid] += scratch[slot + lid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    if (lid == 0 && row < rows) {
        out[row] = scratch[slot];
    }
}
