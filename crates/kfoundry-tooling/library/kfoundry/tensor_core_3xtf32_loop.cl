
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

