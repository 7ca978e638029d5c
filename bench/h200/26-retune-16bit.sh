# Issue 28, 2026-12-06 (second session): the template library learned 16-bit operands
# (KM_HALF: m16n8k16 half and bfloat16 products), so every kernel that includes it changed
# text (ConvGroupNorm, which takes only mma_ptx.cl and mma_emulated.cl, did not). This call
# tunes, on the lockfile of the checkout: the changed FP32 kernels, the new SuiteHgemm and
# SuiteBgemm, the imported ones, at `full` and `small`, most important first while the call
# has time; and cuBLAS on the same shapes in each precision (torch_gemm.py) for the ratios.
# Carry target/release/cargo-kfoundry and .device (bundle.json from `cargo kfoundry bundle
# --workspace -o .device/bundle.json`, opencl-setup.sh). Results: $OUT/Kfoundry.lock and
# $OUT/retune.tgz (one .jsonl and .err a tune).
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export CUDA_CACHE_DISABLE=1
B=target/release/cargo-kfoundry
R=/tmp/retune; mkdir -p $R
START=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout -k 5 60 python3 bench/h200/torch_gemm.py 4096 4096 4096 2>&1 | tee $R/cublas.txt
cp Kfoundry.lock /tmp/K.lock
tune() { # kernel workload seconds evaluations: skipped when the call has not time for it
  if [ $(( $(date +%s) - START + $3 + 60 )) -gt ${DEADLINE:-560} ]; then echo "== $1 @ $2: skipped (time)"; return; fi
  echo "== $1 @ $2, $3 s, $4 evaluations"
  timeout -k 5 $(( ${DEADLINE:-560} - ($(date +%s) - START) )) $B tune --bundle .device/bundle.json --lockfile /tmp/K.lock --device gpu \
    --kernel "$1" --workload $2 --budget-evals $4 --budget-secs $3 --seed 1 --message-format json \
    > $R/${1##*:}-$2.jsonl 2> $R/${1##*:}-$2.err; echo "rc=$? after $(( $(date +%s) - START )) s"
  grep '"tuned"' $R/${1##*:}-$2.jsonl | cut -c1-700; tail -2 $R/${1##*:}-$2.err | cut -c1-300
  cp /tmp/K.lock $OUT/Kfoundry.lock; tar czf $OUT/retune.tgz -C $R .
}
E=kfoundry-examples
tune $E::SuiteSgemm full 30 50
tune $E::LinearGelu full 30 40
tune $E::SuiteHgemm full 30 60
tune $E::SuiteBgemm full 20 40
for k in SuiteSgemm LinearGelu SuiteHgemm SuiteBgemm; do tune $E::$k small 5 30; done
for k in 'kb-linear-gelu-softmax::K00Matmul' 'kb-conv-gn::K00Conv' 'cnn-block::K01Conv' 'cnn-block::K03Matmul'; do
  tune "$k" full 5 20; tune "$k" small 4 20
done
tune $E::SuiteSgemmTf32 full 15 40
tune $E::SuiteSgemmTf32 small 4 20
tar czf $OUT/retune.tgz -C $R .
