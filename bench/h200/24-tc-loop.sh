# Issue 28, 2026-12-06: the template library's new tensor-core main loop (k-permuted 16-byte
# fragment loads, swizzled B tiles, cheaper 3xTF32 split, RASTER, TF32 opt-in) on the H200.
#   measure: bench/h200/tc_dev.py time alone;
#   dev:    bench/h200/tc_dev.py time (mma.sync peak, the loop's configurations against the
#           old loop of .device/old, cuBLAS FP32/TF32), then SuiteSgemm, LinearGelu and
#           SuiteSgemmTf32 tuned at `full`, then at `small` while the call has time;
#   retune: the imported kernels whose text changed (the H200's and H100's workloads of them),
#           on the lockfile the dev call returned (.device/K.lock).
# Carry target/release/cargo-kfoundry, .device (bundle.json from `cargo kfoundry bundle
# --workspace -o .device/bundle.json`, opencl-setup.sh, old/ for the baseline, K.lock) and .whl
# (pyopencl and its pure-Python needs). Results come back as $OUT/tc-<mode>.tgz and
# $OUT/Kfoundry.lock.
set -u
mode=${1:-dev}
sh .device/opencl-setup.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1 CUDA_CACHE_DISABLE=1
B=target/release/cargo-kfoundry
R=/tmp/tc-$mode; mkdir -p $R
START=$(date +%s)
tune() { # kernel workload seconds: skipped when the call has not that long left
  if [ $(( $(date +%s) - START + $3 + 60 )) -gt ${DEADLINE:-570} ]; then echo "== $1 @ $2: skipped (time)"; return; fi
  echo "== $1 @ $2, $3 s"
  timeout -k 5 $(($3 + 90)) $B tune --bundle .device/bundle.json --lockfile /tmp/K.lock --device gpu \
    --kernel "$1" --workload $2 --budget-evals 600 --budget-secs $3 --seed 1 --message-format json \
    > $R/${1##*:}-$2.jsonl 2> $R/${1##*:}-$2.err; echo "rc=$?"
  grep '"tuned"' $R/${1##*:}-$2.jsonl | cut -c1-700; tail -2 $R/${1##*:}-$2.err
  cp /tmp/K.lock $OUT/Kfoundry.lock; tar czf $OUT/tc-$mode.tgz -C $R .
}
if [ "$mode" = dev ] || [ "$mode" = measure ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
  timeout -k 5 240 python3 bench/h200/tc_dev.py time --old .device/old 2>&1 | tee $R/tc_dev.txt
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee -a $R/tc_dev.txt
  if [ "$mode" = measure ]; then tar czf $OUT/tc-$mode.tgz -C $R .; exit 0; fi
  cp Kfoundry.lock /tmp/K.lock
  tune '::SuiteSgemm' full 100
  tune '::LinearGelu' full 80
  tune '::SuiteSgemmTf32' full 40
  for k in '::SuiteSgemm' '::LinearGelu' '::SuiteSgemmTf32'; do tune "$k" small 8; done
else
  cp .device/K.lock /tmp/K.lock; chmod u+w /tmp/K.lock
  for k in 'kb-linear-gelu-softmax::K00Matmul' 'kb-conv-gn::K00Conv' 'cnn-block::K01Conv'; do
    tune "$k" full 6; tune "$k" small 6
  done
  tune 'cnn-block::K03Matmul' full 6
fi
tar czf $OUT/tc-$mode.tgz -C $R .
