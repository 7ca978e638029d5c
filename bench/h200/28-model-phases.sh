# Issue 29, 2026-12-07: where a whole model's tune spends its time outside the search.
# MobileNetV3-small (bench/models) exported, imported and tuned at `full` with the per-tune
# phases of `tuned` messages (start, search, proof and its parts, re-measure), stopped after
# TUNE_S seconds (what finished is kept and the graph run through it); then bench/phases.py.
# Carry .device with cargo-kfoundry (release, built here) and opencl-setup.sh.
#   SECS=1 EVALS=8 TOTAL=... TUNE_S=300 bash bench/h200/28-model-phases.sh   (results in $OUT)
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
START=$(date +%s)
python3 bench/kernelbench/run.py --problems bench/models --level models --cli .device/cargo-kfoundry \
  --only ${ONLY:-1} --results $OUT/models.jsonl --secs ${SECS:-1} --evals ${EVALS:-8} \
  ${TOTAL:+--total-secs $TOTAL} --tune-timeout ${TUNE_S:-300} --tune-log $OUT/tune.jsonl 2> $OUT/models.err
echo "run.py rc=$? after $(( $(date +%s) - START )) s"
python3 - $OUT/models.jsonl <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print({k: r.get(k) for k in ("problem", "eager_ms", "kfoundry_ms", "graph_wall_ms", "tune_s", "tune_rc", "correct_kernelbench", "correct_fp32", "error", "tune_error", "run_error", "exception")}, len(r.get("kernels", [])), "kernels,", len(r.get("tuned", [])), "tuned")
PY
python3 bench/phases.py $OUT/tune.jsonl
tail -3 $OUT/models.err
