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

/// C = A·B with few outputs and a long k (KernelBench level 1 problem 6: 256 × 256 outputs, k =
/// 524288), where one work-group per output tile leaves most of a GPU idle: split-K. The k range
/// is cut into `SPLITK` slices that work-groups of their own compute; the last of a tile's to
/// arrive adds the slices up in slice order (the template library's `split_k.cl`). The partial
/// sums and the arrival counters live in two scratch buffers the launcher owns
/// (`scratch(ws, arrivals)`): all zero at every launch, and the kernel leaves them so (the proof
/// checks it). Beside it, the portable path (register tiles from global memory) and the
/// library's 3xTF32 tensor-core path of [`crate::suite::SuiteSgemm`] (`MMA`, `WM`, `TK`,
/// `STAGES`, `FLUSH`).
///
/// The check: a slice's sum rounds differently from the reference's one long sum, whose own
/// rounding error grows with k (about 4e-3 on outputs near 240 at k = 524288 with inputs in
/// ±1): the relative error norm at most 1e-4 (the reference's own is about 2e-5 there), and
/// each element within 5e-2 plus 1e-3 of itself, which still refuses one product of one k left
/// out of one element (about 0.3).
#[kfoundry::evolve(
    source = "kernels/gemm_splitk.cl",
    params(
        SPLITK = pow2(1..=64), WGX = [8, 16, 32], WGY = [8, 16, 32], TM = [1, 2, 4, 8], TN = [1, 2, 4, 8],
        MMA = [0, 1], WM = [1, 2, 4], TK = [8, 16, 32], STAGES = [2, 3, 4], FLUSH = [1, 2, 4],
    ),
    reference(SPLITK = 1, WGX = 16, WGY = 16, TM = 1, TN = 1, MMA = 0, WM = 1, TK = 8, STAGES = 2, FLUSH = 1),
    require(
        WGX * WGY <= 256,
        // Split-K's reduction needs a device-scope fence: NVIDIA's GPUs, and CPUs (split_k.cl).
        SPLITK == 1 || device_nvidia || device_cpu,
        // The tensor-core path as SuiteSgemm's; the portable path ignores its parameters.
        MMA == 1 || (WM == 1 && TK == 8 && STAGES == 2 && FLUSH == 1),
        MMA == 0 || device_nvidia && device_sm >= 80,
        TK % (8 * FLUSH) == 0,
        MMA == 0 || (WGX * WGY % 32 == 0 && WGX * WGY / 32 % WM == 0),
        MMA == 0 || (WGY * TM % (16 * WM) == 0 && WGX * TN * WM * 32 % (8 * WGX * WGY) == 0),
        MMA == 0 || (m % (WGY * TM) == 0 && n % (WGX * TN) == 0 && k % TK == 0 && k % 4 == 0 && n % 4 == 0),
        MMA * STAGES * (WGY * TM * (TK + TK / 32 * 4) + TK * WGX * TN) <= 12288,
    ),
    global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY, SPLITK), local = (WGX, WGY, 1),
    buffers(
        a = m * k, b = k * n, c = m * n,
        ws = SPLITK * m * n, arrivals = ceil_div(m, WGY * TM) * ceil_div(n, WGX * TN),
    ),
    scratch(ws, arrivals),
    check(c, norm = 1e-4, rtol = 1e-3, atol = 5e-2),
    // The tensor-core path splits each float into TF32 parts: an infinity's small part is NaN.
    edges = finite,
    workloads(small(m = 64, n = 64, k = 8192), full(m = 256, n = 256, k = 524288, on = gpu)),
    cost(bytes = 4 * (m * k + k * n + m * n), flops = 2 * m * n * k),
)]
pub struct SgemmLargeK;

/// RMSNorm of each row, declared for the sizes a decoder calls it at: one row (decode) to
/// 4096 (prefill) of 2048 columns. `tune` tunes the range's anchors and proves a portfolio of at
/// most four variants, each over its bucket of rows (the manual, `book/src/dispatch.md`, "Size ranges").
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
    ConvGnStats, ConvGroupNorm, GroupNormApply, LayerNormApply, LayerNormStats, LinearGelu,
    LinearSoftmax, Softmax, SoftmaxApply, SoftmaxStats, SuiteSgemm, SuiteSgemmTf32, SumDim1,
};
