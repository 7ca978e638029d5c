# Tunes ConvGroupNorm (problem 6) at `full` on the H200, with its tensor-core path (MMA = 1:
# 3xTF32 implicit GEMM, issue 15) in the space, into a copy of Kfoundry.lock returned as
# $OUT/Kfoundry.lock with the JSON trace. Carry target/release/cargo-kfoundry and .device
# (opencl-setup.sh, and bundle.json from `cargo kfoundry bundle -o .device/bundle.json`).
# SECS (default 200) is the search's budget in seconds.
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export CUDA_CACHE_DISABLE=1
B=target/release/cargo-kfoundry
s=${SECS:-200}
cp Kfoundry.lock /tmp/K.lock
echo "== ConvGroupNorm full, $s s"
timeout -k 5 $((s + 40)) $B tune --bundle .device/bundle.json --lockfile /tmp/K.lock --device gpu --kernel "::ConvGroupNorm" --workload full --budget-evals 400 --budget-secs $s --seed 1 --message-format json > $OUT/ConvGroupNorm.jsonl 2>$OUT/ConvGroupNorm.err; echo "rc=$?"
grep '"tuned"' $OUT/ConvGroupNorm.jsonl | cut -c1-900
tail -3 $OUT/ConvGroupNorm.err
cp /tmp/K.lock $OUT/Kfoundry.lock
