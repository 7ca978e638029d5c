# Issues 54 and 55 (2026-12-07, fifth session), in one call on the GPU:
# 1. KernelBench level 2 problems 12, 14 and 22 (6 s and at most 30 evaluations a kernel): the
#    proof's share of the tune with the reference's runs kept across a tune's proofs;
# 2. bench/sizes.sh: the examples' Saxpy, RowSum and Sgemm tuned at their workloads, then called
#    through dispatch at 20 sizes drawn in their proven regions, against per-size tunes.
# Carry .device: cargo-kfoundry and sizes (release, built here), opencl-setup.sh, bundle.json
# (`cargo kfoundry bundle -o .device/bundle.json`), kb/level2 (../shared/kernelbench/level2).
#   bash bench/h200/33-sizes-and-proof.sh   (results in $OUT; PART=kb or PART=sizes for one)
set -u
START=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
sh .device/opencl-setup.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1
if [ "${PART:-kb}" = kb ] || [ "${PART:-}" = all ]; then
  python3 bench/kernelbench/run.py --problems .device/kb --level level2 --cli .device/cargo-kfoundry \
    --only ${ONLY:-12,14,22} --secs 6 --evals 30 --results $OUT/kb.jsonl --tune-log $OUT/kbtune.jsonl 2> $OUT/kb.err
  echo "kernelbench rc=$? after $(( $(date +%s) - START )) s"
  python3 - $OUT/kb.jsonl <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print({k: r.get(k) for k in ("problem", "eager_ms", "kfoundry_ms", "correct_kernelbench", "correct_fp32", "tune_s", "error", "tune_error")})
PY
  python3 bench/phases.py $OUT/kbtune.jsonl
  tail -2 $OUT/kb.err
fi
if [ "${PART:-kb}" = sizes ] || [ "${PART:-}" = all ]; then
  OUT=$OUT/sizes CLI=.device/cargo-kfoundry SIZES=.device/sizes BUNDLE=.device/bundle.json DEVICE=gpu \
    EVALS=${EVALS:-40} bash bench/sizes.sh
  echo "sizes done after $(( $(date +%s) - START )) s"
fi
