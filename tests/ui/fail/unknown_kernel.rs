// `kernel = ...` names no kernel of the source: the error points at the name.
#[kfoundry::evolve(
    code = "__kernel void scale(const int n, const float a, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = a * x[i]; }",
    kernel = "saxpy",
    global = n,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct Scale;

fn main() {}
