// `source` names a file that does not exist (relative to the crate).
#[kfoundry::evolve(
    source = "kernels/does_not_exist.cl",
    global = n,
    buffers(x = n, y = n),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct Scale;

fn main() {}
