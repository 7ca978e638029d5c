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

/// Honest numerical slips (issue 54): each faster variant is what a careless optimizer (or a
/// language model) writes, right on the declared inputs and wrong on values a real call can
/// hold. `SLOW_ROW` makes the reference (P = 0) slower, so that each slip is a finalist.
const SLOW_ROW: &str = "float slow = 0.0f; for (int s = 0; s < 2048 * (P == 0); s++) slow += fmin(fabs(x[(r * cols + s) % (rows * cols)]), 0.0f);";

/// A row softmax whose running maximum starts at 0 (P = 1): on rows of values far below zero
/// (log-probabilities near -200, say) every exponential underflows and the row is 0 / 0.
pub fn softmax_max_from_zero_args() -> String {
    let source = format!(
        r#"__kernel void k(const int rows, const int cols, __global const float* x, __global float* y) {{
            int r = get_global_id(0);
            if (r >= rows) return;
            {SLOW_ROW}
            float m = P == 1 ? 0.0f : -INFINITY;
            for (int j = 0; j < cols; j++) m = fmax(m, x[r * cols + j]);
            float sum = 0.0f;
            for (int j = 0; j < cols; j++) sum += exp(x[r * cols + j] - m);
            for (int j = 0; j < cols; j++) y[r * cols + j] = exp(x[r * cols + j] - m) / sum + slow;
        }}"#
    );
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = rows, buffers(x = rows * cols, y = rows * cols),
           inputs(x = uniform(-4.0, 4.0)), check(y, rtol = 1e-4, atol = 1e-6), workloads(w(rows = 64, cols = 128))"#
    )
}

/// A row normalization whose variance is E[x²] − E[x]² in one pass (P = 1): right for values
/// near zero, off by far more than its tolerance at 1000 ± 1.
pub fn one_pass_variance_args() -> String {
    let source = format!(
        r#"__kernel void k(const int rows, const int cols, __global const float* x, __global float* y) {{
            int r = get_global_id(0);
            if (r >= rows) return;
            {SLOW_ROW}
            float s = 0.0f, s2 = 0.0f;
            for (int j = 0; j < cols; j++) {{ float v = x[r * cols + j]; s += v; s2 += v * v; }}
            float mean = s / cols, var;
            if (P == 1) var = s2 / cols - mean * mean;
            else {{ var = 0.0f; for (int j = 0; j < cols; j++) {{ float d = x[r * cols + j] - mean; var += d * d; }} var /= cols; }}
            float inv = rsqrt(var + 1e-5f);
            for (int j = 0; j < cols; j++) y[r * cols + j] = (x[r * cols + j] - mean) * inv + slow;
        }}"#
    );
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = rows, buffers(x = rows * cols, y = rows * cols),
           check(y, rtol = 1e-3, atol = 1e-4), workloads(w(rows = 64, cols = 256))"#
    )
}

/// An L2 normalization of rows by the square root of a plain sum of squares (P = 1): the
/// squares overflow to infinity near 1e20 and underflow to zero near 1e-25, where the
/// reference, which scales by the row's largest magnitude first, is exact. (`edges = finite`:
/// an infinite input would make both NaN and differ elsewhere first.)
pub fn sum_of_squares_norm_args() -> String {
    let source = format!(
        r#"__kernel void k(const int rows, const int cols, __global const float* x, __global float* y) {{
            int r = get_global_id(0);
            if (r >= rows) return;
            {SLOW_ROW}
            float scale = 1.0f;
            if (P == 0) {{ scale = 0.0f; for (int j = 0; j < cols; j++) scale = fmax(scale, fabs(x[r * cols + j])); if (scale == 0.0f) scale = 1.0f; }}
            float ss = 0.0f;
            for (int j = 0; j < cols; j++) {{ float v = x[r * cols + j] / scale; ss += v * v; }}
            float inv = 1.0f / (sqrt(ss) * scale);
            for (int j = 0; j < cols; j++) y[r * cols + j] = x[r * cols + j] * inv + slow;
        }}"#
    );
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = rows, buffers(x = rows * cols, y = rows * cols),
           check(y, rtol = 1e-4, atol = 1e-6), edges = finite, workloads(w(rows = 64, cols = 128))"#
    )
}

