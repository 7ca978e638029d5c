#!/usr/bin/env bash
# Builds the probe linked (like ocl) and dynamically loaded, runs each twice, then shows what
# happens to each, and to a kfoundry program, on a machine without libOpenCL.so.1 (hidden by
# bind-mounting /dev/null over it in a private mount namespace; needs unshare -r).
# Usage: bench/dynamic_opencl/run.sh [path of a binary built with kfoundry]
set -euo pipefail
program=${1:+$(realpath "$1")}
cd "$(dirname "$0")"
CARGO_TARGET_DIR=target/linked cargo build -q --release --features static
CARGO_TARGET_DIR=target/dynamic cargo build -q --release --features dynamic
linked=target/linked/release/dynamic-opencl
dynamic=target/dynamic/release/dynamic-opencl
for b in "$linked" "$dynamic"; do
    echo "== $b: $(readelf -d "$b" | grep -c 'NEEDED.*libOpenCL') NEEDED libOpenCL"
    for _ in 1 2; do "$b"; done
done
unshare -rm sh -c "
    for f in /usr/lib/*/libOpenCL.so*; do mount --bind /dev/null \$f; done
    for b in $linked $dynamic $program; do echo \"== without libOpenCL.so.1: \$b\"; \$b; echo \"status \$?\"; done
" 2>&1 || true
