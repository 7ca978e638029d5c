// A parameter becomes `-D NAME=value`: an OpenCL C keyword or type would break the kernel.
#[kfoundry::evolve(
    code = "__kernel void k(const int n, __global float* y) { y[get_global_id(0)] = 1.0f; }",
    params(float4 = [1, 2]),
    reference(float4 = 1),
    global = n,
    buffers(y = n),
    check(y),
    workloads(w(n = 64)),
)]
pub struct KeywordParam;

fn main() {}
