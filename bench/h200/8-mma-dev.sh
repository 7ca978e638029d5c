set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyopencl*.whl .whl/pytools*.whl .whl/platformdirs*.whl .whl/siphash24*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 CUDA_CACHE_DISABLE=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 500 python3 bench/h200/mma_dev.py ${1:-all} 2>&1 | tee $OUT/mma_dev.txt
