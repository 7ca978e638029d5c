set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export CUDA_CACHE_DISABLE=1
B=target/release/cargo-kfoundry
cp Kfoundry.lock /tmp/K.lock
for kw in "SuiteSgemm:230" "LinearGelu:200"; do
  k=${kw%%:*}; s=${kw##*:}
  echo "== $k full, $s s"
  timeout -k 5 $((s + 40)) $B tune --bundle .device/bundle.json --lockfile /tmp/K.lock --device gpu --kernel "::$k" --workload full --budget-evals 400 --budget-secs $s --seed 1 --message-format json > $OUT/$k.jsonl 2>$OUT/$k.err; echo "rc=$?"
  grep '"tuned"' $OUT/$k.jsonl | cut -c1-900
  tail -3 $OUT/$k.err
done
cp /tmp/K.lock $OUT/Kfoundry.lock
