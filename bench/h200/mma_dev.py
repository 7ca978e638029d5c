"""Dev bench of the MMA (3xTF32) path of gemm.cl / linear_gelu.cl on NVIDIA OpenCL.
Correctness on sampled rows vs FP64; event-timed medians; cuBLAS FP32 via torch in the same run."""
import sys, time, numpy as np, pyopencl as cl, os
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")
plat = [p for p in cl.get_platforms() if "NVIDIA" in p.name][0]
dev = plat.get_devices()[0]
ctx = cl.Context([dev]); q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
mf = cl.mem_flags
rng = np.random.default_rng(0)
RUNS = 10
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kt_opencl"))
from kernels import expand_includes  # noqa: E402  (the tooling's #include expansion)
def kernel_source(name):
    """An example kernel as kfoundry builds it: its library includes expanded."""
    return expand_includes(open(f"examples/kernels/{name}").read(), "examples/kernels")
def bench(name, src, kname, args, gsz, lsz, opts):
    t0 = time.time()
    try:
        prg = cl.Program(ctx, src).build(options=opts)
    except Exception as e:
        print(f"{name}: BUILD FAILED {str(e)[:1500]}", flush=True); return None
    bt = time.time() - t0
    k = getattr(prg, kname)
    try:
        k(q, gsz, lsz, *args).wait()
    except Exception as e:
        print(f"{name}: LAUNCH FAILED {e}", flush=True); return None
    ts = []
    for _ in range(RUNS):
        ev = k(q, gsz, lsz, *args); ev.wait()
        ts.append((ev.profile.end - ev.profile.start) * 1e-6)
    regs = None
    return float(np.median(ts)), bt

def gemm_suite(m, n, k, configs):
    src = kernel_source("gemm.cl")
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32); b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    da = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a); db = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
    dc = cl.Buffer(ctx, mf.READ_WRITE, m * n * 4)
    rows = np.arange(0, m, m // 64)
    ref = a[rows].astype(np.float64) @ b.astype(np.float64)
    fl = 2.0 * m * n * k
    for cfg in configs:
        p = dict(WGX=16, WGY=16, TM=1, TN=1, VEC=1, USE_LOCAL=0, TK=8, PAD=0, LVEC=1, UNROLL=1, PREFETCH=0, MMA=0, WM=1, STAGES=2); p.update(cfg)
        opts = " ".join(f"-D {kk}={v}" for kk, v in p.items())
        gsz = (-(-n // (p["WGX"] * p["TN"])) * p["WGX"], -(-m // (p["WGY"] * p["TM"])) * p["WGY"])
        cl.enqueue_fill_buffer(q, dc, np.float32(np.nan), 0, m * n * 4).wait()
        r = bench(str(cfg), src, "gemm", (np.int32(m), np.int32(n), np.int32(k), da, db, dc), gsz, (p["WGX"], p["WGY"]), opts)
        if r is None: continue
        c = np.empty((m, n), np.float32); cl.enqueue_copy(q, c, dc).wait()
        err = np.linalg.norm(c[rows] - ref) / np.linalg.norm(ref)
        print(f"gemm {m}x{n}x{k} {cfg}: {r[0]:.3f} ms = {fl / r[0] / 1e9:.1f} TFLOP/s, rel err {err:.2e}, nan {np.isnan(c).sum()}, build {r[1]:.1f}s", flush=True)

def linear_suite(m, n, k, configs):
    src = kernel_source("linear_gelu.cl")
    x = rng.uniform(-1, 1, (m, k)).astype(np.float32); w = (rng.uniform(-1, 1, (n, k)) / 90).astype(np.float32); bias = rng.uniform(-1, 1, n).astype(np.float32)
    dx = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x); dw = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=w)
    dbias = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=bias); dy = cl.Buffer(ctx, mf.READ_WRITE, m * n * 4)
    rows = np.arange(0, m, m // 32)
    from math import erf, sqrt
    v = x[rows].astype(np.float64) @ w.T.astype(np.float64) + bias
    ref = 0.5 * v * (1 + np.vectorize(erf)(v / sqrt(2)))
    fl = 2.0 * m * n * k
    for cfg in configs:
        p = dict(WGX=16, WGY=16, TM=1, TN=1, VEC=1, USE_LOCAL=0, TK=8, PAD=0, LVEC=1, UNROLL=1, PREFETCH=0, MMA=0, WM=1, STAGES=2); p.update(cfg)
        opts = " ".join(f"-D {kk}={v}" for kk, v in p.items())
        gsz = (-(-n // (p["WGX"] * p["TN"])) * p["WGX"], -(-m // (p["WGY"] * p["TM"])) * p["WGY"])
        r = bench(str(cfg), src, "linear_gelu", (np.int32(m), np.int32(n), np.int32(k), dx, dw, dbias, dy), gsz, (p["WGX"], p["WGY"]), opts)
        if r is None: continue
        y = np.empty((m, n), np.float32); cl.enqueue_copy(q, y, dy).wait()
        err = np.linalg.norm(y[rows] - ref) / np.linalg.norm(ref)
        print(f"linear {m}x{n}x{k} {cfg}: {r[0]:.3f} ms = {fl / r[0] / 1e9:.1f} TFLOP/s, rel err {err:.2e}, build {r[1]:.1f}s", flush=True)

M = lambda **kw: dict(MMA=1, **kw)
GEMM = [
    M(WGX=8, WGY=16, TM=8, TN=8, WM=2, TK=16, STAGES=2, FLUSH=2),
    M(WGX=8, WGY=16, TM=8, TN=8, WM=2, TK=16, STAGES=2, FLUSH=2),
    M(WGX=8, WGY=16, TM=8, TN=8, WM=2, TK=16, STAGES=2, FLUSH=2),
    M(WGX=8, WGY=16, TM=8, TN=8, WM=2, TK=16, STAGES=2, FLUSH=2),
    M(WGX=8, WGY=16, TM=8, TN=8, WM=2, TK=32, STAGES=2, FLUSH=4),
    M(WGX=8, WGY=16, TM=8, TN=8, WM=2, TK=32, STAGES=2, FLUSH=4),
    M(WGX=16, WGY=8, TM=8, TN=8, WM=1, TK=16, STAGES=3, FLUSH=2),
    M(WGX=16, WGY=8, TM=8, TN=8, WM=1, TK=16, STAGES=3, FLUSH=2),
]
which = sys.argv[1] if len(sys.argv) > 1 else "all"
if which in ("all", "gemm"):
    gemm_suite(4096, 4096, 4096, GEMM)
if which in ("all", "linear"):
    linear_suite(1024, 8192, 8192, GEMM)
try:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.rand(4096, 4096, device="cuda") * 2 - 1; b = torch.rand(4096, 4096, device="cuda") * 2 - 1
    for _ in range(3): torch.matmul(a, b)
    torch.cuda.synchronize(); ts = []
    for _ in range(RUNS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); torch.matmul(a, b); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ms = float(np.median(ts)); print(f"cuBLAS FP32 4096^3: {ms:.3f} ms = {2 * 4096**3 / ms / 1e9:.1f} TFLOP/s")
except Exception as e:
    print("torch:", e)
