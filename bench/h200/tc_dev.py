"""Issue 28: the tensor-core GEMM path of the template library, developed and measured.

Two modes:

  python3 bench/h200/tc_dev.py emulate [I,J,...]
      Any OpenCL device (PoCL here): gemm.cl and linear_gelu.cl with MMA = 1 and the warp-wide
      instructions emulated (KM_EMULATE), over many tile shapes, sizes and pipelines; each
      output checked against FP64 (relative error norm at most twice a sequential FP32 sum's,
      no element left unwritten). Exits non-zero on a failure.

  python3 bench/h200/tc_dev.py time [--old DIR]
      NVIDIA's OpenCL: the peak rate of mma.sync (TF32 m16n8k8, one kernel of independent
      products, no memory traffic), then each configuration of CONFIGS built as kfoundry builds
      it (includes expanded, parameters as -D), its registers, spills and shared memory from
      ptxas, its error against FP64 on sampled rows (NaN-poisoned output first), the median of
      RUNS event-timed launches; cuBLAS (PyTorch) FP32 and TF32 at the same shapes, same run.
      --old DIR: also the kernels and library of DIR (a copy of an earlier tree's
      examples/kernels and library/kfoundry) at their committed variant, as a baseline.

Writes nothing but stdout. Development figures, not the tuner's.
"""
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pyopencl as cl

warnings.filterwarnings("ignore", category=cl.CompilerWarning)  # NVIDIA's build log of the PTX

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench", "kt_opencl"))
sys.path.insert(0, HERE)
import kernels as kt_kernels  # noqa: E402
from tc_bounds import geometry, inputs, reference_rows  # noqa: E402  (inputs and FP64 truth)

RUNS = int(os.environ.get("RUNS", "10"))
BASE = dict(VEC=1, USE_LOCAL=0, PAD=0, LVEC=1, UNROLL=1, PREFETCH=0, MMA=1)
SHORT = ("WGX", "WGY", "TM", "TN", "WM", "TK", "STAGES", "FLUSH", "RASTER", "KM_SPLITS")


def cfg(wgx, wgy, tm, tn, wm, tk, stages, flush, **extra):
    return dict(BASE, WGX=wgx, WGY=wgy, TM=tm, TN=tn, WM=wm, TK=tk, STAGES=stages, FLUSH=flush, **extra)


def source(name, kernel_dir=None, library_dir=None):
    kernel_dir = kernel_dir or os.path.join(REPO, "examples", "kernels")
    if library_dir:
        kt_kernels.LIBRARY_DIR = library_dir
    else:
        kt_kernels.LIBRARY_DIR = os.path.join(REPO, "crates", "kfoundry-tooling", "library")
    return kt_kernels.expand_includes(open(os.path.join(kernel_dir, name + ".cl")).read(), kernel_dir)


def smem_floats(p, kmajor):
    bm, bn, tk = p["WGY"] * p["TM"], p["WGX"] * p["TN"], p["TK"]
    ldk = tk + tk // 32 * 4
    return p["STAGES"] * ((bm + bn) * ldk if kmajor else bm * ldk + tk * bn)


