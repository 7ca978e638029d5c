// An integer scalar that is not a size needs a value: `inputs(k = constant(3))`. The launcher
// takes it as an `i32`, and the `int` buffers as `&Buffer<i32>`.
use kfoundry::ocl::{Buffer, Queue};

#[kfoundry::evolve(
    code = "__kernel void shift(const int n, const int k, __global const int* x, __global int* y) {
        int i = get_global_id(0);
        if (i < n) y[i] = x[i] << k;
    }",
    name = "ui::shift",
    params(WG = pow2(16..=256)),
    reference(WG = 64),
    global = round_up(n, WG), local = WG,
    buffers(x = n, y = n),
    inputs(k = constant(3), x = uniform(0, 100)),
    check(y),
    workloads(w(n = 1 << 16)),
)]
pub struct Shift;

#[allow(dead_code)]
fn run(queue: &Queue, x: &Buffer<i32>, y: &Buffer<i32>) -> Result<kfoundry::Step, kfoundry::Error> {
    Shift::launch(queue, 1 << 16, 3, x, y)
}

fn main() {
    let _ = Shift::launch;
    assert_eq!(Shift::ID, "ui::shift");
}
