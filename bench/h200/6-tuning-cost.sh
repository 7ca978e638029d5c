#!/usr/bin/env bash
# Tuning cost: wall-clock time to a near-best kernel, kfoundry's `tune` against Kernel Tuner 1.5
# (OpenCL backend through pyopencl) on the same kernels, spaces, restrictions, geometry, inputs,
# verification and sizes (bench/kt_opencl/README.md).
#
# Device tool, carry: target/release/cargo-kfoundry, .device, .whl
#   bash bench/h200/6-tuning-cost.sh
# .whl: Kernel Tuner, pyopencl and the dependencies the H200 image lacks (bench/kt_opencl/README.md
# says how to download them); .device/opencl-setup.sh registers NVIDIA's OpenCL driver.
# Results: $OUT/summary.md (bench/kt_opencl/summarize.py over every complete trace so far),
# $OUT/traces.tar.gz (those traces: the device tool returns at most 8 files), $OUT/log.txt.
#
# One call runs whole runs while LIMIT allows, then summarises. Resumable: put the last call's
# traces.tar.gz in .device/ (or its traces in .device/traces/) before carrying .device again, or
# call again while the machine is warm (it keeps them in $WORK); complete traces are not run again.
#
# Environment (defaults):
#   BUDGET=60            wall-clock seconds per run, setup included (each tool's own budget is set
#                        to it; the summary counts only evaluations that ended within it)
#   SEEDS="1 2 3 4 5"
#   TOOLS="kfoundry kt:genetic_algorithm kt:simulated_annealing"  (kt:<any Kernel Tuner strategy>)
#   KERNELS="Sgemm@large SuiteSgemm@full ConvGroupNorm@full Saxpy@large SumDim1@full"
#   LIMIT=520            seconds this call may use (the device allows 600 a command)
#   GRACE=15             seconds past BUDGET before a run gets SIGINT (SIGKILL 15 s later)
#   DEVICE=gpu           device kind: gpu (the H200s), or cpu (PoCL, for testing elsewhere)
#   JOBS                 runs at once, one per device: the number of GPUs (nvidia-smi -L), at most 2
#   PY=python3  BIN=target/release/cargo-kfoundry  BUNDLE=bench/kt_opencl/examples-bundle.json
#   WORK=/tmp/kt_opencl_work   OUT (set by the device tool)
# Runs take about BUDGET + 20 s each: the defaults (5 kernels x 5 seeds x 3 tools = 75 runs) need
# about 100 GPU-minutes, half that on two GPUs.
set -u
cd "$(dirname "$0")/../.." || exit 1
START=$(date +%s)
BUDGET=${BUDGET:-60}
SEEDS=${SEEDS:-"1 2 3 4 5"}
TOOLS=${TOOLS:-"kfoundry kt:genetic_algorithm kt:simulated_annealing"}
KERNELS=${KERNELS:-"Sgemm@large SuiteSgemm@full ConvGroupNorm@full Saxpy@large SumDim1@full"}
LIMIT=${LIMIT:-520}
GRACE=${GRACE:-15}
DEVICE=${DEVICE:-gpu}
PY=${PY:-python3}
BIN=${BIN:-target/release/cargo-kfoundry}
BUNDLE=${BUNDLE:-bench/kt_opencl/examples-bundle.json}
WORK=${WORK:-/tmp/kt_opencl_work}
OUT=${OUT:-$WORK/out}
L=$OUT/log.txt
mkdir -p "$OUT" "$WORK/traces" "$WORK/tmp" "$WORK/logs" "$WORK/kfcache"
rm -rf "$WORK/claims" && mkdir -p "$WORK/claims"
log() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$L"; }

