#!/usr/bin/env bash
# Split-K on this machine's default device (PoCL's CPU here): SgemmLargeK tuned at a skinny
# size given here (a workload added to a copy of the examples' bundle: 16 x 16 outputs,
# k = 262144 by default), then the best with and without split-K from that one tune.
#   M=16 N=16 K=262144 EVALS=40 bash bench/splitk_pocl.sh      (needs target/release/cargo-kfoundry)
set -euo pipefail
cd "$(dirname "$0")/.."
W=$(mktemp -d)
BIN=${BIN:-target/release/cargo-kfoundry}
"$BIN" kfoundry bundle -p kfoundry-examples -o "$W/all.json" >/dev/null
python3 - "$W" "${M:-16}" "${N:-16}" "${K:-262144}" <<'PY'
import json, sys
w, m, n, k = sys.argv[1], *map(int, sys.argv[2:])
b = json.load(open(f"{w}/all.json"))
b["kernels"] = [x for x in b["kernels"] if x["spec"]["id"].endswith("::SgemmLargeK")]
b["kernels"][0]["spec"]["workloads"].append({"name": "skinny", "sizes": {"k": k, "m": m, "n": n}})
json.dump(b, open(f"{w}/b.json", "w"))
PY
"$BIN" kfoundry tune --bundle "$W/b.json" --kernel ::SgemmLargeK --workload skinny --no-llm \
  --seed 1 --proof-seed 1 --budget-evals "${EVALS:-40}" --lockfile "$W/K.lock" \
  --state-dir "$W/state" --no-tuning-db --message-format json > "$W/tune.jsonl"
python3 bench/splitk_summary.py "$W/tune.jsonl" "$((2 * ${M:-16} * ${N:-16} * ${K:-262144}))"
