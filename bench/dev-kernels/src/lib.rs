//! Development kernels for judging kfoundry's search engine: three kernel kinds whose spaces
//! mix unordered "method" choices that pay only together with other parameters, plateaus and
//! failing regions. Their brute-forced spaces are in `bench/spaces-dev/` (see its README);
//! the kernels are plain, correct OpenCL references in `kernels/`.
//!
//! `cargo kfoundry list --manifest-path bench/dev-kernels/Cargo.toml` shows them.

/// Point-in-polygon (even-odd crossing test) of `n` points against a polygon of `v` vertices,
/// after Kernel Tuner's pnpoly example: block size, points per work item, four formulations of
/// the "edge spans y" test, slopes precomputed in local memory or not, three ways to toggle.
#[kfoundry::evolve(
    source = "kernels/pnpoly.cl",
    params(
        BLOCK_SIZE_X = [32, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024],
        TILE = [1, 2, 4, 8],
        BETWEEN_METHOD = [0, 1, 2, 3],
        USE_PRECOMPUTED_SLOPES = [0, 1],
        USE_METHOD = [0, 1, 2],
    ),
    reference(BLOCK_SIZE_X = 256, TILE = 1, BETWEEN_METHOD = 0, USE_PRECOMPUTED_SLOPES = 0, USE_METHOD = 0),
    global = ceil_div(n, BLOCK_SIZE_X * TILE) * BLOCK_SIZE_X, local = BLOCK_SIZE_X,
    buffers(px = n, py = n, vx = v, vy = v, inside = n, edges = max(1, USE_PRECOMPUTED_SLOPES * 4 * v)),
    inputs(px = uniform(-1.0, 1.0), py = uniform(-1.0, 1.0), vx = uniform(-1.0, 1.0), vy = uniform(-1.0, 1.0)),
    check(inside, rtol = 0.0, atol = 0.0),
    // Bit-identical results across configurations need IEEE division everywhere (the slope).
    options = "-cl-fp32-correctly-rounded-divide-sqrt",
    workloads(small(n = 4096, v = 60), full(n = 2097152, v = 600)),
    cost(bytes = 12 * n + 8 * v, flops = 8 * n * v),
)]
pub struct PnPoly;

/// One step of a 2-D 13-point star stencil of radius 3 with clamped edges: work-group shape,
/// outputs per work item in x and y, local-memory tile (with row padding) or not, and a
/// clamp-free path for interior work-groups or not.
#[kfoundry::evolve(
    source = "kernels/stencil.cl",
    params(
        BX = [16, 32, 64, 128], BY = [1, 2, 4, 8, 16], WPTX = [1, 2, 4], WPTY = [1, 2, 4, 8],
        USE_LOCAL = [0, 1], PAD = [0, 1], BOUNDARY = [0, 1],
    ),
    reference(BX = 16, BY = 16, WPTX = 1, WPTY = 1, USE_LOCAL = 0, PAD = 0, BOUNDARY = 0),
    require(
        BX * BY <= 1024,
        // Padding only exists for the local tile. The tile may take up to 80 KiB: NVIDIA gives
        // a work-group 48 KiB, so larger tiles are a failing region there (not on PoCL).
        USE_LOCAL == 1 || PAD == 0,
        USE_LOCAL * (BY * WPTY + 6) * (BX * WPTX + 6 + PAD) <= 20480,
    ),
    global = (ceil_div(w, BX * WPTX) * BX, ceil_div(h, BY * WPTY) * BY), local = (BX, BY),
    buffers(src = w * h, coef = 4, dst = w * h),
    inputs(src = uniform(-1.0, 1.0), coef = uniform(-1.0, 1.0)),
    check(dst, rtol = 1e-5, atol = 1e-6),
    workloads(small(w = 256, h = 192), full(w = 4096, h = 4096)),
    cost(bytes = 8 * w * h, flops = 26 * w * h),
)]
pub struct Stencil2D;

/// A 256-bin histogram added to `hist` with atomics: global atomics, one local histogram per
/// work-group or several local copies, items per work item, vector loads, contiguous or
/// strided loads. The values fall in 64 of the 256 bins, so those bins are contended.
#[kfoundry::evolve(
    source = "kernels/histogram.cl",
    params(
        WG = pow2(32..=1024), ITEMS = [1, 2, 4, 8, 16, 32, 64], VEC = [1, 2, 4], STRIDED = [0, 1],
        PRIVATE = [0, 1, 2], COPIES = [1, 2, 4, 8, 16, 32, 64],
    ),
    reference(WG = 256, ITEMS = 1, VEC = 1, STRIDED = 0, PRIVATE = 0, COPIES = 1),
    require(
        n % VEC == 0,
        // Copies exist only with PRIVATE = 2, which has at least two.
        // (64 copies take 64 KiB of local memory: more than NVIDIA gives a work-group, a failing
        // region there.)
        (PRIVATE == 2) == (COPIES > 1),
        COPIES <= WG,
        // Contiguous and strided loads are the same thing with one load per item.
        STRIDED <= ITEMS - 1,
    ),
    global = ceil_div(n, WG * ITEMS * VEC) * WG, local = WG,
    buffers(data = n, hist = 256),
    inputs(data = uniform(63.5, 127.5), hist = uniform(0.0, 1000.0)),
    check(hist, rtol = 0.0, atol = 0.0),
    workloads(small(n = 65536), full(n = 8388608)),
    cost(bytes = 4 * n, flops = n),
)]
pub struct Histogram;

