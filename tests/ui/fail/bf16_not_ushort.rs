// bfloat16 is stored as `ushort`: naming a `float` buffer in `bf16(...)` is a mistake.
#[kfoundry::evolve(
    code = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)]; }",
    global = n,
    buffers(x = n, y = n),
    bf16(x),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct K;

fn main() {}
