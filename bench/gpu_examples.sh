#!/usr/bin/env bash
# On the H200 machine (no Rust toolchain there), with release binaries built here and carried:
#   bash bench/gpu_examples.sh tune   # tunes the examples' bundle on NVIDIA OpenCL → $OUT/Kfoundry.lock
#   bash bench/gpu_examples.sh run    # runs the examples program (dispatch + CPU check), small and large
# Prepare here: cargo build --release -p cargo-kfoundry -p kfoundry-examples
#               target/release/cargo-kfoundry bundle -o .device/bundle.json
#               cp ../shared/gpu/opencl-setup.sh .device/
set -euo pipefail
OUT=${OUT:-/tmp/kfoundry-out}
mkdir -p "$OUT"
sh .device/opencl-setup.sh
BIN=target/release
case "${1:-}" in
tune)
    "$BIN/cargo-kfoundry" devices | tee "$OUT/devices.txt"
    cp Kfoundry.lock "$OUT/Kfoundry.lock" 2>/dev/null || true
    "$BIN/cargo-kfoundry" tune --bundle .device/bundle.json --lockfile "$OUT/Kfoundry.lock" \
        --device gpu --budget-evals "${BUDGET:-60}" --seed 1 -q | tee "$OUT/tune-gpu.txt"
    ;;
run)
    "$BIN/kfoundry-examples" | tee "$OUT/run-small.txt"
    "$BIN/kfoundry-examples" large | tee "$OUT/run-large.txt"
    ;;
*)
    echo "usage: $0 tune|run" >&2
    exit 2
    ;;
esac
