/*
 * gemm: C = A * B   (single precision, row-major; A is m x k, B is k x n, C is m x n)
 *
 * The suite's SGEMM (KernelBench level 1, square N = 4096). Reference kernel for kfoundry:
 * tunable parameters arrive as -D definitions; the defaults below are the reference, the
 * naive kernel (one output per work item, 16 x 16 groups, operands read from global memory).
 *
 *   WGX       work-group size along n                     [8, 16, 32]     ref 16
 *   WGY       work-group size along m                     [8, 16, 32]     ref 16
 *   TM        rows of C per work item (register tile)     [1, 2, 4, 8]    ref 1
 *   TN        columns of C per work item (register tile)  [1, 2, 4, 8]    ref 1
 *   VEC       vector width along n: B and C are read and
 *             written in float VEC vectors                [1, 2, 4]       ref 1
 *   USE_LOCAL 1: A and B tiles staged in local memory     [0, 1]          ref 0
 *   TK        depth of a local-memory k-tile              [8, 16, 32]     ref 8
 *   PAD       floats of padding per local tile row
 *             (bank-conflict avoidance)                   [0, 1, 4]       ref 0
 *   LVEC      width of the global loads that fill the
 *             local tiles (A along k, B along n)          [1, 4]          ref 1
 *   UNROLL    manual unroll of the k loop                 [1, 2, 4, 8]    ref 1
 *   PREFETCH  with local tiles: the next tile's global loads
 *             go to registers before the current tile is
 *             computed (latency hiding)                   [0, 1]          ref 0
 *   MMA       0: the portable path below; 1: 3xTF32 tensor
 *             cores (mma.sync + cp.async, inline PTX:
 *             NVIDIA, compute capability >= 8.0), FP32
 *             accuracy; see "The 3xTF32 tensor-core path"  [0, 1]          ref 0
 *   WM        MMA = 1: warps along m in a work-group      [1, 2, 4]       ref 1
 *   STAGES    MMA = 1: k-tiles in flight (cp.async)       [2, 3, 4]       ref 2
 *   FLUSH     MMA = 1: 8-deep steps summed in the tensor
 *             cores before the FP32 add (accuracy vs
 *             instructions)                               [1, 2, 4]       ref 1
 *   RASTER    MMA = 1: work-groups walked in bands of
 *             RASTER tile rows (L2 reuse of B), 0: rows  [0, 4, 16]      ref 0
 *   TF32      MMA = 1: one product of the TF32 parts
 *             instead of three: TF32 precision (about
 *             1e-3 relative), an opt-in whose annotation
 *             must allow that error                      [0, 1]          ref 0
 *
 * A work-group computes BM x BN outputs, BM = WGY * TM, BN = WGX * TN. Item (tx, ty) owns the
 * 2-D tile of rows bm0 + i * WGY + ty (i < TM) and column vectors starting at
 * bn0 + (j * WGX + tx) * VEC (j < TN / VEC): neighbouring items touch neighbouring memory.
 * With USE_LOCAL the A tile is stored transposed (TK rows of BM + PAD floats), the B tile as
 * TK rows of BN + PAD floats.
 *
 * Launch (2-D): global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY),
 *               local  = (WGX, WGY).
 * Requires TN % VEC == 0, n % VEC == 0, and LVEC = 4 only with k % 4 == 0 and n % 4 == 0.
 * Ragged m, n, k are otherwise handled. Every portable configuration accumulates each output
 * in the same order (k ascending, fma), so all are bit-identical (up to the sign of zero); the
 * MMA path sums in another order, with FP32 accuracy (checked against FP64 by the suite).
 */

#ifndef WGX
#define WGX 16
#endif
#ifndef WGY
#define WGY 16
#endif
#ifndef TM
#define TM 1
#endif
#ifndef TN
#define TN 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 0
#endif
#ifndef TK
#define TK 8
#endif
#ifndef PAD
#define PAD 0
#endif
#ifndef LVEC
#define LVEC 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef PREFETCH
#define PREFETCH 0
#endif

#ifndef MMA
#define MMA 0
#endif
#ifndef WM
#define WM 1
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef FLUSH
#define FLUSH 1
#endif

#ifndef RASTER
#define RASTER 0
#endif
#ifndef TF32
#define TF32 0
#endif

#if MMA
#define KM_B_KMAJOR 0
#if TF32
#define KM_SPLITS 1
#endif
#include <kfoundry/tensor_core.cl>
#else /* the portable path */

#if (TN % VEC) != 0
#error "TN must be a multiple of VEC"
#endif
#if LVEC != 1 && LVEC != 4
#error "LVEC must be 1 or 4"
#endif
#if PREFETCH && !USE_LOCAL
#error "PREFETCH needs USE_LOCAL"
#endif

#define KF_BM (WGY * TM)
#define KF_BN (WGX * TN)
#define KF_TNV (TN / VEC)
#define KF_LDA (KF_BM + PAD)
#define KF_LDB (KF_BN + PAD)
#define KF_NT (WGX * WGY)

