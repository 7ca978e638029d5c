//! The kernel suite: six problems from KernelBench (levels 1 and 2), FP32 (problem 1 also in
//! TF32, an opt-in precision with its own tolerance), each a plain
//! reference kernel with a tunable space. Problems that need a grid-wide reduction one launch
//! cannot do safely are split into stages, each its own annotated kernel whose output layout
//! does not depend on the tuning parameters (see `kernels/README.md`):
//!
//! | problem | kernels |
//! | --- | --- |
//! | 1. SGEMM, N = 4096 | [`SuiteSgemm`] (TF32: [`SuiteSgemmTf32`]; half and bfloat16 operands: [`SuiteHgemm`], [`SuiteBgemm`]) |
//! | 2. softmax over rows, 4096 × 393216 | [`SoftmaxStats`] → [`SoftmaxApply`] (one-launch form: [`Softmax`]) |
//! | 3. LayerNorm over (64, 256, 256) of 16 × 64 × 256 × 256 | [`LayerNormStats`] → [`LayerNormApply`] |
//! | 4. sum over dim 1 of 128 × 4096 × 4095, keepdim | [`SumDim1`] |
//! | 5. Linear 8192 → 8192 + bias on 1024 rows, GELU, softmax(dim 1) | [`LinearGelu`] → [`LinearSoftmax`] |
//! | 6. Conv2d 8 → 32 (3 × 3) + bias, × scale, sigmoid, GroupNorm(8) | [`ConvGroupNorm`] (in two launches: [`ConvGnStats`] → [`GroupNormApply`]) |
//!
//! Each kernel has two workloads: `small` (well under a second on PoCL) and `full` (the
//! KernelBench size; buffers of several GB; `on = gpu`: tuned on GPUs only, and `check --locked`
//! asks no CPU device for it).

/// Problem 1: C = A·B, row-major SGEMM. Register tiles (TM × TN per item), work-group shape,
/// local-memory tiles with padding, vector loads into the tiles and along n, k-unroll, register
/// prefetch of the next k-tile.
#[kfoundry::evolve(
    source = "kernels/gemm.cl",
    params(
        WGX = [8, 16, 32], WGY = [8, 16, 32], TM = [1, 2, 4, 8], TN = [1, 2, 4, 8], VEC = [1, 2, 4],
        USE_LOCAL = [0, 1], TK = [8, 16, 32], PAD = [0, 1, 4], LVEC = [1, 4], UNROLL = [1, 2, 4, 8],
        PREFETCH = [0, 1], MMA = [0, 1], WM = [1, 2, 4], STAGES = [2, 3, 4], FLUSH = [1, 2, 4],
        RASTER = [0, 4, 16],
    ),
    reference(
        WGX = 16, WGY = 16, TM = 1, TN = 1, VEC = 1, USE_LOCAL = 0, TK = 8, PAD = 0, LVEC = 1, UNROLL = 1, PREFETCH = 0,
        MMA = 0, WM = 1, STAGES = 2, FLUSH = 1, RASTER = 0,
    ),
    require(
        WGX * WGY <= 256,
        TN % VEC == 0,
        n % VEC == 0,
        // TK, PAD, LVEC and PREFETCH only matter with local tiles.
        USE_LOCAL == 1 || MMA == 1 || (TK == 8 && PAD == 0 && LVEC == 1 && PREFETCH == 0),
        // The two tiles fit 48 KiB, NVIDIA's limit for a kernel's static local memory.
        USE_LOCAL * TK * (WGY * TM + WGX * TN + 2 * PAD) <= 12288,
        LVEC == 1 || (k % 4 == 0 && n % 4 == 0),
        // The tensor-core path: NVIDIA's inline PTX (mma.sync with TF32, cp.async) needs compute
        // capability 8.0; whole warps, warp tiles of whole 16 x 8 pieces, full tiles, 16-byte
        // rows, its tiles in 48 KiB (TM * TN accumulators an item, as in the portable path). It ignores the portable
        // path's VEC, USE_LOCAL, PAD, LVEC, UNROLL and PREFETCH; the portable path ignores WM, STAGES, FLUSH
        // and RASTER.
        MMA == 0 || device_nvidia && device_sm >= 80,
        MMA == 1 || (WM == 1 && STAGES == 2 && FLUSH == 1 && RASTER == 0),
        TK % (8 * FLUSH) == 0,
        MMA == 0 || (VEC == 1 && USE_LOCAL == 0 && PAD == 0 && LVEC == 1 && UNROLL == 1 && PREFETCH == 0),
        MMA == 0 || (WGX * WGY % 32 == 0 && WGX * WGY / 32 % WM == 0),
        MMA == 0 || (WGY * TM % (16 * WM) == 0 && WGX * TN * WM * 32 % (8 * WGX * WGY) == 0),
        MMA == 0 || (m % (WGY * TM) == 0 && n % (WGX * TN) == 0 && k % TK == 0 && k % 4 == 0 && n % 4 == 0),
        MMA * STAGES * (WGY * TM * (TK + TK / 32 * 4) + TK * WGX * TN) <= 12288,
    ),
    global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY), local = (WGX, WGY),
    buffers(a = m * k, b = k * n, c = m * n),
    // Every portable configuration sums in the reference's order (bit-identical results); the
    // tensor-core path sums in another, so it differs from the reference by the reference's own
    // rounding: up to about 4e-4 on outputs of magnitude 20 at k = 4096. 1e-3 allows that and
    // still refuses plain TF32 (errors near 1e-2).
    check(c, rtol = 1e-4, atol = 1e-3),
    // The tensor-core path splits each float into TF32 parts (x = big + small): an infinity's
    // small part is inf - inf = NaN, so where the reference gives an infinity it gives NaN.
    // The kernel is meant for finite inputs, and says so: its proof uses signed zeros,
    // denormals and large magnitudes, not infinities and NaN.
    edges = finite,
    workloads(small(m = 128, n = 128, k = 128), full(m = 4096, n = 4096, k = 4096, on = gpu)),
    cost(bytes = 4 * (m * k + k * n + m * n), flops = 2 * m * n * k),
)]
pub struct SuiteSgemm;

