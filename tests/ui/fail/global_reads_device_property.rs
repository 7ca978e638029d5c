// Only `require(...)` may read device properties: launch geometry may not.
#[kfoundry::evolve(
    code = "__kernel void scale(const int n, const float a, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = a * x[i]; }",
    params(WG = [32, 64]),
    reference(WG = 64),
    global = n * device_compute_units, local = WG,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct Scale;

fn main() {}
