"""Issue 29: would builds in worker processes that keep their context pay on NVIDIA's OpenCL?
build_parallel.py found threads of one process giving 1.2-1.7x the builds per second and new
processes worse, their contexts' creation included. Here each of N worker processes makes its
context once (and builds once, to warm up) before the clock starts; then N distinct builds, one
per worker, against the same N builds one after another in one process. Also: how long a
build from the program binary (NVIDIA's binary is PTX) takes against one from source, which is
what a worker handing its build back to the measuring process would leave on the critical path.

usage (device tool): pip install --target /tmp/site .whl/*.whl; PYTHONPATH=/tmp/site \
    CUDA_CACHE_DISABLE=1 python3 bench/h200/build_processes.py [N ...]
"""
import multiprocessing as mp
import sys
import time

import pyopencl as cl

SRC = open("examples/kernels/gemm.cl").read()
INCLUDE = "-I crates/kfoundry-tooling/library"
STAMP = int(time.time()) % 100000
PATHS = {
    "portable": "-DWGX=16 -DWGY=16 -DTM=4 -DTN=4 -DVEC=4 -DUSE_LOCAL=1 -DTK=16 -DLVEC=4 -DPREFETCH=1 -DUNROLL=4",
    "mma": "-DWGX=32 -DWGY=4 -DTM=4 -DTN=8 -DMMA=1 -DWM=1 -DSTAGES=2 -DFLUSH=2 -DTK=16",
}
CTX = None


def ctx():
    plat = [p for p in cl.get_platforms() if "NVIDIA" in p.name][0]
    return cl.Context(plat.get_devices())


def options(path, i):
    return f"{INCLUDE} {PATHS[path]} -DKF_BUILD_ID={STAMP * 1000 + i}"


def build(c, path, i):
    t = time.time()
    p = cl.Program(c, SRC).build(options=options(path, i))
    return time.time() - t, p


def init():
    global CTX
    CTX = ctx()
    build(CTX, "portable", 999_999)


def in_worker(arg):
    t, _ = build(CTX, *arg)
    return t


def median(xs):
    return sorted(xs)[len(xs) // 2]


if __name__ == "__main__":
    ns = [int(a) for a in sys.argv[1:]] or [4, 8, 15]
    c = ctx()
    dev = c.devices[0]
    for path in PATHS:
        build(c, path, 99_999)
        # from source against from the binary
        srcs, bins = [], []
        for i in range(5):
            t, p = build(c, path, 50_000 + i)
            srcs.append(t)
            binary = p.get_info(cl.program_info.BINARIES)[0]
            t = time.time()
            cl.Program(c, [dev], [binary]).build()
            bins.append(time.time() - t)
        print(f"{path:8} from source median {median(srcs):.3f} s; from its binary "
              f"({len(binary)} bytes) median {median(bins):.3f} s", flush=True)
        for n in ns:
            t = time.time()
            serial = [build(c, path, 1000 * n + i)[0] for i in range(n)]
            ts = time.time() - t
            with mp.get_context("spawn").Pool(n, initializer=init) as pool:
                # every worker has its context and one build before the clock starts
                pool.map(in_worker, [(path, 70_000 + 100 * n + i) for i in range(n)], chunksize=1)
                t = time.time()
                each = pool.map(in_worker, [(path, 80_000 + 100 * n + i) for i in range(n)], chunksize=1)
                tp = time.time() - t
            print(f"{path:8} N={n:2}: serial {ts:6.2f} s (median {median(serial):.3f}); "
                  f"{n} warm worker processes {tp:6.2f} s ({ts / tp:4.2f}x, median {median(each):.3f})",
                  flush=True)