def valid(p, m, n, k, kmajor):
    bm, bn = p["WGY"] * p["TM"], p["WGX"] * p["TN"]
    nt = p["WGX"] * p["WGY"]
    warps = nt // 32
    return (nt % 32 == 0 and nt <= 256 and warps % p["WM"] == 0 and (bm // p["WM"]) % 16 == 0
            and bm % p["WM"] == 0 and bn % (warps // p["WM"]) == 0 and (bn // (warps // p["WM"])) % 8 == 0
            and p["TK"] % (8 * p["FLUSH"]) == 0 and m % bm == 0 and n % bn == 0 and k % p["TK"] == 0
            and smem_floats(p, kmajor) <= 12288)


def problem(kind, m, n, k):
    """tc_bounds's description of a problem: gemm (B is k x n) or linear (w is n x k, + bias, GELU)."""
    return dict(m=m, n=n, k=k, bias=kind != "gemm")


def sequential_fp32(kind, a, b, bias, rows):
    """The reference kernel's sum: k ascending, one FP32 fma at a time."""
    bt = b if kind == "gemm" else b.T
    acc = np.zeros((len(rows), bt.shape[1]), np.float32)
    for kk in range(a.shape[1]):
        acc = (acc.astype(np.float64) + a[rows, kk:kk + 1].astype(np.float64) * bt[kk:kk + 1].astype(np.float64)).astype(np.float32)
    if kind == "gemm":
        return acc.astype(np.float64)
    from math import erf, sqrt
    v = (acc + bias).astype(np.float64)
    return 0.5 * v * (1 + np.vectorize(erf)(v / sqrt(2)))


class Device:
    def __init__(self, want_nvidia):
        plats = cl.get_platforms()
        plat = [p for p in plats if "NVIDIA" in p.name][0] if want_nvidia else plats[0]
        self.dev = plat.get_devices()[0]
        self.ctx = cl.Context([self.dev])
        self.q = cl.CommandQueue(self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)

    def buf(self, host):
        return cl.Buffer(self.ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)


def run_one(d, kind, src, p, m, n, k, data, rows, ref, time_it):
    """Builds and runs one configuration: (seconds or None, rel err, NaN count, program)."""
    a, b, bias = data
    opts = " ".join(f"-D {kk}={vv}" for kk, vv in p.items())
    prg = cl.Program(d.ctx, src).build(options=opts)
    name = "gemm" if kind == "gemm" else "linear_gelu"
    kern = getattr(prg, name)
    bufs = [d.buf(a), d.buf(b)] + ([d.buf(bias)] if bias is not None else [])
    out = cl.Buffer(d.ctx, cl.mem_flags.READ_WRITE, m * n * 4)
    cl.enqueue_copy(d.q, out, np.full(m * n, np.nan, np.float32)).wait()
    gsz, lsz = geometry(p, m, n)
    args = (np.int32(m), np.int32(n), np.int32(k), *bufs, out)
    kern(d.q, gsz, lsz, *args).wait()
    c = np.empty((m, n), np.float32)
    cl.enqueue_copy(d.q, c, out).wait()
    nan = int(np.isnan(c).sum())
    got = c[rows].astype(np.float64)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref)) if nan == 0 else float("nan")
    t = None
    if time_it:
        ts = []
        for _ in range(RUNS):
            ev = kern(d.q, gsz, lsz, *args)
            ev.wait()
            ts.append((ev.profile.end - ev.profile.start) * 1e-9)
        t = float(np.median(ts))
    return t, err, nan, prg


# ---------------------------------------------------------------------------------------------
# emulate

EMULATED = [
    # (kind, config, m, n, k): NJ 1, 2, 4, 8 and 16; TK 8, 16 and 32; swizzled and not; RASTER.
    ("gemm", cfg(8, 4, 4, 1, 1, 8, 2, 1), 32, 16, 24),
    ("gemm", cfg(8, 8, 4, 2, 2, 16, 3, 2), 64, 32, 48),
    ("gemm", cfg(16, 8, 8, 1, 2, 8, 4, 1), 128, 32, 40),
    ("gemm", cfg(8, 4, 4, 4, 1, 16, 2, 2), 32, 64, 48),
    ("gemm", cfg(8, 4, 4, 8, 1, 32, 2, 4), 32, 128, 64),
    ("gemm", cfg(16, 4, 4, 8, 1, 8, 3, 1), 32, 256, 40),
    ("gemm", cfg(16, 4, 4, 4, 1, 32, 2, 2, RASTER=2), 48, 192, 96),
    ("gemm", cfg(8, 8, 4, 8, 2, 16, 4, 1, RASTER=4), 96, 128, 80),
    ("gemm", cfg(8, 4, 4, 4, 1, 16, 2, 2, KM_SPLITS=1), 32, 64, 48),
    ("gemm", cfg(32, 1, 16, 8, 1, 8, 2, 1), 32, 256, 24),  # more chunks in a B row than items
    ("gemm", cfg(8, 8, 2, 4, 1, 8, 2, 1), 32, 64, 24),     # fewer A chunks than items
    ("linear", cfg(8, 4, 4, 1, 1, 8, 2, 1), 32, 16, 24),
    ("linear", cfg(8, 4, 4, 4, 1, 16, 3, 2), 32, 64, 48),
    ("linear", cfg(8, 8, 4, 8, 2, 32, 2, 2), 64, 128, 96),
    ("linear", cfg(16, 4, 4, 2, 1, 8, 4, 1, RASTER=3), 80, 64, 40),
    ("linear", cfg(8, 8, 2, 4, 1, 8, 2, 1), 32, 64, 24),
]


def emulate(only=None):
    d = Device(False)
    rng = np.random.default_rng(7)
    failures = 0
    for idx, (kind, p, m, n, k) in enumerate(EMULATED):
        if only is not None and idx not in only:
            continue
        p = dict(p, KM_EMULATE=1)
        assert valid(p, m, n, k, kind == "linear"), (kind, p, m, n, k)
        src = source("gemm" if kind == "gemm" else "linear_gelu")
        data = inputs(problem(kind, m, n, k), rng)
        rows = np.arange(m)
        ref = reference_rows(problem(kind, m, n, k), *data, rows)
        fp32 = sequential_fp32(kind, *data, rows)
        e32 = float(np.linalg.norm(fp32 - ref) / np.linalg.norm(ref))
        _, err, nan, _ = run_one(d, kind, src, p, m, n, k, data, rows, ref, False)
        tf32 = p.get("KM_SPLITS", 3) == 1
        ok = nan == 0 and (err < 4e-3 if tf32 else err <= 2 * e32)
        failures += not ok
        short = " ".join(f"{kk}={p[kk]}" for kk in SHORT if kk in p)
        print(f"{'ok  ' if ok else 'FAIL'} {kind} {m}x{n}x{k} {short}: rel err {err:.2e} "
              f"(sequential FP32 {e32:.2e}), NaN {nan}", flush=True)
    sys.exit(1 if failures else 0)


