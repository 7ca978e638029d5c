set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export CUDA_CACHE_DISABLE=1
B=target/release/cargo-kfoundry
cp Kfoundry.lock /tmp/K.lock
timeout -k 5 150 $B tune --bundle .device/bundle.json --lockfile /tmp/K.lock --device gpu --kernel "::LayerNormApply" --workload full --budget-evals 120 --budget-secs 100 --seed 1 --message-format json > $OUT/LayerNormApply.jsonl 2>$OUT/LayerNormApply.err; echo "rc=$?"
grep '"tuned"' $OUT/LayerNormApply.jsonl | cut -c1-700
tail -3 $OUT/LayerNormApply.err
cp /tmp/K.lock $OUT/Kfoundry.lock
