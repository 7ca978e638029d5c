#!/usr/bin/env bash
# Device call 1 of the 2026-11-30 H200 session (run with carry: target/release/cargo-kfoundry, .device):
# peaks of both OpenCL devices, then every suite kernel tuned at `full` on the H200.
sh .device/opencl-setup.sh >/dev/null 2>&1; export KFOUNDRY_CACHE_DIR=$OUT; B=target/release/cargo-kfoundry
$B devices --peaks > $OUT/devices.txt 2>&1; cat $OUT/devices.txt; cp Kfoundry.lock $OUT/Kfoundry.lock
for k in SuiteSgemm LinearGelu ::Softmax SumDim1 LayerNormStats LayerNormApply LinearSoftmax ConvGroupNorm; do
  timeout -k 15 62 $B tune --bundle .device/bundle.json --lockfile $OUT/Kfoundry.lock --device gpu --kernel $k \
    --workload full --budget-evals 30 --budget-secs 35 --seed 1 --message-format json >> $OUT/tune-full.jsonl 2>> $OUT/tune-full.err
done
