// The source has two kernels and no `kernel = ...` says which one.
#[kfoundry::evolve(
    code = "__kernel void first(__global float* y) { y[0] = 1.0f; }
            __kernel void second(__global float* y) { y[0] = 2.0f; }",
    global = n,
    buffers(y = n),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct Scale;

fn main() {}
