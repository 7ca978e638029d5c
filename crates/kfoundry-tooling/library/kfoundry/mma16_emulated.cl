/* mma.sync.m16n8k16 with 16-bit operands through local memory, as mma_emulated.cl does
   m16n8k8: each lane publishes its fragments (two elements a register, the lower k in the low
   half), then computes its four accumulators from the others'. Barriers are work-group wide:
   every item calls this the same number of times. */
#define KM_MMA(D, A, B) km_mma16_emulated((D), (A), (B), scratch + (tid / 32) * 32 * 6, tid % 32)
#if KM_HALF == 1
#define KM_ELEM16(s, w, h) vload_half(2 * (w) + (h), (const __local half*)(s))
#else
#define KM_ELEM16(s, w, h) as_float(((s)[w] >> (16 * (h))) << 16)
#endif
inline void km_mma16_emulated(float* d, const uint* a, const uint* b, __local uint* s, const int lane)
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
        for (int kk = 0; kk < 16; ++kk) {
            /* A[row][kk] is half kk % 2 of a[(row >= 8) + 2 * (kk >= 8)] of lane
               (row % 8) * 4 + (kk % 8) / 2; B[kk][col] is half kk % 2 of b[kk >= 8] of lane
               col * 4 + (kk % 8) / 2. */
            const int q = (kk % 8) / 2, h = kk % 2, hi = kk >= 8;
            const float av = KM_ELEM16(s, ((row % 8) * 4 + q) * 6 + (row >= 8) + 2 * hi, h);
            const float bv = KM_ELEM16(s, (col * 4 + q) * 6 + 4 + hi, h);
            acc = fma(av, bv, acc);
        }
        d[r] = acc;
    }
}
#define KM_MMA0(D, A, B)                                                                             \
    do {                                                                                             \
        (D)[0] = (D)[1] = (D)[2] = (D)[3] = 0.0f;                                                    \
        KM_MMA(D, A, B);                                                                             \
    } while (0)
/* ldmatrix.trans (mma16_ptx.cl) through local memory: each lane publishes the row it names
   (an element offset from base), then reads column g of the rows 2t and 2t + 1 of each matrix. */
#define KM_LDSM_X4T(d, base, at) km_ldsm_trans_emulated((d), 4, (base), (at), scratch + (tid / 32) * 32 * 6, tid % 32)
#define KM_LDSM_X2T(d, base, at) km_ldsm_trans_emulated((d), 2, (base), (at), scratch + (tid / 32) * 32 * 6, tid % 32)
inline void km_ldsm_trans_emulated(uint* d, const int count, const __local ushort* base, const int at, __local uint* s, const int lane)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    s[lane] = (uint)at;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int g = lane >> 2, t = lane & 3;
    for (int q = 0; q < count; ++q)
        d[q] = (uint)base[s[8 * q + 2 * t] + g] | ((uint)base[s[8 * q + 2 * t + 1] + g] << 16);
}
