/*
 * sum_dim1: out[b, 0, j] = sum_{i < rows} x[b, i, j]   (x is batch x rows x cols, row-major;
 * keepdim, so out is batch x 1 x cols). The suite's reduction (KernelBench level 1,
 * 128 x 4096 x 4095).
 *
 * A work-group is TX items along j (each on VEC consecutive columns) times TY items along i.
 * Item (tx, ty) sums rows ty, ty + TY, ... with ITEMS independent accumulators, then the TY
 * partial sums of a column are combined by a tree in local memory. The defaults are the
 * reference: one item per output column, a plain serial loop.
 *
 *   TX     items along the columns           [16, 32, 64, 128, 256]   ref 64
 *   TY     items along the reduced dim (pow2) [1, 2, 4, 8, 16, 32]    ref 1
 *   VEC    columns per item (vloadN)          [1, 2, 4]               ref 1
 *   ITEMS  rows per item per loop step        [1, 2, 4, 8]            ref 1
 *
 * Launch (3-D): global = (ceil_div(cols, TX * VEC) * TX, TY, batch), local = (TX, TY, 1).
 * Correct for every batch, rows, cols >= 1: a vector that would cross the end of a row is
 * read element by element. Summation order depends on TY and ITEMS.
 */

#ifndef TX
#define TX 64
#endif
#ifndef TY
#define TY 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

#if (TY & (TY - 1)) != 0
#error "TY must be a power of two"
#endif

#define KF_CAT_(p, q) p##q
#define KF_CAT(p, q) KF_CAT_(p, q)

#if VEC == 1
#define KF_VTYPE float
#define KF_VLOAD(o, p) ((p)[(o)])
#define KF_VSTORE(v, o, p) ((p)[(o)] = (v))
#else
#define KF_VTYPE KF_CAT(float, VEC)
#define KF_VLOAD(o, p) KF_CAT(vload, VEC)((o), (p))
#define KF_VSTORE(v, o, p) KF_CAT(vstore, VEC)((v), (o), (p))
#endif

__kernel void sum_dim1(const int batch, const int rows, const int cols, __global const float* x, __global float* out)
{
#if TY > 1
    __local KF_VTYPE red[TY * TX];
#endif
    const int tx = (int)get_local_id(0);
    const int ty = (int)get_local_id(1);
    const int b = (int)get_global_id(2);
    const int j = (int)get_global_id(0) * VEC;
    __global const float* p = x + (size_t)b * (size_t)rows * (size_t)cols;

    KF_VTYPE acc[ITEMS];
    for (int it = 0; it < ITEMS; ++it)
        acc[it] = (KF_VTYPE)(0.0f);

    if (j + VEC <= cols) {
        int i = ty;
        for (; i + (ITEMS - 1) * TY < rows; i += ITEMS * TY)
            for (int it = 0; it < ITEMS; ++it)
                acc[it] += KF_VLOAD(0, p + (size_t)(i + it * TY) * (size_t)cols + j);
        for (; i < rows; i += TY)
            acc[0] += KF_VLOAD(0, p + (size_t)i * (size_t)cols + j);
    } else if (j < cols) {
        /* the last, partial vector of a row */
        float t[VEC];
        for (int v = 0; v < VEC; ++v)
            t[v] = 0.0f;
        for (int i = ty; i < rows; i += TY)
            for (int v = 0; j + v < cols; ++v)
                t[v] += p[(size_t)i * (size_t)cols + j + v];
#if VEC == 1
        acc[0] = t[0];
#else
        acc[0] = KF_VLOAD(0, t);
#endif
    }
    for (int it = 1; it < ITEMS; ++it)
        acc[0] += acc[it];

#if TY > 1
    red[ty * TX + tx] = acc[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = TY / 2; h > 0; h >>= 1) {
        if (ty < h)
            red[ty * TX + tx] += red[(ty + h) * TX + tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    acc[0] = red[tx];
#endif

    if (ty == 0) {
        __global float* o = out + (size_t)b * (size_t)cols;
        if (j + VEC <= cols) {
            KF_VSTORE(acc[0], 0, o + j);
        } else if (j < cols) {
            float t[VEC];
#if VEC == 1
            t[0] = acc[0];
#else
            KF_CAT(vstore, VEC)(acc[0], 0, t);
#endif
            for (int v = 0; j + v < cols; ++v)
                o[j + v] = t[v];
        }
    }
}
