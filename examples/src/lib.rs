//! Example kernels annotated for kfoundry. `cargo kfoundry tune` tunes them; the program in
//! `src/main.rs` runs them through dispatch and checks their results against the CPU.

/// y = a·x + y: an elementwise kernel, bandwidth-bound.
#[kfoundry::evolve(
    source = "kernels/saxpy.cl",
    params(WG = [32, 64, 128, 256], VEC = [1, 2, 4, 8], ITEMS = 1..=8, STRIDED = [0, 1]),
    reference(WG = 64, VEC = 1, ITEMS = 1, STRIDED = 0),
    // STRIDED only changes anything with several items per work item.
    require(STRIDED <= ITEMS - 1),
    global = ceil_div(n, WG * VEC * ITEMS) * WG, local = WG,
    buffers(x = n, y = n),
    inputs(x = uniform(-1.0, 1.0), y = uniform(-1.0, 1.0)),
    check(y, rtol = 1e-6, atol = 1e-6),
    workloads(small(n = 1 << 16), large(n = 1 << 22)),
    cost(bytes = 12 * n, flops = 2 * n),
)]
pub struct Saxpy;

/// out[r] = Σ m[r, ·]: a row reduction (work per item, rows per group, tree in local memory).
#[kfoundry::evolve(
    source = "kernels/row_sum.cl",
    params(WG = pow2(1..=256), RPG = [1, 2, 4, 8, 16], VEC = [1, 2, 4, 8], ITEMS = [1, 2, 4, 8]),
    reference(WG = 1, RPG = 1, VEC = 1, ITEMS = 1),
    require(WG * RPG <= 256),
    global = (WG, ceil_div(rows, RPG) * RPG), local = (WG, RPG),
    buffers(m = rows * cols, out = rows),
    inputs(m = uniform(0.0, 1.0)),
    check(out, rtol = 1e-4, atol = 1e-5),
    workloads(small(rows = 256, cols = 1024), large(rows = 1024, cols = 8192)),
    cost(bytes = 4 * rows * cols + 4 * rows, flops = rows * cols),
)]
pub struct RowSum;

/// C = A·B (row-major SGEMM): register tiles, local-memory tiles on or off, vector width,
/// work-group shape, k-unroll.
#[kfoundry::evolve(
    source = "kernels/sgemm.cl",
    params(
        WGX = [4, 8, 16, 32], WGY = [4, 8, 16, 32], TM = [1, 2, 4, 8], TN = [1, 2, 4, 8],
        VEC = [1, 2, 4, 8], USE_LOCAL = [0, 1], TK = [8, 16, 32], UNROLL = [1, 2, 4, 8],
    ),
    reference(WGX = 8, WGY = 8, TM = 1, TN = 1, VEC = 1, USE_LOCAL = 0, TK = 8, UNROLL = 1),
    require(
        TN % VEC == 0,
        n % VEC == 0,
        WGX * WGY <= 256,
        // TK only matters with local tiles; the tiles must fit 32 KiB of local memory.
        USE_LOCAL == 1 || TK == 8,
        USE_LOCAL * TK * (WGY * TM + WGX * TN) <= 8192,
    ),
    global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY), local = (WGX, WGY),
    buffers(a = m * k, b = k * n, c = m * n),
    check(c, rtol = 1e-4, atol = 1e-4),
    workloads(small(m = 128, n = 128, k = 128), large(m = 256, n = 256, k = 256)),
    cost(bytes = 4 * (m * k + k * n + m * n), flops = 2 * m * n * k),
)]
pub struct Sgemm;

pub mod checks;
pub mod cpu;
pub mod suite;
pub use suite::{ConvGroupNorm, LayerNormApply, LayerNormStats, LinearGelu, LinearSoftmax, Softmax, SoftmaxApply, SoftmaxStats, SuiteSgemm, SumDim1};
