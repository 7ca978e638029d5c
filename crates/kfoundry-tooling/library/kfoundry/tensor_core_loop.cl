    float acc[KM_MI][KM_NJ][4];
#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                acc[i][j][r] = 0.0f;

    /* Where this lane's fragments start in a stage: A at row wm0 + g, its k run; B at row
       wn0 + g, its k run (n x k), or at its k run's first row, each 16-byte chunk of its NJ
       columns wn0 + g * NJ ... where the permutation put it (k x n). */
    const int a_at = (wm0 + g) * KM_LDA + t * KM_KQ;
#if KM_B_KMAJOR
    const int b_at = (wn0 + g) * KM_LDB + t * KM_KQ;
#elif KM_LDSM
    /* ldmatrix.trans of pieces 2jj and 2jj + 1, step 0: lane 8q + r names k row
       (r / 2) * KQ + 2 * (q % 2) + r % 2 (the k of slot r, or 8 + r for odd q) of piece
       2jj + q / 2's chunk, which that row keeps at chunk ^ r (KM_SWZ). Step s: 4s rows on. */
    int b_at[(KM_NJ + 1) / 2];
#pragma unroll
    for (int jj = 0; jj < (KM_NJ + 1) / 2; ++jj) {
        const int q_ = lane >> 3, r_ = lane & 7;
        b_at[jj] = ((r_ >> 1) * KM_KQ + 2 * (q_ & 1) + (r_ & 1)) * KM_LDB + (((wn0 / 8 + 2 * jj + (q_ >> 1)) ^ r_) * 8);
    }
#else
#define KM_NJC ((KM_NJ + KM_EPC - 1) / KM_EPC)
    int b_at[KM_NJC];
#pragma unroll
    for (int c = 0; c < KM_NJC; ++c)
        b_at[c] = t * KM_KQ * KM_LDB + (((wn0 + g * KM_NJ) / KM_EPC + c) ^ KM_SWZ(t * KM_KQ)) * KM_EPC + (g * KM_NJ % KM_EPC);
#endif
    const int KT = KM_KTILES;
#ifdef KM_LOAD_SETUP
    KM_LOAD_SETUP
