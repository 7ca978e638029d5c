/* ---- The tensor-core path (MMA = 1): NVIDIA, compute capability 8.0 or later ----
 *
 * Warp-wide mma.sync products, FP32 accumulators, tiles arriving in local memory through
 * cp.async (STAGES k-tiles in flight). The operands are FP32 by default, or 16-bit floats:
 *
 * - FP32 (KM_HALF 0, the default): each operand value x is split into big = tf32(x) (rounded
 *   to nearest) and small = x - big (exact in FP32; the tensor cores read its top 19 bits); a
 *   product is accumulated as small_a*big_b + big_a*small_b + big_a*big_b with m16n8k8 TF32
 *   steps: the error of the dropped small*small term and of small's truncation is at worst
 *   about 2^-21 of a product, so the result keeps FP32 accuracy (the "3xTF32" technique of
 *   CUTLASS). KM_SPLITS = 1 (a kernel's opt-in, never the default) keeps big_a*big_b alone:
 *   plain TF32, about 1e-3 relative.
 * - 16-bit (KM_HALF 1: IEEE half, 2: bfloat16): the operands go to m16n8k16 steps as they
 *   are (their products are exact in FP32); the kernel's pointers are to 16-bit elements.
 *
 * The work-group shape and tile parameters keep their geometry: BM = WGY * TM rows and
 * BN = WGX * TN columns per work-group of WGX * WGY items (a multiple of 32: whole warps).
 * Its warps form a WM x (warps / WM) grid; a warp computes a (BM / WM) x (BN / (warps / WM))
 * tile as m16n8 pieces. TK is the k-tile depth (FP32: 8, 16 or 32; 16-bit: 16, 32 or 64).
 * Needs full tiles (m % BM, n % BN, k % TK all 0) and 16-byte rows (n and k multiples of 4
 * FP32 or 8 16-bit elements): the annotation's `require` says so.
 *
 * Fragments. Which k of a k-tile feeds which slot of an mma step is free, as long as A and B
 * agree: lane (g, t) = (lane / 4, lane % 4) owns the run of TK / 4 consecutive k at t * TK / 4,
 * read as 32-bit words (one FP32 k, or two 16-bit k). Step s of the tile takes word 2s of the
 * run into the lane's first slots of a row (k slot t; 16-bit: slots 2t and 2t + 1) and word
 * 2s + 1 into its second (slot t + 4; 16-bit: 2t + 8 and 2t + 9). So a lane reads each row of
 * its fragments with 8- or 16-byte local loads a k-tile, at offsets fixed when the kernel starts
 * (the OpenCL counterpart of ldmatrix). The k-contiguous tiles (A; B when it is n x k) have rows
 * of KM_LDK elements, padded by 16 bytes every 128, which puts a quarter-warp's loads on distinct
 * banks. B stored k x n: column g of piece j of a warp's tile is column g * NJ + j of it, so a
 * lane reads NJ consecutive elements of each of its k rows (16-bit: and pairs two rows into
 * each register), and the 16-byte chunks of a k row are permuted (chunk c at c ^ KM_SWZ(row))
 * so that the rows of the four t hit distinct banks. KM_ROW(i, r) and KM_COL(j, r) give the
 * output of accumulator acc[i][j][r].
 *
 * KM_LDSM = 1 (16-bit, B stored k x n; a tuned parameter): B's fragments come from ldmatrix.trans
 * instead, four registers (two n8 pieces of one step) an instruction: the warp tile's columns are
 * then in order (column g of piece j is column j * 8 + g), the rows a lane names are the k of the
 * slots above, and a k row's chunk c sits at c ^ (its t * 2 + k % 2), so that the eight rows of
 * one 8 x 8 matrix are on distinct banks (rows of B's tile must be 128-byte multiples).
 *
 * A kernel may define, before including this file: KM_HALF (above), KM_GROUP_M / KM_GROUP_N
 * (the work-group's tile row and column; default: dimension 1 and 0, walked in bands of RASTER
 * tile rows when RASTER > 0, so that work-groups running together share their B columns in L2),
 * KM_KTILES (the number of k-tiles; default k / TK) and KM_SPLITS (FP32: 3 or 1).
 *
 * KM_EMULATE (a build option, never a tuned parameter): the warp-wide instructions are
 * emulated with local memory and barriers, so the fragment layouts can be checked on any
 * OpenCL device (`examples/tests/suite.rs`).
 */
