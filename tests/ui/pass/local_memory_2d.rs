// A 2-D transpose through a `__local` tile: the tile's length comes from `buffers(...)` and it is
// not a launcher parameter; the sizes `m`, `n` come first, in the workloads' order.
use kfoundry::ocl::{Buffer, Queue};

#[kfoundry::evolve(
    code = "__kernel void transpose(const int m, const int n, __global const float* a, __global float* b, __local float* tile) {
        int x = get_global_id(0), y = get_global_id(1);
        int lx = get_local_id(0), ly = get_local_id(1);
        tile[ly * TS + lx] = a[y * n + x];
        barrier(CLK_LOCAL_MEM_FENCE);
        b[x * m + y] = tile[ly * TS + lx];
    }",
    params(TS = [8, 16]),
    reference(TS = 16),
    require(m % TS == 0, n % TS == 0),
    global = (n, m), local = (TS, TS),
    buffers(a = m * n, b = m * n, tile = TS * TS),
    inputs(a = normal(0.0, 1.0)),
    check(b, rtol = 0, atol = 0),
    workloads(small(m = 256, n = 512), large(m = 2048, n = 4096)),
    cost(bytes = 8 * m * n),
)]
pub struct Transpose;

#[allow(dead_code)]
fn run(queue: &Queue, a: &Buffer<f32>, b: &Buffer<f32>) -> Result<kfoundry::Step, kfoundry::Error> {
    Transpose::launch(queue, 256, 512, a, b)
}

fn main() {
    let _ = Transpose::launch;
    let _ = Transpose::ID;
}
