// `UNROL` is a misspelling of `UNROLL`: it appears nowhere, so every value would build the
// same kernel.
#[kfoundry::evolve(
    code = "__kernel void scale(const int n, __global const float* x, __global float* y) { int i = get_global_id(0); for (int u = 0; u < UNROLL; u++) if (i < n) y[i] = 2.0f * x[i]; }",
    params(WG = [32, 64], UNROL = [1, 2, 4]),
    reference(WG = 64, UNROL = 1),
    global = n, local = WG,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 1024)),
    options = "-D UNROLL=1",
)]
pub struct Scale;

fn main() {}
