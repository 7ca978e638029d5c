// `global` is given twice: the error points at the second one.
#[kfoundry::evolve(
    code = "__kernel void scale(const int n, const float a, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = a * x[i]; }",
    global = n,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 1024)),
    global = 2 * n,
)]
pub struct Scale;

fn main() {}
