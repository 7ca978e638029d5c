// Buffers named after Rust keywords (`in`, `type`): the annotation names them as they are or
// raw (`r#type`), and the launcher's parameters are raw identifiers.
use kfoundry::ocl::{Buffer, Queue};

#[kfoundry::evolve(
    code = "__kernel void k(const int n, __global const float* in, __global float* type) {
        int i = get_global_id(0);
        if (i < n) type[i] = 2.0f * in[i];
    }",
    name = "ui::keyword_buffers",
    params(WG = [32, 64]),
    reference(WG = 32),
    global = n, local = WG,
    buffers(in = n, r#type = n),
    inputs(in = uniform(0.0, 1.0)),
    check(type),
    workloads(w(n = 64)),
)]
pub struct KeywordBuffers;

#[allow(dead_code)]
fn run(queue: &Queue, input: &Buffer<f32>, output: &Buffer<f32>) -> Result<kfoundry::Step, kfoundry::Error> {
    KeywordBuffers::launch(queue, 64, input, output)
}

fn main() {
    let _ = KeywordBuffers::launch;
}
