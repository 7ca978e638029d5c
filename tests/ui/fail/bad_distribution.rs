// `gauss` is not a distribution (`normal(mean, std)` is).
#[kfoundry::evolve(
    code = "__kernel void scale(const int n, const float a, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = a * x[i]; }",
    global = n,
    buffers(x = n, y = n),
    inputs(x = gauss(0.0, 1.0)),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct Scale;

fn main() {}
