// The workloads bind different sizes: `small` binds `n`, `large` binds `m`.
#[kfoundry::evolve(
    code = "__kernel void scale(const int n, const float a, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = a * x[i]; }",
    global = n,
    buffers(x = n, y = n),
    check(y),
    workloads(small(n = 1024), large(m = 4096)),
)]
pub struct Scale;

fn main() {}