/// Problem 1 in TF32, an opt-in precision: [`SuiteSgemm`]'s kernel (`gemm.cl`) with its
/// tensor-core path keeping one product of the operands' TF32 parts (`TF32 = 1`) instead of
/// 3xTF32's three. The space is SuiteSgemm's tensor-core parameters and its portable path's
/// work-group and register tile (without local tiles, vectors, unrolling or prefetch: the
/// tensor-core path is what this kernel is for); the reference stays FP32. TF32 keeps 10
/// mantissa bits of each operand, rounded to nearest: a product is off by about 4e-4 of
/// itself (rms), so an output of k products by about 1.3e-4 · sqrt(k) · rms(a·b). Measured on
/// an H100 with inputs uniform in ±1 at k = 4096: 5.6e-3 rms, 0.031 at most; at k = 8192 about
/// 0.045 at most. The check allows that (`atol = 5e-2` plus `rtol = 1e-3` of the output) and
/// refuses anything coarser.
#[kfoundry::evolve(
    source = "kernels/gemm.cl",
    params(
        WGX = [8, 16, 32], WGY = [8, 16, 32], TM = [1, 2, 4, 8], TN = [1, 2, 4, 8], MMA = [0, 1], WM = [1, 2, 4],
        TK = [8, 16, 32], STAGES = [2, 3, 4], FLUSH = [1, 2, 4], RASTER = [0, 4, 16], TF32 = [1],
    ),
    reference(WGX = 16, WGY = 16, TM = 1, TN = 1, MMA = 0, WM = 1, TK = 8, STAGES = 2, FLUSH = 1, RASTER = 0, TF32 = 1),
    require(
        WGX * WGY <= 256,
        // The portable path as the reference runs it (no local tiles: TK is the tensor-core
        // path's), the tensor-core path as SuiteSgemm's.
        MMA == 1 || (TK == 8 && WM == 1 && STAGES == 2 && FLUSH == 1 && RASTER == 0),
        MMA == 0 || device_nvidia && device_sm >= 80,
        TK % (8 * FLUSH) == 0,
        MMA == 0 || (WGX * WGY % 32 == 0 && WGX * WGY / 32 % WM == 0),
        MMA == 0 || (WGY * TM % (16 * WM) == 0 && WGX * TN * WM * 32 % (8 * WGX * WGY) == 0),
        MMA == 0 || (m % (WGY * TM) == 0 && n % (WGX * TN) == 0 && k % TK == 0 && k % 4 == 0 && n % 4 == 0),
        MMA * STAGES * (WGY * TM * (TK + TK / 32 * 4) + TK * WGX * TN) <= 12288,
    ),
    global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY), local = (WGX, WGY),
    buffers(a = m * k, b = k * n, c = m * n),
    check(c, rtol = 1e-3, atol = 5e-2),
    edges = finite,
    workloads(small(m = 128, n = 128, k = 128), full(m = 4096, n = 4096, k = 4096, on = gpu)),
    cost(bytes = 4 * (m * k + k * n + m * n), flops = 2 * m * n * k),
)]
pub struct SuiteSgemmTf32;

