set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
B=target/release/cargo-kfoundry
$B devices 2>&1 | grep -E "^[0-9]|key"
t0=$(date +%s)
timeout -k 5 240 $B tune --bundle bench/h200/fleet-bundle.json --lockfile /tmp/F.lock --device all --workload small --budget-evals 8 2>&1 | tail -30; echo "rc=${PIPESTATUS[0]}"
t1=$(date +%s)
echo "wall $((t1 - t0)) s"
$B report --bundle bench/h200/fleet-bundle.json --lockfile /tmp/F.lock 2>&1 | tail -8
cp /tmp/F.lock $OUT/fleet.lock
