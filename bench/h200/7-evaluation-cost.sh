#!/usr/bin/env bash
# Issue 14 on the H200: what one evaluation costs before and after the cheap-evaluation
# changes (pooled input sets, integer inputs drawn on the device, adaptive repeats), and what
# dispatch costs per launch before and after launch plans.
#
# Carry: target/release/cargo-kfoundry (after) and .device, holding opencl-setup.sh,
# bundle.json (`cargo kfoundry bundle -p kfoundry-examples -o .device/bundle.json`),
# dev-bundle.json (bench/h200/5-dev-spaces.sh says how), cargo-kfoundry-before (the CLI built
# at the commit before the change), and dispatch_overhead{,_before} (examples' benchmark
# built with and without launch plans).
# Usage (device tool): bash bench/h200/7-evaluation-cost.sh    results: $OUT/*.jsonl, $OUT/dispatch.txt
# (the device tool returns few files: pack them, e.g. `tar czf $OUT/cost.tgz -C $OUT .` last)
# Then here: python3 bench/evaluation_cost.py <the files' folder>
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
# NVIDIA's driver caches compiled kernels across processes: a second tool (or binary) building
# the same configurations would find them built. Off, so that every build is paid.
export CUDA_CACHE_DISABLE=1
NEW=target/release/cargo-kfoundry
OLD=.device/cargo-kfoundry-before
EVALS=${EVALS:-40}
KERNELS=${KERNELS:-Sgemm:large SuiteSgemm:full ConvGroupNorm:full Saxpy:large SumDim1:full}
HISTOGRAM_EVALS=${HISTOGRAM_EVALS:-12}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1

# Dispatch: three alternations of before and after, 200 rounds of 200 launches per way each.
for i in 1 2 3; do
    echo "== before"; .device/dispatch_overhead_before 4096 200
    echo "== after"; .device/dispatch_overhead 4096 200
done > "$OUT/dispatch.txt" 2>&1

# Evaluation cost: the same search (seed 1, EVALS evaluations) with each binary, which goes
# first alternating from kernel to kernel.
tune() { # which binary bundle kernel workload evals
    local bin=$NEW
    [ "$1" = before ] && bin=$OLD
    timeout -k 10 200 "$bin" kfoundry tune --bundle "$2" --lockfile "/tmp/lock-$1.lock" --device gpu --kernel "::$3" \
        --workload "$4" --budget-evals "$5" --seed 1 --no-llm --message-format json \
        > "$OUT/cost-$1-$3.jsonl" 2> "$OUT/cost-$1-$3.err"
    echo "$1 $3 $4: exit $?" >> "$OUT/log.txt"
}
order="before after"
for kw in $KERNELS; do
    for which in $order; do
        tune "$which" .device/bundle.json "${kw%:*}" "${kw#*:}" "$EVALS"
    done
    [ "$order" = "before after" ] && order="after before" || order="before after"
done
# The histogram of the issue (2^26 bytes of input): fewer evaluations, it was 2.5 s each.
if [ "$HISTOGRAM_EVALS" -gt 0 ]; then
    for which in after before; do
        tune "$which" .device/dev-bundle.json Histogram full "$HISTOGRAM_EVALS"
    done
fi
