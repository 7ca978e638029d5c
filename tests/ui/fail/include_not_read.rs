// Only `#include <kfoundry/NAME>` (kfoundry's template library) and `#include "file"` are read:
// a system header would reach the OpenCL compiler, which resolves it against the process's
// directory.
#[kfoundry::evolve(
    code = "#include <math.h>\n__kernel void scale(const int n, __global const float* x, __global float* y) { int i = get_global_id(0); if (i < n) y[i] = 2.0f * x[i]; }",
    global = n,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct Scale;

fn main() {}