/// Problem 1 with IEEE half operands and output (FP32 accumulation): `hgemm.cl`, whose
/// tensor-core path is the template library's with m16n8k16 products. A product of two halves
/// is exact in FP32, so variants differ from the reference only by the order of the FP32 sum
/// before the final rounding to half: one unit in the last place (2^-10 of the value, `rtol`),
/// or near zero the two FP32 sums' own difference (`atol`): each sum rounds away about
/// 2^-24 · sqrt(k) times its partial sums' size, about sqrt(k) / 3 with inputs in ±1: 1e-4 at
/// the workloads' k = 4096, 2e-4 at the proof's largest sizes.
#[kfoundry::evolve(
    source = "kernels/hgemm.cl",
    params(
        WGX = [8, 16, 32], WGY = [8, 16, 32], TM = [1, 2, 4, 8], TN = [1, 2, 4, 8], MMA = [0, 1], WM = [1, 2, 4],
        TK = [16, 32, 64], STAGES = [2, 3, 4], FLUSH = [1, 2, 4], RASTER = [0, 4, 16], LDSM = [0, 1],
    ),
    reference(WGX = 16, WGY = 16, TM = 1, TN = 1, MMA = 0, WM = 1, TK = 16, STAGES = 2, FLUSH = 1, RASTER = 0, LDSM = 0),
    require(
        WGX * WGY <= 256,
        MMA == 1 || (TK == 16 && WM == 1 && STAGES == 2 && FLUSH == 1 && RASTER == 0 && LDSM == 0),
        // ldmatrix reads B's tile rows as 128-byte multiples.
        LDSM == 0 || WGX * TN % 64 == 0,
        MMA == 0 || device_nvidia && device_sm >= 80,
        TK % (16 * FLUSH) == 0,
        MMA == 0 || (WGX * WGY % 32 == 0 && WGX * WGY / 32 % WM == 0),
        MMA == 0 || (WGY * TM % (16 * WM) == 0 && WGX * TN * WM * 32 % (8 * WGX * WGY) == 0),
        MMA == 0 || (m % (WGY * TM) == 0 && n % (WGX * TN) == 0 && k % TK == 0 && k % 8 == 0 && n % 8 == 0),
        // The tiles in 48 KiB: rows of TK + TK / 64 * 8 halves for A, TK rows of WGX * TN for B.
        MMA * STAGES * (WGY * TM * (TK + TK / 64 * 8) + TK * WGX * TN) <= 24576,
    ),
    global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY), local = (WGX, WGY),
    buffers(a = m * k, b = k * n, c = m * n),
    check(c, rtol = 2e-3, atol = 1e-3),
    workloads(small(m = 128, n = 128, k = 128), full(m = 4096, n = 4096, k = 4096, on = gpu)),
    cost(bytes = 2 * (m * k + k * n + m * n), flops = 2 * m * n * k),
)]
pub struct SuiteHgemm;

