/* ---- The 3xTF32 tensor-core path (MMA = 1): NVIDIA, compute capability 8.0 or later ----
 *
 * Each operand value x is split into big = tf32(x) (rounded to nearest) and small = x - big
 * (exact in FP32; the tensor cores read its top 19 bits); a product is accumulated as
 * small_a*big_b + big_a*small_b + big_a*big_b with warp-wide mma.sync.m16n8k8 (TF32 operands,
 * FP32 accumulators): the error of the dropped small*small term and of small's truncation is
 * about 2^-22 of a product, so the result keeps FP32 accuracy (the "3xTF32" technique of
 * CUTLASS). KM_SPLITS = 1 (a kernel's opt-in, never the default) keeps big_a*big_b alone:
 * plain TF32, about 1e-3 relative. Tiles arrive in local memory through cp.async, STAGES
 * k-tiles in flight.
 *
 * The work-group shape and tile parameters keep their geometry: BM = WGY * TM rows and
 * BN = WGX * TN columns per work-group of WGX * WGY items (a multiple of 32: whole warps).
 * Its warps form a WM x (warps / WM) grid; a warp computes a (BM / WM) x (BN / (warps / WM))
 * tile as m16n8 pieces. TK is the k-tile depth (8, 16 or 32). Needs full tiles (m % BM, n % BN,
 * k % TK all 0) and 16-byte rows (n % 4 == 0, k % 4 == 0): the annotation's `require` says so.
 *
 * Fragments. Which k of a k-tile feeds which slot of an m16n8k8 step is free, as long as A and
 * B agree: lane (g, t) = (lane / 4, lane % 4) owns the run of TK / 4 consecutive k at t * TK / 4,
 * and step s of the tile takes k = t * TK / 4 + 2s into slot t and the next k into slot t + 4.
 * So a lane reads each row of its fragments with one or two 16-byte local loads a k-tile, at
 * offsets fixed when the kernel starts (the OpenCL counterpart of ldmatrix). The k-contiguous
 * tiles (A; B when it is n x k) have rows of KM_LDK floats, which puts a quarter-warp's loads on
 * distinct banks. B stored k x n: column g of piece j of a warp's tile is column g * NJ + j of
 * it, so a lane reads NJ consecutive floats of each of its k rows, and the 16-byte chunks of a
 * k row are permuted (chunk c at c ^ KM_SWZ(row)) so that the rows of the four t hit distinct
 * banks. KM_ROW(i, r) and KM_COL(j, r) give the output of accumulator acc[i][j][r].
 *
 * A kernel may define, before the tiles: KM_GROUP_M / KM_GROUP_N (the work-group's tile row and
 * column; default: dimension 1 and 0, walked in bands of RASTER tile rows when RASTER > 0, so
 * that work-groups running together share their B columns in L2), KM_KTILES (the number of
 * k-tiles; default k / TK) and KM_SPLITS (3 or 1).
 *
 * KM_EMULATE (a build option, never a tuned parameter): the warp-wide instructions are
 * emulated with local memory and barriers, so the fragment layouts can be checked on any
 * OpenCL device (`examples/tests/suite.rs`).
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
/* The k run of a lane in a k-tile, and the row length of k-contiguous tiles. */
#define KM_KQ (TK / 4)
#define KM_LDK (TK + TK / 32 * 4)
#define KM_LDA KM_LDK
#define KM_ASZ (KM_BM * KM_LDA)
#if KM_B_KMAJOR
/* B is n x k (contiguous along k): stored like A, BN rows of TK floats. */
#define KM_LDB KM_LDK
#define KM_BSZ (KM_BN * KM_LDB)
#else
/* B is k x n (contiguous along n): TK rows of BN floats, 16-byte chunks permuted per row. */
#define KM_LDB KM_BN
#define KM_BSZ (TK * KM_LDB)
#if KM_BN % 32 != 0
#define KM_SWZ(kk) 0
#elif KM_NJ == 8
#define KM_SWZ(kk) ((((kk) / KM_KQ) & 1) | ((((kk) / KM_KQ) & 2) << 1))
#elif KM_NJ >= 16
#define KM_SWZ(kk) (((kk) / KM_KQ) & 3)
#else
#define KM_SWZ(kk) ((((kk) / KM_KQ) & 3) << 1)
#endif
#endif
#ifndef KM_SPLITS
#define KM_SPLITS 3
#endif
#ifndef RASTER
#define RASTER 0
#endif
#ifndef KM_KTILES
#define KM_KTILES (k / TK)
#endif

