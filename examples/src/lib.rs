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

/// RMSNorm of each row, declared for the sizes a decoder calls it at: one row (decode) to
/// 4096 (prefill) of 2048 columns. `tune` tunes the range's anchors and proves a portfolio of at
/// most four variants, each over its bucket of rows (README, "Size ranges").
#[kfoundry::evolve(
    source = "kernels/rmsnorm.cl",
    params(WG = pow2(1..=1024), VEC = [1, 2, 4]),
    reference(WG = 1, VEC = 1),
    require(WG <= device_max_work_group),
    global = rows * WG, local = WG,
    buffers(x = rows * cols, w = cols, y = rows * cols),
    inputs(eps = constant(1e-5)),
    check(y, rtol = 1e-4, atol = 1e-5),
    ranges(rows = 1..=4096, cols = 2048),
    cost(bytes = 8 * rows * cols + 4 * cols, flops = 4 * rows * cols),
)]
pub struct RmsNorm;

/// The same kernel tuned at each of eight sizes of that range that are not its anchors: what
/// the best variant at each size is, with the same search budget as an anchor gets. Only the
/// portfolio benchmark (`--bin portfolio`) uses it.
#[kfoundry::evolve(
    source = "kernels/rmsnorm.cl",
    name = "kfoundry-examples::RmsNormPerSize",
    params(WG = pow2(1..=1024), VEC = [1, 2, 4]),
    reference(WG = 1, VEC = 1),
    require(WG <= device_max_work_group),
    global = rows * WG, local = WG,
    buffers(x = rows * cols, w = cols, y = rows * cols),
    inputs(eps = constant(1e-5)),
    check(y, rtol = 1e-4, atol = 1e-5),
    workloads(
        r2(rows = 2, cols = 2048), r7(rows = 7, cols = 2048), r24(rows = 24, cols = 2048), r90(rows = 90, cols = 2048),
        r300(rows = 300, cols = 2048), r1000(rows = 1000, cols = 2048), r2900(rows = 2900, cols = 2048), r3600(rows = 3600, cols = 2048),
    ),
    cost(bytes = 8 * rows * cols + 4 * cols, flops = 4 * rows * cols),
)]
pub struct RmsNormPerSize;

pub mod checks;
pub mod cpu;
pub mod suite;
pub use suite::{
    ConvGroupNorm, LayerNormApply, LayerNormStats, LinearGelu, LinearSoftmax, Softmax,
    SoftmaxApply, SoftmaxStats, SuiteSgemm, SuiteSgemmTf32, SumDim1,
};
