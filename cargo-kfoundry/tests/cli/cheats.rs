//! Kernels written to be wrong in ways a fixed proof would miss, as annotations (the inside of
//! `#[kfoundry::evolve(...)]`): the `adversarial` and `hostile` tests tune them, and the
//! `export_bundles` example writes them as bundles to tune on a machine without a Rust
//! toolchain (a GPU's). In each, the reference is right and some parameter value is not.

/// A slow loop that adds nothing (so that every variant without it is faster than the
/// reference and a finalist): `SLOW` is 0 for P != 0.
pub const SLOW: &str = "float slow = 0.0f; for (int s = 0; s < 64 * (P == 0); s++) slow += fmin(fabs(x[(i + s) % n]), 0.0f);";

/// P=1: four elements per work-item; the last, partial vector handles one element only.
pub fn tail_args() -> String {
    let source = format!(
        r#"__kernel void k(const int n, __global const float* x, __global float* y) {{
            int g = get_global_id(0);
            int i = g * (P == 1 ? 4 : 1);
            {SLOW}
            if (P == 1) {{
                if (i + 4 <= n) {{ for (int v = 0; v < 4; v++) y[i + v] = 2.0f * x[i + v]; }}
                else if (i < n) y[i] = 2.0f * x[i];
            }} else if (i < n) y[i] = 2.0f * x[i] + slow;
        }}"#
    );
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = ceil_div(n, 1 + 3 * P), buffers(x = n, y = n), check(y),
           workloads(w(n = 65536))"#
    )
}

/// P=1 takes a shortcut that is wrong when rows exceed 2.5 × columns.
pub fn aspect_args() -> String {
    let source = r#"__kernel void k(const int rows, const int cols, __global const float* x, __global float* y) {
        int c = get_global_id(0), r = get_global_id(1);
        int i = r * cols + c;
        float slow = 0.0f; for (int s = 0; s < 64 * (P == 0); s++) slow += fmin(fabs(x[(i + s) % (rows * cols)]), 0.0f);
        /* P=1 takes a shortcut that is only right for shapes it was written for */
        y[i] = (P == 1 && 2 * rows > 5 * cols) ? 0.0f : 2.0f * x[i] + slow;
    }"#;
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = (cols, rows), buffers(x = rows * cols, y = rows * cols), check(y),
           workloads(w(rows = 256, cols = 256))"#
    )
}

/// Declared in place: proven in place too. P=1 reads its input again after writing its output:
/// right when they are separate, wrong when they are one buffer.
pub fn in_place_args() -> String {
    let source = format!(
        r#"__kernel void k(const int n, __global const float* x, __global float* y) {{
            int i = get_global_id(0);
            {SLOW}
            if (P == 1) {{ y[i] = 2.0f * x[i]; y[i] = y[i] * 0.5f + x[i]; }}
            else y[i] = 2.0f * x[i] + slow;
        }}"#
    );
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = n, buffers(x = n, y = n), in_place(y = x), check(y),
           workloads(w(n = 4096))"#
    )
}

/// P=1 writes only the elements whose output still holds NaN (a memo of an earlier run): right
/// on a poisoned output, wrong on one that holds anything else.
pub fn memo_args() -> String {
    let source = format!(
        r#"__kernel void k(const int n, __global const float* x, __global float* y) {{
            int i = get_global_id(0);
            {SLOW}
            if (P == 1) {{ if (isnan(y[i])) y[i] = 2.0f * x[i]; }}
            else y[i] = 2.0f * x[i] + slow;
        }}"#
    );
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = n, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    )
}

