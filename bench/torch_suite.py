#!/usr/bin/env python3
"""PyTorch side of the GPU suite benchmark (run after `suite OUT_DIR`, on the same machine).

    python3 bench/torch_suite.py OUT_DIR [--runs 20] [--warmup 3] [--problem NAME]...

Reads OUT_DIR/suite.json (written by the `suite` binary of kfoundry-examples), and for each
problem in it:
  * regenerates the same inputs on CUDA with the same counter-based hash as the OpenCL
    generator (examples/kernels/suite_util.cl), in int64 tensor ops, bit-exact;
  * times PyTorch eager FP32 (TF32 off for matmul and cuDNN) with CUDA events: warm-up, then
    median, min and max over --runs;
  * compares kfoundry's tuned output (the full output, or the strided sample with its index
    file) with PyTorch's: relative error norm ||k - t|| / ||t||.
It also measures the device's ceilings in the same run: device-to-device copy bandwidth of a
4 GiB tensor (bytes read + written) and cuBLAS FP32 SGEMM at 8192^3 (TF32 off). The roofline
floor of a problem is max(compulsory bytes / copy bandwidth, FLOPs / cuBLAS rate), where the
compulsory bytes are its inputs read once and its output written once. The JSON also has the
floor from the annotations' cost(bytes, flops), summed over a problem's stages.

Prints one table and writes OUT_DIR/torch_suite.json.
"""
import argparse
import json
import math
import os
import sys

M32 = 0xFFFFFFFF


def _mul32(x, c):
    """(x * c) mod 2^32 for x in [0, 2^32) held in int64, without int64 overflow."""
    lo = x * (c & 0xFFFF)  # < 2^48
    hi = ((x * (c >> 16)) & 0xFFFF) << 16  # only the low 16 bits of x * c_hi survive the shift
    return (lo + hi) & M32


def mix(x):
    """lowbias32 on int64 arrays or tensors holding uint32 values (works for numpy and torch)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    x = x ^ (x >> 16)
    return x


def mix_int(x):
    """lowbias32 on a Python int."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    x ^= x >> 16
    return x


def hash_codes(index, seed):
    """The generator's integer: ((h >> 8) - 2^23) with h = mix(mix(i) + mix(seed)); int64."""
    h = mix((mix(index) + mix_int(seed & M32)) & M32)
    return (h >> 8) - 8388608


def fill_torch(torch, shape, seed, device, chunk=1 << 27):
    """A float32 tensor of `shape` filled like hash_fill (values k * 2^-23 in [-1, 1), exact)."""
    n = math.prod(shape)
    assert n < 1 << 32, "the generator indexes with 32 bits"
    out = torch.empty(n, dtype=torch.float32, device=device)
    for start in range(0, n, chunk):
        end = min(n, start + chunk)
        idx = torch.arange(start, end, dtype=torch.int64, device=device)
        out[start:end] = hash_codes(idx, seed).to(torch.float32) * (1.0 / 8388608.0)
        del idx
    return out.view(*shape)


