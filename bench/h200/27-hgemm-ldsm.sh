# Issue 28, 2026-12-06 (third session): the 16-bit tensor-core path with B's fragments by
# ldmatrix.trans (LDSM) and each accumulator's flush steps in a row from zero accumulators.
#   dev:    bench/h200/hgemm_dev.py (mma.sync f16 peak, configurations at 4096^3 against the
#           loop of .device/old, cuBLAS FP16/BF16), then SuiteHgemm and SuiteBgemm tuned at
#           `full` while the call has time;
#   retune: every other kernel whose text the library change touched, `full` then `small`,
#           on the lockfile the dev call returned (.device/K.lock).
# Carry target/release/cargo-kfoundry, .device (bundle.json from `cargo kfoundry bundle
# --workspace -o .device/bundle.json`, opencl-setup.sh, old/ = main's kernels and library
# before the change, K.lock) and .whl (pyopencl and its pure-Python needs). Results come back
# as $OUT/<mode>.tgz and $OUT/Kfoundry.lock.
set -u
mode=${1:-dev}
sh .device/opencl-setup.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1 CUDA_CACHE_DISABLE=1
B=target/release/cargo-kfoundry
R=/tmp/$mode; mkdir -p $R
START=$(date +%s)
cp .device/K.lock /tmp/K.lock; chmod u+w /tmp/K.lock
tune() { # kernel workload seconds evaluations: skipped when the call has not time for it
  # (a `full` tune's proof runs the naive reference up to 8448^3: about 170 s beyond its search)
  margin=30; [ "$2" = full ] && margin=190
  if [ $(( $(date +%s) - START + $3 + margin )) -gt ${DEADLINE:-560} ]; then echo "== $1 @ $2: skipped (time)"; return; fi
  echo "== $1 @ $2, $3 s, $4 evaluations"
  timeout -k 5 $(( ${DEADLINE:-560} - ($(date +%s) - START) )) $B tune --bundle .device/bundle.json --lockfile /tmp/K.lock --device gpu \
    --kernel "$1" --workload $2 --budget-evals $4 --budget-secs $3 --seed 1 --message-format json \
    > $R/${1##*:}-$2.jsonl 2> $R/${1##*:}-$2.err; echo "rc=$? after $(( $(date +%s) - START )) s"
  grep '"tuned"' $R/${1##*:}-$2.jsonl | cut -c1-700; tail -2 $R/${1##*:}-$2.err | cut -c1-300
  cp /tmp/K.lock $OUT/Kfoundry.lock; tar czf $OUT/$mode.tgz -C $R .
}
E=kfoundry-examples
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
if [ "$mode" = dev ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
  timeout -k 5 200 python3 bench/h200/hgemm_dev.py --old .device/old 2>&1 | tee $R/hgemm_dev.txt
  tune $E::SuiteHgemm full ${HSECS:-60} 200
  tune $E::SuiteBgemm full ${BSECS:-40} 150
else
  # JOBS: "kernel@workload@seconds@evaluations ..." to tune only those (a second call's rest).
  JOBS=${JOBS:-"$E::SuiteSgemm@full@45@300 $E::LinearGelu@full@40@300 $E::SuiteHgemm@small@4@20 $E::SuiteBgemm@small@4@20 $E::SuiteSgemm@small@4@20 $E::LinearGelu@small@4@20 $E::SuiteSgemmTf32@small@4@20 $E::SuiteSgemmTf32@full@25@150 kb-linear-gelu-softmax::K00Matmul@full@4@20 kb-linear-gelu-softmax::K00Matmul@small@3@15 kb-conv-gn::K00Conv@full@4@20 kb-conv-gn::K00Conv@small@3@15 cnn-block::K01Conv@full@4@20 cnn-block::K01Conv@small@3@15 cnn-block::K03Matmul@full@4@20 cnn-block::K03Matmul@small@3@15"}
  for j in $JOBS; do IFS=@ read -r k w s e <<< "$j"; tune "$k" "$w" "$s" "$e"; done
fi
tar czf $OUT/$mode.tgz -C $R .
