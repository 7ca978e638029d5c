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
inline uint km_tf32(const float x)
{
    uint r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
#define KM_TF32(x) km_tf32(x)
#include <kfoundry/mma_ptx.cl>
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
