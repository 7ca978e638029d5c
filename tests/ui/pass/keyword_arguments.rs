// Scalar kernel arguments named after Rust keywords: raw identifiers where Rust allows them
// (`r#fn`), a trailing `_` where it does not (`self`, `Self`, `super`, `crate`, `_`), and a
// second `_` when that name is taken (`self_`). The launcher's parameters are positional.
use kfoundry::ocl::{Buffer, Queue};

#[kfoundry::evolve(
    code = "__kernel void k(const int n, const float self, const float Self, const float super, const float crate, const float _,
                            const float self_, const float fn, __global const float* x, __global float* y) {
        int i = get_global_id(0);
        y[i] = x[i] * self * Self * super * crate * _ * self_ * fn;
    }",
    name = "ui::keywords",
    global = n,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 64)),
)]
pub struct Keywords;

#[allow(dead_code, clippy::too_many_arguments)]
fn run(queue: &Queue, x: &Buffer<f32>, y: &Buffer<f32>) -> Result<kfoundry::Step, kfoundry::Error> {
    Keywords::launch(queue, 64, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, x, y)
}

fn main() {
    let _ = Keywords::launch;
}