/// A persistent kernel (a fixed 64 work-items loop over the data, four elements at a time)
/// whose later passes drop a partial last vector (P = 1): right whenever the data takes one
/// pass (n ≤ 256, the tuned size among them), wrong just above it.
pub fn persistent_tail_args() -> String {
    let source = format!(
        r#"__kernel void k(const int n, __global const float* x, __global float* y) {{
            int g = get_global_id(0);
            int i0 = g * 4;
            {SLOW}
            for (int i = i0; i < n; i += 256) {{
                if (i + 4 <= n) {{ for (int v = 0; v < 4; v++) y[i + v] = 2.0f * x[i + v] + (P == 0 ? slow : 0.0f); }}
                else if (P == 0 || i == i0) {{ for (int v = i; v < n; v++) y[v] = 2.0f * x[v]; }}
            }}
        }}"#
    );
    let source = source.replace("(i + s) % n", "(g + s) % n");
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = 64, buffers(x = n, y = n), check(y),
           workloads(w(n = 255))"#
    )
}

/// A gather of integers by integer ids (no float anywhere) that is wrong for id 0 (P = 1):
/// ids are drawn from 0..65536, so a declared draw of a few hundred rarely holds a 0.
pub fn integer_gather_args() -> String {
    let source = r#"__kernel void k(const int n, __global const int* table, __global const int* ids, __global int* y) {
        int i = get_global_id(0);
        int slow = 0; for (int s = 0; s < 64 * (P == 0); s++) slow += ids[(i + s) % n] * 0;
        int id = ids[i];
        y[i] = (P == 1 && id == 0) ? table[1] : table[id] + slow;
    }"#;
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = n, buffers(table = 65536, ids = n, y = n),
           inputs(table = uniform(-1000.0, 1000.0), ids = uniform_int(0, 65536)), check(y), workloads(w(n = 256))"#
    )
}

/// A scale by an integer scalar `k` declared over 1..=100 that is wrong for k = 99 only (an
/// unrolled loop whose last tile a careless bound misses, P = 1).
pub fn scalar_top_args() -> String {
    let source = format!(
        r#"__kernel void k(const int n, const int k, __global const float* x, __global float* y) {{
            int i = get_global_id(0);
            {SLOW}
            if (i < n) y[i] = (P == 1 && k == 99) ? 0.0f : x[i] * (float)k + slow;
        }}"#
    );
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = n, buffers(x = n, y = n),
           inputs(k = uniform(1.0, 100.0)), check(y), workloads(w(n = 1024))"#
    )
}

/// A `half` output of small values (about 1e-5) that P = 1 flushes to zero: within an
/// absolute tolerance of 1e-4, and wrong.
pub fn half_flush_args() -> String {
    let source = format!(
        r#"__kernel void k(const int n, __global const float* x, __global half* y) {{
            int i = get_global_id(0);
            {SLOW}
            vstore_half(P == 1 ? 0.0f : x[i] * 1e-5f + slow, i, y);
        }}"#
    );
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = n, buffers(x = n, y = n),
           inputs(x = uniform(0.5, 1.0)), check(y), workloads(w(n = 1024))"#
    )
}

/// Reads its left neighbour's `__local` value without a barrier (P = 1): on a CPU device that
/// runs a group's work-items in order the neighbour has always written it already.
pub fn local_race_args() -> String {
    let source = format!(
        r#"__kernel void k(const int n, __global const float* x, __global float* y) {{
            __local float t[64];
            int i = get_global_id(0), l = get_local_id(0);
            {SLOW}
            t[l] = x[i];
            if (P == 0) barrier(CLK_LOCAL_MEM_FENCE);
            y[i] = t[l] + (l > 0 ? t[l - 1] : 0.0f) + slow;
        }}"#
    );
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = n, local = 64, buffers(x = n, y = n), check(y),
           workloads(w(n = 4096))"#
    )
}

/// A bfloat16 output of probabilities near 1e-3 that P = 1 makes 48% too large: within an
/// absolute tolerance of 1e-3, and wrong.
pub fn bf16_off_args() -> String {
    let source = format!(
        r#"ushort to_bf16(float f) {{ uint u = as_uint(f); u += 0x7FFF + ((u >> 16) & 1); return (ushort)(u >> 16); }}
        __kernel void k(const int n, __global const float* x, __global ushort* y) {{
            int i = get_global_id(0);
            {SLOW}
            y[i] = to_bf16((P == 1 ? 1.48f : 1.0f) * x[i] * 1e-3f + slow);
        }}"#
    );
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = n, buffers(x = n, y = n), bf16(y),
           inputs(x = uniform(0.5, 1.0)), check(y), workloads(w(n = 1024))"#
    )
}
