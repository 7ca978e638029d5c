"""Split-K in one tune: the `tuned` result, and the best evaluated configuration with and
without split-K (SPLITK > 1 or 1), each path (MMA) apart, from a tune's JSON messages.

    python3 bench/splitk_summary.py TUNE.jsonl [FLOP]     (FLOP: the product's, for GFLOP/s)
"""
import json
import sys

best = {}
flop = float(sys.argv[2]) if len(sys.argv) > 2 else None
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d.get("reason") == "evaluation" and "Ok" in d["outcome"]:
        p, t = d["params"], d["outcome"]["Ok"]["time"]
        key = ("split" if p["SPLITK"] > 1 else "no split", p.get("MMA", 0))
        if t < best.get(key, (float("inf"),))[0]:
            best[key] = (t, p)
    if d.get("reason") == "tuned":
        r = d["result"]
        keys = ("reference_ns", "best_ns", "speedup", "params", "evaluations", "failures",
                "proof_cases", "rel_error_norm")
        print("tuned:", {k: r.get(k) for k in keys})
for (kind, mma), (t, p) in sorted(best.items()):
    rate = f", {flop / t / 1e9:.1f} GFLOP/s" if flop else ""
    print(f"best {kind:8s} MMA={mma}: {t * 1e3:.3f} ms{rate}", p)
