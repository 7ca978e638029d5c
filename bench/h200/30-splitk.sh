# Issue 28, item 2 (split-K), 2026-12-07: SgemmLargeK (KernelBench level 1 problem 6: C = A·B,
# 256 x 256 outputs, k = 524288) tuned at `full` on the GPU with its split-K space (SPLITK,
# scratch buffers the launcher owns), then PyTorch's torch.matmul at the same shape in the same
# call (cuBLAS FP32, and TF32 allowed), and the tune's best with SPLITK = 1 against its best.
# Carry .device with cargo-kfoundry (release, built here), opencl-setup.sh and bundle.json
# (`cargo kfoundry bundle -p kfoundry-examples -o .device/bundle.json`).
#   EVALS=60 bash bench/h200/30-splitk.sh     (results in $OUT: tune.jsonl, K.lock, torch.txt)
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
START=$(date +%s)
timeout -k 10 ${TUNE_S:-400} .device/cargo-kfoundry kfoundry tune --bundle .device/bundle.json \
  --lockfile $OUT/K.lock --device gpu --kernel ::SgemmLargeK --workload full \
  --budget-evals ${EVALS:-60} --seed 1 --no-llm --message-format json > $OUT/tune.jsonl 2> $OUT/tune.err
echo "tune rc=$? after $(( $(date +%s) - START )) s"; tail -2 $OUT/tune.err
python3 bench/splitk_summary.py $OUT/tune.jsonl $((2 * 256 * 256 * 524288))
timeout -k 5 120 python3 - <<'PY' 2>&1 | tee $OUT/torch.txt
import torch
m, n, k = 256, 256, 524288
a = torch.rand(m, k, device="cuda"); b = torch.rand(k, n, device="cuda")
flop = 2 * m * n * k
for tf32 in (False, True):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    for _ in range(3): torch.matmul(a, b)
    torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); torch.matmul(a, b); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort(); t = ts[len(ts) // 2] / 1e3
    print(f"torch.matmul {m}x{n}x{k} allow_tf32={tf32}: {t*1e3:.3f} ms, {flop/t/1e12:.1f} TFLOP/s")
PY
