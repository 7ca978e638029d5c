"""Issue 29: do OpenCL builds run in parallel on this driver? N distinct builds of one kernel
(the suite's examples/kernels/gemm.cl, portable and tensor-core paths, N different -D values),
one after another, on N threads of one process, and in N processes (each its own context);
wall seconds of each way. Every build must succeed (a failed build is fast and would say
nothing), so the script stops at the first that does not.

usage (device tool): pip install --target /tmp/site .whl/*.whl; PYTHONPATH=/tmp/site \
    CUDA_CACHE_DISABLE=1 python3 bench/h200/build_parallel.py [N]
"""
import sys
import time
import concurrent.futures as cf
import multiprocessing as mp

import pyopencl as cl

SRC = open("examples/kernels/gemm.cl").read()
INCLUDE = "-I crates/kfoundry-tooling/library"
N = int(sys.argv[1]) if len(sys.argv) > 1 else 8
STAMP = int(time.time()) % 100000

PATHS = {
    "portable": "-DWGX=16 -DWGY=16 -DTM=4 -DTN=4 -DVEC=4 -DUSE_LOCAL=1 -DTK=16 -DLVEC=4 -DPREFETCH=1 -DUNROLL=4",
    "mma": "-DWGX=32 -DWGY=4 -DTM=4 -DTN=8 -DMMA=1 -DWM=1 -DSTAGES=2 -DFLUSH=2 -DTK=16",
}


def options(path, i):
    # distinct options, same kernel: every build is new for the driver's cache too
    return f"{INCLUDE} {PATHS[path]} -DKF_BUILD_ID={STAMP * 1000 + i}"


def ctx():
    plat = [p for p in cl.get_platforms() if "NVIDIA" in p.name][0]
    return cl.Context(plat.get_devices())


def build(c, path, i):
    t = time.time()
    try:
        cl.Program(c, SRC).build(options=options(path, i))
    except Exception as e:  # noqa: BLE001
        sys.exit(f"{path} build {i} failed: {str(e)[:600]}")
    return time.time() - t


def in_process(arg):
    return build(ctx(), *arg)


def median(xs):
    return sorted(xs)[len(xs) // 2]


if __name__ == "__main__":
    c = ctx()
    for path in PATHS:
        build(c, path, 99_999)  # warm the driver up
        t = time.time()
        serial = [build(c, path, i) for i in range(N)]
        ts = time.time() - t
        t = time.time()
        with cf.ThreadPoolExecutor(N) as ex:
            threads = list(ex.map(lambda i: build(c, path, 100 + i), range(N)))
        tt = time.time() - t
        with mp.get_context("spawn").Pool(N) as pool:
            pool.map(in_process, [(path, 10_000 + i) for i in range(N)])  # start the workers
            t = time.time()
            procs = pool.map(in_process, [(path, 200 + i) for i in range(N)])
            tp = time.time() - t
        print(f"{path:8} N={N:2}: serial {ts:6.2f} s (median {median(serial):.3f}); "
              f"threads {tt:6.2f} s ({ts / tt:4.2f}x, median {median(threads):.3f}); "
              f"processes {tp:6.2f} s ({ts / tp:4.2f}x, median {median(procs):.3f}, context included)",
              flush=True)
