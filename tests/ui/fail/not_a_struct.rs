// The attribute goes on a unit struct, not on a function.
#[kfoundry::evolve(
    code = "__kernel void scale(const int n, const float a, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = a * x[i]; }",
    global = n,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 1024)),
)]
pub fn scale() {}

fn main() {}
