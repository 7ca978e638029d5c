#!/usr/bin/env bash
# Final figures: the whole suite harness + PyTorch in one run, then a longer SGEMM tune.
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export KFOUNDRY_CACHE_DIR=$PWD/.device/cache
B=target/release/cargo-kfoundry
cp Kfoundry.lock $OUT/Kfoundry.lock
CL=$(ls -d .device/clblast/usr/lib/*-linux-gnu | head -1)
export LD_LIBRARY_PATH=$PWD/$CL
mkdir -p /tmp/suite
timeout -k 5 150 target/release/suite /tmp/suite --device gpu --clblast $PWD/$CL/libclblast.so.1 > /tmp/suite/suite.txt 2>&1; echo "suite rc=$?"
grep -v ": " /tmp/suite/suite.txt | tail -10
timeout -k 5 120 python3 bench/torch_suite.py /tmp/suite > /tmp/suite/torch.txt 2>&1; echo "torch rc=$?"
tail -12 /tmp/suite/torch.txt
tar czf $OUT/suite-results.tgz -C /tmp/suite $(cd /tmp/suite && ls *.json *.txt)
echo "== SuiteSgemm full, budget 150"
timeout -k 5 200 $B tune --bundle .device/bundle.json --lockfile $OUT/sgemm-long.lock --device gpu --kernel SuiteSgemm --workload full --budget-evals 150 --budget-secs 170 --seed 2 --message-format json > $OUT/sgemm-long.jsonl 2>&1; echo "rc=$?"
grep '"tuned"' $OUT/sgemm-long.jsonl | cut -c1-700
