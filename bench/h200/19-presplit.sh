# Issue 28, 2026-12-03 (with bench/h200/presplit.patch applied, binaries built from that tree): the split-once tensor-core path (PRESPLIT) on the H200, then the two GEMM
# kernels tuned at `full` with it in their space. Carry target/release/cargo-kfoundry, .device
# (bundle.json from `cargo kfoundry bundle -o .device/bundle.json`, opencl-setup.sh) and .whl.
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export CUDA_CACHE_DISABLE=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
timeout -k 5 150 python3 bench/h200/presplit_dev.py 2>&1 | tee $OUT/presplit_dev.txt
B=target/release/cargo-kfoundry
cp Kfoundry.lock /tmp/K.lock
for kw in "SuiteSgemm:180" "LinearGelu:160"; do
  k=${kw%%:*}; s=${kw##*:}
  echo "== $k full, $s s"
  timeout -k 5 $((s + 40)) $B tune --bundle .device/bundle.json --lockfile /tmp/K.lock --device gpu --kernel "::$k" --workload full --budget-evals 400 --budget-secs $s --seed 1 --message-format json > $OUT/$k.jsonl 2>$OUT/$k.err; echo "rc=$?"
  grep '"tuned"' $OUT/$k.jsonl | cut -c1-900
  tail -3 $OUT/$k.err
  cp /tmp/K.lock $OUT/Kfoundry.lock
done
