#!/bin/bash
# Issue 11/12 on the H200 (2026-11-30): the trust work checked on NVIDIA's OpenCL.
# Carried in .device/: cargo-kfoundry and kfoundry-examples (release, built here), the
# examples' bundle (`cargo kfoundry bundle -o .device/k.json`), the hostile bundles
# (`cargo run -p cargo-kfoundry --example export_bundles -- .device`),
# Kfoundry.lock copied to .device/K.lock, ../shared/gpu/opencl-setup.sh, and the probes of
# bench/dynamic_opencl (as .device/probe-linked, .device/probe-dynamic).
# Usage: bash bench/h200/4-trust-on-the-gpu.sh examples|hostile|dispatch   (results in $OUT)
set -u
D=.device
L=$OUT/log.txt
sh $D/opencl-setup.sh
case "${1:-}" in
examples)
    echo "== devices" >> $L; $D/cargo-kfoundry devices >> $L 2>&1
    for p in linked dynamic; do echo "== probe $p"; for i in 1 2; do $D/probe-$p; done; done >> $L 2>&1
    for k in examples::Saxpy examples::RowSum examples::Sgemm; do
        echo "== tune $k" >> $L
        $D/cargo-kfoundry tune --bundle $D/k.json --lockfile $D/K.lock --state-dir $D/state --device gpu --kernel "$k" \
            --budget-evals 40 --seed 1 --message-format json > $OUT/tune-${k##*::}.jsonl 2>> $L
        echo "$k: status $?" >> $L
    done
    cp $D/K.lock $OUT/K.lock
    ;;
hostile)
    # The bundles of cargo-kfoundry/tests/cli/hostile.rs, with the test's budgets, 20 + 3 seeds.
    J=$OUT/hostile.jsonl
    mkdir -p $D/h
    tune() { # bundle seed budget
        $D/cargo-kfoundry tune --bundle $D/$1 --lockfile $D/h/$1-$2.lock --state-dir $D/h/state-$1-$2 --device gpu \
            --budget-evals $3 --repeats 1 --candidate-timeout 5 --seed $2 --message-format json 2>> $L | sed "s/^{/{\"bundle\":\"$1\",\"seed\":$2,/" >> $J
        echo "$1 seed $2: status ${PIPESTATUS[0]}, shipped $(grep -h '^BAD = ' $D/h/$1-$2.lock | tr '\n' ' ')" >> $L
    }
    for seed in $(seq 0 19); do tune hostile.json $seed 10; done
    for seed in 0 1 2; do tune escape.json $seed 4; done
    python3 - "$J" >> $L <<'PY'
import json, sys, collections
t = collections.defaultdict(collections.Counter)
for line in open(sys.argv[1]):
    v = json.loads(line)
    b = (v["bundle"], v.get("params", {}).get("BAD"))
    if v["reason"] == "evaluation":
        t[b]["passed search" if "Ok" in v["outcome"] else "failed in search"] += 1
    elif v["reason"] == "rejected":
        t[b]["rejected at " + v["stage"]] += 1
for b in sorted(t, key=str):
    print(b, dict(t[b]))
PY
    ;;
dispatch)
    # The examples program built here with the lockfile that `examples` produced.
    (cd $D && ./kfoundry-examples) >> $L 2>&1; echo "status $?" >> $L
    ;;
*)
    echo "usage: $0 examples|hostile|dispatch" >&2
    exit 2
    ;;
esac
