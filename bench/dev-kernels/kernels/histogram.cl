/*
 * histogram: adds the 256-bin histogram of n values to hist (hist[b] += #{i : data[i] & 255 == b};
 * hist holds counts from earlier calls, so nothing has to clear it between launches).
 *
 * Tunable parameters (-D NAME=value); the defaults are the reference configuration:
 *   WG       work-group size                                         pow2(32..=1024)  ref 256
 *   ITEMS    loads per work item                                     [1, 2, ..., 64]  ref 1
 *   VEC      values per load (vloadVEC)                              [1, 2, 4]        ref 1
 *   STRIDED  0: a work item's loads are contiguous; 1: strided by
 *            the work-group (consecutive items read consecutive data) [0, 1]          ref 0
 *   PRIVATE  0: every value is an atomic increment in global memory;
 *            1: one privatised histogram per work-group in local
 *            memory, added to hist at the end; 2: COPIES local
 *            histograms per work-group (item i uses copy i % COPIES)  [0, 1, 2]       ref 0
 *   COPIES   local copies with PRIVATE = 2 (1 otherwise)     [1, 2, 4, ..., 64] ref 1
 *
 * A work-group reads WG * ITEMS * VEC consecutive values. Integer atomics: every configuration
 * gives exactly the reference's counts. Requires n % VEC == 0.
 * Launch: global = ceil_div(n, WG * ITEMS * VEC) * WG, local = WG.
 */
#ifndef WG
#define WG 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef STRIDED
#define STRIDED 0
#endif
#ifndef PRIVATE
#define PRIVATE 0
#endif
#ifndef COPIES
#define COPIES 1
#endif

#define KF_BINS 256
#define KF_CAT_(p, q) p##q
#define KF_CAT(p, q) KF_CAT_(p, q)

#if PRIVATE == 0
#define KF_ADD(val) atomic_inc(&hist[(val) & (KF_BINS - 1)])
#else
#define KF_ADD(val) atomic_inc(&lh[copy + ((val) & (KF_BINS - 1))])
#endif

__kernel void histogram(const int n, __global const uint* data, __global uint* hist)
{
    const int lid = get_local_id(0);
#if PRIVATE
    __local uint lh[COPIES * KF_BINS];
    const int copy = (lid % COPIES) * KF_BINS;
    for (int b = lid; b < COPIES * KF_BINS; b += WG) {
        lh[b] = 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    const int g0 = get_group_id(0) * (WG * ITEMS * VEC);
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
#if STRIDED
        const int e = g0 + (it * WG + lid) * VEC;
#else
        const int e = g0 + (lid * ITEMS + it) * VEC;
#endif
        if (e < n) {
#if VEC == 1
            KF_ADD(data[e]);
#else
            const KF_CAT(uint, VEC) d = KF_CAT(vload, VEC)(0, data + e);
            KF_ADD(d.s0);
            KF_ADD(d.s1);
#if VEC == 4
            KF_ADD(d.s2);
            KF_ADD(d.s3);
#endif
#endif
        }
    }

#if PRIVATE
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int b = lid; b < KF_BINS; b += WG) {
        uint s = 0;
        for (int c = 0; c < COPIES; c++) {
            s += lh[c * KF_BINS + b];
        }
        if (s != 0) {
            atomic_add(&hist[b], s);
        }
    }
#endif
}
