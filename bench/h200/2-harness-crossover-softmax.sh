#!/usr/bin/env bash
# Final device call: suite harness + PyTorch (all but softmax), crossover, then softmax.
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export KFOUNDRY_CACHE_DIR=$PWD/.device/cache
B=target/release/cargo-kfoundry
cp Kfoundry.lock $OUT/Kfoundry.lock
CL=$(ls -d .device/clblast/usr/lib/*-linux-gnu | head -1)
export LD_LIBRARY_PATH=$PWD/$CL
mkdir -p /tmp/suite /tmp/smx
echo "== suite harness (full, all but softmax)"
timeout -k 5 130 target/release/suite /tmp/suite --device gpu --clblast $PWD/$CL/libclblast.so.1 --problem sgemm --problem layernorm --problem sum_dim1 --problem linear_gelu_softmax --problem conv_groupnorm > /tmp/suite/suite.txt 2>&1; echo "suite rc=$?"
tail -12 /tmp/suite/suite.txt
timeout -k 5 100 python3 bench/torch_suite.py /tmp/suite > /tmp/suite/torch.txt 2>&1; echo "torch rc=$?"
tail -25 /tmp/suite/torch.txt
tar czf $OUT/suite-results.tgz -C /tmp/suite $(cd /tmp/suite && ls *.json *.txt)
echo "== crossover (small)"
for dev in gpu cpu; do
  for k in Saxpy RowSum ::Sgemm SuiteSgemm SumDim1; do
    timeout -k 3 14 $B tune --bundle .device/bundle.json --lockfile $OUT/Kfoundry.lock --device $dev --kernel $k --workload small --budget-evals 10 --budget-secs 2 --seed 1 -q >> $OUT/cross-tune.txt 2>&1; echo "$dev $k rc=$?"
  done
done
timeout -k 5 45 $B report --cross --bundle .device/bundle.json --lockfile $OUT/Kfoundry.lock --workload small --repeats 10 > $OUT/cross.txt 2>&1; echo "report rc=$?"
cat $OUT/cross.txt
echo "== softmax full"
timeout -k 5 60 $B tune --bundle .device/bundle.json --lockfile $OUT/Kfoundry.lock --device gpu --kernel ::Softmax --workload full --budget-evals 12 --budget-secs 30 --seed 1 --message-format json > $OUT/softmax.jsonl 2>&1; echo "softmax tune rc=$?"
grep -c evaluation $OUT/softmax.jsonl; grep '"tuned"' $OUT/softmax.jsonl | cut -c1-600
timeout -k 5 40 target/release/suite /tmp/smx --device gpu --problem softmax > /tmp/smx/suite.txt 2>&1; echo "suite softmax rc=$?"
tail -5 /tmp/smx/suite.txt
timeout -k 5 35 python3 bench/torch_suite.py /tmp/smx --copy-gib 1 > /tmp/smx/torch.txt 2>&1; echo "torch softmax rc=$?"; tail -8 /tmp/smx/torch.txt
tar czf $OUT/softmax-suite.tgz -C /tmp/smx $(cd /tmp/smx && ls *.json *.txt)