/* Filling the local tiles. The tiles are cut into LVEC-wide pieces numbered e; item tid fills
   pieces tid, tid + KF_NT, ... . A "k-major" operand (A, and w of linear_gelu) has rows along
   m (or n) and is contiguous along k; it is stored transposed: S[kk * LD + row]. */
#if LVEC == 1
#define KF_LV float
#else
#define KF_LV float4
#endif
#define KF_PA (KF_BM * TK / LVEC)                  /* pieces of the A tile */
#define KF_NA ((KF_PA + KF_NT - 1) / KF_NT)         /* pieces per item */

inline KF_LV kf_load_kmajor(__global const float* p, const int rows, const int k, const int row0, const int k0, const int e)
{
    const int r = e / (TK / LVEC), kk = (e % (TK / LVEC)) * LVEC;
    const int gr = row0 + r, gk = k0 + kk;
#if LVEC == 1
    return (gr < rows && gk < k) ? p[(size_t)gr * (size_t)k + gk] : 0.0f;
#else
    /* k % 4 == 0: a 4-vector is entirely inside or entirely outside */
    return (gr < rows && gk < k) ? vload4(0, p + (size_t)gr * (size_t)k + gk) : (float4)(0.0f);
#endif
}

inline void kf_store_kmajor(__local float* S, const int ld, const int e, const KF_LV v)
{
    const int r = e / (TK / LVEC), kk = (e % (TK / LVEC)) * LVEC;
#if LVEC == 1
    S[kk * ld + r] = v;
#else
    S[(kk + 0) * ld + r] = v.s0;
    S[(kk + 1) * ld + r] = v.s1;
    S[(kk + 2) * ld + r] = v.s2;
    S[(kk + 3) * ld + r] = v.s3;
#endif
}

/* B is k x n, contiguous along n: stored as is, S[kk * LD + col]. */
#define KF_PB (TK * KF_BN / LVEC)
#define KF_NB ((KF_PB + KF_NT - 1) / KF_NT)

inline KF_LV kf_load_b(__global const float* b, const int n, const int k, const int col0, const int k0, const int e)
{
    const int kk = e / (KF_BN / LVEC), cc = (e % (KF_BN / LVEC)) * LVEC;
    const int gk = k0 + kk, gc = col0 + cc;
#if LVEC == 1
    return (gk < k && gc < n) ? b[(size_t)gk * (size_t)n + gc] : 0.0f;
#else
    /* n % 4 == 0 */
    return (gk < k && gc < n) ? vload4(0, b + (size_t)gk * (size_t)n + gc) : (float4)(0.0f);
#endif
}

inline void kf_store_b(__local float* S, const int e, const KF_LV v)
{
    const int kk = e / (KF_BN / LVEC), cc = (e % (KF_BN / LVEC)) * LVEC;
#if LVEC == 1
    S[kk * KF_LDB + cc] = v;
#else
    vstore4(v, 0, S + kk * KF_LDB + cc);
#endif
}
#define KF_LOAD_B(k0, e) kf_load_b(b, n, k, bn0, (k0), (e))
#define KF_STORE_B(e, v) kf_store_b(Bs, (e), (v))
#define KF_LOAD_A(k0, e) kf_load_kmajor(a, m, k, bm0, (k0), (e))
#define KF_STORE_A(e, v) kf_store_kmajor(As, KF_LDA, (e), (v))

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

#if UNROLL == 1
#define KF_REPEAT(S, kk) S(kk)
#elif UNROLL == 2
#define KF_REPEAT(S, kk) S(kk) S((kk) + 1)
#elif UNROLL == 4
#define KF_REPEAT(S, kk) S(kk) S((kk) + 1) S((kk) + 2) S((kk) + 3)
#elif UNROLL == 8
#define KF_REPEAT(S, kk) S(kk) S((kk) + 1) S((kk) + 2) S((kk) + 3) \
                         S((kk) + 4) S((kk) + 5) S((kk) + 6) S((kk) + 7)
#else
#error "UNROLL must be 1, 2, 4 or 8"
#endif

#if USE_LOCAL
#define KF_STEP(kk)                                                           \
    {                                                                         \
        float av[TM];                                                         \
        KF_VTYPE bv[KF_TNV];                                                  \
        for (int i = 0; i < TM; ++i)                                          \
            av[i] = As[(kk) * KF_LDA + i * WGY + ty];                         \
        for (int j = 0; j < KF_TNV; ++j)                                      \
            bv[j] = KF_VLOAD(0, Bs + (kk) * KF_LDB + (j * WGX + tx) * VEC);   \
        for (int i = 0; i < TM; ++i)                                          \
            for (int j = 0; j < KF_TNV; ++j)                                  \
                acc[i][j] = fma((KF_VTYPE)(av[i]), bv[j], acc[i][j]);         \
    }
