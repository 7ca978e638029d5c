# Issue 18's figures in one run: the imported KernelBench problems' kernels tuned at `full`
# (bench/h200/15-import-tune.sh, SECS per kernel), then the suite harness with PyTorch eager
# (bench/h200/10-final-suite.sh) on the same machine, everything in $OUT/import-and-suite.tgz.
set -u
mkdir -p /tmp/r16
OUT0=$OUT
OUT=/tmp/r16 SECS=${SECS:-60} bash bench/h200/15-import-tune.sh 2>&1 | cut -c1-400
OUT=/tmp/r16 bash bench/h200/10-final-suite.sh
mv /tmp/r16/suite-results.tgz /tmp/r16/suite-results-inner.tgz 2>/dev/null
tar czf $OUT0/import-and-suite.tgz -C /tmp/r16 .
