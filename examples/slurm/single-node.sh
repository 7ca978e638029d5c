#!/usr/bin/env bash
# Tunes on a real Slurm cluster of one node: installs Slurm and munge from Debian's packages
# (when missing), starts munged, slurmctld and slurmd on 127.0.0.1, submits a job array (one
# share of the jobs per task) and a merge job that depends on it, waits, and checks the merged
# lockfile with `check --locked`. Needs root (it writes /etc/slurm and starts daemons) and
# Debian 12. Stops the daemons it started at the end (KEEP=1 leaves them).
#
#   bash examples/slurm/single-node.sh
#
# Exit status 77: the cluster did not come up on this machine (nothing of kfoundry ran).
# Environment (defaults): TASKS=2, BIN=target/release/cargo-kfoundry (built when missing),
# KERNELS="Saxpy RowSum" (the example kernels tuned: the bundle is cut to those), WORKLOADS
# (their workloads kept; default all), EVALS=4, OUTDIR=target/kfoundry-slurm (emptied first).
set -euo pipefail
cd "$(dirname "$0")/../.."
TASKS=${TASKS:-2}
BIN=${BIN:-target/release/cargo-kfoundry}
KERNELS=${KERNELS:-"Saxpy RowSum"}
EVALS=${EVALS:-4}
OUTDIR=${OUTDIR:-$PWD/target/kfoundry-slurm}
BIN=$(realpath "$BIN" 2>/dev/null || echo "$BIN")

if ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null
fi
[ -x "$BIN" ] || cargo build --release -q -p cargo-kfoundry
BIN=$(realpath "$BIN")

rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
"$BIN" bundle -q -p kfoundry-examples -o "$OUTDIR/all.json"
WORKLOADS=${WORKLOADS:-} python3 - "$OUTDIR/all.json" "$OUTDIR/bundle.json" $KERNELS <<'PY'
import json, os, sys
b = json.load(open(sys.argv[1]))
want = sys.argv[3:]
b["kernels"] = [k for k in b["kernels"] if k["spec"]["id"].split("::")[-1] in want]
keep = os.environ["WORKLOADS"].split()
for k in b["kernels"] if keep else []:
    k["spec"]["workloads"] = [w for w in k["spec"]["workloads"] if w["name"] in keep]
json.dump(b, open(sys.argv[2], "w"))
print(f"bundle: {len(b['kernels'])} kernel(s): {', '.join(k['spec']['id'] for k in b['kernels'])}")
PY
BUNDLE=$OUTDIR/bundle.json

# --- a one-node cluster on 127.0.0.1 ---
started=()
mkdir -p /etc/slurm /var/lib/slurm/slurmd /var/lib/slurm/slurmctld /var/log/slurm /run/munge
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=kfoundry
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/lib/slurm/slurmd
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=main Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
if ! pgrep -x munged >/dev/null; then
    [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; chmod 400 /etc/munge/munge.key; }
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
    runuser -u munge -- /usr/sbin/munged
    started+=(munged)
fi
pgrep -x slurmctld >/dev/null || { slurmctld; started+=(slurmctld); }
pgrep -x slurmd >/dev/null || { slurmd -N localhost; started+=(slurmd); }
stop() {
    if [ "${KEEP:-0}" != 1 ]; then
        for d in "${started[@]}"; do pkill -x "$d" || true; done
    fi
}
trap stop EXIT
up=0
for _ in $(seq 60); do
    if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then up=1; break; fi
    scontrol update nodename=localhost state=resume >/dev/null 2>&1 || true
    sleep 1
done
if [ "$up" != 1 ]; then
    # Exit 77: the machine could not run the cluster (a container without what slurmd needs,
    # say); nothing of kfoundry ran. The test reports this as skipped, not as kfoundry's failure.
    echo "the one-node Slurm cluster did not come up here: $(sinfo 2>&1 | tail -1)" >&2
    exit 77
fi
sinfo

# --- the array and the merge job ---
export BIN BUNDLE OUTDIR TUNE_ARGS="--budget-evals $EVALS --repeats 1 -q"
cd "$OUTDIR"
t0=$(date +%s)
array=$(sbatch --parsable --array=1-"$TASKS" "$OLDPWD/examples/slurm/tune-share.sbatch")
merge=$(sbatch --parsable --dependency=afterok:"$array" "$OLDPWD/examples/slurm/merge.sbatch")
echo "submitted: array $array (tasks 1-$TASKS), merge $merge (after the array)"
while squeue -h -j "$array,$merge" 2>/dev/null | grep -q .; do sleep 2; done
t1=$(date +%s)
cat kfoundry-merge-"$merge".out || true
for f in kfoundry-tune-"$array"_*.out; do echo "== $f"; tail -3 "$f"; done
"$BIN" check --locked --bundle "$BUNDLE" --lockfile "$OUTDIR/Kfoundry.lock"
python3 - "$OUTDIR" "$TASKS" "$((t1 - t0))" <<'PY'
import sys, tomllib, glob
out, tasks, wall = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lock = tomllib.load(open(f"{out}/Kfoundry.lock", "rb"))
entries = sum(len(k.get("variants", [])) for k in lock.get("kernels", {}).values())
shares = [sum(len(k.get("variants", [])) for k in tomllib.load(open(f, "rb")).get("kernels", {}).values()) for f in sorted(glob.glob(f"{out}/shares/*.lock"))]
print(f"slurm: {tasks} task(s), wall {wall} s from submission to the merge's end, entries per share {shares}, merged {entries} entries; check --locked passed")
PY
