// Only options that change how the kernel is compiled, never what is read: no `-I`.
#[kfoundry::evolve(
    code = "__kernel void k(const int n, __global float* y) { y[get_global_id(0)] = 1.0f; }",
    global = n,
    buffers(y = n),
    check(y),
    workloads(w(n = 64)),
    options = "-cl-mad-enable -I/etc",
)]
pub struct BadOption;

fn main() {}
