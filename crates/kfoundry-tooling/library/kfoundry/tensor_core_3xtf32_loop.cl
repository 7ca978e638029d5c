
    float acc[KM_MI][KM_NJ][4], part[KM_MI][KM_NJ][4];
#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                acc[i][j][r] = 0.0f;

#if PRESPLIT
    /* ldmatrix: lane 8q + r names row r of matrix q. A's matrices: rows 0-7 and 8-15 of a
       16-row piece, words 0-3 then 4-7 of its k8 step (a0..a3); B's (n x k): words 0-3 and
       4-7 of n8 piece j (b0, b1), then of piece j + 1. */
    const int km_a_lane = (wm0 + (lane & 7) + 8 * ((lane >> 3) & 1)) * KM_LDA + 4 * (lane >> 4);
#if KM_B_KMAJOR
    const int km_b_lane = (wn0 + (lane & 7) + 8 * (lane >> 4)) * KM_LDB + 4 * ((lane >> 3) & 1);
#endif
#endif
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
#if PRESPLIT
        /* As_lo and Bs_lo were last read in iteration kt - 1, which every item has left. */
        KM_SPLIT_TILE(kt % STAGES)
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
#pragma unroll
        for (int kk = 0; kk < TK; kk += 8) {
            uint ab[KM_MI][4], asm_[KM_MI][4], bb[KM_NJ][2], bsm[KM_NJ][2];
#if PRESPLIT
#pragma unroll
            for (int i = 0; i < KM_MI; ++i) {
                KM_LDSM4(ab[i], Ac, km_a_lane + i * 16 * KM_LDA + kk);
                KM_LDSM4(asm_[i], As_lo, km_a_lane + i * 16 * KM_LDA + kk);
            }
#if KM_B_KMAJOR
#pragma unroll
            for (int j = 0; j < KM_NJ; j += 2) {
                uint q_[4];
                KM_LDSM4(q_, Bc, km_b_lane + j * 8 * KM_LDB + kk);
                bb[j][0] = q_[0], bb[j][1] = q_[1], bb[j + 1][0] = q_[2], bb[j + 1][1] = q_[3];
                KM_LDSM4(q_, Bs_lo, km_b_lane + j * 8 * KM_LDB + kk);
                bsm[j][0] = q_[0], bsm[j][1] = q_[1], bsm[j + 1][0] = q_[2], bsm[j + 1][1] = q_[3];
            }
#else
#pragma unroll
            for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    bb[j][r] = as_uint(KM_BAT(Bc, kk + t + 4 * r, wn0 + j * 8 + g));
                    bsm[j][r] = as_uint(KM_BAT(Bs_lo, kk + t + 4 * r, wn0 + j * 8 + g));
                }
#endif
#else
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
#endif
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

