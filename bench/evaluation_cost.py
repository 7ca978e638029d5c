#!/usr/bin/env python3
"""Summarises bench/h200/7-evaluation-cost.sh: evaluations per second before and after, per
kernel, and dispatch's overhead per launch.

usage: python3 bench/evaluation_cost.py DIR

Evaluations per second = evaluations / the sum of their costs (each evaluation's cost is the
tuner's own measure of it: build, checks and timing, as the search is charged for it; the
worker's start and the finalist stage are not in it). Also printed: the median cost, the
search's seconds as the tune reported them, and the median timing noise (relative
interquartile range of the timed runs) where the tuner reported one.
"""
import glob
import json
import os
import re
import statistics
import sys


def load(path):
    evals, result = [], None
    for line in open(path):
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "evaluation":
            # {"Ok": {...}} or {"Failed": {...}}
            evals.append(next(iter(m["outcome"].values())))
        elif m.get("reason") == "tuned":
            result = m["result"]
    return evals, result


def row(path):
    evals, result = load(path)
    costs = [e["cost"] for e in evals if e.get("cost") is not None]
    if not costs:
        return None
    noise = []
    for e in evals:
        for name, value in e.get("descriptors", []) or []:
            if name == "timing_noise":
                noise.append(value)
    return {
        "n": len(costs),
        "per_s": len(costs) / sum(costs),
        "median": statistics.median(costs),
        "search_s": result.get("seconds") if result else None,
        "noise": statistics.median(noise) if noise else None,
        "best_ns": result.get("best_ns") if result else None,
    }


def main():
    d = sys.argv[1]
    kernels = sorted({re.sub(r"^cost-(before|after)-", "", os.path.basename(p))[:-6] for p in glob.glob(f"{d}/cost-*.jsonl")})
    print("| kernel | evals before / after | evals/s before | evals/s after | ratio | median cost before → after (s) | best before → after (µs) | timing noise after |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for k in kernels:
        b, a = row(f"{d}/cost-before-{k}.jsonl"), row(f"{d}/cost-after-{k}.jsonl")
        if not b or not a:
            print(f"| {k} | {'missing' if not b else b['n']} / {'missing' if not a else a['n']} | | | | | | |")
            continue
        r = a["per_s"] / b["per_s"]
        ratios.append(r)
        best = lambda x: f"{x['best_ns'] / 1000:.1f}" if x["best_ns"] else "?"
        noise = f"{a['noise']:.3f}" if a["noise"] is not None else "–"
        print(f"| {k} | {b['n']} / {a['n']} | {b['per_s']:.2f} | {a['per_s']:.2f} | {r:.2f}× | {b['median']:.3f} → {a['median']:.3f} | {best(b)} → {best(a)} | {noise} |")
    if ratios:
        print(f"\nratio of evaluations per second, geometric mean over kernels: {statistics.geometric_mean(ratios):.2f}×, smallest {min(ratios):.2f}×")
    dispatch = f"{d}/dispatch.txt"
    if os.path.exists(dispatch):
        which, over = None, {"before": [], "after": []}
        for line in open(dispatch):
            if line.startswith("== "):
                which = line[3:].strip()
            m = re.search(r"launch − set\+enq = (-?[\d.]+) µs; launch − enq = (-?[\d.]+) µs", line)
            if m and which in over:
                over[which].append((float(m.group(1)), float(m.group(2))))
        for w, v in over.items():
            if v:
                print(f"dispatch overhead {w}: launch − set+enq median {statistics.median(x[0] for x in v):.3f} µs, "
                      f"launch − enq median {statistics.median(x[1] for x in v):.3f} µs (runs: {len(v)})")


if __name__ == "__main__":
    main()
