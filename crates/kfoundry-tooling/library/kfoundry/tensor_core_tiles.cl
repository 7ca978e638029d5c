    __local KM_T As[STAGES * KM_ASZ] __attribute__((aligned(16)));
    __local KM_T Bs[STAGES * KM_BSZ] __attribute__((aligned(16)));
#ifdef KM_EMULATE
    __local uint scratch[KM_WARPS * 32 * 6];
#endif
    const int tid = (int)(get_local_id(1) * WGX + get_local_id(0));
    const int warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
    const int wm0 = (warp % WM) * KM_WTM, wn0 = (warp / WM) * KM_WTN;
#if defined(KM_GROUP_M) && defined(KM_GROUP_N)
    const int bn0 = (int)(KM_GROUP_N) * KM_BN, bm0 = (int)(KM_GROUP_M) * KM_BM;
#elif RASTER > 0
    /* Bands of RASTER tile rows, walked down their columns: work-group L of the launch order. */
    const int gx_ = (int)get_num_groups(0), gy_ = (int)get_num_groups(1);
    const int l_ = (int)get_group_id(1) * gx_ + (int)get_group_id(0);
    const int band_ = l_ / (RASTER * gx_), rows_ = min(RASTER, gy_ - band_ * RASTER);
    const int in_ = l_ - band_ * RASTER * gx_;
    const int bn0 = (in_ / rows_) * KM_BN, bm0 = (band_ * RASTER + in_ % rows_) * KM_BM;
#else
    const int bn0 = (int)get_group_id(0) * KM_BN, bm0 = (int)get_group_id(1) * KM_BM;
#endif
