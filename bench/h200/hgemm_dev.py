"""Issue 28: the template library's 16-bit tensor-core path (hgemm.cl, bgemm.cl), measured.

    python3 bench/h200/hgemm_dev.py [--old DIR]

NVIDIA's OpenCL: the peak rate of mma.sync m16n8k16 (half, FP32 accumulators; independent
products, no memory traffic); then each configuration of CONFIGS at 4096^3, built as kfoundry
builds it (includes expanded, parameters as -D): its registers and spills from ptxas, its
error against FP64 on sampled rows (NaN-poisoned output first; relative error norm and the
largest error in units of the output's last place), the median of RUNS event-timed launches;
cuBLAS (PyTorch) FP16 and BF16 at the same shape, same run. --old DIR: also hgemm.cl of DIR (a
copy of an earlier tree's examples/kernels and library/kfoundry) at its committed variant.

Writes nothing but stdout. Development figures, not the tuner's.
"""
import os
import sys
import warnings

import numpy as np
import pyopencl as cl

warnings.filterwarnings("ignore", category=cl.CompilerWarning)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tc_dev import Device, mma_peak, ptxas, source  # noqa: E402

RUNS = int(os.environ.get("RUNS", "10"))
KEYS = ("WGX", "WGY", "TM", "TN", "WM", "TK", "STAGES", "FLUSH", "RASTER", "LDSM")


def cfg(*values):
    return dict(zip(KEYS, values), MMA=1)


# (WGX, WGY, TM, TN, WM, TK, STAGES, FLUSH, RASTER, LDSM)
CONFIGS = [
    cfg(32, 8, 8, 8, 1, 16, 4, 1, 4, 0),   # the committed variant (64 x 256, 8 warps of 64 x 32)
    cfg(32, 8, 8, 8, 1, 16, 4, 1, 4, 1),   # the same, B by ldmatrix.trans
    cfg(32, 8, 8, 8, 1, 32, 2, 2, 4, 1),
    cfg(32, 8, 8, 8, 2, 16, 4, 1, 4, 1),   # warps of 32 x 64
    cfg(32, 8, 8, 8, 2, 32, 2, 2, 4, 1),
    cfg(16, 16, 8, 8, 2, 32, 3, 2, 4, 1),  # 128 x 128, 8 warps of 64 x 32
    cfg(16, 16, 8, 8, 2, 32, 3, 2, 4, 0),
    cfg(16, 16, 8, 8, 2, 32, 3, 1, 4, 1),
    cfg(16, 16, 8, 8, 4, 32, 3, 2, 4, 1),  # 128 x 128, 8 warps of 32 x 64
    cfg(16, 16, 8, 8, 2, 16, 4, 1, 4, 1),
    cfg(16, 16, 8, 8, 2, 32, 3, 2, 16, 1),
    cfg(16, 8, 8, 8, 2, 32, 4, 2, 4, 1),   # 64 x 128, 4 warps of 32 x 64
    cfg(16, 8, 8, 8, 1, 32, 4, 2, 4, 1),   # 64 x 128, 4 warps of 64 x 32
    cfg(8, 8, 8, 8, 1, 64, 2, 4, 4, 1),    # 64 x 64, 2 warps of 64 x 32, TK 64
]
OLD = cfg(32, 8, 8, 8, 1, 16, 4, 1, 4, 0)

F16 = ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 4096, 0x3c003c00)  # pairs of half 1.0


