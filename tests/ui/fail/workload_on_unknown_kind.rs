// A workload meant for a kind of device that OpenCL does not have.
#[kfoundry::evolve(
    code = "__kernel void scale(const int n, const float a, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = a * x[i]; }",
    params(WG = [32, 64]),
    reference(WG = 64),
    global = n, local = WG,
    buffers(x = n, y = n),
    check(y),
    workloads(small(n = 1024), full(n = 1048576, on = [gpu, tpu])),
)]
pub struct Scale;

fn main() {}