/// A 2-D convolution with a 15 x 15 filter (no image padding: the caller passes the halo),
/// after Kernel Tuner's convolution example: work-group shape, outputs per work item in x and
/// y, a local-memory input tile (with row padding) or not, the filter staged in local memory or
/// read from global memory. Compute-bound.
#[kfoundry::evolve(
    source = "kernels/conv2d_15.cl",
    params(
        BX = [16, 32, 64, 128], BY = [1, 2, 4, 8, 16], TX = [1, 2, 4], TY = [1, 2, 4, 8],
        USE_LOCAL = [0, 1], PAD = [0, 1], FLOCAL = [0, 1],
    ),
    reference(BX = 16, BY = 16, TX = 1, TY = 1, USE_LOCAL = 0, PAD = 0, FLOCAL = 0),
    require(
        BX * BY <= 1024,
        USE_LOCAL == 1 || PAD == 0,
        // Tiles up to 80 KiB: over NVIDIA's 48 KiB a work-group, a failing region there.
        USE_LOCAL * (BY * TY + 14) * (BX * TX + 14 + PAD) <= 20480,
    ),
    global = (ceil_div(w, BX * TX) * BX, ceil_div(h, BY * TY) * BY), local = (BX, BY),
    buffers(image = (w + 14) * (h + 14), filter = 225, out = w * h),
    inputs(image = uniform(-1.0, 1.0), filter = uniform(-1.0, 1.0)),
    check(out, rtol = 1e-5, atol = 1e-5),
    workloads(small(w = 200, h = 120), full(w = 2048, h = 2048)),
    cost(bytes = 8 * w * h, flops = 450 * w * h),
)]
pub struct Conv2D15;

/// [`Conv2D15`]'s kernel and space with a 5 x 5 filter: memory-bound, a different landscape.
#[kfoundry::evolve(
    source = "kernels/conv2d_5.cl",
    params(
        BX = [16, 32, 64, 128], BY = [1, 2, 4, 8, 16], TX = [1, 2, 4], TY = [1, 2, 4, 8],
        USE_LOCAL = [0, 1], PAD = [0, 1], FLOCAL = [0, 1],
    ),
    reference(BX = 16, BY = 16, TX = 1, TY = 1, USE_LOCAL = 0, PAD = 0, FLOCAL = 0),
    require(
        BX * BY <= 1024,
        USE_LOCAL == 1 || PAD == 0,
        USE_LOCAL * (BY * TY + 4) * (BX * TX + 4 + PAD) <= 20480,
    ),
    global = (ceil_div(w, BX * TX) * BX, ceil_div(h, BY * TY) * BY), local = (BX, BY),
    buffers(image = (w + 4) * (h + 4), filter = 25, out = w * h),
    inputs(image = uniform(-1.0, 1.0), filter = uniform(-1.0, 1.0)),
    check(out, rtol = 1e-5, atol = 1e-5),
    workloads(small(w = 200, h = 120), full(w = 2048, h = 2048)),
    cost(bytes = 8 * w * h, flops = 50 * w * h),
)]
pub struct Conv2D5;

/// One Jacobi step of the 3-D 7-point heat stencil: work-group shape, planes per work item
/// (2.5-D blocking), a register queue along z or reloads, x/y neighbours through local memory.
#[kfoundry::evolve(
    source = "kernels/stencil3d.cl",
    params(BX = [32, 64, 128, 256], BY = [1, 2, 4, 8], ZB = [1, 2, 4, 8, 16], QUEUE = [0, 1], USE_LOCAL = [0, 1]),
    reference(BX = 32, BY = 4, ZB = 1, QUEUE = 0, USE_LOCAL = 0),
    require(BX * BY <= 1024, ZB > 1 || QUEUE == 0),
    global = (ceil_div(nx, BX) * BX, ceil_div(ny, BY) * BY, ceil_div(nz, ZB)), local = (BX, BY, 1),
    buffers(src = nx * ny * nz, coef = 2, dst = nx * ny * nz),
    inputs(src = uniform(-1.0, 1.0), coef = uniform(-1.0, 1.0)),
    check(dst, rtol = 1e-5, atol = 1e-6),
    workloads(small(nx = 40, ny = 24, nz = 20), full(nx = 256, ny = 256, nz = 128)),
    cost(bytes = 8 * nx * ny * nz, flops = 8 * nx * ny * nz),
)]
pub struct Stencil3D;
