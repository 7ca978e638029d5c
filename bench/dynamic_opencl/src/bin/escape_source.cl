
__kernel void scale2(const int rows, const int cols, __global const float* x, __global float* y) {
    int c = get_global_id(0), r = get_global_id(1);
#if BAD == 1
    /* no bounds check: the last row's extra work-items copy x's guard past the end of y */
    y[r * cols + c] = 3.0f * x[r * cols + c];
#elif BAD == 2
    /* one element before the start */
    if (c < cols) { y[r * cols + c] = 3.0f * x[r * cols + c]; if (r == 0 && c == 0) y[-1] = 1.0f; }
#elif BAD == 3
    /* rows indexed by the row count instead of the column count: right on square shapes only */
    if (c < cols) y[r * rows + c] = 3.0f * x[r * rows + c];
#else
    if (c < cols) {
        float zero = 0.0f;
        for (int k = 0; k < 256; k++) zero += x[(r * cols + c + k) % (rows * cols)] * 0.0f;
        y[r * cols + c] = 3.0f * x[r * cols + c] + zero;
    }
#endif
}
