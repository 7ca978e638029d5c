# Issue 15, the memory-bound problems: tunes the two-stage softmax (SoftmaxStats,
# SoftmaxApply) and the LayerNorm stages (LayerNormStats, LayerNormApply) at `full` on the GPU
# into a copy of Kfoundry.lock, returned as $OUT/Kfoundry.lock with the JSON traces.
#
#   bash bench/h200/13-softmax-layernorm.sh [softmax|layernorm|all]   (default: all)
#
# Carry target/release/cargo-kfoundry and .device (opencl-setup.sh, bundle.json from
# `cargo kfoundry bundle -p kfoundry-examples` built after these kernels changed). Each tune has
# 130 s of search budget (150 s for LayerNormApply, 1,920 configurations) and a hard timeout
# of 60 s more (the tuner draws the 6.4 GB softmax input on the host). All four take about
# 9-10 minutes, so under the device's 10-minute limit per command run `softmax` and
# `layernorm` as two calls: the lockfile is kept in /tmp/K13.lock between calls on a warm
# machine (on a fresh one, carry the first call's $OUT/Kfoundry.lock as Kfoundry.lock).
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export CUDA_CACHE_DISABLE=1
B=target/release/cargo-kfoundry
L=/tmp/K13.lock
[ -e $L ] || cp Kfoundry.lock $L
# SECS overrides every kernel's search budget.
case "${1:-all}" in
softmax) list="SoftmaxStats:${SECS:-130} SoftmaxApply:${SECS:-130}" ;;
layernorm) list="LayerNormStats:${SECS:-130} LayerNormApply:${SECS:-150}" ;;
*) list="SoftmaxStats:${SECS:-130} SoftmaxApply:${SECS:-130} LayerNormStats:${SECS:-130} LayerNormApply:${SECS:-150}" ;;
esac
for kw in $list; do
  k=${kw%%:*}; s=${kw##*:}
  echo "== $k full, $s s"
  timeout -k 5 $((s + 60)) $B tune --bundle .device/bundle.json --lockfile $L --device gpu --kernel "::$k" --workload full --budget-evals 300 --budget-secs $s --seed 1 --message-format json > $OUT/$k.jsonl 2>$OUT/$k.err; echo "rc=$?"
  grep '"tuned"' $OUT/$k.jsonl | cut -c1-900
  tail -3 $OUT/$k.err
done
cp $L $OUT/Kfoundry.lock
