#!/usr/bin/env bash
# Issue 29 on the H200: evaluations per second of `tune` with builds ahead by speculation
# (`Settings::speculate`: 2 levels built one at a time by default on a GPU, `--set speculate=N`,
# `--build-jobs N`) against the same CLI without it
# (`--set speculate=0`: the same search, evaluation for evaluation) and against the CLI of
# 1a655c8 (the baseline), in one call, which goes first rotating from kernel to kernel.
#
# Carry: target/release/cargo-kfoundry and .device, holding opencl-setup.sh, bundle.json
# (`cargo kfoundry bundle -p kfoundry-examples -o .device/bundle.json`) and
# cargo-kfoundry-1a655c8 (the CLI built at 1a655c8) with bundle-old.json (that CLI's `bundle` run
# in a checkout of 1a655c8: it cannot read today's bundles).
# Variants: old (that CLI), default (this CLI, no flags), specL (speculate=L), sLjN (speculate=L,
# --build-jobs N), farmN (--build-processes N: builds ahead in N processes), sLfarmN (both).
# Usage (device tool): bash bench/h200/21-speculation.sh; results in $OUT/spec.tgz
# Then here: [BASE=variant] python3 bench/speculation.py <the unpacked folder>
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
# NVIDIA's driver caches compiled kernels across processes: the second run of a kernel would
# find the first run's builds. Off, so that every build is paid.
export CUDA_CACHE_DISABLE=1
EVALS=${EVALS:-40}
KERNELS=${KERNELS:-Saxpy:large Sgemm:large SuiteSgemm:full ConvGroupNorm:full SumDim1:full}
VARIANTS=${VARIANTS:-old spec0 spec4 spec8}
D=$OUT/spec
mkdir -p "$D"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$D/gpu.txt" 2>&1
nproc > "$D/nproc.txt"
stamp() { python3 -u -c 'import sys,time
for l in sys.stdin: print(f"{time.time():.4f} {l}", end="")'; }
tune() { # variant kernel workload
    local bin=target/release/cargo-kfoundry set=() bundle=.device/bundle.json
    case "$1" in
        old) bin=.device/cargo-kfoundry-1a655c8
             # that CLI reads only the bundle format of its day (no 16-bit arguments)
             [ -f .device/bundle-old.json ] && bundle=.device/bundle-old.json ;;
        spec*) set=(--set "speculate=${1#spec}") ;;
        farm*) set=(--build-processes "${1#farm}") ;;
        s*farm*) # sLfarmN: speculate=L, builds ahead in N processes
            local l=${1#s}
            set=(--set "speculate=${l%farm*}" --build-processes "${l#*farm}") ;;
        s*j*) # sLjN: speculate=L with at most N builds at once
            local l=${1#s}
            set=(--set "speculate=${l%j*}" --build-jobs "${l#*j}") ;;
    esac
    # this CLI's tuning database would start later variants from earlier ones' results (the
    # old CLI has none): off, so that every variant runs the same search
    [ "$1" != old ] && set+=(--no-tuning-db)
    local start
    start=$(date +%s.%N)
    timeout -k 10 250 "$bin" kfoundry tune --bundle "$bundle" --lockfile "/tmp/lock-$1-$2.lock" \
        --device gpu --kernel "::$2" --workload "$3" --budget-evals "$EVALS" --seed 1 --no-llm \
        --message-format json "${set[@]}" 2> "$D/$1-$2.err" | stamp > "$D/$1-$2.jsonl"
    echo "$1 $2 $3 exit ${PIPESTATUS[0]} start $start end $(date +%s.%N)" >> "$D/log.txt"
}
order=($VARIANTS)
for kw in $KERNELS; do
    for v in "${order[@]}"; do
        tune "$v" "${kw%:*}" "${kw#*:}"
    done
    order=("${order[@]:1}" "${order[0]}")
    # after each kernel, so that a run cut short still brings back what it measured
    tar czf "$OUT/spec.tgz" -C "$OUT" spec
done