/// [`SuiteHgemm`] in bfloat16 (`bgemm.cl`, the same body): the buffers hold bfloat16 bits.
/// One unit in bfloat16's last place is up to 2^-7 of the value (`rtol` allows two); near zero, the FP32 sums'
/// difference as for half.
#[kfoundry::evolve(
    source = "kernels/bgemm.cl",
    params(
        WGX = [8, 16, 32], WGY = [8, 16, 32], TM = [1, 2, 4, 8], TN = [1, 2, 4, 8], MMA = [0, 1], WM = [1, 2, 4],
        TK = [16, 32, 64], STAGES = [2, 3, 4], FLUSH = [1, 2, 4], RASTER = [0, 4, 16], LDSM = [0, 1],
    ),
    reference(WGX = 16, WGY = 16, TM = 1, TN = 1, MMA = 0, WM = 1, TK = 16, STAGES = 2, FLUSH = 1, RASTER = 0, LDSM = 0),
    require(
        WGX * WGY <= 256,
        MMA == 1 || (TK == 16 && WM == 1 && STAGES == 2 && FLUSH == 1 && RASTER == 0 && LDSM == 0),
        // ldmatrix reads B's tile rows as 128-byte multiples.
        LDSM == 0 || WGX * TN % 64 == 0,
        MMA == 0 || device_nvidia && device_sm >= 80,
        TK % (16 * FLUSH) == 0,
        MMA == 0 || (WGX * WGY % 32 == 0 && WGX * WGY / 32 % WM == 0),
        MMA == 0 || (WGY * TM % (16 * WM) == 0 && WGX * TN * WM * 32 % (8 * WGX * WGY) == 0),
        MMA == 0 || (m % (WGY * TM) == 0 && n % (WGX * TN) == 0 && k % TK == 0 && k % 8 == 0 && n % 8 == 0),
        MMA * STAGES * (WGY * TM * (TK + TK / 64 * 8) + TK * WGX * TN) <= 24576,
    ),
    global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY), local = (WGX, WGY),
    buffers(a = m * k, b = k * n, c = m * n),
    bf16(a, b, c),
    check(c, rtol = 1.6e-2, atol = 1e-3),
    workloads(small(m = 128, n = 128, k = 128), full(m = 4096, n = 4096, k = 4096, on = gpu)),
    cost(bytes = 2 * (m * k + k * n + m * n), flops = 2 * m * n * k),
)]
pub struct SuiteBgemm;

/// Problem 2 in one launch: softmax over each row, one work-group per row; items, vector
/// width, loads in flight, and three passes or two ("online" max and sum). The suite runs the
/// split form ([`SoftmaxStats`] → [`SoftmaxApply`]), which lets many work-groups share a row;
/// this form is kept for rows short enough for one group (it is [`LinearSoftmax`]'s kernel).
#[kfoundry::evolve(
    source = "kernels/softmax.cl",
    params(WG = pow2(32..=1024), VEC = [1, 2, 4, 8], ITEMS = [1, 2, 4], ONLINE = [0, 1]),
    reference(WG = 256, VEC = 1, ITEMS = 1, ONLINE = 0),
    global = (WG, rows), local = (WG, 1),
    buffers(x = rows * cols, y = rows * cols),
    check(y, rtol = 1e-4, atol = 1e-12),
    workloads(small(rows = 64, cols = 4096), full(rows = 4096, cols = 393216, on = gpu)),
    // Compulsory traffic: the input read once, the output written once.
    cost(bytes = 8 * rows * cols, flops = 5 * rows * cols),
)]
pub struct Softmax;

/// Problem 2, stage 1: per (row, chunk of `chunk` elements) the chunk's maximum and its sum of
/// exp(x - maximum), one work-group per chunk. The partials' layout depends on the sizes only.
#[kfoundry::evolve(
    source = "kernels/softmax_stats.cl",
    params(WG = pow2(32..=512), VEC = [1, 2, 4, 8], ITEMS = [1, 2, 4, 8]),
    reference(WG = 256, VEC = 1, ITEMS = 1),
    global = (WG * ceil_div(cols, chunk), rows), local = (WG, 1),
    buffers(x = rows * cols, pmax = rows * ceil_div(cols, chunk), psum = rows * ceil_div(cols, chunk)),
    // The maximum is exact in every configuration; the sum's order depends on it.
    check(pmax, rtol = 1e-6, atol = 1e-6),
    check(psum, rtol = 1e-4, atol = 1e-4),
    workloads(small(rows = 64, cols = 4096, chunk = 1024), full(rows = 4096, cols = 393216, chunk = 16384, on = gpu)),
    // x read once, the partials written.
    cost(bytes = 4 * rows * cols + 8 * rows * ceil_div(cols, chunk), flops = 4 * rows * cols),
)]
pub struct SoftmaxStats;

