#!/usr/bin/env bash
# Development benchmark of the search engine: kfoundry variants on the development spaces in
# bench/spaces-dev/ (never the judged spaces in shared/spaces/), then the mean score per
# variant. Settings are chosen here and on the synthetic landscapes, then judged once by
# bench/search_vs_kernel_tuner.sh.
#
#   KF_VARIANTS=default,screening=8 SEEDS=50 bash bench/search_dev.sh [SPACE.json.gz ...]
#
# KT_STRATEGIES=genetic_algorithm,pso,... also replays those Kernel Tuner strategies (the venv
# of bench/search_vs_kernel_tuner.sh, bench/.venv) with the same seeds and budgets.
#
# Spaces whose score axis ends before MIN_AXIS evaluations (default 40) are skipped: on them
# the score measures the initial random samples, not the search.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-50}
MIN_AXIS=${MIN_AXIS:-40}
export KF_VARIANTS=${KF_VARIANTS:-default}
cargo build --release -q -p kfoundry-search --examples
BENCH=target/release/examples/bench
OUT=${DEV_OUT:-bench/out/dev}; mkdir -p "$OUT"
spaces=("$@"); [ ${#spaces[@]} -eq 0 ] && spaces=(bench/spaces-dev/*.json.gz)
run() {
  local f=$1 name traces=(); name=$(basename "$f" .json.gz)
  if [ -n "${KT_STRATEGIES:-}" ]; then
    # Kernel Tuner reads its own layout only (`cache` last): prepare_cache.py writes it
    bench/.venv/bin/python bench/prepare_cache.py "$f" "$OUT/$name.json"
    local budget; budget=$("$BENCH" --budget "$f")
    for s in ${KT_STRATEGIES//,/ }; do
      rm -f "$OUT/kt-$name-$s.jsonl"
      bench/.venv/bin/python -W ignore bench/kt_runner.py "$OUT/$name.json" "$s" 0 "$SEEDS" "$budget" "$OUT/kt-$name-$s.jsonl" 2>>"$OUT/kt-stderr.log"
      traces+=("$OUT/kt-$name-$s.jsonl")
    done
  fi
  "$BENCH" "$f" "$SEEDS" "${traces[@]}" > "$OUT/$name.md"
}
export -f run; export BENCH SEEDS OUT
todo=()
for f in "${spaces[@]}"; do
  axis=$("$BENCH" --axis-end "$f")
  if [ "$axis" -lt "$MIN_AXIS" ]; then echo "skip $(basename "$f") (axis ends at $axis)" >&2; continue; fi
  todo+=("$f")
done
printf '%s\n' "${todo[@]}" | xargs -P "${JOBS:-2}" -I{} bash -c 'run {}'
# summary: score (evals) per variant and space, and the mean
python3 - "$OUT" "${todo[@]}" <<'PY'
import sys, os, re
out, files = sys.argv[1], sys.argv[2:]
names = [os.path.basename(f)[:-8] for f in files]
table = {}
for n in names:
    for line in open(os.path.join(out, n + ".md")):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 3 and (cells[0].startswith("kfoundry") or cells[0].startswith("KT ")):
            table.setdefault(cells[0], {})[n] = float(cells[2])
print("| variant | " + " | ".join(names) + " | mean |")
print("| --- |" + " ---: |" * (len(names) + 1))
for v, row in table.items():
    vals = [row.get(n, float("nan")) for n in names]
    print(f"| {v} | " + " | ".join(f"{x:.3f}" for x in vals) + f" | {sum(vals)/len(vals):.3f} |")
PY
