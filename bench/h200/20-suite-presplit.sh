# Issue 28, 2026-12-03 (with bench/h200/presplit.patch applied), after 19-presplit.sh: the two GEMM kernels tuned at `small` on the H200,
# then the suite harness (built here with 19's lockfile) and PyTorch in one run. Carry
# target/release/{cargo-kfoundry,suite}, .device (bundle.json, opencl-setup.sh, clblast/).
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export CUDA_CACHE_DISABLE=1 PYTHONUNBUFFERED=1
B=target/release/cargo-kfoundry
cp Kfoundry.lock /tmp/K.lock
for k in SuiteSgemm LinearGelu; do
  timeout -k 5 80 $B tune --bundle .device/bundle.json --lockfile /tmp/K.lock --device gpu --kernel "::$k" --workload small --budget-evals 60 --budget-secs 30 --seed 1 > $OUT/$k-small.txt 2>&1; echo "$k small rc=$?"; tail -4 $OUT/$k-small.txt
done
cp /tmp/K.lock $OUT/Kfoundry.lock
CL=$(ls -d .device/clblast/usr/lib/*-linux-gnu | head -1)
export LD_LIBRARY_PATH=$PWD/$CL
mkdir -p /tmp/suite
timeout -k 5 200 target/release/suite /tmp/suite --device gpu --clblast $PWD/$CL/libclblast.so.1 > /tmp/suite/suite.txt 2>&1; echo "suite rc=$?"
grep -v ": " /tmp/suite/suite.txt | tail -12
timeout -k 5 240 python3 bench/torch_suite.py /tmp/suite > /tmp/suite/torch.txt 2>&1; echo "torch rc=$?"
tail -22 /tmp/suite/torch.txt
tar czf $OUT/suite-results.tgz -C /tmp/suite $(cd /tmp/suite && ls *.json *.txt)