def cuda_time(torch, fn, runs, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    s = sorted(times)
    med = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
    return {"median_ms": med, "min_ms": s[0], "max_ms": s[-1], "runs_ms": times}


def problem_fn(torch, name, t):
    """The PyTorch eager computation of a suite problem, from its input tensors by name."""
    F = torch.nn.functional
    if name == "sgemm":
        return lambda: torch.matmul(t["a"], t["b"])
    if name == "softmax":
        return lambda: torch.softmax(t["x"], dim=1)
    if name == "layernorm":
        return lambda: F.layer_norm(t["x"], tuple(t["weight"].shape), t["weight"], t["bias"], eps=1e-5)
    if name == "sum_dim1":
        return lambda: torch.sum(t["x"], dim=1, keepdim=True)
    if name == "linear_gelu_softmax":
        return lambda: torch.softmax(F.gelu(F.linear(t["x"], t["weight"], t["bias"])), dim=1)
    if name == "conv_groupnorm":
        groups = 8

        def f():
            y = F.conv2d(t["x"], t["weight"], t["conv_bias"])
            y = y + t["bias"]
            y = y * t["scale"]
            y = torch.sigmoid(y)
            return F.group_norm(y, groups, t["gamma"], t["beta"], eps=1e-5)

        return f
    raise ValueError(f"unknown problem {name}")


def rel_err(torch, out_dir, p, ref, device, which="output"):
    """||k - t|| / ||t|| over kfoundry's output (or its sample) and PyTorch's at the same indices
    (`which`: "output", the tuned variants' output, or "reference_output", the reference's)."""
    o = p[which]
    k = torch.from_file(os.path.join(out_dir, o["file"]), shared=False, size=o["len"] if o["kind"] == "full" else o["count"], dtype=torch.float32)
    flat = ref.reshape(-1)
    if o["kind"] == "full":
        t = flat
    else:
        idx = torch.from_file(os.path.join(out_dir, o["index_file"]), shared=False, size=o["count"], dtype=torch.int64).to(device)
        t = flat[idx]
    k = k.to(device).to(torch.float64)
    t = t.to(torch.float64)
    return {
        "rel_l2": (torch.linalg.vector_norm(k - t) / torch.linalg.vector_norm(t)).item(),
        "max_abs_diff": (k - t).abs().max().item(),
        "non_finite": int((~torch.isfinite(k)).sum().item()),
        "compared": o["kind"],
        "elements": int(k.numel()),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--problem", action="append", default=[])
    ap.add_argument("--copy-gib", type=float, default=4.0)
    args = ap.parse_args()

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda")
    suite = json.load(open(os.path.join(args.out_dir, "suite.json")))

    # Ceilings, measured in this run.
    n = int(args.copy_gib * (1 << 30)) // 4
    src = torch.empty(n, dtype=torch.float32, device=dev).uniform_()
    dst = torch.empty_like(src)
    copy = cuda_time(torch, lambda: dst.copy_(src), args.runs, args.warmup)
    bw = 2 * 4 * n / (copy["median_ms"] * 1e-3)
    del src, dst
    s = 8192
    a = torch.randn(s, s, device=dev)
    b = torch.randn(s, s, device=dev)
    mm = cuda_time(torch, lambda: torch.matmul(a, b), max(5, args.runs // 2), args.warmup)
    peak = 2 * s**3 / (mm["median_ms"] * 1e-3)
    del a, b
    torch.cuda.empty_cache()
    ceilings = {"copy_bytes_per_s": bw, "copy": copy, "copy_gib": args.copy_gib, "cublas_sgemm_flops_per_s": peak, "cublas_sgemm_8192": mm}
    print(f"device: {torch.cuda.get_device_name()}   copy {bw / 1e9:.0f} GB/s   cuBLAS FP32 {peak / 1e12:.1f} TFLOP/s   (torch {torch.__version__})")

    rows = []
    for p in suite["problems"]:
        if args.problem and p["name"] not in args.problem:
            continue
        t = {i["name"]: fill_torch(torch, i["shape"], i["tensor_seed"], dev) for i in p["inputs"]}
        fn = problem_fn(torch, p["name"], t)
        timing = cuda_time(torch, fn, args.runs, args.warmup)
        ref = fn()
        torch.cuda.synchronize()
        err = rel_err(torch, args.out_dir, p, ref, dev)
        del ref
        # The accuracy rule: against the problem computed in FP64, the tuned output's relative
        # error norm is at most twice the reference kernel's.
        accuracy = None
        if "reference_output" in p:
            t64 = {k: v.to(torch.float64) for k, v in t.items()}
            exact = problem_fn(torch, p["name"], t64)()
            torch.cuda.synchronize()
            e_tuned = rel_err(torch, args.out_dir, p, exact, dev)["rel_l2"]
            e_ref = rel_err(torch, args.out_dir, p, exact, dev, "reference_output")["rel_l2"]
            e_torch = (torch.linalg.vector_norm(fn().to(torch.float64) - exact) / torch.linalg.vector_norm(exact)).item()
            accuracy = {"tuned_vs_fp64": e_tuned, "reference_vs_fp64": e_ref, "torch_fp32_vs_fp64": e_torch,
                        "ratio": e_tuned / e_ref if e_ref > 0 else (0.0 if e_tuned == 0 else float("inf")),
                        "within_rule": e_tuned <= 2 * e_ref}
            del t64, exact
        del t, fn
        torch.cuda.empty_cache()
        floor_s = max(p["compulsory_bytes"] / bw, p["flops"] / peak)
        # The same from the annotations' cost(bytes, flops), stage by stage (a split problem pays
        # its intermediate traffic here).
        cost_floor_s = sum(max((st["cost_bytes"] or 0) / bw, (st["cost_flops"] or 0) / peak) for st in p["stages"])
        tuned = p["tuned"]["median_ms"]
        row = {
            "name": p["name"],
            "reference_ms": p["reference"]["median_ms"],
            "tuned_ms": tuned,
            "tuned_spread_ms": [p["tuned"]["min_ms"], p["tuned"]["max_ms"]],
            "torch": timing,
            "torch_ms": timing["median_ms"],
            "floor_ms": floor_s * 1e3,
            "cost_floor_ms": cost_floor_s * 1e3,
            "fraction_of_cost_floor": cost_floor_s * 1e3 / tuned,
            "bound": "memory" if p["compulsory_bytes"] / bw >= p["flops"] / peak else "compute",
            "fraction_of_floor": floor_s * 1e3 / tuned,
            "achieved_bytes_per_s": p["compulsory_bytes"] / (tuned * 1e-3),
            "achieved_flops_per_s": p["flops"] / (tuned * 1e-3),
            "speedup_vs_torch": timing["median_ms"] / tuned,
            "speedup_vs_reference": p["reference"]["median_ms"] / tuned,
            "rel_err_vs_torch": err,
            "dispatch": [f'{s["stage"]}: {s["dispatch"]} ({s["tuned_params_text"]})' for s in p["stages"]],
            "check_vs_reference": p["check"],
            "accuracy_vs_fp64": accuracy,
        }
        if "clblast" in p:
            row["clblast_ms"] = p["clblast"]["median_ms"]
            row["vs_clblast"] = p["clblast"]["median_ms"] / tuned
            row["vs_cublas"] = (p["flops"] / peak * 1e3) / tuned
        rows.append(row)

    hdr = f'{"problem":<20} {"ref ms":>9} {"tuned ms":>9} {"torch ms":>9} {"floor ms":>9} {"of floor":>8} {"vs torch":>8} {"err vs torch":>12}  notes'
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        notes = f'{r["bound"]}-bound'
        if r["bound"] == "memory":
            notes += f', {r["achieved_bytes_per_s"] / 1e9:.0f} GB/s'
            if len(r["dispatch"]) > 1:
                # A split problem's own floor: its stages' cost(bytes) (softmax: two reads of x
                # and one write of y, the three-pass floor; LayerNorm: x read twice).
                notes += f', {r["fraction_of_cost_floor"]:.2f} of the stages\' floor ({r["cost_floor_ms"]:.3f} ms)'
        else:
            notes += f', {r["achieved_flops_per_s"] / 1e12:.1f} TFLOP/s'
        if "clblast_ms" in r:
            notes += f', CLBlast {r["clblast_ms"]:.3f} ms ({r["vs_clblast"]:.2f}x), {r["vs_cublas"]:.2f} of cuBLAS'
        print(
            f'{r["name"]:<20} {r["reference_ms"]:>9.3f} {r["tuned_ms"]:>9.3f} {r["torch_ms"]:>9.3f} {r["floor_ms"]:>9.3f} '
            f'{r["fraction_of_floor"]:>8.2f} {r["speedup_vs_torch"]:>7.2f}x {r["rel_err_vs_torch"]["rel_l2"]:>12.2e}  {notes}'
        )
    print("accuracy against FP64 (relative error norm; rule: tuned <= 2 x reference):")
    for r in rows:
        a = r["accuracy_vs_fp64"]
        if a:
            print(f'  {r["name"]:<20} tuned {a["tuned_vs_fp64"]:.2e}  reference {a["reference_vs_fp64"]:.2e}  PyTorch FP32 {a["torch_fp32_vs_fp64"]:.2e}  '
                  f'ratio {a["ratio"]:.2f}  {"ok" if a["within_rule"] else "OUTSIDE THE RULE"}')
    geo = math.exp(sum(math.log(r["speedup_vs_torch"]) for r in rows) / len(rows)) if rows else float("nan")
    print(f"geometric-mean speedup over PyTorch eager: {geo:.2f}x  ({len(rows)} problems)")
    doc = {"ceilings": ceilings, "problems": rows, "geomean_speedup_vs_torch": geo, "suite": {k: suite[k] for k in ("device", "device_key", "workload", "seed", "runs")}}
    with open(os.path.join(args.out_dir, "torch_suite.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {os.path.join(args.out_dir, 'torch_suite.json')}")


if __name__ == "__main__":
    sys.exit(main())
