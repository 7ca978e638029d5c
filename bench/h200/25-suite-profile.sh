# Issue 28, 2026-12-06 (second session): one run of the suite harness with PyTorch, cuBLAS and
# CLBlast on the committed variants (10-final-suite.sh), cuBLAS in every precision on the GEMM
# shapes (torch_gemm.py), and what bounds the tensor-core kernels (tc_bounds.py: OpenCL timing,
# ptxas, the SASS mix, Nsight Compute where it can profile them).
# Carry target/release/suite (built with the lockfile), .device (opencl-setup.sh, clblast/) and
# .whl (pyopencl and its needs). Results: $OUT/suite-results.tgz, $OUT/tc_out.tgz, $OUT/gemm.txt.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
bash bench/h200/10-final-suite.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
timeout -k 5 120 python3 bench/h200/torch_gemm.py 2>&1 | tee $OUT/gemm.txt
mkdir -p /tmp/tc_out
OUT_SAVED=$OUT
OUT=/tmp/tc_out timeout -k 5 ${TC_SECS:-300} python3 bench/h200/tc_bounds.py 2>&1 | grep -v "^ *$" | cut -c1-220 | tail -150
tar czf $OUT_SAVED/tc_out.tgz -C /tmp/tc_out .
