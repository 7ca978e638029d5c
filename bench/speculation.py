"""Summarises bench/h200/21-speculation.sh: evaluations per second of each variant per
kernel, from the time stamps of its evaluation messages ((evaluations - 1) / seconds from
the first to the last), the whole run's wall time, and how many evaluations the new CLI's
variants have in common from the start (the configurations evaluated, in order: on a real
device measured times differ from run to run, and the search follows them, so the runs part
ways at some point even though speculation itself changes nothing).

usage: [BASE=old] python3 bench/speculation.py DIR (BASE: the variant the others are divided by)
"""
import json
import math
import os
import re
import sys

BASE = os.environ.get("BASE", "old")


def load(path):
    stamps, configs = [], []
    for line in open(path):
        t, _, msg = line.partition(" ")
        try:
            m = json.loads(msg)
        except json.JSONDecodeError:
            continue
        if m.get("reason") == "evaluation":
            stamps.append(float(t))
            configs.append(json.dumps(m.get("params"), sort_keys=True))
    return stamps, configs


def main(d):
    wall = {}
    for line in open(os.path.join(d, "log.txt")):
        m = re.match(r"(\S+) (\S+) (\S+) exit (\d+) start (\S+) end (\S+)", line)
        if m:
            wall[(m[1], m[2])] = (float(m[6]) - float(m[5]), int(m[4]))
    variants = sorted({v for v, _ in wall}, key=lambda v: (v != BASE, v))
    kernels = list(dict.fromkeys(k for _, k in wall))
    print("| kernel | " + " | ".join(f"{v} evals/s (wall s)" for v in variants)
          + " | " + " | ".join(f"{v} / {BASE}" for v in variants if v != BASE) + " | same first evaluations |")
    print("| --- |" + " ---: |" * (2 * len(variants) - 1) + " --- |")
    ratios = {v: [] for v in variants}
    for k in kernels:
        cells, rate, searches = [], {}, {}
        for v in variants:
            path = os.path.join(d, f"{v}-{k}.jsonl")
            stamps, configs = load(path) if os.path.exists(path) else ([], [])
            w, rc = wall.get((v, k), (float("nan"), -1))
            if len(stamps) > 1 and rc == 0:
                rate[v] = (len(stamps) - 1) / (stamps[-1] - stamps[0])
                cells.append(f"{rate[v]:.2f} ({w:.1f})")
            else:
                cells.append(f"— (exit {rc})")
            searches[v] = configs
        for v in variants:
            if v != BASE:
                if v in rate and BASE in rate:
                    ratios[v].append(rate[v] / rate[BASE])
                    cells.append(f"{rate[v] / rate[BASE]:.2f}x")
                else:
                    cells.append("—")
        new = [searches[v] for v in variants if v != BASE and searches[v]]
        same = 0
        while new and all(len(s) > same and s[same] == new[0][same] for s in new):
            same += 1
        print(f"| {k} | " + " | ".join(cells) + f" | {same} |")
    for v, r in ratios.items():
        if r:
            g = math.exp(sum(map(math.log, r)) / len(r))
            print(f"{v} / {BASE}, geometric mean over {len(r)} kernels: {g:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1])
