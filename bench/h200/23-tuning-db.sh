#!/usr/bin/env bash
# Issue 29 on the H200: evaluations the tuning database saves a search at a new size. Per
# kernel: one tune at the source workload (SRC_EVALS evaluations, seed 1) writes its fastest
# configurations into a fresh database; then, per seed, the same kernel at the target workload
# on a fresh lockfile, `cold` (--no-tuning-db) and `warm` (a copy of that database, so that the
# warm runs never read each other's results). Same budget, same seeds.
# Then here: python3 bench/tuning_db.py <unpacked>/tdb/<kernel>
#
# Carry: target/release/cargo-kfoundry and .device, holding opencl-setup.sh and bundle.json
# (`cargo kfoundry bundle -p kfoundry-examples -o .device/bundle.json`).
# Usage (device tool): bash bench/h200/23-tuning-db.sh; results in $OUT/tdb.tgz
# Elsewhere (PoCL): OUT=/tmp/tdb DEVICE=cpu BUNDLE=/tmp/b.json KERNELS=Sgemm:small:large \
#   SEEDS="$(seq 1 15)" bash bench/h200/23-tuning-db.sh
set -u
[ -f .device/opencl-setup.sh ] && sh .device/opencl-setup.sh >/dev/null 2>&1
DEVICE=${DEVICE:-gpu}
BUNDLE=${BUNDLE:-.device/bundle.json}
BIN=${BIN:-target/release/cargo-kfoundry}
EVALS=${EVALS:-25}
SRC_EVALS=${SRC_EVALS:-30}
SEEDS=${SEEDS:-1 2 3}
KERNELS=${KERNELS:-Sgemm:small:large SuiteSgemm:small:full ConvGroupNorm:small:full Softmax:small:full}
D=$OUT/tdb
mkdir -p "$D"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$D/gpu.txt" 2>&1
tune() { # out-prefix kernel workload evals seed flags...
    local out=$1 k=$2 w=$3 n=$4 s=$5
    shift 5
    timeout -k 10 200 "$BIN" kfoundry tune --bundle "$BUNDLE" \
        --lockfile "/tmp/tdb-$k/$(basename "$out").lock" --device "$DEVICE" --kernel "::$k" \
        --workload "$w" --budget-evals "$n" --seed "$s" --no-llm --message-format json "$@" \
        > "$out.jsonl" 2> "$out.err"
    echo "$(basename "$out") $k $w seed $s exit $?" >> "$D/log.txt"
}
for kss in $KERNELS; do
    IFS=: read -r k src dst <<< "$kss"
    mkdir -p "$D/$k" "/tmp/tdb-$k"
    rm -rf "/tmp/tdb-$k/db"
    tune "$D/$k/src" "$k" "$src" "$SRC_EVALS" 1 --tuning-db "/tmp/tdb-$k/db"
    for s in $SEEDS; do
        tune "$D/$k/cold$s" "$k" "$dst" "$EVALS" "$s" --no-tuning-db
        rm -rf "/tmp/tdb-$k/dbc"
        cp -r "/tmp/tdb-$k/db" "/tmp/tdb-$k/dbc"
        tune "$D/$k/warm$s" "$k" "$dst" "$EVALS" "$s" --tuning-db "/tmp/tdb-$k/dbc"
    done
    # after each kernel, so that a run cut short still brings back what it measured
    tar czf "$OUT/tdb.tgz" -C "$OUT" tdb
done