# ---------------------------------------------------------------------------------------------
# time

PEAK_SRC = r"""
#define KM_MMA(D, A, B)                                                                              \
    asm volatile(MMA_INSTRUCTION " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"        \
                 : "+f"((D)[0]), "+f"((D)[1]), "+f"((D)[2]), "+f"((D)[3])                           \
                 : "r"((A)[0]), "r"((A)[1]), "r"((A)[2]), "r"((A)[3]), "r"((B)[0]), "r"((B)[1]))
__kernel void peak(const int iters, __global const uint* in, __global float* out)
{
    const int lane = get_local_id(0) % 32;
    uint a[4], b[2];
    for (int r = 0; r < 4; ++r) a[r] = in[(lane + r) % 64];
    for (int r = 0; r < 2; ++r) b[r] = in[(lane + 7 * r) % 64];
    float d[CHAINS][4];
    for (int c = 0; c < CHAINS; ++c)
        for (int r = 0; r < 4; ++r) d[c][r] = 0.0f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            KM_MMA(d[c], a, b);
    }
    float s = 0.0f;
    for (int c = 0; c < CHAINS; ++c)
        for (int r = 0; r < 4; ++r) s += d[c][r];
    out[get_global_id(0)] = s;
}
"""
TF32 = ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 2048, 0x3f800000)


def mma_peak(d, mma=TF32, shapes=((4, 128, 4), (8, 128, 4), (8, 256, 2), (16, 128, 2))):
    """Products a second of one mma.sync instruction, whole chip: independent chains per warp.
    mma: (PTX instruction, flops a product, the 32-bit word its operands are filled with)."""
    instruction, flops, word = mma
    inp = d.buf(np.full(64, word, np.uint32))
    src = PEAK_SRC.replace("MMA_INSTRUCTION", f'"{instruction}"')
    for chains, wg, groups_per_sm in shapes:
        peak = cl.Kernel(cl.Program(d.ctx, src).build(options=f"-D CHAINS={chains}"), "peak")
        sms = d.dev.max_compute_units
        gsz = sms * groups_per_sm * wg
        out = cl.Buffer(d.ctx, cl.mem_flags.WRITE_ONLY, gsz * 4)
        iters = 20000
        peak(d.q, (gsz,), (wg,), np.int32(iters), inp, out).wait()
        ts = []
        for _ in range(5):
            ev = peak(d.q, (gsz,), (wg,), np.int32(iters), inp, out)
            ev.wait()
            ts.append((ev.profile.end - ev.profile.start) * 1e-9)
        t = float(np.median(ts))
        rate = gsz // 32 * iters * chains * flops / t / 1e12
        extra = f" (3xTF32 ceiling {rate / 3:.1f})" if mma == TF32 else ""
        print(f"{instruction} peak: {chains} chains a warp, {wg} items x {groups_per_sm} groups an SM: "
              f"{rate:.1f} TFLOP/s{extra}", flush=True)


def ptxas(prg):
    ptx = prg.get_info(cl.program_info.BINARIES)[0].rstrip(b"\0")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        open(path, "wb").write(ptx)
        r = subprocess.run(["ptxas", "-arch=sm_90", "-v", path, "-o", os.path.join(tmp, "k.cubin")],
                           capture_output=True, text=True)
        sass = subprocess.run(["cuobjdump", "--dump-sass", os.path.join(tmp, "k.cubin")],
                              capture_output=True, text=True).stdout
    t = r.stdout + r.stderr
    regs = re.search(r"Used (\d+) registers", t)
    spill = re.search(r"(\d+) bytes spill stores", t)
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass)
    hmma = sum(1 for o in ops if o.startswith("HMMA"))
    return (regs and regs.group(1), spill and spill.group(1), len(ops), hmma)


