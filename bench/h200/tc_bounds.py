"""What bounds the suite's tensor-core kernels on the H200 (issue 28): the committed variants
of gemm.cl (SGEMM 4096^3) and linear_gelu.cl (Linear+GELU at 1024 x 8192 x 8192), built by
NVIDIA's OpenCL as kfoundry builds them (the sources with their library includes expanded, the
parameters as -D), then:

1. timed through OpenCL (events, median of 10) against FP64 on sampled rows;
2. their PTX (the OpenCL program binary) assembled by ptxas for sm_90: registers, spills,
   shared memory;
3. the SASS of each kernel counted by instruction class (cuobjdump): the static mix of the
   main loop (tensor-core MMAs against shared-memory loads, conversions, barriers);
4. the same PTX launched through CUDA (CuPy) under Nsight Compute, when it runs there:
   throughput of the tensor pipe, shared memory and DRAM, occupancy, warp stalls.

Writes everything under $OUT (or ./tc_out). Usage: python3 bench/h200/tc_bounds.py [--ncu-child NAME | --opencl-only]
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.environ.get("OUT", os.path.join(REPO, "tc_out"))
sys.path.insert(0, os.path.join(REPO, "bench", "kt_opencl"))
from kernels import expand_includes  # noqa: E402

KERNELS = {
    # The committed H100 variants of 0a46b40 (SuiteSgemm and LinearGelu at `full`).
    "gemm": dict(
        file="gemm.cl",
        params={"FLUSH": 4, "LVEC": 1, "MMA": 1, "PAD": 0, "PREFETCH": 0, "RASTER": 16, "STAGES": 2, "TK": 32,
                "TM": 8, "TN": 4, "UNROLL": 1, "USE_LOCAL": 0, "VEC": 1, "WGX": 16, "WGY": 8, "WM": 2},
        m=4096, n=4096, k=4096, bias=False,
    ),
    "linear_gelu": dict(
        file="linear_gelu.cl",
        params={"FLUSH": 4, "LVEC": 1, "MMA": 1, "PAD": 0, "PREFETCH": 0, "RASTER": 4, "STAGES": 2, "TK": 32,
                "TM": 8, "TN": 4, "UNROLL": 1, "USE_LOCAL": 0, "VEC": 1, "WGX": 16, "WGY": 8, "WM": 2},
        m=1024, n=8192, k=8192, bias=True,
    ),
}


def geometry(p, m, n):
    wgx, wgy, tm, tn = p["WGX"], p["WGY"], p["TM"], p["TN"]
    gx = -(-n // (wgx * tn)) * wgx
    gy = -(-m // (wgy * tm)) * wgy
    return (gx, gy), (wgx, wgy)


def inputs(spec, rng):
    m, n, k = spec["m"], spec["n"], spec["k"]
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    if spec["bias"]:  # linear: w is n x k, y = gelu(x w^T + bias)
        b = (rng.uniform(-1, 1, (n, k)) / 90).astype(np.float32)
        bias = rng.uniform(-1, 1, n).astype(np.float32)
    else:
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        bias = None
    return a, b, bias


def reference_rows(spec, a, b, bias, rows):
    if spec["bias"]:
        from math import erf, sqrt
        v = a[rows].astype(np.float64) @ b.T.astype(np.float64) + bias
        return 0.5 * v * (1 + np.vectorize(erf)(v / sqrt(2)))
    return a[rows].astype(np.float64) @ b.astype(np.float64)


def opencl_stage():
    import pyopencl as cl
    plat = [p for p in cl.get_platforms() if "NVIDIA" in p.name][0]
    dev = plat.get_devices()[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    mf = cl.mem_flags
    rng = np.random.default_rng(0)
    results = {}
    for name, spec in KERNELS.items():
        src = expand_includes(open(os.path.join(REPO, "examples", "kernels", spec["file"])).read(),
                              os.path.join(REPO, "examples", "kernels"))
        opts = " ".join(f"-D {k}={v}" for k, v in spec["params"].items())
        prg = cl.Program(ctx, src).build(options=opts)
        # The program binary is the PTX text, NUL-terminated.
        ptx = prg.get_info(cl.program_info.BINARIES)[0].rstrip(b"\0")
        open(os.path.join(OUT, f"{name}.ptx"), "wb").write(ptx)
        m, n, k = spec["m"], spec["n"], spec["k"]
        a, b, bias = inputs(spec, rng)
        bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a),
                cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)]
        if bias is not None:
            bufs.append(cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=bias))
        out = cl.Buffer(ctx, mf.READ_WRITE, m * n * 4)
        kern = getattr(prg, name)
        gsz, lsz = geometry(spec["params"], m, n)
        args = (np.int32(m), np.int32(n), np.int32(k), *bufs, out)
        kern(q, gsz, lsz, *args).wait()
        ts = []
        for _ in range(10):
            ev = kern(q, gsz, lsz, *args)
            ev.wait()
            ts.append((ev.profile.end - ev.profile.start) * 1e-9)
        t = float(np.median(ts))
        c = np.empty((m, n), np.float32)
        cl.enqueue_copy(q, c, out).wait()
        rows = np.arange(0, m, m // 32)
        ref = reference_rows(spec, a, b, bias, rows)
        err = float(np.linalg.norm(c[rows] - ref) / np.linalg.norm(ref))
        flops = 2.0 * m * n * k
        results[name] = dict(seconds=t, tflops=flops / t / 1e12, rel_err=err, global_size=gsz,
                             local_size=lsz)
        print(f"{name}: {t * 1e3:.3f} ms = {flops / t / 1e12:.1f} TFLOP/s (3xTF32 work counted once), "
              f"rel err {err:.2e}", flush=True)
    json.dump(results, open(os.path.join(OUT, "opencl.json"), "w"), indent=1)
    return results


def static_stage():
    classes = ["HMMA", "LDS", "LDSM", "LDGSTS", "LDG", "STS", "STG", "BAR", "FFMA", "FADD", "FMUL", "IMAD",
               "IADD3", "LOP3", "SHF", "I2F", "F2F", "MOV", "ISETP", "BRA", "DEPBAR"]
    for name in KERNELS:
        ptx = os.path.join(OUT, f"{name}.ptx")
        cubin = os.path.join(OUT, f"{name}.cubin")
        r = subprocess.run(["ptxas", "-arch=sm_90", "-v", ptx, "-o", cubin], capture_output=True, text=True)
        print(f"--- ptxas {name}:\n{r.stdout}{r.stderr}", flush=True)
        sass = subprocess.run(["cuobjdump", "--dump-sass", cubin], capture_output=True, text=True).stdout
        open(os.path.join(OUT, f"{name}.sass"), "w").write(sass)
        ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass)
        counts = {}
        for op in ops:
            counts[op] = counts.get(op, 0) + 1
        shown = {c: sum(v for o, v in counts.items() if o == c or o.startswith(c + "_") or o.startswith(c + "."))
                 for c in classes}
        print(f"--- SASS {name}: {len(ops)} instructions; by class: "
              + ", ".join(f"{c} {v}" for c, v in shown.items() if v), flush=True)


def ncu_child(name):
    """Launched under ncu: the OpenCL-built PTX of `name` through CUDA, once to warm, once profiled."""
    import cupy as cp
    spec = KERNELS[name]
    res = json.load(open(os.path.join(OUT, "opencl.json")))[name]
    # KF_NCU_LOAD=ptx: the driver compiles the PTX itself (a cubin from this machine's ptxas is
    # the default); one of the two may prepare for profiling where the other does not.
    load = os.environ.get("KF_NCU_LOAD", "cubin")
    mod = cp.RawModule(path=os.path.join(OUT, f"{name}.{load}"))
    fn = mod.get_function(name)
    m, n, k = spec["m"], spec["n"], spec["k"]
    rng = np.random.default_rng(0)
    a, b, bias = inputs(spec, rng)
    bufs = [cp.asarray(a), cp.asarray(b)] + ([cp.asarray(bias)] if bias is not None else [])
    out = cp.zeros((m, n), cp.float32)
    (gx, gy), (lx, ly) = res["global_size"], res["local_size"]
    args = (np.int32(m), np.int32(n), np.int32(k), *bufs, out)
    for _ in range(2):
        fn((gx // lx, gy // ly, 1), (lx, ly, 1), args)
    cp.cuda.runtime.deviceSynchronize()
    rows = np.arange(0, m, m // 32)
    ref = reference_rows(spec, a, b, bias, rows)
    c = cp.asnumpy(out)
    print(f"{name} through CUDA: rel err {np.linalg.norm(c[rows] - ref) / np.linalg.norm(ref):.2e}", flush=True)


def ncu_stage():
    sections = ["SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "Occupancy",
                "LaunchStats", "WarpStateStats", "SchedulerStats", "InstructionStats"]
    # Can ncu read counters on this machine at all? A cuBLAS product through PyTorch first.
    probe = "import torch; a = torch.ones(1024, 1024, device='cuda'); (a @ a).sum().item()"
    r = subprocess.run(["ncu", "--clock-control", "none", "--section", "SpeedOfLight", "-c", "1",
                        sys.executable, "-c", probe], capture_output=True, text=True, timeout=240)
    print("--- ncu probe (a PyTorch matmul):\n" + "\n".join((r.stdout + r.stderr).splitlines()[-14:]), flush=True)
    # Tries in turn until one profiles: the cubin, the PTX (the driver's own compile), each in
    # kernel replay and in application replay.
    tries = [("cubin", []), ("ptx", []), ("cubin", ["--replay-mode", "application"]),
             ("ptx", ["--replay-mode", "application"])]
    for name in KERNELS:
        for load, extra in tries:
            cmd = ["ncu", "--clock-control", "none", "-k", name, "-s", "1", "-c", "1", *extra]
            for s in sections:
                cmd += ["--section", s]
            cmd += [sys.executable, os.path.abspath(__file__), "--ncu-child", name]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                               env=dict(os.environ, KF_NCU_LOAD=load))
            text = r.stdout + r.stderr
            open(os.path.join(OUT, f"{name}.{load}{''.join(extra)}.ncu.txt"), "w").write(text)
            keep = [l for l in text.splitlines() if re.search(
                r"Throughput|Duration|Registers|Occupancy|Pipe|Stall|Issued|Bank|Shared|Eligible|Warp Cycles|Executed Ipc|rel err|==PROF==|ERR|rror", l)]
            print(f"--- ncu {name} ({load} {' '.join(extra)}):\n" + "\n".join(keep[:80]), flush=True)
            if "Duration" in text:
                break


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--ncu-child":
        ncu_child(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] == "--opencl-only":
        # Stage 1 alone: for Nsight Compute on NVIDIA's OpenCL itself (which runs on the CUDA
        # driver), where the PTX launched through CUDA would not prepare for profiling.
        os.makedirs(OUT, exist_ok=True)
        opencl_stage()
        sys.exit(0)
    os.makedirs(OUT, exist_ok=True)
    opencl_stage()
    static_stage()
    try:
        ncu_stage()
    except Exception as e:  # the profile is extra: the figures above stand without it
        print(f"ncu stage failed: {e}", flush=True)
