"""cuBLAS (through PyTorch) on the suite's GEMM shapes in each precision, the baselines of issue 28:
FP32 (TF32 off), TF32 (allow_tf32), FP16 and BF16 inputs (FP32 accumulation, 16-bit output).
Median of 20 timed products (CUDA events) after 3 warm-ups, random inputs in [-1, 1).

    python3 bench/h200/torch_gemm.py [M N K]...      (default: 4096^3 and 8192^3)
"""
import sys

import torch


def time_ms(f, runs=20, warmup=3):
    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    args = [int(x) for x in sys.argv[1:]]
    shapes = [tuple(args[i:i + 3]) for i in range(0, len(args), 3)] or [(4096, 4096, 4096), (8192, 8192, 8192)]
    print(f"device: {torch.cuda.get_device_name()}")
    for m, n, k in shapes:
        for label, dtype, tf32 in [("fp32", torch.float32, False), ("tf32", torch.float32, True),
                                   ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)]:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = (torch.rand(m, k, device="cuda") * 2 - 1).to(dtype)
            b = (torch.rand(k, n, device="cuda") * 2 - 1).to(dtype)
            t = time_ms(lambda: torch.matmul(a, b))
            print(f"cuBLAS {label} {m}x{n}x{k}: {t:.3f} ms = {2 * m * n * k / t / 1e9:.1f} TFLOP/s", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False


if __name__ == "__main__":
    main()