def run(d, name, src, p, m, n, k, a16, b16, rows, ref, ulp):
    opts = " ".join(f"-D {kk}={vv}" for kk, vv in p.items())
    prg = cl.Program(d.ctx, src).build(options=opts)
    kern = getattr(prg, name)
    out = cl.Buffer(d.ctx, cl.mem_flags.READ_WRITE, m * n * 2)
    cl.enqueue_copy(d.q, out, np.full(m * n, 0x7e00, np.uint16)).wait()  # NaN in both formats
    gsz = (n // (p["WGX"] * p["TN"]) * p["WGX"], m // (p["WGY"] * p["TM"]) * p["WGY"])
    lsz = (p["WGX"], p["WGY"])
    args = (np.int32(m), np.int32(n), np.int32(k), d.buf(a16), d.buf(b16), out)
    kern(d.q, gsz, lsz, *args).wait()
    c = np.empty((m, n), np.uint16)
    cl.enqueue_copy(d.q, c, out).wait()
    got = decode(name, c[rows])
    nan = int(np.isnan(got).sum())
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    worst = float(np.max(np.abs(got - ref) / ulp))
    ts = []
    for _ in range(RUNS):
        ev = kern(d.q, gsz, lsz, *args)
        ev.wait()
        ts.append((ev.profile.end - ev.profile.start) * 1e-9)
    return float(np.median(ts)), err, worst, nan, prg


def decode(name, bits):
    if name == "hgemm":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def encode(name, x):
    if name == "hgemm":
        return x.astype(np.float16).view(np.uint16)
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def sweep(d, name, m, n, k, configs, old_dir, rng):
    src = source(name)
    a16 = encode(name, rng.uniform(-1, 1, (m, k)))
    b16 = encode(name, rng.uniform(-1, 1, (k, n)))
    rows = np.arange(0, m, max(1, m // 32))
    ref = decode(name, a16[rows]) @ decode(name, b16)
    # One unit in the last place of each exact output (half: 2^-10 of its binade, bfloat16: 2^-7),
    # at least the smallest normal's.
    e = np.floor(np.log2(np.maximum(np.abs(ref), 2.0 ** -14)))
    ulp = 2.0 ** (e - (10 if name == "hgemm" else 7))
    flops = 2.0 * m * n * k
    runs = [(p, src, "") for p in configs]
    if old_dir:
        old = source(name, os.path.join(old_dir, "kernels"), os.path.join(old_dir, "library"))
        runs.insert(0, (OLD, old, " [before]"))
    for p, s, tag in runs:
        short = " ".join(f"{kk}={p[kk]}" for kk in KEYS if kk in p)
        try:
            t, err, worst, nan, prg = run(d, name, s, {kk: vv for kk, vv in p.items() if not (tag and kk == "LDSM")},
                                          m, n, k, a16, b16, rows, ref, ulp)
        except Exception as e:  # noqa: BLE001
            print(f"{name} {m}x{n}x{k} {short}{tag}: FAILED {str(e)[-600:]}", flush=True)
            continue
        regs, spill, sass, hmma = ptxas(prg)
        print(f"{name} {m}x{n}x{k} {short}{tag}: {t * 1e3:.3f} ms = {flops / t / 1e12:.1f} TFLOP/s, "
              f"rel err {err:.2e}, worst {worst:.2f} units, NaN {nan}, regs {regs}, spill {spill} B, "
              f"SASS {sass} ({hmma} HMMA)", flush=True)


def torch_rates(m, n, k):
    import torch
    for dtype in (torch.float16, torch.bfloat16):
        a = (torch.rand(m, k, device="cuda") * 2 - 1).to(dtype)
        b = (torch.rand(k, n, device="cuda") * 2 - 1).to(dtype)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        ts = []
        for _ in range(RUNS):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            a @ b
            e.record()
            torch.cuda.synchronize()
            ts.append(s.elapsed_time(e) * 1e-3)
        t = float(np.median(ts))
        print(f"cuBLAS {dtype} {m}x{n}x{k}: {t * 1e3:.3f} ms = {2.0 * m * n * k / t / 1e12:.1f} TFLOP/s", flush=True)


if __name__ == "__main__":
    old = sys.argv[sys.argv.index("--old") + 1] if "--old" in sys.argv else None
    d = Device(True)
    rng = np.random.default_rng(0)
    mma_peak(d, F16, ((4, 128, 4), (8, 128, 4), (8, 256, 2)))
    sweep(d, "hgemm", 4096, 4096, 4096, CONFIGS, old, rng)
    sweep(d, "bgemm", 4096, 4096, 4096, CONFIGS[:2] + CONFIGS[5:6], None, rng)
    try:
        torch_rates(4096, 4096, 4096)
    except Exception as e:  # noqa: BLE001
        print("torch:", e)
