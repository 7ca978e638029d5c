#!/usr/bin/env bash
# Issue 55: does one tune serve every size a program calls? On the default OpenCL device:
#   1. tune the examples' Saxpy, RowSum and Sgemm (the README's main job settings: both
#      workloads, EVALS evaluations each) into $OUT/K.lock;
#   2. draw COUNT sizes per kernel inside each kernel's proven region (seed SEED, printed);
#   3. tune each kernel again at the first PER_SIZE of those sizes exactly (same budget), into
#      $OUT/per-size.lock;
#   4. run every drawn size through dispatch (checked against the CPU) and time the dispatched
#      variant, the reference and the per-size winner there (examples/src/bin/sizes.rs).
# Usage: OUT=dir [SEED=1] [COUNT=20] [PER_SIZE=5] [EVALS=40] [CLI=path] [SIZES=path] bash bench/sizes.sh
# CLI and SIZES default to this tree's release builds (cargo build --release -p cargo-kfoundry
# -p kfoundry-examples --bin sizes); on a machine without Rust, pass both.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to a directory}"
SEED=${SEED:-1} COUNT=${COUNT:-20} PER_SIZE=${PER_SIZE:-5} EVALS=${EVALS:-40}
CLI=${CLI:-target/release/cargo-kfoundry} SIZES=${SIZES:-target/release/sizes}
mkdir -p "$OUT"
export KFOUNDRY_TUNING_DB="$OUT/db"
kernels=(--kernel 'kfoundry-examples::Saxpy' --kernel 'kfoundry-examples::RowSum' --kernel 'kfoundry-examples::Sgemm')
start=$(date +%s)
"$CLI" kfoundry tune "${kernels[@]}" --workload small --workload large --budget-evals "$EVALS" \
  --lockfile "$OUT/K.lock" --state-dir "$OUT/state" ${BUNDLE:+--bundle "$BUNDLE"} ${DEVICE:+--device "$DEVICE"} > "$OUT/tune.txt"
echo "tune of the workloads: $(( $(date +%s) - start )) s"
SIZES_LOCKFILE="$OUT/K.lock" "$SIZES" sizes "$SEED" "$COUNT" > "$OUT/drawn.tsv"
if [ -z "${BUNDLE:-}" ]; then "$CLI" kfoundry bundle -o "$OUT/bundle.json" >/dev/null 2>&1; BUNDLE="$OUT/bundle.json"; fi
python3 - "$BUNDLE" "$OUT/drawn.tsv" "$PER_SIZE" "$OUT/per-size.json" <<'PY'
import json, re, sys
bundle, drawn, per, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
b = json.load(open(bundle))
sizes = {}
for line in open(drawn):
    kid, rest = line.rstrip("\n").split("\t")
    sets = re.findall(r"(s\d+)\(([^)]*)\)", rest)[:per]
    sizes[kid] = [{"name": name, "sizes": {k: int(v) for k, v in (a.split("=") for a in body.split(", "))}} for name, body in sets]
b["kernels"] = [k for k in b["kernels"] if k["spec"]["id"] in sizes]
for k in b["kernels"]:
    k["spec"]["workloads"] = sizes[k["spec"]["id"]]
json.dump(b, open(out, "w"))
print("per-size tunes:", {k: len(v) for k, v in sizes.items()})
PY
start=$(date +%s)
"$CLI" kfoundry tune --bundle "$OUT/per-size.json" --budget-evals "$EVALS" \
  --lockfile "$OUT/per-size.lock" --state-dir "$OUT/state-per-size" ${DEVICE:+--device "$DEVICE"} > "$OUT/tune-per-size.txt"
echo "tune at the drawn sizes: $(( $(date +%s) - start )) s"
SIZES_LOCKFILE="$OUT/K.lock" "$SIZES" measure "$SEED" "$COUNT" "$OUT/per-size.lock" | tee "$OUT/measure.txt"
