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
/* ---- The 3xTF32 tensor-core path (MMA = 1): NVIDIA, compute capability 8.0 or later ----
 *
 * Each operand value x is split into big = tf32(x) and small = tf32(x - big); a product is
 * accumulated as small_a*big_b + big_a*small_b + big_a*big_b with warp-wide
 * mma.sync.m16n8k8 (TF32 operands, FP32 accumulators): the error of the dropped small*small
 * term is about 2^-22 of a product, so the result keeps FP32 accuracy (the "3xTF32" technique
 * of CUTLASS). Tiles arrive in local memory through cp.async, STAGES k-tiles in flight.
 *
 * The work-group shape and tile parameters keep their geometry: BM = WGY * TM rows and
 * BN = WGX * TN columns per work-group of WGX * WGY items (a multiple of 32: whole warps).
 * Its warps form a WM x (warps / WM) grid; a warp computes a (BM / WM) x (BN / (warps / WM))
 * tile as m16n8 pieces. TK is the k-tile depth. Needs full tiles (m % BM, n % BN, k % TK all 0)
 * and 16-byte rows (n % 4 == 0, k % 4 == 0): the annotation's `require` says so.
 *
 * KM_EMULATE (a build option, never a tuned parameter): the warp-wide instructions are
 * emulated with local memory and barriers, so the fragment layouts can be checked on any
 * OpenCL device (`examples/tests/mma_emulation.rs`).
 */
#define KM_BM (WGY * TM)
#define KM_BN (WGX * TN)
#define KM_NT (WGX * WGY)
#define KM_WARPS (KM_NT / 32)
#define KM_WN (KM_WARPS / WM)
#define KM_WTM (KM_BM / WM)
#define KM_WTN (KM_BN / KM_WN)
#define KM_MI (KM_WTM / 16)
#define KM_NJ (KM_WTN / 8)
/* A tile: BM rows of TK floats (+4: the fragment loads of a warp hit 32 distinct banks). */
#define KM_LDA (TK + 4)
#define KM_ASZ (KM_BM * KM_LDA)
#if KM_B_KMAJOR
/* B is n x k (contiguous along k): stored like A, BN rows of TK floats. */
#define KM_LDB (TK + 4)
#define KM_BSZ (KM_BN * KM_LDB)
#define KM_BAT(S, kk, col) ((S)[(col) * KM_LDB + (kk)])
#else
/* B is k x n (contiguous along n): TK rows of BN floats (+8 for the banks). */
#define KM_LDB (KM_BN + 8)
#define KM_BSZ (TK * KM_LDB)
#define KM_BAT(S, kk, col) ((S)[(kk) * KM_LDB + (col)])
#endif

#if (KM_NT % 32) != 0 || (KM_WARPS % WM) != 0 || (KM_WTM % 16) != 0 || (KM_WTN % 8) != 0 || (TK % (8 * FLUSH)) != 0
#error "MMA = 1 needs whole warps, WM dividing them, warp tiles of whole m16n8 pieces and TK % (8 * FLUSH) == 0"
#endif

#ifdef KM_EMULATE
/* cp.async as a plain 16-byte copy; the barrier after each wait makes it visible. */
#define KM_CP16(dst, src) vstore4(vload4(0, (src)), 0, (dst))
#define KM_COMMIT()
#define KM_WAIT_PIPE()
/* cvt.rna.tf32.f32: round to nearest, ties away, keeping 10 mantissa bits. */
#define KM_TF32(x) ((as_uint(x) + 0x1000u) & 0xffffe000u)
/* mma.sync.m16n8k8 through local memory: each lane publishes its fragments, then computes
   its four accumulators from the others'. Barriers are work-group wide: every item calls
   this the same number of times. */
#define KM_MMA(D, A, B) km_mma_emulated((D), (A), (B), scratch + (tid / 32) * 32 * 6, tid % 32)
inline void km_mma_emulated(float* d, const uint* a, const uint* b, __local uint* s, const int lane)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int r = 0; r < 4; ++r)
        s[lane * 6 + r] = a[r];
    s[lane * 6 + 4] = b[0];
    s[lane * 6 + 5] = b[1];
    barrier(CLK_LOCAL_MEM_FENCE);
    const int g = lane >> 2, t = lane & 3;
    for (int r = 0; r < 4; ++r) {
        const int row = g + 8 * (r >> 1), col = 2 * t + (r & 1);
        float acc = d[r];
        for (int kk = 0; kk < 8; ++kk) {
            /* A[row][kk] is a[(row >= 8) + 2 * (kk >= 4)] of lane (row % 8) * 4 + kk % 4;
               B[kk][col] is b[kk >= 4] of lane col * 4 + kk % 4. */
            const float av = as_float(s[((row % 8) * 4 + kk % 4) * 6 + (row >= 8) + 2 * (kk >= 4)]);
            const float bv = as_float(s[(col * 4 + kk % 4) * 6 + 4 + (kk >= 4)]);
            acc = fma(av, bv, acc);
        }
        d[r] = acc;
    }
}
#else
#define KM_CP16(dst, src) \
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint)(size_t)(dst)), "l"((size_t)(src)) : "memory")
#define KM_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#if STAGES == 2
#define KM_WAIT_PIPE() asm volatile("cp.async.wait_group 0;" ::: "memory")
#elif STAGES == 3
#define KM_WAIT_PIPE() asm volatile("cp.async.wait_group 1;" ::: "memory")
#elif STAGES == 4
#define KM_WAIT_PIPE() asm volatile("cp.async.wait_group 2;" ::: "memory")
#else
#error "STAGES must be 2, 3 or 4"
#endif
inline uint km_tf32(const float x)
{
    uint r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
#define KM_TF32(x) km_tf32(x)
#define KM_MMA(D, A, B)                                                                              \
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
                 : "+f"((D)[0]), "+f"((D)[1]), "+f"((D)[2]), "+f"((D)[3])                           \
                 : "r"((A)[0]), "r"((A)[1]), "r"((A)[2]), "r"((A)[3]), "r"((B)[0]), "r"((B)[1]))
