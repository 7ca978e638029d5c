# Issue 18: the KernelBench problems imported from ONNX (`cargo kfoundry import` of
# `fixtures/make.py --full`), their generated kernels tuned at `full` on the GPU: the tuner's
# reference and best times per kernel (medians of profiling events). Weights do not travel (256
# MiB); the tuner fills every buffer with random inputs, which is all the timing needs.
#
# Prepare here:
#   python3 crates/kfoundry-import/fixtures/make.py --full -o /tmp/kbfull-models
#   a workspace /tmp/kbfull with members linear and conv, kfoundry from this checkout, then
#   cargo kfoundry import /tmp/kbfull-models/kb_linear_gelu_softmax_full.onnx --name kb-linear-gelu-softmax-full -o /tmp/kbfull/linear
#   cargo kfoundry import /tmp/kbfull-models/kb_conv_gn_full.onnx --name kb-conv-gn-full -o /tmp/kbfull/conv
#   cargo kfoundry bundle --manifest-path /tmp/kbfull/Cargo.toml -o .device/import-bundle.json
# and carry target/release/cargo-kfoundry and .device.
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export CUDA_CACHE_DISABLE=1
B=target/release/cargo-kfoundry
L=/tmp/K15.lock
S=${SECS:-60}
for k in K00Matmul K01Softmax K00Conv K01GroupNorm; do
  echo "== $k full, $S s"
  timeout -k 5 $((S + 60)) $B tune --bundle .device/import-bundle.json --lockfile $L --device gpu --kernel "::$k" --workload full --budget-evals 200 --budget-secs $S --seed 1 --message-format json > $OUT/import-$k.jsonl 2>$OUT/import-$k.err; echo "rc=$?"
  grep '"tuned"' $OUT/import-$k.jsonl | cut -c1-700
  tail -2 $OUT/import-$k.err
done
cp $L $OUT/import.lock 2>/dev/null || true
