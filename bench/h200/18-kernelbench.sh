#!/bin/bash
# Issue 25 on the H200: the imported examples re-tuned (their kernels changed: the tensor-core
# path in matrix products, CumSum), then KernelBench through import (bench/kernelbench/run.py).
# Carried in .device/: cargo-kfoundry (release, built here), the workspace's bundle
# (`cargo kfoundry bundle -o .device/k.json`), Kfoundry.lock as .device/K.lock,
# ../shared/gpu/opencl-setup.sh, ../shared/kernelbench's level1/ and level2/ as
# .device/kernelbench/, and the results of earlier calls as .device/kb-results.jsonl (resumed).
# `models`: the whole models of bench/models/models (MobileNetV3-small, SqueezeNet, ShuffleNetV2,
# ViT-Tiny, a small Llama) through the same harness (ONLY=1,5 picks; NOTUNE=1 runs their
# reference kernels; results resumed from .device/models-results.jsonl). For `kernelbench`,
# NOCOMPILE=' ' leaves torch.compile out and NOTUNE=1 runs the reference kernels.
# Usage: bash bench/h200/18-kernelbench.sh examples|kernelbench|models [DEADLINE_S]  (results in $OUT)
set -u
set -f  # `--kernel` globs are for kfoundry, not for the shell
D=.device
sh $D/opencl-setup.sh > /dev/null 2>&1
export CUDA_CACHE_DISABLE=1
case "${1:-}" in
examples)
    # The kernels named in KERNELS (default: every imported one), each its own tune (`--kernel`
    # is one pattern), at both workloads.
    for k in ${KERNELS:-cnn-block::* kb-conv-gn::* kb-linear-gelu-softmax::*}; do
        timeout -k 30 "${TUNE_SECS:-240}" $D/cargo-kfoundry tune --bundle $D/k.json --lockfile $D/K.lock --state-dir $D/state --device gpu \
            --kernel "$k" --workload small --workload full \
            --budget-evals "${BUDGET:-30}" --budget-secs "${SECS:-8}" --seed 1 --message-format json >> $OUT/tune-imported.jsonl 2>> $OUT/tune-imported.err
    done
    echo "tune imported examples: status $?"
    cp $D/K.lock $OUT/K.lock
    grep '"tuned"' $OUT/tune-imported.jsonl | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)["result"]
    print(r["kernel"], r["workload"], r["reference_ns"], r["best_ns"], round(r["speedup"], 2), r["params"], "kept" if r["reference_kept"] else "")'
    tail -3 $OUT/tune-imported.err
    ;;
kernelbench)
    touch $D/kb-results.jsonl
    python3 bench/kernelbench/run.py --problems $D/kernelbench --level "${LEVEL:-level2}" --cli $D/cargo-kfoundry --only "${ONLY:-}" \
        --results $D/kb-results.jsonl --secs "${SECS:-4}" --evals "${EVALS:-24}" ${NOCOMPILE:---compile} ${NOTUNE:+--no-tune} --deadline "${2:-400}" 2>> $OUT/kernelbench.err
    cp $D/kb-results.jsonl $OUT/kb-results.jsonl
    python3 bench/kernelbench/table.py $OUT/kb-results.jsonl | tail -4
    ;;
models)
    touch $D/models-results.jsonl
    python3 bench/kernelbench/run.py --problems bench/models --level models --cli $D/cargo-kfoundry --only "${ONLY:-}" \
        --results $D/models-results.jsonl --secs "${SECS:-2}" --evals "${EVALS:-12}" ${NOTUNE:+--no-tune} ${COMPILE:+--compile} \
        --deadline "${2:-400}" 2>> $OUT/models.err
    cp $D/models-results.jsonl $OUT/models-results.jsonl
    python3 bench/kernelbench/table.py $OUT/models-results.jsonl | tail -4
    ;;
*)
    echo "usage: $0 examples|kernelbench|models [DEADLINE_S]" >&2
    exit 2
    ;;
esac