#if (KM_NT % 32) != 0 || (KM_WARPS % WM) != 0 || (KM_WTM % 16) != 0 || (KM_WTN % 8) != 0 || (TK % (8 * FLUSH)) != 0
#error "MMA = 1 needs whole warps, WM dividing them, warp tiles of whole m16n8 pieces and TK % (8 * FLUSH) == 0"
#endif
#if TK != 8 && TK != 16 && TK != 32
#error "MMA = 1 needs TK = 8, 16 or 32"
#endif
#if KM_SPLITS != 3 && KM_SPLITS != 1
#error "KM_SPLITS must be 3 (FP32 accuracy) or 1 (TF32)"
#endif

#ifdef KM_EMULATE
/* cp.async as a plain 16-byte copy; the barrier after each wait makes it visible. */
#define KM_CP16(dst, src) vstore4(vload4(0, (src)), 0, (dst))
#define KM_COMMIT()
#define KM_WAIT_PIPE()
#include <kfoundry/mma_emulated.cl>
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
#include <kfoundry/mma_ptx.cl>
#endif

/* x = big + small: big is x rounded to TF32 (to nearest, ties away: cvt.rna.tf32.f32 on
   finite x, in two integer operations), small the exact rest. */
#define KM_TF32(x) ((as_uint(x) + 0x1000u) & 0xffffe000u)
#ifdef KM_EMULATE
/* The tensor cores read a TF32 operand's top 19 bits: so does the emulation. */
#define KM_SMALL(v) (as_uint(v) & 0xffffe000u)
#else
#define KM_SMALL(v) as_uint(v)
#endif
#if KM_SPLITS == 3
#define KM_SPLIT(x, big, small)                      \
    {                                                \
        const float x_ = (x);                        \
        (big) = KM_TF32(x_);                         \
        (small) = KM_SMALL(x_ - as_float(big));      \
    }
#else
#define KM_SPLIT(x, big, small) (big) = KM_TF32(x)
#endif

/* A lane's k run of one row (KQ floats, 8- or 16-byte aligned) into the array `dst`. */
#if KM_KQ == 2
#define KM_LOAD_RUN(dst, p)                                      \
    {                                                            \
        const float2 v_ = *(const __local float2*)(p);           \
        (dst)[0] = v_.x;                                         \
        (dst)[1] = v_.y;                                         \
    }
#else
#define KM_LOAD_RUN(dst, p)                                      \
    for (int q_ = 0; q_ < KM_KQ; q_ += 4) {                      \
        const float4 v_ = *(const __local float4*)((p) + q_);    \
        (dst)[q_] = v_.x;                                        \
        (dst)[q_ + 1] = v_.y;                                    \
        (dst)[q_ + 2] = v_.z;                                    \
        (dst)[q_ + 3] = v_.w;                                    \
    }
#endif
/* B k x n: chunk c of a lane's NJ columns of one k row into dst[4c ...]. */
#if KM_NJ >= 4
#define KM_LOAD_COLS(dst, c, p)                                  \
    {                                                            \
        const float4 v_ = *(const __local float4*)(p);           \
        (dst)[4 * (c)] = v_.x;                                   \
        (dst)[4 * (c) + 1] = v_.y;                               \
        (dst)[4 * (c) + 2] = v_.z;                               \
        (dst)[4 * (c) + 3] = v_.w;                               \
    }
#elif KM_NJ == 2
#define KM_LOAD_COLS(dst, c, p)                                  \
    {                                                            \
        const float2 v_ = *(const __local float2*)(p);           \
        (dst)[0] = v_.x;                                         \
        (dst)[1] = v_.y;                                         \
    }
#else
#define KM_LOAD_COLS(dst, c, p) (dst)[0] = *(p)
#endif

/* The output of accumulator acc[i][j][r]. */
#define KM_ROW(i, r) (bm0 + wm0 + (i) * 16 + g + 8 * ((r) >> 1))
#if KM_B_KMAJOR
#define KM_COL(j, r) (bn0 + wn0 + (j) * 8 + 2 * t + ((r) & 1))
#else
#define KM_COL(j, r) (bn0 + wn0 + (2 * t + ((r) & 1)) * KM_NJ + (j))
/* The lane's outputs of row KM_ROW(i, 2h) are one run of 2 * NJ columns from KM_COL(0, 2h):
   element x of it is this accumulator. */
#define KM_RUN(i, h, x) acc[i][(x) % KM_NJ][2 * (h) + (x) / KM_NJ]
#endif

/* Issues the copies of k-tile `kt` into stage `st` (A rows from a at bm0, B from b at bn0):
   each item copies the 16-byte chunks e = tid + q * NT of each tile, from addresses it works
   out once (KM_LOAD_SETUP, before the first tile). */
