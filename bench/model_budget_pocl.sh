#!/usr/bin/env bash
# Issue 29's "95% of the model speed that tunes of 10x the budget reach", on this machine's
# PoCL with the imported models committed here (cnn-block, kb-conv-gn, kb-linear-gelu-softmax
# at `small`): every kernel tuned with B evaluations and with 10 B, from a fresh lockfile and
# state, then each model's time as the sum of its kernels' tuned times (each kernel runs once
# per forward pass), and the ratio. SHARED=0: no tuning database and no warm starts (each
# kernel from nothing); SHARED=1 (default): a fresh tuning database for each run, so that the
# kernels of one run start from each other's results, as in a whole-model tune.
#   B=8 SEEDS="1 2" bash bench/model_budget_pocl.sh      (release CLI in target/release)
set -eu
B=${B:-8}
D=${OUT:-/tmp/model-budget}
mkdir -p "$D"
for seed in ${SEEDS:-1}; do
  for budget in "$B" $((10 * B)); do
    rm -rf "$D/s$seed-$budget" "$D/db$seed-$budget"
    if [ "${SHARED:-1}" = 1 ]; then shared=(--tuning-db "$D/db$seed-$budget"); else shared=(--no-tuning-db --no-warm-start); fi
    target/release/cargo-kfoundry kfoundry tune -p cnn-block -p kb-conv-gn -p kb-linear-gelu-softmax \
      --workload small --budget-evals "$budget" --no-llm --seed "$seed" --proof-seed "$seed" \
      "${shared[@]}" --lockfile "$D/s$seed-$budget.lock" \
      --state-dir "$D/s$seed-$budget" --message-format json > "$D/s$seed-$budget.jsonl"
  done
done
python3 - "$D" "$B" ${SEEDS:-1} <<'PY'
import json, sys, collections
d, b, seeds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for seed in seeds:
    times = {}
    for budget in (b, 10 * b):
        per = collections.defaultdict(float)
        for line in open(f"{d}/s{seed}-{budget}.jsonl"):
            m = json.loads(line)
            if m.get("reason") == "tuned":
                r = m["result"]
                per[r["kernel"].split("::")[0]] += r["best_ns"] / 1e3
        times[budget] = per
    for model in sorted(times[b]):
        lo, hi = times[b][model], times[10 * b][model]
        print(f"seed {seed} {model:24} {b:3} evals: {lo:9.1f} us   {10*b:3} evals: {hi:9.1f} us   speed reached: {hi / lo:.3f}")
PY