# No compiled-kernel caches across runs: every run compiles as on a fresh machine (otherwise a later
# seed would find the kernels an earlier one built: NVIDIA's JIT cache, pyopencl's binary cache,
# PoCL's kernel cache).
export CUDA_CACHE_DISABLE=1 PYOPENCL_NO_CACHE=1 POCL_KERNEL_CACHE=0
export KFOUNDRY_CACHE_DIR=$WORK/kfcache PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# Kernel Tuner and pyopencl from the carried wheels, unless $PY already has them.
if ! "$PY" -c 'import kernel_tuner, pyopencl' 2>/dev/null; then
    if [ ! -d /tmp/site/kernel_tuner ]; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
            || { log "wheel install failed"; exit 1; }
    fi
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if command -v nvidia-smi >/dev/null 2>&1 && [ -f .device/opencl-setup.sh ]; then
    sh .device/opencl-setup.sh
fi
NGPU=0
command -v nvidia-smi >/dev/null 2>&1 && NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ -z "${JOBS:-}" ]; then
    if [ "$DEVICE" = gpu ]; then JOBS=$(( NGPU < 1 ? 1 : (NGPU > 2 ? 2 : NGPU) )); else JOBS=1; fi
fi
log "budget ${BUDGET}s, seeds [$SEEDS], tools [$TOOLS], kernels [$KERNELS], limit ${LIMIT}s, $JOBS at once ($NGPU GPUs)"
{ nvidia-smi -L 2>/dev/null; "$PY" -c 'import sys, numpy, kernel_tuner, pyopencl as cl; print(sys.version.split()[0], "numpy", numpy.__version__, "kernel_tuner", kernel_tuner.__version__, "pyopencl", cl.VERSION_TEXT); [print("  OpenCL", pi, di, d.name, "|", p.name) for pi, p in enumerate(cl.get_platforms()) for di, d in enumerate(p.get_devices())]'; } >> "$L" 2>&1

