// Scratch is memory the kernel writes and clears: a `const` buffer cannot be scratch.
#[kfoundry::evolve(
    code = "__kernel void k(const int n, __global const float* x, __global float* y, __global const float* ws) { y[get_global_id(0)] = x[get_global_id(0)] + ws[0]; }",
    global = n,
    buffers(x = n, y = n, ws = n),
    scratch(ws),
    check(y),
    workloads(w(n = 64)),
)]
pub struct ConstScratch;

fn main() {}
