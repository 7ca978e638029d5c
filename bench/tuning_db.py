"""Summarises a cold-against-warm-from-the-tuning-database comparison: for each run
(`cold<seed>.jsonl`, `warm<seed>.jsonl`, the `--message-format json` output of `tune`), the
best time found after each evaluation; the best of all runs; per run the evaluations until the
best found is within 5% and 10% of it, the evaluations until it is as good as the median of
the cold runs' final bests ("the same result") and the final best / best of all; then the
median best-so-far of each kind after 1, 2, 5, 10, ... evaluations.

usage: python3 bench/tuning_db.py DIR
"""
import glob
import itertools
import json
import os
import re
import statistics
import sys


def times(path):
    out = []
    for line in open(path):
        try:
            m = json.loads(line)
        except json.JSONDecodeError:
            continue
        if m.get("reason") != "evaluation":
            continue
        ok = m["outcome"].get("Ok") if isinstance(m["outcome"], dict) else None
        out.append(ok["time"] if ok else float("inf"))
    return out


def main(d):
    runs = {}
    for p in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        m = re.match(r"(cold|warm)(\d+)\.jsonl", os.path.basename(p))
        if m:
            t = times(p)
            if t:
                runs[(m[1], int(m[2]))] = t
    best = min(min(t) for t in runs.values())
    curves = {k: list(itertools.accumulate(t, min)) for k, t in runs.items()}
    target = statistics.median(c[-1] for (v, _), c in curves.items() if v == "cold")
    print(f"best of all runs: {best * 1e3:.4f} ms; median final best of the cold runs: "
          f"{target * 1e3:.4f} ms")
    same = {"cold": [], "warm": []}
    for (v, s), c in sorted(curves.items()):
        row = {}
        for tol in (1.05, 1.10):
            row[tol] = next((i for i, x in enumerate(c, 1) if x <= best * tol), "-")
        to_target = next((i for i, x in enumerate(c, 1) if x <= target), None)
        same[v].append(to_target if to_target is not None else len(c) + 1)
        print(f"{v} seed {s}: {len(c)} evals, to 10%: {row[1.10]}, to 5%: {row[1.05]}, "
              f"to the cold median: {to_target or '-'}, final/best {c[-1] / best:.3f}")
    for v, n in same.items():
        if n:
            print(f"{v}: median evaluations to the cold median final best "
                  f"{statistics.median(n)} (runs that never reach it count as budget + 1)")
    points = [p for p in (1, 2, 3, 5, 10, 15, 20, 25, 30, 40, 50) if p <= min(map(len, curves.values()))]
    print("median best-so-far (ms) after " + ", ".join(map(str, points)) + " evaluations")
    for v in ("cold", "warm"):
        cs = [c for (k, _), c in curves.items() if k == v]
        if cs:
            print(f"  {v}: " + " ".join(f"{statistics.median(c[p - 1] for c in cs) * 1e3:.3f}"
                                         for p in points))


main(sys.argv[1])
