// RMSNorm of each row, as a language model's decoder layer calls it (decode at one row,
// prefill at thousands): y[r, c] = x[r, c] * w[c] / sqrt(mean(x[r, :]^2) + eps).
//
// One work-group per row. WG work-items each sum the squares of a strided part of the row,
// VEC elements at a time (vloadN; the columns left over past the last whole vector one at a
// time), then a tree in local memory; each writes its part of the output. The reference
// (WG = 1, VEC = 1) is the plain loop over the row.
#ifndef WG
#define WG 1
#endif
#ifndef VEC
#define VEC 1
#endif

#define KF_CAT(a, b) a##b
#define KF_XCAT(a, b) KF_CAT(a, b)
#if VEC == 1
#define KF_VTYPE float
#define KF_LOAD(i, p) ((p)[i])
#define KF_STORE(v, i, p) ((p)[i] = (v))
#define KF_SQ(v) ((v) * (v))
#else
#define KF_VTYPE KF_XCAT(float, VEC)
#define KF_LOAD(i, p) KF_XCAT(vload, VEC)(i, p)
#define KF_STORE(v, i, p) KF_XCAT(vstore, VEC)(v, i, p)
#define KF_SQ(v) dot(v, v)
#endif

__kernel void rmsnorm(const int rows, const int cols, const float eps, __global const float* x, __global const float* w,
                      __global float* y) {
    __local float part[WG];
    const int row = get_group_id(0);
    const int t = get_local_id(0);
    __global const float* xr = x + (long)row * cols;
    __global float* yr = y + (long)row * cols;
    const int whole = cols / VEC;
    float s = 0.0f;
    for (int i = t; i < whole; i += WG) {
        KF_VTYPE v = KF_LOAD(i, xr);
        s += KF_SQ(v);
    }
    for (int c = whole * VEC + t; c < cols; c += WG) s += xr[c] * xr[c];
    part[t] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h >>= 1) {
        if (t < h) part[t] += part[t + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = rsqrt(part[0] / (float)cols + eps);
    for (int i = t; i < whole; i += WG) KF_STORE(KF_LOAD(i, xr) * inv * KF_LOAD(i, w), i, yr);
    for (int c = whole * VEC + t; c < cols; c += WG) yr[c] = xr[c] * inv * w[c];
}
