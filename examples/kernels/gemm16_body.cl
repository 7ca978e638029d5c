/* The body of hgemm and bgemm (see gemm16.cl): a, b and c are the kernel's buffers. */
#if MMA
#include <kfoundry/tensor_core_tiles.cl>
#define KM_A a
#define KM_B b
#include <kfoundry/tensor_core_loop.cl>
#if KM_LDSM
    /* Outputs r = 2h and 2h + 1 of piece (i, j) are two adjacent columns of row KM_ROW(i, 2h). */
#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                G16_STORE(acc[i][j][r], (size_t)KM_ROW(i, r) * (size_t)n + KM_COL(j, r), c);
#else
    /* Row KM_ROW(i, 2h) of the lane's outputs is one run of 2 * NJ columns from KM_COL(0, 2h). */
#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const size_t out = (size_t)KM_ROW(i, 2 * h) * (size_t)n + KM_COL(0, 2 * h);
#pragma unroll
            for (int x = 0; x < 2 * KM_NJ; ++x)
                G16_STORE(KM_RUN(i, h, x), out + x, c);
        }
#endif
#else /* the portable path */
    const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
    const int bn0 = (int)get_group_id(0) * WGX * TN, bm0 = (int)get_group_id(1) * WGY * TM;
    float acc[TM][TN];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0.0f;
    for (int kk = 0; kk < k; ++kk) {
        float bv[TN];
        for (int j = 0; j < TN; ++j) {
            const int col = bn0 + j * WGX + tx;
            bv[j] = col < n ? G16_LOAD(b, (size_t)kk * (size_t)n + col) : 0.0f;
        }
        for (int i = 0; i < TM; ++i) {
            const int row = bm0 + i * WGY + ty;
            const float av = row < m ? G16_LOAD(a, (size_t)row * (size_t)k + kk) : 0.0f;
            for (int j = 0; j < TN; ++j)
                acc[i][j] = fma(av, bv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) {
            const int row = bm0 + i * WGY + ty, col = bn0 + j * WGX + tx;
            if (row < m && col < n)
                G16_STORE(acc[i][j], (size_t)row * (size_t)n + col, c);
        }
#endif
