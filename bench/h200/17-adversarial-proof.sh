#!/bin/bash
# Issue 24 on the H200 (2026-12-01): the new proof on NVIDIA's OpenCL, and the committed
# lockfile re-tuned under it.
# Carried in .device/: cargo-kfoundry (release, built here), the workspace's bundle
# (`cargo kfoundry bundle -o .device/k.json`), ../shared/gpu/opencl-setup.sh, the lockfile to
# merge into (.device/K.lock), the adversarial bundles
# (`cargo run -p cargo-kfoundry --example export_bundles -- .device/adv`)
# and .device/linetest.py.
# Usage: bash bench/h200/17-adversarial-proof.sh line|tune WORKLOADS...|verify|adversarial  (results in $OUT)
set -u
D=.device
L=$OUT/log.txt
sh $D/opencl-setup.sh
case "${1:-}" in
line)
    # Does NVIDIA's compiler name a `#line 1 "candidate.cl"` file in its diagnostics?
    python3 $D/linetest.py > $OUT/line.txt 2>&1
    cat $OUT/line.txt
    ;;
tune)
    shift
    W=""
    for w in "$@"; do W="$W --workload $w"; done
    # SIGTERM after TUNE_SECS: what was found is proven and recorded (partial), then the copy.
    timeout -k 60 "${TUNE_SECS:-480}" $D/cargo-kfoundry tune --bundle $D/k.json --lockfile $D/K.lock --state-dir $D/state --device gpu $W \
        --budget-evals "${BUDGET:-30}" --seed 1 --message-format json > $OUT/tune-$(echo "$@" | tr ' ' '-').jsonl 2>> $L
    echo "tune $*: status $?" | tee -a $L
    cp $D/K.lock $OUT/K.lock
    ;;
verify)
    # Every entry that would run on the GPU, proven again there.
    $D/cargo-kfoundry check --verify --device gpu --bundle $D/k.json --lockfile $D/K.lock > $OUT/verify.txt 2>&1
    echo "check --verify: status $?" | tee -a $L
    tail -3 $OUT/verify.txt
    ;;
adversarial)
    # The bundles of cargo-kfoundry/tests/cli/adversarial.rs whose bad variant (P=1) must never
    # ship, 3 seeds each (SEEDS="0 1" for fewer), on the GPU.
    J=$OUT/adversarial.jsonl
    mkdir -p $D/a
    for b in $D/adv/*.json; do
        n=$(basename $b .json)
        for seed in ${SEEDS:-0 1 2}; do
            $D/cargo-kfoundry tune --bundle $b --lockfile $D/a/$n-$seed.lock --state-dir $D/a/state-$n-$seed --device gpu \
                --budget-evals 8 --repeats 1 --seed $seed --message-format json 2>> $L | sed "s/^{/{\"bundle\":\"$n\",\"seed\":$seed,/" >> $J
            echo "$n seed $seed: status ${PIPESTATUS[0]}, shipped $(grep -h '^P = ' $D/a/$n-$seed.lock | tr '\n' ' ')" | tee -a $L
        done
    done
    ;;
*)
    echo "usage: $0 line|tune WORKLOADS...|verify|adversarial" >&2
    exit 2
    ;;
esac
