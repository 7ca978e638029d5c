/*
 * softmax: y[r, :] = exp(x[r, :] - max_r) / sum(exp(x[r, :] - max_r))   (rows x cols, row-major)
 *
 * The suite's row softmax (KernelBench level 1, 4096 x 393216) and stage 2 of its
 * Linear + GELU + softmax. One work-group per row; each item strides through the row with
 * ITEMS independent VEC-wide loads per step, then the WG partial results are combined by a
 * tree in local memory. The defaults are the reference: 256 items per row, scalar loads,
 * three passes (max, sum of exponentials, write).
 *
 *   WG      items per row (power of two)                [32 .. 1024]   ref 256
 *   VEC     vector width of loads and stores            [1, 2, 4, 8]   ref 1
 *   ITEMS   vectors per item per loop step              [1, 2, 4]      ref 1
 *   ONLINE  0: three passes over the row (max, sum, write);
 *           1: two passes, max and sum together with rescaling
 *           ("online softmax"), then write                [0, 1]         ref 0
 *
 * Launch (2-D): global = (WG, rows), local = (WG, 1). Every configuration is correct for
 * every rows, cols >= 1 (elements that do not fill a whole step go through shorter loops).
 * Summation order depends on the configuration: compare with a relative tolerance.
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
#ifndef ONLINE
#define ONLINE 0
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
#define KF_HMAX(v) (v)
#define KF_HSUM(v) (v)
#else
#define KF_VTYPE KF_CAT(float, VEC)
#define KF_VLOAD(o, p) KF_CAT(vload, VEC)((o), (p))
#define KF_VSTORE(v, o, p) KF_CAT(vstore, VEC)((v), (o), (p))
#if VEC == 2
#define KF_HMAX(v) fmax((v).s0, (v).s1)
#define KF_HSUM(v) ((v).s0 + (v).s1)
#elif VEC == 4
#define KF_HMAX(v) fmax(fmax((v).s0, (v).s1), fmax((v).s2, (v).s3))
#define KF_HSUM(v) (((v).s0 + (v).s1) + ((v).s2 + (v).s3))
#elif VEC == 8
#define KF_HMAX(v) fmax(fmax(fmax((v).s0, (v).s1), fmax((v).s2, (v).s3)), fmax(fmax((v).s4, (v).s5), fmax((v).s6, (v).s7)))
#define KF_HSUM(v) ((((v).s0 + (v).s1) + ((v).s2 + (v).s3)) + (((v).s4 + (v).s5) + ((v).s6 + (v).s7)))
#else
#error "VEC must be 1, 2, 4 or 8"
#endif
#endif

/* Steps: [0, end1) in steps of WG*VEC*ITEMS, [end1, end2) in steps of WG*VEC, then scalars. */
#define KF_STEP1 (WG * VEC * ITEMS)
#define KF_STEP2 (WG * VEC)

/* (m, s) pairs: s is a sum of exp(x - m). m = -INFINITY means "empty". */
inline float2 kf_merge(float2 p, float2 q)
{
    const float m = fmax(p.x, q.x);
    if (m == -INFINITY)
        return (float2)(-INFINITY, 0.0f);
    return (float2)(m, p.y * exp(p.x - m) + q.y * exp(q.x - m));
}

