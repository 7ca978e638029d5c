// Scratch belongs to the launcher, all zero at every launch: it cannot be a checked output.
#[kfoundry::evolve(
    code = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)]; }",
    global = n,
    buffers(x = n, y = n),
    scratch(y),
    check(y),
    workloads(w(n = 64)),
)]
pub struct CheckedScratch;

fn main() {}
