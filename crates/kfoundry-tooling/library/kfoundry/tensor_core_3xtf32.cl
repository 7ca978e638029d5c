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
 * PRESPLIT (tuned, default 0): 0: each warp splits the fragments it loads (scalar loads from the
 * raw tiles; an element of A is split once per warp along n, of B once per warp along m);
 * 1: each element is split once, when its k-tile has landed: the work-group's items replace
 * the raw tile by its big parts in place and write the small parts to a second tile, then the
 * warps load fragments with `ldmatrix` (A, and B when it is n x k: an 8 x 8 b16 matrix is
 * 8 rows of 4 TF32 values, lane 4g + t receiving row g, word t: exactly the m16n8k8 TF32
 * fragment), or scalar loads at fixed offsets (B when it is k x n). One more tile's worth of
 * local memory (the small parts), one more barrier a k-tile; the split and the address
 * arithmetic leave the loop. Needs an even number of n8 pieces a warp.
 *
 * KM_EMULATE (a build option, never a tuned parameter): the warp-wide instructions are
 * emulated with local memory and barriers, so the fragment layouts can be checked on any
 * OpenCL device (`examples/tests/mma_emulation.rs`).
 */
#ifndef PRESPLIT
#define PRESPLIT 0
#endif
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
#if PRESPLIT && (KM_NJ % 2) != 0
#error "PRESPLIT = 1 loads the B fragments of two n8 pieces at once: a warp tile of an even number of them"
#endif

#ifdef KM_EMULATE
/* cp.async as a plain 16-byte copy; the barrier after each wait makes it visible. */
#define KM_CP16(dst, src) vstore4(vload4(0, (src)), 0, (dst))
#define KM_COMMIT()
#define KM_WAIT_PIPE()
/* cvt.rna.tf32.f32: round to nearest, ties away, keeping 10 mantissa bits. */
#define KM_TF32(x) ((as_uint(x) + 0x1000u) & 0xffffe000u)
#include <kfoundry/mma_emulated.cl>
/* ldmatrix.m8n8.x4.b16 through local memory: lane 8q + r names row r of matrix q (its offset
   from base, in words); lane 4g + t receives word t of row g of each matrix q in r[q]. */
#define KM_LDSM4(R, base, off) km_ldsm4_emulated((R), (base), (off), scratch + (tid / 32) * 32 * 6, tid % 32)
inline void km_ldsm4_emulated(uint* r, const __local float* base, const int off, __local uint* s, const int lane)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    s[lane] = (uint)off;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int q = 0; q < 4; ++q)
        r[q] = as_uint(base[s[8 * q + (lane >> 2)] + (lane & 3)]);
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
#include <kfoundry/mma_ptx.cl>
/* Volatile: never moved across the barrier that makes the tile it reads complete. */
#define KM_LDSM4(R, base, off)                                                                      \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"                   \
                 : "=r"((R)[0]), "=r"((R)[1]), "=r"((R)[2]), "=r"((R)[3])                          \
                 : "r"((uint)(size_t)((base) + (off))))
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

/* PRESPLIT = 1: the k-tile of stage `st` split in place (big parts) and into As_lo, Bs_lo. */
#define KM_SPLIT_ROWS(S, L, rows, ld, cols)                                                       \
    for (int e = tid; e < (rows) * (cols) / 4; e += KM_NT) {                                     \
        const int at_ = (e / ((cols) / 4)) * (ld) + (e % ((cols) / 4)) * 4;                        \
        const float4 v_ = vload4(0, (S) + at_);                                                  \
        uint4 big_, small_;                                                                      \
        KM_SPLIT(v_.x, big_.x, small_.x)                                                         \
        KM_SPLIT(v_.y, big_.y, small_.y)                                                         \
        KM_SPLIT(v_.z, big_.z, small_.z)                                                         \
        KM_SPLIT(v_.w, big_.w, small_.w)                                                         \
        vstore4(as_float4(big_), 0, (S) + at_);                                                  \
        vstore4(as_float4(small_), 0, (L) + at_);                                                \
    }
#if KM_B_KMAJOR
#define KM_SPLIT_B(Bs_) KM_SPLIT_ROWS(Bs_, Bs_lo, KM_BN, KM_LDB, TK)
#else
#define KM_SPLIT_B(Bs_) KM_SPLIT_ROWS(Bs_, Bs_lo, TK, KM_LDB, KM_BN)
#endif
#define KM_SPLIT_TILE(st)                                                                        \
    {                                                                                            \
        KM_SPLIT_ROWS(As + (st) * KM_ASZ, As_lo, KM_BM, KM_LDA, TK)                              \
        KM_SPLIT_B(Bs + (st) * KM_BSZ)                                                           \
    }