#endif

/* x = big + small, both TF32. */
#define KM_SPLIT(x, big, small)                         \
    {                                                   \
        const float x_ = (x);                           \
        (big) = KM_TF32(x_);                            \
        (small) = KM_TF32(x_ - as_float(big));          \
    }

/* Issues the copies of k-tile `kt` into stage `st` (A rows from a at bm0, B from b at bn0). */
#define KM_LOAD_TILE(st, kt)                                                                     \
    {                                                                                            \
        __local float* As_ = As + (st) * KM_ASZ;                                                 \
        __local float* Bs_ = Bs + (st) * KM_BSZ;                                                 \
        const int k0_ = (kt) * TK;                                                               \
        for (int e = tid; e < KM_BM * TK / 4; e += KM_NT) {                                      \
            const int r = e / (TK / 4), c4 = (e % (TK / 4)) * 4;                                 \
            KM_CP16(As_ + r * KM_LDA + c4, KM_A + (size_t)(bm0 + r) * (size_t)k + k0_ + c4);     \
        }                                                                                        \
        KM_LOAD_B(Bs_, k0_);                                                                     \
    }
#if KM_B_KMAJOR
#define KM_LOAD_B(Bs_, k0_)                                                                      \
    for (int e = tid; e < KM_BN * TK / 4; e += KM_NT) {                                          \
        const int r = e / (TK / 4), c4 = (e % (TK / 4)) * 4;                                     \
        KM_CP16(Bs_ + r * KM_LDB + c4, KM_B + (size_t)(bn0 + r) * (size_t)k + k0_ + c4);         \
    }
#else
#define KM_LOAD_B(Bs_, k0_)                                                                      \
    for (int e = tid; e < TK * KM_BN / 4; e += KM_NT) {                                          \
        const int r = e / (KM_BN / 4), c4 = (e % (KM_BN / 4)) * 4;                               \
        KM_CP16(Bs_ + r * KM_LDB + c4, KM_B + (size_t)(k0_ + r) * (size_t)n + bn0 + c4);         \
    }
#endif
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

    __local float As[STAGES * KM_ASZ] __attribute__((aligned(16)));
    __local float Bs[STAGES * KM_BSZ] __attribute__((aligned(16)));
#ifdef KM_EMULATE
    __local uint scratch[KM_WARPS * 32 * 6];
#endif
    const int tid = (int)(get_local_id(1) * WGX + get_local_id(0));
    const int warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
    const int wm0 = (warp % WM) * KM_WTM, wn0 = (warp / WM) * KM_WTN;
    const int bn0 = (int)get_group_id(0) * KM_BN, bm0 = (int)get_group_id(1) * KM_BM;
#define KM_A x
#define KM_B w

    float acc[KM_MI][KM_NJ][4], part[KM_MI][KM_NJ][4];
#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                acc[i][j][r] = 0.0f;

    const int KT = k / TK;
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT)
            KM_LOAD_TILE(s, s);
        KM_COMMIT();
    }
    for (int kt = 0; kt < KT; ++kt) {
        KM_WAIT_PIPE();
        barrier(CLK_LOCAL_MEM_FENCE);
        /* The stage written now was last read in iteration kt - 1, which every item has left. */
        if (kt + STAGES - 1 < KT)
            KM_LOAD_TILE((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
        KM_COMMIT();
        const __local float* Ac = As + (kt % STAGES) * KM_ASZ;
        const __local float* Bc = Bs + (kt % STAGES) * KM_BSZ;
#pragma unroll
        for (int kk = 0; kk < TK; kk += 8) {
            uint ab[KM_MI][4], asm_[KM_MI][4], bb[KM_NJ][2], bsm[KM_NJ][2];
#pragma unroll
            for (int i = 0; i < KM_MI; ++i)
#pragma unroll
                for (int r = 0; r < 4; ++r)
                    KM_SPLIT(Ac[(wm0 + i * 16 + g + 8 * (r & 1)) * KM_LDA + kk + t + 4 * (r >> 1)], ab[i][r], asm_[i][r])
#pragma unroll
            for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
                for (int r = 0; r < 2; ++r)
                    KM_SPLIT(KM_BAT(Bc, kk + t + 4 * r, wn0 + j * 8 + g), bb[j][r], bsm[j][r])
#pragma unroll
            for (int i = 0; i < KM_MI; ++i)
#pragma unroll
                for (int j = 0; j < KM_NJ; ++j) {
                    /* The tensor cores round their sums toward zero: a running sum kept there
                       drifts (a relative error of 3e-5 at k = 4096, 25 times FP32's). FLUSH
                       8-deep steps are summed there from zero, then added to acc here, rounded
                       to nearest (Ootomo and Yokota, 2022). */
                    if ((kk / 8) % FLUSH == 0) {
#pragma unroll
                        for (int r = 0; r < 4; ++r)
                            part[i][j][r] = 0.0f;
                    }
                    KM_MMA(part[i][j], asm_[i], bb[j]);
                    KM_MMA(part[i][j], ab[i], bsm[j]);
                    KM_MMA(part[i][j], ab[i], bb[j]);
                    if ((kk / 8) % FLUSH == FLUSH - 1) {
#pragma unroll
                        for (int r = 0; r < 4; ++r)
                            acc[i][j][r] += part[i][j][r];
                    }
                }
        }
    }

#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = bm0 + wm0 + i * 16 + g + 8 * h, col = bn0 + wn0 + j * 8 + 2 * t;
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
