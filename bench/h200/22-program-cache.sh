#!/usr/bin/env bash
# Issue 29 on the H200: what kfoundry's program-binary cache saves a re-tune. Per kernel, in
# this order, the same tune three times (same seed, a fresh lockfile each time):
#   cold    both caches empty: NVIDIA's (CUDA_CACHE_PATH, the driver's cache of PTX compiled
#           to machine code) and kfoundry's (KFOUNDRY_CACHE_DIR);
#   nvwarm  again, NVIDIA's cache as the first run left it, kfoundry's not used (the default);
#   warm    again, both caches as the first run left them.
# cold and warm run with --program-cache.
# Evaluations per second from the time stamps of the evaluation messages; the search follows
# measured times, so the runs part ways at some point and the later ones meet some builds
# the first did not make.
#
# Carry: target/release/cargo-kfoundry and .device, holding opencl-setup.sh and bundle.json
# (`cargo kfoundry bundle -p kfoundry-examples -o .device/bundle.json`).
# Usage (device tool): bash bench/h200/22-program-cache.sh; results in $OUT/cache.tgz
# Then here: BASE=cold python3 bench/speculation.py <the unpacked folder>/cache
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
EVALS=${EVALS:-30}
KERNELS=${KERNELS:-Saxpy:large Sgemm:large SuiteSgemm:full ConvGroupNorm:full Softmax:full LayerNormApply:full}
D=$OUT/cache
mkdir -p "$D"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$D/gpu.txt" 2>&1
nproc > "$D/nproc.txt"
stamp() { python3 -u -c 'import sys,time
for l in sys.stdin: print(f"{time.time():.4f} {l}", end="")'; }
tune() { # variant kernel workload
    local flags=(--program-cache)
    [ "$1" = nvwarm ] && flags=()
    local start
    start=$(date +%s.%N)
    CUDA_CACHE_PATH="/tmp/nvcache-$2" KFOUNDRY_CACHE_DIR="/tmp/kfcache-$2" \
    timeout -k 10 250 target/release/cargo-kfoundry kfoundry tune --bundle .device/bundle.json \
        --lockfile "/tmp/lock-$1-$2.lock" --device gpu --kernel "::$2" --workload "$3" \
        --budget-evals "$EVALS" --seed 1 --no-llm --message-format json "${flags[@]}" \
        2> "$D/$1-$2.err" | stamp > "$D/$1-$2.jsonl"
    echo "$1 $2 $3 exit ${PIPESTATUS[0]} start $start end $(date +%s.%N)" >> "$D/log.txt"
}
for kw in $KERNELS; do
    rm -rf "/tmp/nvcache-${kw%:*}" "/tmp/kfcache-${kw%:*}"
    for v in cold nvwarm warm; do
        tune "$v" "${kw%:*}" "${kw#*:}"
    done
    ls "/tmp/kfcache-${kw%:*}/programs" | wc -l > "$D/entries-${kw%:*}.txt"
    # after each kernel, so that a run cut short still brings back what it measured
    tar czf "$OUT/cache.tgz" -C "$OUT" cache
done