#else
#define KF_STEP(kk)                                                           \
    {                                                                         \
        float av[TM];                                                         \
        KF_VTYPE bv[KF_TNV];                                                  \
        __global const float* brow = b + (size_t)(kk) * (size_t)n;            \
        for (int i = 0; i < TM; ++i)                                          \
            av[i] = arow[i][(kk)];                                            \
        for (int j = 0; j < KF_TNV; ++j)                                      \
            bv[j] = KF_VLOAD(bcol[j], brow);                                  \
        for (int i = 0; i < TM; ++i)                                          \
            for (int j = 0; j < KF_TNV; ++j)                                  \
                acc[i][j] = fma((KF_VTYPE)(av[i]), bv[j], acc[i][j]);         \
    }
#endif
#endif /* MMA */

__kernel void gemm(const int m, const int n, const int k, __global const float* a, __global const float* b, __global float* c)
{
#if MMA

#include <kfoundry/tensor_core_tiles.cl>
#define KM_A a
#define KM_B b
#include <kfoundry/tensor_core_loop.cl>
    /* Row KM_ROW(i, 2h) of the lane's outputs is one run of 2 * NJ columns from KM_COL(0, 2h). */
#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            __global float* out = c + (size_t)KM_ROW(i, 2 * h) * (size_t)n + KM_COL(0, 2 * h);
#if KM_NJ == 1
            *(__global float2*)out = (float2)(acc[i][0][2 * h], acc[i][0][2 * h + 1]);
#else
#pragma unroll
            for (int x = 0; x < 2 * KM_NJ; x += 4)
                *(__global float4*)(out + x) = (float4)(KM_RUN(i, h, x), KM_RUN(i, h, x + 1), KM_RUN(i, h, x + 2), KM_RUN(i, h, x + 3));
#endif
        }
#else /* the portable path */

    const int tx = (int)get_local_id(0);
    const int ty = (int)get_local_id(1);
    const int bn0 = (int)get_group_id(0) * KF_BN;
    const int bm0 = (int)get_group_id(1) * KF_BM;

    KF_VTYPE acc[TM][KF_TNV];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < KF_TNV; ++j)
            acc[i][j] = (KF_VTYPE)(0.0f);

#if USE_LOCAL
    __local float As[TK * KF_LDA];
    __local float Bs[TK * KF_LDB];
    const int tid = ty * WGX + tx;

#if PREFETCH
    /* The next tile's global loads are issued before the current tile is computed. */
    KF_LV ra[KF_NA], rb[KF_NB];
    for (int q = 0; q < KF_NA; ++q)
        if (tid + q * KF_NT < KF_PA)
            ra[q] = KF_LOAD_A(0, tid + q * KF_NT);
    for (int q = 0; q < KF_NB; ++q)
        if (tid + q * KF_NT < KF_PB)
            rb[q] = KF_LOAD_B(0, tid + q * KF_NT);
#endif
    for (int k0 = 0; k0 < k; k0 += TK) {
#if PREFETCH
        for (int q = 0; q < KF_NA; ++q)
            if (tid + q * KF_NT < KF_PA)
                KF_STORE_A(tid + q * KF_NT, ra[q]);
        for (int q = 0; q < KF_NB; ++q)
            if (tid + q * KF_NT < KF_PB)
                KF_STORE_B(tid + q * KF_NT, rb[q]);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + TK < k) {
            for (int q = 0; q < KF_NA; ++q)
                if (tid + q * KF_NT < KF_PA)
                    ra[q] = KF_LOAD_A(k0 + TK, tid + q * KF_NT);
            for (int q = 0; q < KF_NB; ++q)
                if (tid + q * KF_NT < KF_PB)
                    rb[q] = KF_LOAD_B(k0 + TK, tid + q * KF_NT);
        }
#else
        for (int e = tid; e < KF_PA; e += KF_NT)
            KF_STORE_A(e, KF_LOAD_A(k0, e));
        for (int e = tid; e < KF_PB; e += KF_NT)
            KF_STORE_B(e, KF_LOAD_B(k0, e));
        barrier(CLK_LOCAL_MEM_FENCE);
#endif

        for (int kk = 0; kk < TK; kk += UNROLL) {
            KF_REPEAT(KF_STEP, kk)
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#else
    __global const float* arow[TM];
    for (int i = 0; i < TM; ++i) {
        const int r = min(bm0 + i * WGY + ty, m - 1);
        arow[i] = a + (size_t)r * (size_t)k;
    }
    int bcol[KF_TNV];
    for (int j = 0; j < KF_TNV; ++j) {
        bcol[j] = min(bn0 / VEC + j * WGX + tx, n / VEC - 1);
    }
    int kk = 0;
    for (; kk + UNROLL <= k; kk += UNROLL) {
        KF_REPEAT(KF_STEP, kk)
    }
    for (; kk < k; ++kk) {
        KF_STEP(kk)
    }
#endif

    for (int i = 0; i < TM; ++i) {
        const int r = bm0 + i * WGY + ty;
        if (r < m) {
            __global float* crow = c + (size_t)r * (size_t)n;
            for (int j = 0; j < KF_TNV; ++j) {
                const int cv = bn0 / VEC + j * WGX + tx;
                if (cv < n / VEC) {
                    KF_VSTORE(acc[i][j], cv, crow);
                }
            }
        }
    }
#endif /* MMA */
}
