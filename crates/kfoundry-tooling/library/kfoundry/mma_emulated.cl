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
