// A constraint reads `device_warp`, which is not one of the device properties.
#[kfoundry::evolve(
    code = "__kernel void scale(const int n, const float a, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = a * x[i]; }",
    params(WG = [32, 64]),
    reference(WG = 64),
    require(WG <= device_max_work_group, WG % device_warp == 0),
    global = n, local = WG,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct Scale;

fn main() {}
