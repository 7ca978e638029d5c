// `half*` buffers, and bfloat16 in `ushort` buffers declared with `bf16(...)`: the launcher
// takes both as `&Buffer<u16>` (their bits), and the check's default tolerance is the format's.
use kfoundry::ocl::{Buffer, Queue};

#[kfoundry::evolve(
    code = "__kernel void mix(const int n, __global const half* x, __global const ushort* w, __global ushort* y) {
        int i = get_global_id(0);
        if (i < n) {
            float v = vload_half(i, x) * as_float((uint)w[i] << 16);
            y[i] = (ushort)(as_uint(v) >> 16);
        }
    }",
    name = "ui::mix",
    params(WG = pow2(16..=256)),
    reference(WG = 64),
    global = round_up(n, WG), local = WG,
    buffers(x = n, w = n, y = n),
    bf16(w, y),
    check(y),
    workloads(w(n = 1 << 16)),
)]
pub struct Mix;

#[allow(dead_code)]
fn run(queue: &Queue, x: &Buffer<u16>, w: &Buffer<u16>, y: &Buffer<u16>) -> Result<kfoundry::Step, kfoundry::Error> {
    Mix::launch(queue, 1 << 16, x, w, y)
}

fn main() {
    let _ = Mix::launch;
    assert_eq!(Mix::ID, "ui::mix");
}
