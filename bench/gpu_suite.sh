#!/usr/bin/env bash
# The kernel suite on the H200 machine (no Rust toolchain there), with release binaries built
# here and carried (target/release/{cargo-kfoundry,suite} and .device/):
#
#   bash bench/gpu_suite.sh tune [KERNEL...]  # tune suite kernels at `full` on NVIDIA OpenCL,
#                                             #   one command per kernel → $OUT/Kfoundry.lock
#   bash bench/gpu_suite.sh run [ARGS...]     # suite harness on the GPU at `full` (reference vs
#                                             #   dispatched variant, CLBlast for SGEMM), then
#                                             #   PyTorch, ceilings and roofline → $OUT
#   bash bench/gpu_suite.sh small             # smoke test of both sides at the `small` sizes
#
# Prepare here:
#   cargo build --release -p cargo-kfoundry -p kfoundry-examples
#   target/release/cargo-kfoundry bundle -o .device/bundle.json
#   cp ../shared/gpu/opencl-setup.sh .device/
#   (cd /tmp && apt-get download libclblast1) && dpkg -x /tmp/libclblast1_*.deb .device/clblast
# and carry target/release/cargo-kfoundry, target/release/suite and .device.
#
# Tuned variants are embedded at build time: after `tune`, copy $OUT/Kfoundry.lock over the
# repository's Kfoundry.lock, rebuild the release binaries here, carry them again, then `run`.
#
# KERNEL: text in a kernel id (the tuner's --kernel): SuiteSgemm ::SoftmaxStats ::SoftmaxApply
# LayerNormStats LayerNormApply SumDim1 LinearGelu LinearSoftmax ConvGroupNorm (the default: all
# of them, one tuner run each; `::Softmax` alone would match the one-launch Softmax and both
# stages). BUDGET (evaluations, default 40) and BUDGET_SECS (default 420) apply per
# kernel. The tuner draws its inputs on the host: at `full` sizes (up to 8.6 GB for SumDim1)
# an evaluation takes seconds, so keep each tune command within the 10-minute limit: pass one
# or two kernels per command.
#
# Reports (tables, JSON, lockfile) go to $OUT; the outputs the harness writes for the PyTorch
# comparison (about 1 GB at `full`) stay in $WORK (default /tmp/kfoundry-suite).
set -euo pipefail
OUT=${OUT:-/tmp/kfoundry-out}
WORK=${WORK:-/tmp/kfoundry-suite}
mkdir -p "$OUT" "$WORK"
sh .device/opencl-setup.sh
BIN=target/release
ALL=(SuiteSgemm ::SoftmaxStats ::SoftmaxApply LayerNormStats LayerNormApply SumDim1 LinearGelu LinearSoftmax ConvGroupNorm)
CLBLAST_DIR=$(ls -d .device/clblast/usr/lib/*-linux-gnu 2>/dev/null | head -n 1 || true)
CLBLAST_ARGS=()
if [ -n "$CLBLAST_DIR" ] && [ -e "$CLBLAST_DIR/libclblast.so.1" ]; then
    export LD_LIBRARY_PATH="$PWD/$CLBLAST_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    CLBLAST_ARGS=(--clblast "$PWD/$CLBLAST_DIR/libclblast.so.1")
fi
case "${1:-}" in
tune)
    shift
    kernels=("$@")
    [ ${#kernels[@]} -gt 0 ] || kernels=("${ALL[@]}")
    "$BIN/cargo-kfoundry" devices | tee "$OUT/devices.txt"
    [ -e "$OUT/Kfoundry.lock" ] || cp Kfoundry.lock "$OUT/Kfoundry.lock" 2>/dev/null || true
    for k in "${kernels[@]}"; do
        echo "== tune $k (full)" | tee -a "$OUT/tune-suite.txt"
        "$BIN/cargo-kfoundry" tune --bundle .device/bundle.json --lockfile "$OUT/Kfoundry.lock" \
            --device gpu --kernel "$k" --workload full --budget-evals "${BUDGET:-40}" \
            --budget-secs "${BUDGET_SECS:-420}" --seed 1 -q | tee -a "$OUT/tune-suite.txt"
    done
    ;;
run)
    shift
    "$BIN/suite" "$WORK/suite" --device gpu "${CLBLAST_ARGS[@]}" "$@" | tee "$OUT/suite.txt"
    python3 bench/torch_suite.py "$WORK/suite" | tee "$OUT/torch_suite.txt"
    cp "$WORK/suite/suite.json" "$WORK/suite/torch_suite.json" "$OUT/"
    ;;
small)
    "$BIN/suite" "$WORK/suite-small" --workload small --device gpu "${CLBLAST_ARGS[@]}" | tee "$OUT/suite-small.txt"
    python3 bench/torch_suite.py "$WORK/suite-small" --copy-gib 1 | tee "$OUT/torch_suite-small.txt"
    cp "$WORK/suite-small/suite.json" "$OUT/suite-small.json"
    cp "$WORK/suite-small/torch_suite.json" "$OUT/torch_suite-small.json"
    ;;
*)
    echo "usage: $0 tune [KERNEL...] | run [suite args] | small" >&2
    exit 2
    ;;
esac
