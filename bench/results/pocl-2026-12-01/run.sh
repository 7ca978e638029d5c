#!/usr/bin/env bash
# Issue 14 on PoCL (this development machine): evaluation cost and dispatch overhead, before and
# after. BEFORE_CLI / BEFORE_DISPATCH: the CLI and examples' dispatch_overhead built at the commit
# before the change; .device/bundle.json: `cargo kfoundry bundle -p kfoundry-examples -o .device/bundle.json`.
# Usage: BEFORE_CLI=... BEFORE_DISPATCH=... D=/tmp/ecp bash bench/results/pocl-2026-12-01/run.sh
# then python3 bench/evaluation_cost.py $D
set -u
D=${D:-/tmp/ecp}
mkdir -p "$D"
export POCL_KERNEL_CACHE=0
for i in 1 2 3; do
    echo "== before"; "$BEFORE_DISPATCH" 4096 200
    echo "== after"; target/release/dispatch_overhead 4096 200
done > "$D/dispatch.txt" 2>&1
order="before after"
for kw in Saxpy:small ConvGroupNorm:small Sgemm:small SuiteSgemm:small; do
    for w in $order; do
        b=target/release/cargo-kfoundry; [ "$w" = before ] && b=$BEFORE_CLI
        "$b" kfoundry tune --bundle .device/bundle.json --lockfile "$D/l-$w.lock" --state-dir "$D/st-$w" --kernel "::${kw%:*}" \
            --workload "${kw#*:}" --budget-evals 15 --seed 1 --no-llm --message-format json > "$D/cost-$w-${kw%:*}.jsonl" 2>/dev/null
    done
    [ "$order" = "before after" ] && order="after before" || order="before after"
done