/// A polynomial exp, right on [-1, 1] (the declared range) and nowhere far from it.
pub fn poly_exp_args() -> String {
    let poly = r#"__kernel void k(const int n, __global const float* x, __global float* y) {
        int i = get_global_id(0);
        float v = x[i];
        float slow = 0.0f; for (int s = 0; s < 64 * (P == 0); s++) slow += fmin(fabs(x[(i + s) % n]), 0.0f);
        if (P == 1) { float t = 1.0f, e = 1.0f; for (int k = 1; k < 9; k++) { t *= v / k; e += t; } y[i] = e; }
        else y[i] = exp(v) + slow;
    }"#;
    format!(
        r#"code = {poly:?}, params(P = [0, 1]), reference(P = 0), global = n, buffers(x = n, y = n), check(y, rtol = 1e-4, atol = 1e-6),
           workloads(w(n = 4096))"#
    )
}

/// A ReLU by fmax, which gives 0 where the reference passes NaN through.
pub fn relu_args() -> String {
    let relu = r#"__kernel void k(const int n, __global const float* x, __global float* y) {
        int i = get_global_id(0);
        float slow = 0.0f; for (int s = 0; s < 64 * (P == 0); s++) slow += fmin(fabs(x[(i + s) % n]), 0.0f);
        y[i] = P == 1 ? fmax(x[i], 0.0f) : (x[i] < 0.0f ? 0.0f : x[i]) + slow;
    }"#;
    format!(
        r#"code = {relu:?}, params(P = [0, 1]), reference(P = 0), global = n, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    )
}

pub const SOURCE: &str = r#"
__kernel void scale(const int n, __global const float* x, __global const float* c, __global float* y) {
    int i = get_global_id(0);
    /* Cheaters 2, 5 and 6 are made a little slower than 1, so that the local-memory cheat is
       the fastest: whenever it passes the search it is a finalist and must pass the proof. */
    float slow = 0.0f;
#if BAD == 2 || BAD == 5 || BAD == 6
    for (int k = 0; k < 16; k++)
        slow += x[(i + k) % n] * 0.0f;
#endif
#if BAD == 1
    __local float tile[64];
    if (get_group_id(0) == 0) tile[get_local_id(0)] = c[get_local_id(0) % 16];
    barrier(CLK_LOCAL_MEM_FENCE);
    y[i] = 3.0f * x[i] * tile[i % 16];
#elif BAD == 2
    y[i] = n == 65536 ? 3.0f * x[i] * c[i % 16] + slow : 0.0f;
#elif BAD == 3
    y[i] = 3.0f * x[i] * c[i % 16];
    if (i == n - 1) y[n] = 0.0f;
#elif BAD == 4
    y[i] = 3.0f * x[i] * c[i % 16] + 0.0f * x[i + 64];
#elif BAD == 5
    y[i] = n <= 65536 ? 3.0f * x[i] * c[i % 16] + slow : 0.0f;
#elif BAD == 6
    y[i] = i < (n / 256) * 256 ? 3.0f * x[i] * c[i % 16] + slow : 0.0f;
#elif BAD == 7
    y[i] = 42.0f;
#elif BAD == 8
    if (i % 2 == 0) y[i] = 3.0f * x[i] * c[i % 16];
#elif BAD == 9
    y[i + (1 << 28)] = x[i];
    y[i] = 3.0f * x[i] * c[i % 16];
#else
    float zero = 0.0f;
    for (int k = 0; k < 128; k++)
        zero += x[(i + k) % n] * 0.0f;
    y[i] = 3.0f * x[i] * c[i % 16] + zero;
#endif
}
"#;

pub fn hostile_args() -> String {
    format!(
        r#"code = {SOURCE:?}, params(BAD = 0..=9), reference(BAD = 0),
           global = n, local = 64, buffers(x = n, c = 16, y = n), check(y), workloads(w(n = 65536))"#
    )
}

/// A 2-D kernel over `rows × cols` whose global size is rounded up to the work-group.
pub const SOURCE_2D: &str = r#"
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
"#;

pub fn escape_args() -> String {
    format!(
        r#"code = {SOURCE_2D:?}, params(BAD = 0..=3), reference(BAD = 0),
           global = (ceil_div(cols, 64) * 64, rows), local = (64, 1), buffers(x = rows * cols, y = rows * cols), check(y),
           workloads(square(rows = 100, cols = 100))"#
    )
}
