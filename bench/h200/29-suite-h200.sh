# Issue 28, 2026-12-07: the suite harness with PyTorch, cuBLAS and CLBlast on the committed
# variants (10-final-suite.sh), then cuBLAS in every precision on the GEMM shapes
# (torch_gemm.py: the TF32 baseline). Carry target/release/suite (built with the lockfile) and
# .device (opencl-setup.sh, clblast/). Results: $OUT/suite-results.tgz, $OUT/gemm.txt.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
START=$(date +%s)
bash bench/h200/10-final-suite.sh
echo "suite and torch_suite: $(( $(date +%s) - START )) s"
timeout -k 5 120 python3 bench/h200/torch_gemm.py 2>&1 | tee $OUT/gemm.txt