#ifndef KM_HALF
#define KM_HALF 0
#endif
#ifndef KM_LDSM
#define KM_LDSM 0
#endif
#if KM_HALF
/* The elements of A, B and the local tiles (half and bfloat16 alike: the bits are moved). */
#define KM_T ushort
#define KM_ESZ 2
#define KM_STEPK 16
#else
#define KM_T float
#define KM_ESZ 4
#define KM_STEPK 8
#endif
/* Elements in a 16-byte chunk, and 32-bit words in a lane's k run. */
#define KM_EPC (16 / KM_ESZ)
#define KM_KW (TK / 4 * KM_ESZ / 4)
#define KM_BM (WGY * TM)
#define KM_BN (WGX * TN)
#define KM_NT (WGX * WGY)
#define KM_WARPS (KM_NT / 32)
#define KM_WN (KM_WARPS / WM)
#define KM_WTM (KM_BM / WM)
#define KM_WTN (KM_BN / KM_WN)
#define KM_MI (KM_WTM / 16)
#define KM_NJ (KM_WTN / 8)
/* The k run of a lane in a k-tile; the row length of k-contiguous tiles (16 bytes of padding
   every 128) and their chunks a row. */
#define KM_KQ (TK / 4)
#define KM_LDK (TK + TK * KM_ESZ / 128 * KM_EPC)
#define KM_CPR (TK / KM_EPC)
#define KM_LDA KM_LDK
#define KM_ASZ (KM_BM * KM_LDA)
#if KM_B_KMAJOR
/* B is n x k (contiguous along k): stored like A, BN rows of TK elements. */
#define KM_LDB KM_LDK
#define KM_BSZ (KM_BN * KM_LDB)
#else
/* B is k x n (contiguous along n): TK rows of BN elements, 16-byte chunks permuted per row.
   The permutation depends on the bytes a lane reads of a row (NJ elements): KM_NJF in floats. */
#define KM_LDB KM_BN
#define KM_BSZ (TK * KM_LDB)
#define KM_NJF (KM_NJ * KM_ESZ / 4)
#if KM_LDSM
#define KM_SWZ(kk) (((((kk) / KM_KQ) & 3) << 1) | ((kk) & 1))
#elif KM_BN * KM_ESZ % 128 != 0
#define KM_SWZ(kk) 0
#elif KM_NJF == 8
#define KM_SWZ(kk) ((((kk) / KM_KQ) & 1) | ((((kk) / KM_KQ) & 2) << 1))
#elif KM_NJF >= 16
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

#if (KM_NT % 32) != 0 || (KM_WARPS % WM) != 0 || (KM_WTM % 16) != 0 || (KM_WTN % 8) != 0 || (TK % (KM_STEPK * FLUSH)) != 0
#error "MMA = 1 needs whole warps, WM dividing them, warp tiles of whole m16n8 pieces and TK % (mma k * FLUSH) == 0"
#endif
#if KM_HALF == 0 && TK != 8 && TK != 16 && TK != 32
#error "MMA = 1 with FP32 needs TK = 8, 16 or 32"
#endif
#if KM_HALF != 0 && TK != 16 && TK != 32 && TK != 64
#error "MMA = 1 with 16-bit operands needs TK = 16, 32 or 64"
#endif
#if KM_HALF != 0 && KM_HALF != 1 && KM_HALF != 2
#error "KM_HALF must be 0 (FP32), 1 (half) or 2 (bfloat16)"
#endif
#if KM_HALF == 0 && KM_SPLITS != 3 && KM_SPLITS != 1
#error "KM_SPLITS must be 3 (FP32 accuracy) or 1 (TF32)"
#endif
#if KM_LDSM && (!KM_HALF || KM_B_KMAJOR || KM_BN * KM_ESZ % 128 != 0)
#error "KM_LDSM = 1 needs 16-bit operands, B stored k x n and rows of B's tile in 128-byte multiples"
#endif
#if !KM_B_KMAJOR && !(KM_NJ == 1 || KM_NJ == 2 || (KM_HALF && KM_NJ == 4) || KM_NJ * KM_ESZ % 16 == 0)
#error "B stored k x n needs NJ (a warp tile's n8 pieces) of 1, 2 or 16-byte multiples (16-bit: also 4)"
#endif

