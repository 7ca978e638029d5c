#!/usr/bin/env bash
# The development spaces of bench/dev-kernels/ (PnPoly, Stencil2D, Histogram) brute-forced at
# `full` on the H200 (bench/spaces-dev/README.md). Run with carry: target/release/cargo-kfoundry,
# .device, where .device holds opencl-setup.sh and the kernels' bundle, written here with
#   target/release/cargo-kfoundry kfoundry bundle --manifest-path bench/dev-kernels/Cargo.toml -o .device/dev-bundle.json
# Usage (device tool): bash bench/h200/5-dev-spaces.sh            results: $OUT/spaces/*.json, $OUT/log.txt
# KERNELS (default "PnPoly Histogram Stencil2D") names the kernels, in order; issue 29's
# convolution and stencil spaces: KERNELS="Conv2D15 Conv2D5 Stencil3D".
# Stays under 9 minutes (LIMIT seconds of brute force, default 470, plus setup and a 30 s grace
# to write the file after SIGINT). One call does not finish all three spaces: call it again.
# Each call continues where the last stopped (--resume): from the files of a warm machine's
# target/kfoundry/dev-spaces/, else from .device/spaces/ (copy the previous call's
# $OUT/spaces/*.json there before carrying it). Finished spaces are skipped.
set -u
B=target/release/cargo-kfoundry
W=target/kfoundry/dev-spaces
L=$OUT/log.txt
LIMIT=${LIMIT:-470}
START=$(date +%s)
mkdir -p "$W" "$OUT/spaces"
sh .device/opencl-setup.sh >/dev/null 2>&1
[ -d .device/spaces ] && cp -n .device/spaces/*.json "$W"/ 2>/dev/null
echo "== devices" >> "$L"; $B devices >> "$L" 2>&1
complete() { # kernel text: 0 when its file in $W says complete
    python3 - "$W" "$1" <<'PY'
import glob, json, sys
for f in glob.glob(sys.argv[1] + "/*" + sys.argv[2] + "@full@*.json"):
    try:
        if json.load(open(f))["kfoundry"]["complete"]:
            sys.exit(0)
    except Exception:
        pass
sys.exit(1)
PY
}
for k in ${KERNELS:-PnPoly Histogram Stencil2D}; do
    if complete "$k"; then echo "$k: complete, skipped" | tee -a "$L"; continue; fi
    left=$((LIMIT - ($(date +%s) - START)))
    if [ "$left" -lt 40 ]; then echo "$k: no time left this call" | tee -a "$L"; continue; fi
    echo "== $k ($left s)" >> "$L"
    timeout -s INT -k 30 "$left" $B brute-force --bundle .device/dev-bundle.json --device gpu \
        --kernel "::$k" --workload full --repeats 3 --out "$W" --resume --message-format json \
        >> "$OUT/brute-force.jsonl" 2>> "$L"
    echo "$k: status $? after $(($(date +%s) - START)) s" | tee -a "$L"
done
cp "$W"/*.json "$OUT/spaces/" 2>/dev/null
python3 - "$OUT/spaces" <<'PY' | tee -a "$L"
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    d = json.load(open(f)); k = d["kfoundry"]; c = d["cache"]
    ok = [v["time"] for v in c.values() if isinstance(v["time"], (int, float))]
    print(f"{f.split('/')[-1]}: {len(c)} of {k['valid_configurations']} evaluated, {len(ok)} timed, "
          f"complete={k['complete']}, best {min(ok) if ok else float('nan'):.4f} ms")
PY