GEMM = [
    cfg(16, 8, 8, 8, 1, 16, 3, 2),   # 64 x 128, 4 warps of 64 x 32 (the committed shape)
    cfg(16, 8, 8, 8, 1, 16, 4, 2),
    cfg(16, 8, 8, 8, 1, 16, 3, 2, RASTER=8),
    cfg(16, 8, 8, 8, 1, 8, 4, 1),
    cfg(8, 16, 8, 8, 2, 16, 3, 2),   # 128 x 64, warps 64 x 32
    cfg(16, 16, 8, 8, 2, 16, 3, 2),  # 128 x 128, 8 warps of 64 x 32
    cfg(16, 16, 8, 8, 4, 16, 3, 2),  # 128 x 128, 8 warps of 32 x 64
    cfg(32, 8, 8, 8, 2, 16, 2, 2),   # 64 x 256, warps 32 x 64
    cfg(16, 8, 8, 4, 1, 16, 4, 2),   # 64 x 64, warps 64 x 16
]
LINEAR = [
    cfg(16, 8, 8, 8, 1, 16, 3, 2),
    cfg(16, 16, 8, 4, 4, 16, 3, 1),  # the committed variant's shape
    cfg(16, 16, 8, 8, 2, 16, 3, 2),
    cfg(8, 16, 8, 8, 2, 16, 3, 2),
    cfg(16, 8, 8, 8, 1, 16, 3, 2, RASTER=8),
]
OLD = {  # the committed variants (main before issue 28's loop)
    "gemm": dict(BASE, WGX=16, WGY=8, TM=8, TN=8, WM=1, TK=16, STAGES=3, FLUSH=2),
    "linear": dict(BASE, WGX=16, WGY=16, TM=8, TN=4, WM=4, TK=16, STAGES=3, FLUSH=1),
}


def sweep(d, kind, m, n, k, configs, old_dir, rng):
    name = "gemm" if kind == "gemm" else "linear_gelu"
    src = source(name)
    data = inputs(problem(kind, m, n, k), rng)
    rows = np.arange(0, m, max(1, m // 32))
    ref = reference_rows(problem(kind, m, n, k), *data, rows)
    flops = 2.0 * m * n * k
    runs = [(p, src, "") for p in configs if valid(p, m, n, k, kind == "linear")]
    if old_dir:
        old = source(name, os.path.join(old_dir, "kernels"), os.path.join(old_dir, "library"))
        runs.insert(0, (OLD[kind], old, " [old loop]"))
    best = None
    for p, s, tag in runs:
        short = " ".join(f"{kk}={p[kk]}" for kk in SHORT if kk in p)
        try:
            t, err, nan, prg = run_one(d, kind, s, p, m, n, k, data, rows, ref, True)
        except Exception as e:  # noqa: BLE001
            print(f"{name} {m}x{n}x{k} {short}{tag}: FAILED {str(e)[-600:]}", flush=True)
            continue
        regs, spill, sass, hmma = ptxas(prg)
        print(f"{name} {m}x{n}x{k} {short}{tag}: {t * 1e3:.3f} ms = {flops / t / 1e12:.1f} TFLOP/s, "
              f"rel err {err:.2e}, NaN {nan}, regs {regs}, spill {spill} B, SASS {sass} ({hmma} HMMA)",
              flush=True)
        if nan == 0 and err < 1e-5 and not tag and (best is None or t < best[0]):
            best = (t, p)
    return best


def torch_rates(m, n, k, linear):
    import torch
    a = torch.rand(m, k, device="cuda") * 2 - 1
    b = torch.rand(n, k, device="cuda") * 2 - 1 if linear else torch.rand(k, n, device="cuda") * 2 - 1
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        f = (lambda: a @ b.T) if linear else (lambda: a @ b)
        for _ in range(3):
            f()
        torch.cuda.synchronize()
        ts = []
        for _ in range(RUNS):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            torch.cuda.synchronize()
            ts.append(s.elapsed_time(e) * 1e-3)
        t = float(np.median(ts))
        print(f"cuBLAS {'TF32' if tf32 else 'FP32'} {m}x{n}x{k}{' (x w^T)' if linear else ''}: "
              f"{t * 1e3:.3f} ms = {2.0 * m * n * k / t / 1e12:.1f} TFLOP/s", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False


def time_mode(old_dir):
    d = Device(True)
    rng = np.random.default_rng(0)
    mma_peak(d)
    best = sweep(d, "gemm", 4096, 4096, 4096, GEMM, old_dir, rng)
    if best:
        sweep(d, "gemm", 8192, 8192, 8192, [best[1], dict(best[1], KM_SPLITS=1)], old_dir, rng)
        sweep(d, "gemm", 4096, 4096, 4096, [dict(best[1], KM_SPLITS=1)], None, rng)
    sweep(d, "linear", 1024, 8192, 8192, LINEAR, old_dir, rng)
    try:
        torch_rates(4096, 4096, 4096, False)
        torch_rates(8192, 8192, 8192, False)
        torch_rates(1024, 8192, 8192, True)
    except Exception as e:  # noqa: BLE001
        print("torch:", e)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "emulate"
    if mode == "emulate":
        emulate([int(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else None)
    else:
        old = sys.argv[sys.argv.index("--old") + 1] if "--old" in sys.argv else None
        time_mode(old)
