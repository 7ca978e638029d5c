/* The 3xTF32 tensor-core GEMM of kfoundry's suite (examples/kernels/gemm.cl, whose text a test
 * keeps equal to this file's two parts), for the importer's matrix products: the machinery
 * (macros and helpers) first, then the main loop, which leaves acc[KM_MI][KM_NJ][4]. */
/* ==== machinery ==== */
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
/* ==== main loop ==== */
    __local float As[STAGES * KM_ASZ] __attribute__((aligned(16)));
    __local float Bs[STAGES * KM_BSZ] __attribute__((aligned(16)));
#ifdef KM_EMULATE
    __local uint scratch[KM_WARPS * 32 * 6];
#endif
    const int tid = (int)(get_local_id(1) * WGX + get_local_id(0));
    const int warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
    const int wm0 = (warp % WM) * KM_WTM, wn0 = (warp / WM) * KM_WTN;
    const int bn0 = (int)get_group_id(0) * KM_BN, bm0 = (int)get_group_id(1) * KM_BM;
#define KM_A a
#define KM_B b

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

