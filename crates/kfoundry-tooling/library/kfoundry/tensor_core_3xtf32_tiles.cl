    __local float As[STAGES * KM_ASZ] __attribute__((aligned(16)));
    __local float Bs[STAGES * KM_BSZ] __attribute__((aligned(16)));
#ifdef KM_EMULATE
    __local uint scratch[KM_WARPS * 32 * 6];
#endif
    const int tid = (int)(get_local_id(1) * WGX + get_local_id(0));
    const int warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
    const int wm0 = (warp % WM) * KM_WTM, wn0 = (warp / WM) * KM_WTN;
    const int bn0 = (int)get_group_id(0) * KM_BN, bm0 = (int)get_group_id(1) * KM_BM;