#endif
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT)
            KM_LOAD_TILE(s, s);
        KM_COMMIT();
    }
    int stage = 0;
    for (int kt = 0; kt < KT; ++kt) {
        KM_WAIT_PIPE();
        barrier(CLK_LOCAL_MEM_FENCE);
        /* The stage written now was last read in iteration kt - 1, which every item has left. */
        if (kt + STAGES - 1 < KT)
            KM_LOAD_TILE(stage == 0 ? STAGES - 1 : stage - 1, kt + STAGES - 1);
        KM_COMMIT();
        const __local KM_T* Ac = As + stage * KM_ASZ + a_at;
        const __local KM_T* Bc = Bs + stage * KM_BSZ;
        stage = stage == STAGES - 1 ? 0 : stage + 1;

        /* The lane's whole k-tile: its k run of rows g and g + 8 of each m16 piece of A, and of
           B its k run of each n8 piece's column g (n x k), as 32-bit words, or its NJ columns of
           each k (k x n), as elements. */
        uint ra[KM_MI][2][KM_KW];
#pragma unroll
        for (int i = 0; i < KM_MI; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                KM_LOAD_RUN(ra[i][h], Ac + (i * 16 + h * 8) * KM_LDA);
#if KM_B_KMAJOR
        uint rb[KM_NJ][KM_KW];
#pragma unroll
        for (int j = 0; j < KM_NJ; ++j)
            KM_LOAD_RUN(rb[j], Bc + b_at + j * 8 * KM_LDB);
#define KM_BWORD(j, w) rb[j][w]
#elif KM_LDSM
        /* Register r of piece j's fragment of step s: bf[s][j][r]. */
        uint bf[TK / 16][KM_NJ][2];
#pragma unroll
        for (int s = 0; s < TK / 16; ++s) {
#pragma unroll
            for (int jj = 0; jj < KM_NJ / 2; ++jj) {
                uint d_[4];
                KM_LDSM_X4T(d_, Bc, b_at[jj] + 4 * s * KM_LDB);
                bf[s][2 * jj][0] = d_[0];
                bf[s][2 * jj][1] = d_[1];
                bf[s][2 * jj + 1][0] = d_[2];
                bf[s][2 * jj + 1][1] = d_[3];
            }
#if KM_NJ % 2
            KM_LDSM_X2T(bf[s][KM_NJ - 1], Bc, b_at[KM_NJ / 2] + 4 * s * KM_LDB);
#endif
        }
#define KM_BWORD(j, w) bf[(w) / 2][j][(w) % 2]
#else
        KM_T rb[KM_KQ][KM_NJ];
#pragma unroll
        for (int q = 0; q < KM_KQ; ++q)
#pragma unroll
            for (int c = 0; c < KM_NJC; ++c)
                KM_LOAD_COLS(rb[q], c, Bc + b_at[c] + q * KM_LDB);
#if KM_HALF
/* Word w of column j's run: k rows 2w (low half) and 2w + 1. */
#define KM_BWORD(j, w) ((uint)rb[2 * (w)][j] | ((uint)rb[2 * (w) + 1][j] << 16))
#else
#define KM_BWORD(j, w) as_uint(rb[w][j])
#endif
#endif

#if KM_HALF
        /* Step s: words 2s and 2s + 1 of each run (above). Each accumulator's FLUSH steps in a
           row, summed in the tensor cores from zero, then added to acc here (why: the FP32
           path's comment below). */
#pragma unroll
        for (int f = 0; f < TK / 16; f += FLUSH)
#pragma unroll
            for (int i = 0; i < KM_MI; ++i)
#pragma unroll
                for (int j = 0; j < KM_NJ; ++j) {
                    float part[4];
#pragma unroll
                    for (int s = f; s < f + FLUSH; ++s) {
                        const uint ab[4] = {ra[i][0][2 * s], ra[i][1][2 * s], ra[i][0][2 * s + 1], ra[i][1][2 * s + 1]};
                        const uint bb[2] = {KM_BWORD(j, 2 * s), KM_BWORD(j, 2 * s + 1)};
                        if (s == f)
                            KM_MMA0(part, ab, bb);
                        else
                            KM_MMA(part, ab, bb);
                    }
#pragma unroll
                    for (int r = 0; r < 4; ++r)
                        acc[i][j][r] += part[r];
                }
#else
        float part[KM_MI][KM_NJ][4];
#pragma unroll
        for (int s = 0; s < TK / KM_STEPK; ++s) {
            /* Step s: words 2s and 2s + 1 of each run (above). */
            uint ab[KM_MI][4], as_[KM_MI][4], bb[KM_NJ][2], bs_[KM_NJ][2];
#pragma unroll
            for (int i = 0; i < KM_MI; ++i)
#pragma unroll
                for (int r = 0; r < 4; ++r)
                    KM_SPLIT(as_float(ra[i][r & 1][2 * s + (r >> 1)]), ab[i][r], as_[i][r]);
#pragma unroll
            for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
                for (int r = 0; r < 2; ++r)
                    KM_SPLIT(as_float(KM_BWORD(j, 2 * s + r)), bb[j][r], bs_[j][r]);
#pragma unroll
            for (int i = 0; i < KM_MI; ++i)
#pragma unroll
                for (int j = 0; j < KM_NJ; ++j) {
                    /* The tensor cores round their sums toward zero: a running sum kept there
                       drifts (a relative error of 3e-5 at k = 4096, 25 times FP32's). FLUSH
                       steps are summed there from zero, then added to acc here, rounded to
                       nearest (Ootomo and Yokota, 2022). */
                    if (s % FLUSH == 0) {
#pragma unroll
                        for (int r = 0; r < 4; ++r)
                            part[i][j][r] = 0.0f;
                    }
#if KM_SPLITS == 3
                    KM_MMA(part[i][j], as_[i], bb[j]);
                    KM_MMA(part[i][j], ab[i], bs_[j]);
#endif
                    KM_MMA(part[i][j], ab[i], bb[j]);
                    if (s % FLUSH == FLUSH - 1) {
#pragma unroll
                        for (int r = 0; r < 4; ++r)
                            acc[i][j][r] += part[i][j][r];
                    }
                }
        }
#endif
#undef KM_BWORD
    }
