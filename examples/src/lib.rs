//! Example kernels annotated for kfoundry. `cargo kfoundry tune` tunes them; the program in
//! `src/main.rs` runs them through dispatch and checks their results against the CPU.

/// y = a·x + y: an elementwise kernel, bandwidth-bound.
#[kfoundry::evolve(
    source = "kernels/saxpy.cl",
    params(WG = [32, 64, 128, 256], VEC = [1, 2, 4, 8], ITEMS = 1..=8, STRIDED = [0, 1]),
    reference(WG = 64, VEC = 1, ITEMS = 1, STRIDED = 0),
    global = ceil_div(n, WG * VEC * ITEMS) * WG, local = WG,
    buffers(x = n, y = n),
    inputs(x = uniform(-1.0, 1.0), y = uniform(-1.0, 1.0)),
    check(y, rtol = 1e-6, atol = 1e-6),
    workloads(small(n = 1 << 16), large(n = 1 << 22)),
    cost(bytes = 12 * n, flops = 2 * n),
)]
pub struct Saxpy;
