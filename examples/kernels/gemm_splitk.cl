/*
 * gemm_splitk: C = A * B (single precision, row-major; A is m x k, B is k x n, C is m x n), the
 * k range cut into SPLITK slices that work-groups of their own compute (launch dimension 2) and
 * the last of them to arrive adds up (the template library's split_k.cl, on two scratch
 * buffers the launcher owns): for products with few outputs and a long k, KernelBench level 1
 * problem 6 (256 x 256 outputs, k = 524288), where a work-group per output tile leaves most of
 * a GPU idle.
 *
 *   SPLITK    slices of k                                   [1, 2, ..., 64]  ref 1
 *   WGX, WGY  work-group size along n and m                 [8, 16, 32]      ref 16
 *   TM, TN    rows and columns of C per work item           [1, 2, 4, 8]     ref 1
 *   MMA       0: the portable path below; 1: the library's 3xTF32 tensor-core path (as
 *             gemm.cl's, FP32 accuracy; NVIDIA, compute capability >= 8.0)    [0, 1]  ref 0
 *   WM, TK, STAGES, FLUSH   MMA = 1: as gemm.cl's
 *
 * Slices: the portable path gives slice s the k in [s * ceil(k / SPLITK), ...); the
 * tensor-core path cuts the k / TK k-tiles likewise. A slice may be empty (its partial sums
 * are then zero). With SPLITK = 1 the output is written directly and the scratch untouched.
 * The portable path reads its operands from global memory (the caches serve the reuse of a
 * small output), summing in k order with fma within a slice.
 *
 * Launch (3-D): global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY, SPLITK),
 *               local  = (WGX, WGY, 1).
 * Scratch: ws, SPLITK * m * n floats (partial sums); arrivals, one uint per output tile.
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
#ifndef SPLITK
#define SPLITK 1
#endif
#ifndef MMA
#define MMA 0
#endif
#ifndef WM
#define WM 1
#endif
#ifndef TK
#define TK 8
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef FLUSH
#define FLUSH 1
#endif

#define KS_SLICES SPLITK
#include <kfoundry/split_k.cl>

#if MMA
#define KM_B_KMAJOR 0
/* The k-tiles of this work-group's slice (set in the kernel). */
#define KM_KTILES km_kts
#include <kfoundry/tensor_core.cl>
#endif

__kernel void gemm_splitk(const int m, const int n, const int k, __global const float* a, __global const float* b, __global float* c, __global float* ws, __global uint* arrivals)
{
    const int slice = (int)get_group_id(2);
    const int tile = (int)(get_group_id(1) * get_num_groups(0) + get_group_id(0));
    const size_t mn = (size_t)m * (size_t)n;
    __local int last_flag;
#if MMA

#include <kfoundry/tensor_core_tiles.cl>
    const int km_all = k / TK, km_per = (km_all + SPLITK - 1) / SPLITK;
    const int km_kt0 = min(km_all, slice * km_per);
    const int km_kts = min(km_per, km_all - km_kt0);
#define KM_A (a + (size_t)km_kt0 * TK)
#define KM_B (b + (size_t)km_kt0 * TK * (size_t)n)
#include <kfoundry/tensor_core_loop.cl>
    /* Each output: acc[i][j][r] at row KM_ROW(i, r), column KM_COL(j, r). */
#define KF_AT(i, j, r) ((size_t)KM_ROW(i, r) * (size_t)n + KM_COL(j, r))
#if SPLITK == 1
#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                c[KF_AT(i, j, r)] = acc[i][j][r];
#else
#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                ks_put(ws, mn, slice, KF_AT(i, j, r), acc[i][j][r]);
    if (ks_last(arrivals, tile, &last_flag, tid)) {
#pragma unroll
        for (int i = 0; i < KM_MI; ++i)
#pragma unroll
            for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
                for (int r = 0; r < 4; ++r)
                    c[KF_AT(i, j, r)] = ks_take(ws, mn, KF_AT(i, j, r));
    }
#endif
#else /* the portable path */

    const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
    const int tid = ty * WGX + tx;
    const int bn0 = (int)get_group_id(0) * (WGX * TN), bm0 = (int)get_group_id(1) * (WGY * TM);
    const int chunk = (k + SPLITK - 1) / SPLITK;
    const int k0 = min(k, slice * chunk), k1 = min(k, k0 + chunk);
    /* Rows and columns past the ends are read clamped and never stored. */
    __global const float* arow[TM];
    for (int i = 0; i < TM; ++i)
        arow[i] = a + (size_t)min(bm0 + i * WGY + ty, m - 1) * (size_t)k;
    int col[TN];
    for (int j = 0; j < TN; ++j)
        col[j] = min(bn0 + j * WGX + tx, n - 1);
    float acc[TM][TN];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0.0f;
    for (int kk = k0; kk < k1; ++kk) {
        __global const float* brow = b + (size_t)kk * (size_t)n;
        float bv[TN];
        for (int j = 0; j < TN; ++j)
            bv[j] = brow[col[j]];
        for (int i = 0; i < TM; ++i) {
            const float av = arow[i][kk];
            for (int j = 0; j < TN; ++j)
                acc[i][j] = fma(av, bv[j], acc[i][j]);
        }
    }
    /* Each output that lies inside C: rows bm0 + i * WGY + ty, columns bn0 + j * WGX + tx. */
#define KF_IN(i, j) (bm0 + (i) * WGY + ty < m && bn0 + (j) * WGX + tx < n)
#define KF_AT(i, j) ((size_t)(bm0 + (i) * WGY + ty) * (size_t)n + bn0 + (j) * WGX + tx)
#if SPLITK == 1
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
            if (KF_IN(i, j))
                c[KF_AT(i, j)] = acc[i][j];
#else
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
            if (KF_IN(i, j))
                ks_put(ws, mn, slice, KF_AT(i, j), acc[i][j]);
    if (ks_last(arrivals, tile, &last_flag, tid)) {
        for (int i = 0; i < TM; ++i)
            for (int j = 0; j < TN; ++j)
                if (KF_IN(i, j))
                    c[KF_AT(i, j)] = ks_take(ws, mn, KF_AT(i, j));
    }
#endif
#endif /* MMA */
}