#ifdef KM_EMULATE
/* cp.async as a plain 16-byte copy; the barrier after each wait makes it visible. */
#define KM_CP16(dst, src) vstore4(vload4(0, (const __global uint*)(src)), 0, (__local uint*)(dst))
#define KM_COMMIT()
#define KM_WAIT_PIPE()
#if KM_HALF
#include <kfoundry/mma16_emulated.cl>
#else
#include <kfoundry/mma_emulated.cl>
#endif
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
#if KM_HALF
#include <kfoundry/mma16_ptx.cl>
#else
#include <kfoundry/mma_ptx.cl>
#endif
#endif

#if KM_HALF == 0
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
#endif

/* A lane's k run of one row (KW words, 8- or 16-byte aligned) into the uint array `dst`. */
#if KM_KW == 2
#define KM_LOAD_RUN(dst, p)                                      \
    {                                                            \
        const uint2 v_ = *(const __local uint2*)(p);             \
        (dst)[0] = v_.x;                                         \
        (dst)[1] = v_.y;                                         \
    }
#else
#define KM_LOAD_RUN(dst, p)                                      \
    for (int q_ = 0; q_ < KM_KW; q_ += 4) {                      \
        const uint4 v_ = *((const __local uint4*)(p) + q_ / 4);  \
        (dst)[q_] = v_.x;                                        \
        (dst)[q_ + 1] = v_.y;                                    \
        (dst)[q_ + 2] = v_.z;                                    \
        (dst)[q_ + 3] = v_.w;                                    \
    }
#endif
/* B k x n: chunk c of a lane's NJ columns of one k row into dst[EPC c ...] (elements). */
#if KM_NJ * KM_ESZ >= 16 && KM_HALF
#define KM_LOAD_COLS(dst, c, p)                                  \
    {                                                            \
        const uint4 v_ = *(const __local uint4*)(p);             \
        const uint w_[4] = {v_.x, v_.y, v_.z, v_.w};             \
        for (int e_ = 0; e_ < 8; ++e_)                           \
            (dst)[8 * (c) + e_] = (ushort)(w_[e_ / 2] >> (16 * (e_ & 1))); \
    }
#elif KM_NJ * KM_ESZ >= 16
#define KM_LOAD_COLS(dst, c, p)                                  \
    {                                                            \
        const float4 v_ = *(const __local float4*)(p);           \
        (dst)[4 * (c)] = v_.x;                                   \
        (dst)[4 * (c) + 1] = v_.y;                               \
        (dst)[4 * (c) + 2] = v_.z;                               \
        (dst)[4 * (c) + 3] = v_.w;                               \
    }
#elif KM_NJ * KM_ESZ == 8 && KM_HALF
#define KM_LOAD_COLS(dst, c, p)                                  \
    {                                                            \
        const uint2 v_ = *(const __local uint2*)(p);             \
        (dst)[0] = (ushort)v_.x;                                 \
        (dst)[1] = (ushort)(v_.x >> 16);                         \
        (dst)[2] = (ushort)v_.y;                                 \
        (dst)[3] = (ushort)(v_.y >> 16);                         \
    }
#elif KM_NJ * KM_ESZ == 8
#define KM_LOAD_COLS(dst, c, p)                                  \
    {                                                            \
        const float2 v_ = *(const __local float2*)(p);           \
        (dst)[0] = v_.x;                                         \
        (dst)[1] = v_.y;                                         \
    }
#elif KM_NJ * KM_ESZ == 4 && KM_HALF
#define KM_LOAD_COLS(dst, c, p)                                  \
    {                                                            \
        const uint v_ = *(const __local uint*)(p);               \
        (dst)[0] = (ushort)v_;                                   \
        (dst)[1] = (ushort)(v_ >> 16);                           \
    }
#else
#define KM_LOAD_COLS(dst, c, p) (dst)[0] = *(p)
#endif

/* The output of accumulator acc[i][j][r]. */
#define KM_ROW(i, r) (bm0 + wm0 + (i) * 16 + g + 8 * ((r) >> 1))
#if KM_B_KMAJOR || KM_LDSM
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
#define KM_CHUNKS_A (KM_BM * KM_CPR)
#define KM_QA ((KM_CHUNKS_A + KM_NT - 1) / KM_NT)
#if KM_B_KMAJOR
#define KM_CB KM_CPR /* chunks in a row of B's tile */
#define KM_CHUNKS_B (KM_BN * KM_CPR)
#else
#define KM_CB (KM_BN / KM_EPC)
#define KM_CHUNKS_B (TK * KM_CB)
#endif
#define KM_QB ((KM_CHUNKS_B + KM_NT - 1) / KM_NT)
#define KM_LOAD_SETUP                                                                            \
    const __global KM_T* km_a = (const __global KM_T*)(KM_A) + (size_t)(bm0 + tid / KM_CPR) * (size_t)k + (tid % KM_CPR) * KM_EPC; \
    const int km_a_at = (tid / KM_CPR) * KM_LDA + (tid % KM_CPR) * KM_EPC;                       \
    KM_LOAD_SETUP_B