/// Problem 2, stage 2: every work-group combines its row's partials (each partial sum rescaled
/// by exp(pmax - max), in an order fixed by the sizes) and writes WG·VEC·ITEMS elements of y.
#[kfoundry::evolve(
    source = "kernels/softmax_apply.cl",
    params(WG = pow2(32..=512), VEC = [1, 2, 4, 8], ITEMS = [1, 2, 4, 8, 16]),
    reference(WG = 256, VEC = 1, ITEMS = 1),
    global = (ceil_div(cols, WG * VEC * ITEMS) * WG, rows), local = (WG, 1),
    buffers(x = rows * cols, pmax = rows * ceil_div(cols, chunk), psum = rows * ceil_div(cols, chunk), y = rows * cols),
    // Partials as stage 1 makes them: a chunk's sum of exp(x - its maximum) is at least 1.
    inputs(psum = uniform(1.0, 100.0)),
    check(y, rtol = 1e-4, atol = 1e-12),
    workloads(small(rows = 64, cols = 4096, chunk = 1024), full(rows = 4096, cols = 393216, chunk = 16384, on = gpu)),
    // x read a second time, y written: with stage 1, the three-pass floor.
    cost(bytes = 8 * rows * cols + 8 * rows * ceil_div(cols, chunk), flops = 3 * rows * cols),
)]
pub struct SoftmaxApply;

/// Problem 3, stage 1: per (sample, chunk of `chunk` elements) mean and sum of squared
/// deviations. The partials' layout depends on the sizes only.
#[kfoundry::evolve(
    source = "kernels/layernorm_stats.cl",
    params(WG = pow2(32..=1024), VEC = [1, 2, 4, 8], ITEMS = [1, 2, 4, 8]),
    reference(WG = 256, VEC = 1, ITEMS = 1),
    global = (WG * ceil_div(d, chunk), n), local = (WG, 1),
    buffers(x = n * d, mean = n * ceil_div(d, chunk), m2 = n * ceil_div(d, chunk)),
    check(mean, rtol = 1e-4, atol = 1e-5),
    check(m2, rtol = 1e-4, atol = 1e-3),
    workloads(small(n = 4, d = 8192, chunk = 1024), full(n = 16, d = 4194304, chunk = 16384, on = gpu)),
    cost(bytes = 4 * n * d + 8 * n * ceil_div(d, chunk), flops = 3 * n * d),
)]
pub struct LayerNormStats;

/// Problem 3, stage 2: combine a sample's partials, normalise, apply weight and bias; NS samples
/// per work-group share one read of weight and bias. REV walks the blocks in the reverse of
/// stage 1's order (what stage 1 read last may still be in the L2 cache), SFAST puts the sample
/// groups of a d-block next to each other (weight and bias from L2); both only renumber the
/// blocks, so every configuration writes the same output.
#[kfoundry::evolve(
    source = "kernels/layernorm_apply.cl",
    params(WG = pow2(32..=1024), VEC = [1, 2, 4, 8], ITEMS = [1, 2, 4, 8], NS = [1, 2, 4, 8, 16], REV = [0, 1], SFAST = [0, 1]),
    reference(WG = 256, VEC = 1, ITEMS = 1, NS = 1, REV = 0, SFAST = 0),
    global = (ceil_div(d, WG * VEC * ITEMS) * WG, ceil_div(n, NS)), local = (WG, 1),
    buffers(
        x = n * d, mean = n * ceil_div(d, chunk), m2 = n * ceil_div(d, chunk),
        weight = d, bias = d, y = n * d,
    ),
    // Partials as stage 1 makes them: sums of squares are never negative.
    inputs(eps = constant(0.00001), m2 = uniform(0.0, 100.0)),
    check(y, rtol = 1e-4, atol = 1e-4),
    workloads(small(n = 4, d = 8192, chunk = 1024), full(n = 16, d = 4194304, chunk = 16384, on = gpu)),
    cost(bytes = 8 * n * d + 8 * d + 8 * n * ceil_div(d, chunk), flops = 4 * n * d),
)]
pub struct LayerNormApply;

