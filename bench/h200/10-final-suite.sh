set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
CL=$(ls -d .device/clblast/usr/lib/*-linux-gnu | head -1)
export LD_LIBRARY_PATH=$PWD/$CL PYTHONUNBUFFERED=1
mkdir -p /tmp/suite
timeout -k 5 200 target/release/suite /tmp/suite --device gpu --clblast $PWD/$CL/libclblast.so.1 > /tmp/suite/suite.txt 2>&1; echo "suite rc=$?"
grep -v ": " /tmp/suite/suite.txt | tail -12
timeout -k 5 240 python3 bench/torch_suite.py /tmp/suite > /tmp/suite/torch.txt 2>&1; echo "torch rc=$?"
tail -22 /tmp/suite/torch.txt
tar czf $OUT/suite-results.tgz -C /tmp/suite $(cd /tmp/suite && ls *.json *.txt)