#define KM_CHUNKS_A (KM_BM * KM_KQ)
#define KM_QA ((KM_CHUNKS_A + KM_NT - 1) / KM_NT)
#if KM_B_KMAJOR
#define KM_CB KM_KQ /* chunks in a row of B's tile */
#define KM_CHUNKS_B (KM_BN * KM_KQ)
#else
#define KM_CB (KM_BN / 4)
#define KM_CHUNKS_B (TK * KM_CB)
#endif
#define KM_QB ((KM_CHUNKS_B + KM_NT - 1) / KM_NT)
#define KM_LOAD_SETUP                                                                            \
    const __global float* km_a = KM_A + (size_t)(bm0 + tid / KM_KQ) * (size_t)k + (tid % KM_KQ) * 4; \
    const int km_a_at = (tid / KM_KQ) * KM_LDA + (tid % KM_KQ) * 4;                              \
    KM_LOAD_SETUP_B
#if KM_B_KMAJOR
#define KM_LOAD_SETUP_B                                                                          \
    const __global float* km_b = KM_B + (size_t)(bn0 + tid / KM_KQ) * (size_t)k + (tid % KM_KQ) * 4; \
    const int km_b_at = (tid / KM_KQ) * KM_LDB + (tid % KM_KQ) * 4;
#elif KM_NT % KM_CB == 0
/* Every chunk of an item is in its column of chunks c = tid % CB, rows tid / CB + q * NT / CB. */
#define KM_LOAD_SETUP_B                                                                          \
    const __global float* km_b = KM_B + (size_t)(tid / KM_CB) * (size_t)n + bn0 + 4 * (tid % KM_CB); \
    int km_b_at[KM_QB];                                                                          \
    for (int q = 0; q < KM_QB; ++q) {                                                            \
        const int r_ = tid / KM_CB + q * (KM_NT / KM_CB);                                        \
        km_b_at[q] = r_ * KM_LDB + (((tid % KM_CB) ^ KM_SWZ(r_)) << 2);                          \
    }
#else
#define KM_LOAD_SETUP_B
#endif

#define KM_LOAD_TILE(st, kt)                                                                     \
    {                                                                                            \
        __local float* As_ = As + (st) * KM_ASZ + km_a_at;                                       \
        const __global float* a_ = km_a + (kt) * TK;                                             \
        for (int q = 0; q < KM_QA; ++q)                                                          \
            if (KM_CHUNKS_A % KM_NT == 0 || tid + q * KM_NT < KM_CHUNKS_A)                       \
                KM_CP16(As_ + q * (KM_NT / KM_KQ) * KM_LDA, a_ + (size_t)(q * (KM_NT / KM_KQ)) * (size_t)k); \
        KM_LOAD_B((st) * KM_BSZ, kt);                                                            \
    }
#if KM_B_KMAJOR
#define KM_LOAD_B(at, kt)                                                                        \
    {                                                                                            \
        __local float* Bs_ = Bs + (at) + km_b_at;                                                \
        const __global float* b_ = km_b + (kt) * TK;                                             \
        for (int q = 0; q < KM_QB; ++q)                                                          \
            if (KM_CHUNKS_B % KM_NT == 0 || tid + q * KM_NT < KM_CHUNKS_B)                       \
                KM_CP16(Bs_ + q * (KM_NT / KM_KQ) * KM_LDB, b_ + (size_t)(q * (KM_NT / KM_KQ)) * (size_t)k); \
    }
#elif KM_NT % KM_CB == 0
#define KM_LOAD_B(at, kt)                                                                        \
    {                                                                                            \
        const __global float* b_ = km_b + (size_t)((kt) * TK) * (size_t)n;                       \
        for (int q = 0; q < KM_QB; ++q)                                                          \
            if (KM_CHUNKS_B % KM_NT == 0 || tid + q * KM_NT < KM_CHUNKS_B)                       \
                KM_CP16(Bs + (at) + km_b_at[q], b_ + (size_t)(q * (KM_NT / KM_CB)) * (size_t)n); \
    }
#else
/* Fewer items than chunks in a row: each chunk's place worked out as it is copied. */
#define KM_LOAD_B(at, kt)                                                                        \
    for (int e = tid; e < KM_CHUNKS_B; e += KM_NT) {                                             \
        const int r = e / KM_CB, c = e % KM_CB;                                                  \
        KM_CP16(Bs + (at) + r * KM_LDB + ((c ^ KM_SWZ(r)) << 2), KM_B + (size_t)((kt) * TK + r) * (size_t)n + bn0 + 4 * c); \
    }
#endif
