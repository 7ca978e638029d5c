/*
 * linear_gelu: y = gelu(x * w^T + bias), exact GELU 0.5 * v * (1 + erf(v / sqrt(2)))
 *   x is m x k (rows of input features), w is n x k (PyTorch Linear weight: out x in),
 *   bias has n elements, y is m x n. Row-major throughout.
 *
 * Stage 1 of the suite's "Linear 8192 -> 8192 on 1024 rows, GELU, softmax(dim=1)" (KernelBench
 * level 2); stage 2 is softmax.cl over the rows of y. The structure and parameters are those
 * of gemm.cl; the difference is that both operands are read along k (an "NT" product) and the
 * epilogue adds the bias and applies GELU. The defaults are the reference (naive kernel).
 *
 *   WGX, WGY  work-group shape (n, m)                     [8, 16, 32]     ref 16, 16
 *   TM, TN    register tile (rows, columns of y)          [1, 2, 4, 8]    ref 1, 1
 *   VEC       vector width of the column tile             [1, 2, 4]       ref 1
 *   USE_LOCAL x and w tiles staged in local memory        [0, 1]          ref 0
 *   TK        depth of a local-memory k-tile              [8, 16, 32]     ref 8
 *   PAD       padding of a local tile row (floats)        [0, 1, 4]       ref 0
 *   LVEC      width of the global loads filling the
 *             local tiles (both along k)                  [1, 4]          ref 1
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
 *             RASTER tile rows (L2 reuse of w), 0: rows  [0, 4, 16]      ref 0
 *
 * Launch (2-D): global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY),
 *               local  = (WGX, WGY).
 * Requires TN % VEC == 0, n % VEC == 0, and LVEC = 4 only with k % 4 == 0. Each output is
 * accumulated k-ascending with fma in every portable configuration: all are bit-identical
 * before the epilogue, which is the same expression everywhere. The MMA path (as in gemm.cl)
 * sums in another order, with FP32 accuracy.
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

#if MMA
#define KM_B_KMAJOR 1
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

/* w is n x k, contiguous along k: k-major like x. */
#define KF_PB (KF_BN * TK / LVEC)
#define KF_NB ((KF_PB + KF_NT - 1) / KF_NT)
#define KF_LOAD_B(k0, e) kf_load_kmajor(w, n, k, bn0, (k0), (e))
#define KF_STORE_B(e, v) kf_store_kmajor(Bs, KF_LDB, (e), (v))
#define KF_LOAD_A(k0, e) kf_load_kmajor(x, m, k, bm0, (k0), (e))
#define KF_STORE_A(e, v) kf_store_kmajor(As, KF_LDA, (e), (v))

#define KF_CAT_(p, q) p##q
#define KF_CAT(p, q) KF_CAT_(p, q)

#if VEC == 1
#define KF_VTYPE float
#define KF_VLOAD(o, p) ((p)[(o)])
#else
#define KF_VTYPE KF_CAT(float, VEC)
#define KF_VLOAD(o, p) KF_CAT(vload, VEC)((o), (p))
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
        for (int i = 0; i < TM; ++i)                                          \
            av[i] = xrow[i][(kk)];                                            \
        for (int j = 0; j < KF_TNV; ++j) {                                    \
            float t[VEC];                                                     \
            for (int q = 0; q < VEC; ++q)                                     \
                t[q] = wrow[j][q * k + (kk)];                                 \
            bv[j] = KF_VLOAD(0, t);                                           \
        }                                                                     \
        for (int i = 0; i < TM; ++i)                                          \
            for (int j = 0; j < KF_TNV; ++j)                                  \
                acc[i][j] = fma((KF_VTYPE)(av[i]), bv[j], acc[i][j]);         \
    }
#endif
#endif /* MMA */

__kernel void linear_gelu(const int m, const int n, const int k, __global const float* x, __global const float* w, __global const float* bias, __global float* y)
{
#if MMA

#include <kfoundry/tensor_core_tiles.cl>
#define KM_A x
#define KM_B w
#include <kfoundry/tensor_core_loop.cl>
#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = KM_ROW(i, 2 * h), col = KM_COL(j, 2 * h);
                const float v0 = acc[i][j][2 * h] + bias[col], v1 = acc[i][j][2 * h + 1] + bias[col + 1];
                const float2 out = (float2)(0.5f * v0 * (1.0f + erf(v0 * 0.70710678118654752f)), 0.5f * v1 * (1.0f + erf(v1 * 0.70710678118654752f)));
                vstore2(out, 0, y + (size_t)row * (size_t)n + col);
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
    /* Out-of-range rows and columns are clamped to valid ones: computed, never stored. */
    __global const float* xrow[TM];
    for (int i = 0; i < TM; ++i) {
        const int r = min(bm0 + i * WGY + ty, m - 1);
        xrow[i] = x + (size_t)r * (size_t)k;
    }
    __global const float* wrow[KF_TNV];
    for (int j = 0; j < KF_TNV; ++j) {
        const int cv = min(bn0 / VEC + j * WGX + tx, n / VEC - 1);
        wrow[j] = w + (size_t)cv * VEC * (size_t)k;
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
            __global float* yrow = y + (size_t)r * (size_t)n;
            for (int j = 0; j < KF_TNV; ++j) {
                const int cv = bn0 / VEC + j * WGX + tx;
                if (cv < n / VEC) {
                    float t[VEC];
                    KF_VTYPE a = acc[i][j];
#if VEC == 1
                    t[0] = a;
#else
                    KF_CAT(vstore, VEC)(a, 0, t);
#endif
                    for (int q = 0; q < VEC; ++q) {
                        const int col = cv * VEC + q;
                        const float v = t[q] + bias[col];
                        yrow[col] = 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
                    }
                }
            }
        }
    }
#endif /* MMA */
}
