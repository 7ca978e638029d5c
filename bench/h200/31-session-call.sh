# 2026-12-07 (third session): one device call that does what the card it lands on can measure.
# On an H200: the suite harness (29-suite-h200.sh: the committed H200 variants), then the
# split-K tune (30-splitk.sh) with what is left of the call. On another card (the committed
# variants are the H200's, so the harness would run references): the split-K tune, then the
# MobileNetV3-small phases (28-model-phases.sh). Before split-K on either: problem 6 in two launches
# tuned at `full` (ConvGnStats, GroupNormApply), and build_processes.py. Carry .device,
# .whl (pyopencl and its pure dependencies for Python 3.12) and target/release/suite.
set -u
START=$(date +%s)
left() { echo $(( ${LIMIT:-580} - ($(date +%s) - START) )); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $GPU"
builds() { # worker processes with their own contexts: would they build in parallel?
  pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
  sh .device/opencl-setup.sh >/dev/null 2>&1
  PYTHONPATH=/tmp/site CUDA_CACHE_DISABLE=1 timeout -k 5 $(( $(left) > 150 ? 150 : $(left) - 10 )) python3 bench/h200/build_processes.py 4 8 15 2>&1 | tee $OUT/builds.txt
}
staged() { # problem 6 in two launches (ConvGnStats, GroupNormApply) tuned at full
  sh .device/opencl-setup.sh >/dev/null 2>&1
  local t0=$(date +%s)
  timeout -k 10 ${STAGED_S:-200} .device/cargo-kfoundry kfoundry tune --bundle .device/bundle.json \
    --lockfile $OUT/K-staged.lock --device gpu --kernel ::ConvGnStats --kernel ::GroupNormApply \
    --workload full --budget-evals ${STAGED_EVALS:-40} --seed 1 --no-llm --message-format json \
    > $OUT/staged.jsonl 2> $OUT/staged.err
  echo "staged tune rc=$? after $(( $(date +%s) - t0 )) s"; grep -h '"tuned"' $OUT/staged.jsonl | cut -c1-400
}
case "$GPU" in
  *H200*)
    bash bench/h200/29-suite-h200.sh
    staged
    T=$(( $(left) - 100 ))
    if [ "$T" -ge 90 ]; then EVALS=${EVALS:-50} TUNE_S=$T bash bench/h200/30-splitk.sh; fi
    if [ "$(left)" -ge 40 ]; then builds; fi ;;
  *)
    staged
    builds
    EVALS=${EVALS:-50} TUNE_S=200 bash bench/h200/30-splitk.sh
    mkdir -p $OUT/splitk && mv $OUT/tune.jsonl $OUT/tune.err $OUT/K.lock $OUT/torch.txt $OUT/splitk/ 2>/dev/null
    T=$(( $(left) - 40 ))
    if [ "$T" -ge 120 ]; then SECS=1 EVALS=8 TUNE_S=$T bash bench/h200/28-model-phases.sh; fi ;;
esac
echo "call: $(( $(date +%s) - START )) s"
