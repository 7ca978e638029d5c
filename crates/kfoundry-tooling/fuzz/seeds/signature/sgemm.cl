/*
 * sgemm: C = A * B   (single precision, row-major)
 *   A is m x k, B is k x n, C is m x n.
 *
 * Reference kernel for kfoundry. Tunable parameters arrive as preprocessor
 * definitions (-D NAME=value); the defaults below are the reference
 * configuration: the naive kernel, one output per work item, 8 x 8 groups,
 * operands read straight from global memory.
 *
 *   WGX       work-group size along n (columns of C)  [4, 8, 16, 32]  ref 8
 *   WGY       work-group size along m (rows of C)     [4, 8, 16, 32]  ref 8
 *   TM        rows of C per work item                 [1, 2, 4, 8]    ref 1
 *   TN        columns of C per work item              [1, 2, 4, 8]    ref 1
 *   VEC       vector width along n: B and C are read
 *             and written in vectors of VEC columns   [1, 2, 4, 8]    ref 1
 *   USE_LOCAL 1: A and B tiles are staged in local
 *             memory; 0: read from global memory      [0, 1]          ref 0
 *   TK        depth of a local-memory k-tile          [8, 16, 32]     ref 8
 *   UNROLL    manual unroll of the k loop             [1, 2, 4, 8]    ref 1
 *
 * A work-group computes a block of BM x BN outputs, BM = WGY * TM and
 * BN = WGX * TN. Item (tx, ty) owns rows  bm0 + i * WGY + ty  (i < TM) and
 * the column vectors starting at  bn0 + (j * WGX + tx) * VEC  (j < TN / VEC),
 * so neighbouring items touch neighbouring memory.
 *
 * Launch (2-D): global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY),
 *               local  = (WGX, WGY).
 * Requires TN % VEC == 0 and n % VEC == 0 (whole vectors only), and with
 * USE_LOCAL = 1 the two tiles, TK * (BM + BN) floats, must fit the device's
 * local memory (the annotation keeps them within 32 KiB, the OpenCL 1.2
 * minimum). Ragged m, n and k are otherwise handled: out-of-range loads are
 * clamped or zero-filled, out-of-range stores skipped.
 *
 * Every configuration accumulates each output in the same order
 * (k ascending) with fma, so results are bit-identical across
 * configurations (up to the sign of zero).
 */

#ifndef WGX
#define WGX 8
#endif
#ifndef WGY
#define WGY 8
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
#ifndef UNROLL
#define UNROLL 1
#endif

#if (TN % VEC) != 0
#error "TN must be a multiple of VEC"
#endif

#define KF_BM (WGY * TM)
#define KF_BN (WGX * TN)
#define KF_TNV (TN / VEC)

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

/* Manual unroll: KF_REPEAT(S, kk) expands S(kk), S(kk + 1), ..., S(kk + UNROLL - 1). */
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
/* One k step from the local tiles: As is TK x BM (A transposed), Bs is TK x BN. */
#define KF_STEP(kk)                                                           \
    {                                                                         \
        float av[TM];                                                         \
        KF_VTYPE bv[KF_TNV];                                                  \
        for (int i = 0; i < TM; ++i)                                          \
            av[i] = As[(kk) * KF_BM + i * WGY + ty];                          \
        for (int j = 0; j < KF_TNV; ++j)                                      \
            bv[j] = KF_VLOAD(0, Bs + (kk) * KF_BN + (j * WGX + tx) * VEC);    \
        for (int i = 0; i < TM; ++i)                                          \
            for (int j = 0; j < KF_TNV; ++j)                                  \
                acc[i][j] = fma((KF_VTYPE)(av[i]), bv[j], acc[i][j]);         \
    }
#else
/* One k step from global memory: arow[i] points at row i of A, bcol[j] is a vector index into a row of B. */
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

__kernel void sgemm(const int m, const int n, const int k, __global const float* a, __global const float* b, __global float* c)
{
    const int tx = (int)get_local_id(0);
    const int ty = (int)get_local_id(1);
    const int bn0 = (int)get_group_id(0) * KF_BN;
    const int bm0 = (int)get_group_id(1) * KF_BM;

    KF_VTYPE acc[TM][KF_TNV];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < KF_TNV; ++j)
            acc[i][j] = (KF_VTYPE)(0.0f);

#if USE_LOCAL
    __local float As[TK * KF_BM];
    __local float Bs[TK * KF_BN];
    const int tid = ty * WGX + tx;

    for (int k0 = 0; k0 < k; k0 += TK) {
        /* cooperative loads, zero-filled outside the matrices */
        for (int e = tid; e < KF_BM * TK; e += WGX * WGY) {
            const int r = e / TK;
            const int kk = e % TK;
            const int gr = bm0 + r;
            const int gk = k0 + kk;
            As[kk * KF_BM + r] = (gr < m && gk < k) ? a[(size_t)gr * (size_t)k + gk] : 0.0f;
        }
        for (int e = tid; e < TK * KF_BN; e += WGX * WGY) {
            const int kk = e / KF_BN;
            const int cc = e % KF_BN;
            const int gk = k0 + kk;
            const int gc = bn0 + cc;
            Bs[e] = (gk < k && gc < n) ? b[(size_t)gk * (size_t)n + gc] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int kk = 0; kk < TK; kk += UNROLL) {
            KF_REPEAT(KF_STEP, kk)
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#else
    /* Out-of-range rows and column vectors are clamped to the last valid one:
       they are computed but never stored. */
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
}