# kfoundry's index of the k-th device of kind $DEVICE (Kernel Tuner gets --select $DEVICE:k: both
# list OpenCL devices through the ICD loader, platform by platform, in the same order).
"$BIN" kfoundry devices --message-format json > "$WORK/devices.json" 2>> "$L" || { log "cargo-kfoundry devices failed"; exit 1; }
kf_index() { "$PY" -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; g=[m for m in d if m.get("info",{}).get("kind")==sys.argv[2]]; k=int(sys.argv[3]); print(g[k]["index"] if k<len(g) else "")' "$WORK/devices.json" "$DEVICE" "$1"; }
kf_name() { "$PY" -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; print(next(m["info"]["name"] for m in d if m["index"]==int(sys.argv[2])))' "$WORK/devices.json" "$1"; }
for k in $(seq 0 $((JOBS - 1))); do
    if [ -z "$(kf_index "$k")" ]; then log "no $DEVICE number $k: running $k at once"; JOBS=$k; break; fi
done
[ "$JOBS" -ge 1 ] || { log "no $DEVICE device"; exit 1; }

# Traces of earlier calls.
if [ -f .device/traces.tar.gz ]; then tar -xzf .device/traces.tar.gz -C "$WORK" --skip-old-files 2>> "$L"; fi
if [ -d .device/traces ]; then cp -n .device/traces/*.jsonl "$WORK/traces/" 2>/dev/null; fi

# kfoundry measures a device's peaks (for its roofline figures) the first time it tunes there and
# caches them: do it now, untimed, so no run pays for it.
for k in $(seq 0 $((JOBS - 1))); do
    idx=$(kf_index "$k")
    "$BIN" kfoundry tune --bundle "$BUNDLE" --kernel ::Saxpy --workload small --budget-evals 1 --device "$idx" --no-llm -q \
        --lockfile "$WORK/tmp/peaks.lock" --state-dir "$WORK/tmp/peaks.state" --message-format json > /dev/null 2>> "$L" \
        || log "warm-up tune on device $idx failed"
    rm -rf "$WORK/tmp/peaks.lock" "$WORK/tmp/peaks.state"
done
log "set up"

JOBLIST=""
for seed in $SEEDS; do
    for kw in $KERNELS; do
        for tool in $TOOLS; do
            tag=${tool/:/-}
            JOBLIST="$JOBLIST ${tag}__${kw%@*}__${kw#*@}__s${seed}"
        done
    done
done

run_job() { # slot job
    local k=$1 job=$2 tag kernel workload seed rc t0 tmp
    IFS='|' read -r tag kernel workload seed <<< "${job//__/|}"
    seed=${seed#s}
    tmp=$WORK/tmp/$job.jsonl
    t0=$(date +%s)
    if [ "$tag" = kfoundry ]; then
        local idx name
        idx=$(kf_index "$k"); name=$(kf_name "$idx")
        rm -rf "$WORK/tmp/$job.lock" "$WORK/tmp/$job.state"
        "$PY" bench/kt_opencl/stamp.py --out "$tmp" --timeout $((BUDGET + GRACE)) --kill-after 15 \
            --meta kernel="$kernel" --meta workload="$workload" --meta seed="$seed" --meta budget_s="$BUDGET" \
            --meta "device_name=$name" --meta "kfoundry_device=$idx" -- \
            "$BIN" kfoundry tune --bundle "$BUNDLE" --kernel "::$kernel" --workload "$workload" --seed "$seed" \
            --budget-secs "$BUDGET" --budget-evals 1000000 --message-format json --no-llm -q \
            --lockfile "$WORK/tmp/$job.lock" --state-dir "$WORK/tmp/$job.state" --device "$idx" \
            2> "$WORK/logs/$job.err"
        rc=$?
        rm -rf "$WORK/tmp/$job.lock" "$WORK/tmp/$job.state"
    else
        timeout -s INT -k 15 $((BUDGET + GRACE)) "$PY" bench/kt_opencl/tune_kt.py --kernel "$kernel" --workload "$workload" \
            --strategy "${tag#kt-}" --seed "$seed" --max-seconds "$BUDGET" --out "$tmp" --select "$DEVICE:$k" \
            > "$WORK/logs/$job.err" 2>&1
        rc=$?
        if ! tail -n 1 "$tmp" 2>/dev/null | grep -q '"type": "end"'; then
            echo "{\"type\": \"end\", \"t\": null, \"status\": \"stopped by the driver, rc $rc\"}" >> "$tmp"
        fi
    fi
    mv "$tmp" "$WORK/traces/$job.jsonl"
    log "$job: rc $rc, $(( $(date +%s) - t0 ))s on $DEVICE $k, $(grep -c '"evaluation"\|"type": "eval"' "$WORK/traces/$job.jsonl") evaluations"
}

run_slot() {
    local k=$1 job left
    for job in $JOBLIST; do
        [ -e "$WORK/traces/$job.jsonl" ] && continue
        mkdir "$WORK/claims/$job" 2>/dev/null || continue
        left=$((LIMIT - ($(date +%s) - START)))
        if [ "$left" -lt $((BUDGET + GRACE + 20)) ]; then
            rmdir "$WORK/claims/$job"
            return
        fi
        run_job "$k" "$job"
    done
}

for k in $(seq 0 $((JOBS - 1))); do
    run_slot "$k" &
done
wait

total=$(echo "$JOBLIST" | wc -w)
done_=0
for job in $JOBLIST; do [ -e "$WORK/traces/$job.jsonl" ] && done_=$((done_ + 1)); done
log "$done_ of $total runs complete$([ "$done_" -lt "$total" ] && echo ': call again (with traces.tar.gz in .device/)')"
"$PY" bench/kt_opencl/summarize.py "$WORK/traces" --spaces bench/spaces-dev --out "$OUT/summary.md" > /dev/null 2>> "$L" \
    || log "summarize failed"
tar -czf "$OUT/traces.tar.gz" -C "$WORK" traces
cat "$OUT/summary.md" 2>/dev/null