/// Problem 4: sum over the middle dimension (keepdim). Items along the columns and along the
/// reduced dimension, vector width, independent accumulators.
#[kfoundry::evolve(
    source = "kernels/sum_dim1.cl",
    params(TX = [16, 32, 64, 128, 256], TY = pow2(1..=32), VEC = [1, 2, 4], ITEMS = [1, 2, 4, 8]),
    reference(TX = 64, TY = 1, VEC = 1, ITEMS = 1),
    require(TX * TY <= 1024),
    global = (ceil_div(cols, TX * VEC) * TX, TY, batch), local = (TX, TY, 1),
    buffers(x = batch * rows * cols, out = batch * cols),
    // Positive inputs: summation order differs between configurations, and sums near 0 would
    // make a relative check meaningless.
    inputs(x = uniform(0.0, 1.0)),
    check(out, rtol = 1e-4, atol = 1e-4),
    workloads(small(batch = 4, rows = 256, cols = 255), full(batch = 128, rows = 4096, cols = 4095, on = gpu)),
    cost(bytes = 4 * batch * rows * cols + 4 * batch * cols, flops = batch * rows * cols),
)]
pub struct SumDim1;

/// Problem 5, stage 1: y = GELU(x·wᵀ + bias) (exact GELU, erf), the GEMM space of
/// [`SuiteSgemm`] with both operands read along k.
#[kfoundry::evolve(
    source = "kernels/linear_gelu.cl",
    params(
        WGX = [8, 16, 32], WGY = [8, 16, 32], TM = [1, 2, 4, 8], TN = [1, 2, 4, 8], VEC = [1, 2, 4],
        USE_LOCAL = [0, 1], TK = [8, 16, 32], PAD = [0, 1, 4], LVEC = [1, 4], UNROLL = [1, 2, 4, 8],
        PREFETCH = [0, 1], MMA = [0, 1], WM = [1, 2, 4], STAGES = [2, 3, 4], FLUSH = [1, 2, 4],
        RASTER = [0, 4, 16],
    ),
    reference(
        WGX = 16, WGY = 16, TM = 1, TN = 1, VEC = 1, USE_LOCAL = 0, TK = 8, PAD = 0, LVEC = 1, UNROLL = 1, PREFETCH = 0,
        MMA = 0, WM = 1, STAGES = 2, FLUSH = 1, RASTER = 0,
    ),
    require(
        WGX * WGY <= 256,
        TN % VEC == 0,
        n % VEC == 0,
        USE_LOCAL == 1 || MMA == 1 || (TK == 8 && PAD == 0 && LVEC == 1 && PREFETCH == 0),
        USE_LOCAL * TK * (WGY * TM + WGX * TN + 2 * PAD) <= 12288,
        LVEC == 1 || k % 4 == 0,
        // The tensor-core path: NVIDIA's inline PTX (mma.sync with TF32, cp.async) needs compute
        // capability 8.0; whole warps, warp tiles of whole 16 x 8 pieces, full tiles, 16-byte
        // rows, its tiles in 48 KiB (TM * TN accumulators an item, as in the portable path). It ignores the portable
        // path's VEC, USE_LOCAL, PAD, LVEC, UNROLL and PREFETCH; the portable path ignores WM, STAGES, FLUSH
        // and RASTER.
        MMA == 0 || device_nvidia && device_sm >= 80,
        MMA == 1 || (WM == 1 && STAGES == 2 && FLUSH == 1 && RASTER == 0),
        TK % (8 * FLUSH) == 0,
        MMA == 0 || (VEC == 1 && USE_LOCAL == 0 && PAD == 0 && LVEC == 1 && UNROLL == 1 && PREFETCH == 0),
        MMA == 0 || (WGX * WGY % 32 == 0 && WGX * WGY / 32 % WM == 0),
        MMA == 0 || (WGY * TM % (16 * WM) == 0 && WGX * TN * WM * 32 % (8 * WGX * WGY) == 0),
        MMA == 0 || (m % (WGY * TM) == 0 && n % (WGX * TN) == 0 && k % TK == 0 && k % 4 == 0 && n % 4 == 0),
        MMA * STAGES * (WGY * TM + WGX * TN) * (TK + TK / 32 * 4) <= 12288,
    ),
    global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY), local = (WGX, WGY),
    buffers(x = m * k, w = n * k, bias = n, y = m * n),
    // As for SuiteSgemm, at k = 8192: the reference's own rounding reaches about 7e-4.
    check(y, rtol = 1e-4, atol = 2e-3),
    // As for SuiteSgemm: the TF32 split turns an infinity into NaN; finite inputs only.
    edges = finite,
    workloads(small(m = 64, n = 256, k = 256), full(m = 1024, n = 8192, k = 8192, on = gpu)),
    cost(bytes = 4 * (m * k + n * k + n + m * n), flops = 2 * m * n * k),
)]
pub struct LinearGelu;

