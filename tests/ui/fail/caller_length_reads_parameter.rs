// The caller allocates its buffers before dispatch picks a variant: their lengths may depend
// on sizes only.
#[kfoundry::evolve(
    code = "__kernel void k(const int n, __global float* y) { y[get_global_id(0)] = 1.0f; }",
    params(PAD = [0, 64]),
    reference(PAD = 0),
    global = n,
    buffers(y = n + PAD),
    check(y),
    workloads(w(n = 64)),
)]
pub struct PaddedLength;

fn main() {}