#if KM_B_KMAJOR
#define KM_LOAD_SETUP_B                                                                          \
    const __global KM_T* km_b = (const __global KM_T*)(KM_B) + (size_t)(bn0 + tid / KM_CPR) * (size_t)k + (tid % KM_CPR) * KM_EPC; \
    const int km_b_at = (tid / KM_CPR) * KM_LDB + (tid % KM_CPR) * KM_EPC;
#elif KM_NT % KM_CB == 0
/* Every chunk of an item is in its column of chunks c = tid % CB, rows tid / CB + q * NT / CB. */
#define KM_LOAD_SETUP_B                                                                          \
    const __global KM_T* km_b = (const __global KM_T*)(KM_B) + (size_t)(tid / KM_CB) * (size_t)n + bn0 + KM_EPC * (tid % KM_CB); \
    int km_b_at[KM_QB];                                                                          \
    for (int q = 0; q < KM_QB; ++q) {                                                            \
        const int r_ = tid / KM_CB + q * (KM_NT / KM_CB);                                        \
        km_b_at[q] = r_ * KM_LDB + ((tid % KM_CB) ^ KM_SWZ(r_)) * KM_EPC;                        \
    }
#else
#define KM_LOAD_SETUP_B
#endif

#define KM_LOAD_TILE(st, kt)                                                                     \
    {                                                                                            \
        __local KM_T* As_ = As + (st) * KM_ASZ + km_a_at;                                        \
        const __global KM_T* a_ = km_a + (kt) * TK;                                              \
        for (int q = 0; q < KM_QA; ++q)                                                          \
            if (KM_CHUNKS_A % KM_NT == 0 || tid + q * KM_NT < KM_CHUNKS_A)                       \
                KM_CP16(As_ + q * (KM_NT / KM_CPR) * KM_LDA, a_ + (size_t)(q * (KM_NT / KM_CPR)) * (size_t)k); \
        KM_LOAD_B((st) * KM_BSZ, kt);                                                            \
    }
#if KM_B_KMAJOR
#define KM_LOAD_B(at, kt)                                                                        \
    {                                                                                            \
        __local KM_T* Bs_ = Bs + (at) + km_b_at;                                                 \
        const __global KM_T* b_ = km_b + (kt) * TK;                                              \
        for (int q = 0; q < KM_QB; ++q)                                                          \
            if (KM_CHUNKS_B % KM_NT == 0 || tid + q * KM_NT < KM_CHUNKS_B)                       \
                KM_CP16(Bs_ + q * (KM_NT / KM_CPR) * KM_LDB, b_ + (size_t)(q * (KM_NT / KM_CPR)) * (size_t)k); \
    }
#elif KM_NT % KM_CB == 0
#define KM_LOAD_B(at, kt)                                                                        \
    {                                                                                            \
        const __global KM_T* b_ = km_b + (size_t)((kt) * TK) * (size_t)n;                        \
        for (int q = 0; q < KM_QB; ++q)                                                          \
            if (KM_CHUNKS_B % KM_NT == 0 || tid + q * KM_NT < KM_CHUNKS_B)                       \
                KM_CP16(Bs + (at) + km_b_at[q], b_ + (size_t)(q * (KM_NT / KM_CB)) * (size_t)n); \
    }
#else
/* Fewer items than chunks in a row: each chunk's place worked out as it is copied. */
#define KM_LOAD_B(at, kt)                                                                        \
    for (int e = tid; e < KM_CHUNKS_B; e += KM_NT) {                                             \
        const int r = e / KM_CB, c = e % KM_CB;                                                  \
        KM_CP16(Bs + (at) + r * KM_LDB + (c ^ KM_SWZ(r)) * KM_EPC,                              \
                (const __global KM_T*)(KM_B) + (size_t)((kt) * TK + r) * (size_t)n + bn0 + KM_EPC * c); \
    }
#endif
