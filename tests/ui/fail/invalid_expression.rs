// `n = 4` is an assignment, not a condition (`n == 4` was meant).
#[kfoundry::evolve(
    code = "__kernel void scale(const int n, const float a, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = a * x[i]; }",
    require(n = 4),
    global = n,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 4)),
)]
pub struct Scale;

fn main() {}
