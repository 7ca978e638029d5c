# Issue 54 (2026-12-07): the searching proof on NVIDIA's OpenCL, in one call.
# 1. The honest slips of cargo-kfoundry/tests/cli/adversarial.rs (softmax max from 0, one-pass
#    variance, plain sum of squares, persistent kernel above the tuned size, integer gather at
#    id 0, scalar range top, half flushed to zero, local read without a barrier), each tuned
#    on the GPU with seed 0 (SEEDS to change): P=1 must never ship.
# 2. MobileNetV3-small's whole tune with per-tune phases (28-model-phases.sh, TUNE_S seconds):
#    the proof's share of the tune time, the model's speed and its correctness.
# Carry .device: cargo-kfoundry (release, built here), opencl-setup.sh, and the new bundles
# (`cargo run -p cargo-kfoundry --example export_bundles -- .device/adv`, then only the new
# ones kept).
#   bash bench/h200/32-prover.sh   (results in $OUT)
set -u
START=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
sh .device/opencl-setup.sh >/dev/null 2>&1
J=$OUT/adversarial.jsonl
mkdir -p .device/a
for b in .device/adv/*.json; do
    n=$(basename $b .json)
    for seed in ${SEEDS:-0}; do
        timeout -k 10 60 .device/cargo-kfoundry kfoundry tune --bundle $b --lockfile .device/a/$n-$seed.lock --state-dir .device/a/state-$n-$seed \
            --device gpu --budget-evals 8 --repeats 1 --seed $seed --message-format json 2>> $OUT/adversarial.err \
            | sed "s/^{/{\"bundle\":\"$n\",\"seed\":$seed,/" >> $J
        echo "$n seed $seed: status ${PIPESTATUS[0]}, shipped $(grep -h '^P = ' .device/a/$n-$seed.lock | tr '\n' ' ')"
    done
done
echo "adversarial done after $(( $(date +%s) - START )) s"
grep -h '"reason":"rejected"' $J | cut -c1-300
SECS=1 EVALS=8 TUNE_S=${TUNE_S:-300} bash bench/h200/28-model-phases.sh
echo "all done after $(( $(date +%s) - START )) s"
