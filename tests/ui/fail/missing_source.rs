// Neither `source = ...` nor `code = ...`.
#[kfoundry::evolve(
    global = n,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct Scale;

fn main() {}
