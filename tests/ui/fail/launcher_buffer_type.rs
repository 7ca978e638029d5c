// The launcher is typed: `x` is `__global const float*`, so `&Buffer<i32>` is refused.
use kfoundry::ocl::{Buffer, Queue};

#[kfoundry::evolve(
    code = "__kernel void scale(const int n, const float a,
                                __global const float* x, __global float* y) {
        int i = get_global_id(0);
        if (i < n) y[i] = a * x[i];
    }",
    global = n,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct Scale;

fn run(queue: &Queue, x: &Buffer<i32>, y: &Buffer<f32>) -> Result<kfoundry::Step, kfoundry::Error> {
    Scale::launch(queue, 1024, 2.0, x, y)
}

fn main() {
    let _ = run;
}