__kernel void softmax(const int rows, const int cols, __global const float* x, __global float* y)
{
    __local float red_a[WG];
    __local float red_b[WG];

    const int lid = (int)get_local_id(0);
    const int row = (int)get_global_id(1);
    /* rows is a multiple of the local size 1 along dimension 1: every group has a row. */
    __global const float* p = x + (size_t)row * (size_t)cols;
    __global float* q = y + (size_t)row * (size_t)cols;
    const int end1 = (cols / KF_STEP1) * KF_STEP1;
    const int end2 = end1 + ((cols - end1) / KF_STEP2) * KF_STEP2;

#if ONLINE
    float2 st[ITEMS];
    for (int it = 0; it < ITEMS; ++it)
        st[it] = (float2)(-INFINITY, 0.0f);
    for (int c0 = 0; c0 < end1; c0 += KF_STEP1) {
        for (int it = 0; it < ITEMS; ++it) {
            const KF_VTYPE v = KF_VLOAD(it * WG + lid, p + c0);
            const float vm = KF_HMAX(v);
            const float m = fmax(st[it].x, vm);
            st[it].y = st[it].y * exp(st[it].x - m) + KF_HSUM(exp(v - (KF_VTYPE)(m)));
            st[it].x = m;
        }
    }
    for (int c0 = end1; c0 < end2; c0 += KF_STEP2) {
        const KF_VTYPE v = KF_VLOAD(lid, p + c0);
        const float m = fmax(st[0].x, KF_HMAX(v));
        st[0].y = st[0].y * exp(st[0].x - m) + KF_HSUM(exp(v - (KF_VTYPE)(m)));
        st[0].x = m;
    }
    for (int c = end2 + lid; c < cols; c += WG) {
        const float v = p[c];
        const float m = fmax(st[0].x, v);
        st[0].y = st[0].y * exp(st[0].x - m) + exp(v - m);
        st[0].x = m;
    }
    for (int it = 1; it < ITEMS; ++it)
        st[0] = kf_merge(st[0], st[it]);
    red_a[lid] = st[0].x;
    red_b[lid] = st[0].y;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) {
            const float2 r = kf_merge((float2)(red_a[lid], red_b[lid]), (float2)(red_a[lid + s], red_b[lid + s]));
            red_a[lid] = r.x;
            red_b[lid] = r.y;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mx = red_a[0];
    const float sum = red_b[0];
#else
    /* pass 1: the maximum */
    KF_VTYPE vmax[ITEMS];
    for (int it = 0; it < ITEMS; ++it)
        vmax[it] = (KF_VTYPE)(-INFINITY);
    for (int c0 = 0; c0 < end1; c0 += KF_STEP1)
        for (int it = 0; it < ITEMS; ++it)
            vmax[it] = fmax(vmax[it], KF_VLOAD(it * WG + lid, p + c0));
    for (int c0 = end1; c0 < end2; c0 += KF_STEP2)
        vmax[0] = fmax(vmax[0], KF_VLOAD(lid, p + c0));
    for (int it = 1; it < ITEMS; ++it)
        vmax[0] = fmax(vmax[0], vmax[it]);
    float tmax = KF_HMAX(vmax[0]);
    for (int c = end2 + lid; c < cols; c += WG)
        tmax = fmax(tmax, p[c]);
    red_a[lid] = tmax;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s)
            red_a[lid] = fmax(red_a[lid], red_a[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mx = red_a[0];

    /* pass 2: the sum of exponentials */
    KF_VTYPE vsum[ITEMS];
    for (int it = 0; it < ITEMS; ++it)
        vsum[it] = (KF_VTYPE)(0.0f);
    for (int c0 = 0; c0 < end1; c0 += KF_STEP1)
        for (int it = 0; it < ITEMS; ++it)
            vsum[it] += exp(KF_VLOAD(it * WG + lid, p + c0) - (KF_VTYPE)(mx));
    for (int c0 = end1; c0 < end2; c0 += KF_STEP2)
        vsum[0] += exp(KF_VLOAD(lid, p + c0) - (KF_VTYPE)(mx));
    for (int it = 1; it < ITEMS; ++it)
        vsum[0] += vsum[it];
    float tsum = KF_HSUM(vsum[0]);
    for (int c = end2 + lid; c < cols; c += WG)
        tsum += exp(p[c] - mx);
    red_b[lid] = tsum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s)
            red_b[lid] += red_b[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float sum = red_b[0];
#endif

    /* last pass: write */
    const float inv = 1.0f / sum;
    for (int c0 = 0; c0 < end1; c0 += KF_STEP1)
        for (int it = 0; it < ITEMS; ++it)
            KF_VSTORE(exp(KF_VLOAD(it * WG + lid, p + c0) - (KF_VTYPE)(mx)) * inv, it * WG + lid, q + c0);
    for (int c0 = end1; c0 < end2; c0 += KF_STEP2)
        KF_VSTORE(exp(KF_VLOAD(lid, p + c0) - (KF_VTYPE)(mx)) * inv, lid, q + c0);
    for (int c = end2 + lid; c < cols; c += WG)
        q[c] = exp(p[c] - mx) * inv;
}
