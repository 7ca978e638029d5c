# one KernelBench run per CLI given, in turn: WHICH="before after" (results in $OUT/<which>)
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
sh .device/opencl-setup.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1
for w in $WHICH; do
  mkdir -p $OUT/$w
  START=$(date +%s)
  KFOUNDRY_PROOF_TRACE=$OUT/$w/trace.tsv python3 bench/kernelbench/run.py --problems .device/kb --level level2 --cli .device/$w/cargo-kfoundry \
    --only ${ONLY:-12,14,22} --secs 6 --evals 30 --results $OUT/$w/kb.jsonl --tune-log $OUT/$w/kbtune.jsonl 2> $OUT/$w/kb.err
  echo "$w: kernelbench rc=$? after $(( $(date +%s) - START )) s"
  python3 bench/phases.py $OUT/$w/kbtune.jsonl | head -14
done