/// Problem 5, stage 2: softmax over the rows of stage 1's output (the kernel of [`Softmax`],
/// tuned for these sizes).
#[kfoundry::evolve(
    source = "kernels/softmax.cl",
    params(WG = pow2(32..=1024), VEC = [1, 2, 4, 8], ITEMS = [1, 2, 4], ONLINE = [0, 1]),
    reference(WG = 256, VEC = 1, ITEMS = 1, ONLINE = 0),
    global = (WG, rows), local = (WG, 1),
    buffers(x = rows * cols, y = rows * cols),
    check(y, rtol = 1e-4, atol = 1e-12),
    workloads(small(rows = 64, cols = 256), full(rows = 1024, cols = 8192, on = gpu)),
    cost(bytes = 8 * rows * cols, flops = 5 * rows * cols),
)]
pub struct LinearSoftmax;

/// Problem 6: Conv2d (3 × 3, valid) + conv bias + bias, × scale, sigmoid, GroupNorm, fused:
/// one work-group per (sample, group). Register tiles over pixels and channels, weights in
/// local memory or not, second pass re-reading or recomputing; or (`MMA = 1`, NVIDIA) the
/// convolution as an implicit GEMM on the tensor cores in 3xTF32 (FP32 accuracy).
#[kfoundry::evolve(
    source = "kernels/conv_gn.cl",
    params(
        WG = pow2(64..=1024), PX = [1, 2, 4, 8], CB = [1, 2, 4], RECOMPUTE = [0, 1], WLOCAL = [0, 1],
        MMA = [0, 1], RW = [1, 2, 4, 8], MW = [1, 2, 4, 8], SPLIT = [0, 1],
    ),
    reference(WG = 256, PX = 1, CB = 1, RECOMPUTE = 0, WLOCAL = 0, MMA = 0, RW = 1, MW = 1, SPLIT = 0),
    require(
        h >= 3, w >= 3, cout % groups == 0, (cout / groups) % CB == 0,
        // The tensor-core path: NVIDIA's inline PTX (mma.sync with TF32, cp.async) needs
        // compute capability 8.0; whole warps, MW of them along x, at most 256 items (it
        // takes more than 128 registers an item: WG = 512 never launched on the H200); two
        // patch buffers of 8 planes (big and small parts with SPLIT = 0) and the reduction in
        // 48 KiB, NVIDIA's limit for a kernel's static local memory. It ignores PX, CB and
        // WLOCAL; the portable path ignores RW, MW and SPLIT. Any size: partial tiles and
        // chunks are padded with zeros.
        MMA == 0 || device_nvidia && device_sm >= 80,
        MMA == 1 || (RW == 1 && MW == 1 && SPLIT == 0),
        MMA == 0 || (PX == 1 && CB == 1 && WLOCAL == 0 && WG <= 256 && WG / 32 % MW == 0),
        MMA * (16 * (round_up((RW * (WG / 32 / MW) + 2) * (16 * MW + 4) + 24, 32) - 24) + 2 * WG) <= 12288,
    ),
    global = (WG * groups, n), local = (WG, 1),
    buffers(
        x = n * cin * h * w, weight = cout * cin * 9, conv_bias = cout, bias = cout, scale = cout,
        gamma = cout, beta = cout, out = n * cout * (h - 2) * (w - 2),
        wl = max(1, WLOCAL * (cout / groups) * cin * 9),
    ),
    inputs(eps = constant(0.00001)),
    check(out, rtol = 1e-3, atol = 1e-3),
    // As for SuiteSgemm: the tensor-core path's TF32 split turns an infinity into NaN.
    edges = finite,
    workloads(
        small(n = 2, cin = 8, h = 34, w = 34, cout = 32, groups = 8),
        full(n = 128, cin = 8, h = 256, w = 256, cout = 32, groups = 8, on = gpu),
    ),
    cost(
        bytes = 4 * (n * cin * h * w + n * cout * (h - 2) * (w - 2) + cout * cin * 9),
        flops = 2 * n * cout * (h - 2) * (w - 2) * cin * 9,
    ),
)]
pub struct ConvGroupNorm;

/// Problem 6 in two launches, stage 1: the convolution, biases, scale and sigmoid of every
/// output (`z`), and per (sample, group, chunk of `rows` output rows) the mean and sum of squared
/// deviations of the chunk's values (the partials' layout depends on the sizes only). One
/// work-group per chunk: many more than [`ConvGroupNorm`]'s one per (sample, group). Register
/// tiles over pixels, channels and rows; the group's weights in local memory or not.
#[kfoundry::evolve(
    source = "kernels/conv_gn_stats.cl",
    params(WG = pow2(32..=512), PX = [1, 2, 4, 8], CB = [1, 2, 4], RY = [1, 2, 4], WLOCAL = [0, 1]),
    reference(WG = 256, PX = 1, CB = 1, RY = 1, WLOCAL = 0),
    require(h >= 3, w >= 3, rows >= 1, cout % groups == 0, (cout / groups) % CB == 0),
    global = (WG * groups * ceil_div(h - 2, rows), n), local = (WG, 1),
    buffers(
        x = n * cin * h * w, weight = cout * cin * 9, conv_bias = cout, bias = cout, scale = cout,
        z = n * cout * (h - 2) * (w - 2), mean = n * groups * ceil_div(h - 2, rows),
        m2 = n * groups * ceil_div(h - 2, rows), wl = max(1, WLOCAL * (cout / groups) * cin * 9),
    ),
    // Every configuration sums each output in the reference's order: z is the same bit for bit;
    // the partials' sums depend on WG.
    check(z, rtol = 1e-5, atol = 1e-6),
    check(mean, rtol = 1e-4, atol = 1e-5),
    check(m2, rtol = 1e-4, atol = 1e-3),
    workloads(
        small(n = 2, cin = 8, h = 34, w = 34, cout = 32, groups = 8, rows = 8),
        full(n = 128, cin = 8, h = 256, w = 256, cout = 32, groups = 8, rows = 8, on = gpu),
    ),
    cost(
        bytes = 4 * (n * cin * h * w + n * cout * (h - 2) * (w - 2) + cout * cin * 9),
        flops = 2 * n * cout * (h - 2) * (w - 2) * cin * 9,
    ),
)]
pub struct ConvGnStats;

/// Problem 6 in two launches, stage 2: every work-group combines its (sample, group)'s partials
/// (in an order fixed by the sizes) and normalises WG·VEC·ITEMS of the block's values, with the
/// channel's gamma and beta.
#[kfoundry::evolve(
    source = "kernels/groupnorm_apply.cl",
    params(WG = pow2(32..=1024), VEC = [1, 2, 4, 8], ITEMS = [1, 2, 4, 8]),
    reference(WG = 256, VEC = 1, ITEMS = 1),
    require(h >= 3, w >= 3, rows >= 1, cout % groups == 0),
    global = (ceil_div((cout / groups) * (h - 2) * (w - 2), WG * VEC * ITEMS) * WG, n * groups), local = (WG, 1),
    buffers(
        z = n * cout * (h - 2) * (w - 2), mean = n * groups * ceil_div(h - 2, rows),
        m2 = n * groups * ceil_div(h - 2, rows), gamma = cout, beta = cout,
        out = n * cout * (h - 2) * (w - 2),
    ),
    // Partials as stage 1 makes them: means of sigmoid outputs, sums of squares never negative.
    inputs(eps = constant(0.00001), z = uniform(0.0, 1.0), mean = uniform(0.0, 1.0), m2 = uniform(0.0, 100.0)),
    check(out, rtol = 1e-4, atol = 1e-4),
    workloads(
        small(n = 2, h = 34, w = 34, cout = 32, groups = 8, rows = 8),
        full(n = 128, h = 256, w = 256, cout = 32, groups = 8, rows = 8, on = gpu),
    ),
    cost(bytes = 8 * n * cout * (h - 2) * (w - 2), flops = 4 * n * cout * (h - 2) * (w - 2)),
)]
pub struct GroupNormApply;
