#!/usr/bin/env python3
"""Time to a near-best kernel: kfoundry's tune against Kernel Tuner's strategies, from run traces.

    python summarize.py TRACE_OR_DIR... [--spaces bench/spaces-dev] [--within 0.05] [--out summary.md]

Traces: kfoundry runs written by stamp.py around `cargo kfoundry tune --message-format json`
(each `evaluation` message with the wall-clock second it arrived), Kernel Tuner runs written by
tune_kt.py. Every second is counted from the start of the run's process (setup included), and
only evaluations that ended within the run's budget (its meta `budget_s`) count.

Per kernel and workload, for each tool (and strategy), the median over seeds of:
  (a) seconds until the run's best-so-far came within 5 % of the best known time,
  (b) evaluations (failed ones included) until then,
  (c) the best time found within the budget;
plus evaluations per second (between the first and the last evaluation within the budget) and the
seconds to the first evaluation (start-up: imports, input data, the reference). A run that never
came within 5 % counts as its budget (a), or its evaluation count (b), marked ">" (censored): a
median shown with ">" is at least that.

"Best known": the minimum of the brute-force cache file of the same kernel, workload and device
(kfoundry's brute force on the H200, bench/spaces-dev/h200_<kernel>_<workload>.json.gz, times in
ms; used only when its device name matches the runs') and of every run's best; the table says
which it was. Each tool's own measurements are used (kfoundry: median of 5 timed launches after a
warm-up; Kernel Tuner: mean of 7 launches, no warm-up per configuration; the brute force: median of
3 after a warm-up). Where a brute-force file applies, the table also gives the search-only view
"BF-scored": when a run first *evaluated* (successfully) a configuration whose brute-force time is
within 5 % of the brute-force optimum, independent of the tools' timing noise and method.
"""

import argparse
import glob
import gzip
import json
import math
import os
import statistics
import sys
from collections import defaultdict


def load(path):
    lines = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    pass
    return lines


class Run:
    def __init__(self, path):
        self.path = path
        self.evals = []  # (t, time_ms | None, config dict)
        self.complete = False
        self.status = "?"
        lines = load(path)
        if not lines or lines[0].get("type") != "meta":
            raise ValueError("no meta line")
        meta = lines[0]
        self.meta = meta
        self.seed = meta.get("seed")
        self.budget = float(meta.get("budget_s") or math.inf)
        self.device = meta.get("device_name") or ""
        if meta.get("tool") == "kernel_tuner":
            self.tool = "Kernel Tuner " + meta["strategy"]
            self.kernel, self.workload = meta["kernel"], meta["workload"]
            self.setup_s = None
            for ln in lines[1:]:
                if ln.get("type") == "eval":
                    self.evals.append((ln["t"], ln["time_ms"], ln["config"]))
                elif ln.get("type") == "setup":
                    self.setup_s = ln["setup_s"]
                elif ln.get("type") == "end":
                    self.complete = True
                    self.status = ln.get("status", "?")
        else:
            self.tool = "kfoundry" + (f" ({meta['engine']})" if meta.get("engine") else "")
            self.kernel = meta.get("kernel")
            self.workload = meta.get("workload")
            self.setup_s = None
            for ln in lines[1:]:
                if ln.get("type") == "msg":
                    m = ln["msg"]
                    if m.get("reason") == "evaluation":
                        kid = m["kernel"].split("::")[-1]
                        if self.kernel and kid != self.kernel:
                            continue
                        self.kernel, self.workload = kid, m["workload"]
                        ok = m["outcome"].get("Ok")
                        self.evals.append((ln["t"], ok["time"] * 1e3 if ok else None, m["params"]))
                        if self.setup_s is None:
                            cost = (ok or m["outcome"].get("Failed") or {}).get("cost", 0.0)
                            self.setup_s = max(0.0, ln["t"] - cost)
                    elif m.get("reason") == "tuned":
                        self.device = self.device or m["result"].get("device", "")
                elif ln.get("type") == "end":
                    self.complete = True
                    self.status = f"rc {ln.get('rc')}" + (f", {ln['signalled']}" if ln.get("signalled") else "")
        if self.setup_s is None and self.evals:
            self.setup_s = self.evals[0][0]

    def window(self):
        return [e for e in self.evals if e[0] <= self.budget]

    def best(self, within=True):
        ts = [e[1] for e in (self.window() if within else self.evals) if e[1] is not None]
        return min(ts) if ts else None

    def first_reaching(self, pred):
        """(t, evaluations) of the first evaluation within the budget for which pred holds, or None."""
        for i, e in enumerate(self.window()):
            if pred(e):
                return e[0], i + 1
        return None

    def rate(self):
        w = self.window()
        if len(w) < 2 or w[-1][0] <= w[0][0]:
            return None
        return (len(w) - 1) / (w[-1][0] - w[0][0])


def brute_force_file(spaces, kernel, workload):
    if not spaces:
        return None
    path = os.path.join(spaces, f"h200_{kernel.lower()}_{workload}.json.gz")
    if not os.path.exists(path):
        return None
    d = json.load(gzip.open(path))
    order = d["tune_params_keys"]
    times = {}
    for key, v in d["cache"].items():
        if isinstance(v.get("time"), (int, float)):
            times[tuple(int(x) for x in key.split(","))] = float(v["time"])
    return {"path": path, "device": d.get("device_name", ""), "order": order, "times": times, "best": min(times.values())}


def median_censored(values):
    """values: (value, censored). The median, and whether it is only a lower bound."""
    if not values:
        return None, False
    v = sorted(values, key=lambda x: (x[0], x[1]))
    n = len(v)
    mid = [v[(n - 1) // 2], v[n // 2]]
    val = statistics.mean(m[0] for m in mid)
    return val, any(m[1] for m in mid)


def fmt(v, cens=False, nd=1):
    if v is None:
        return "–"
    s = f"{v:.{nd}f}" if isinstance(v, float) else str(v)
    return (">" if cens else "") + s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+", help="trace files or directories of *.jsonl")
    ap.add_argument("--spaces", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spaces-dev"))
    ap.add_argument("--within", type=float, default=0.05)
    ap.add_argument("--out")
    a = ap.parse_args()

    files = []
    for p in a.traces:
        files += sorted(glob.glob(os.path.join(p, "*.jsonl"))) if os.path.isdir(p) else [p]
    runs = []
    skipped = []
    for f in files:
        try:
            r = Run(f)
        except (ValueError, KeyError) as e:
            skipped.append(f"{os.path.basename(f)} ({e})")
            continue
        if not r.complete:
            skipped.append(f"{os.path.basename(f)} (incomplete)")
            continue
        if r.kernel is None:
            skipped.append(f"{os.path.basename(f)} (no evaluation)")
            continue
        runs.append(r)

    groups = defaultdict(list)
    for r in runs:
        groups[(r.kernel, r.workload)].append(r)

    out = []
    pct = int(round(a.within * 100))
    out.append(f"# Time to within {pct} % of the best known kernel: kfoundry and Kernel Tuner\n")
    out.append(
        f"Median over seeds. Seconds are wall-clock from the start of each run's process (setup included). "
        f"'>' marks a censored median: at least one middle run never came within {pct} % "
        f"(it counts as its budget or its evaluation count). 'reached' = runs that did, of all. "
        f"'best' = the best time found within the budget. 'evals/s' = evaluations per second between the first "
        f"and the last one within the budget. 'first eval s' = seconds until the first evaluation ended.\n"
    )
    for (kernel, workload), rs in sorted(groups.items()):
        devices = sorted({r.device for r in rs if r.device})
        budgets = sorted({r.budget for r in rs})
        bf = brute_force_file(a.spaces, kernel, workload)
        if bf and not any(bf["device"].lower() in d.lower() or d.lower() in bf["device"].lower() for d in devices if d):
            bf = None
        cands = [(r.best(within=False), f"{r.tool}, seed {r.seed}") for r in rs if r.best(within=False) is not None]
        if bf:
            cands.append((bf["best"], f"brute force {os.path.basename(bf['path'])}"))
        if not cands:
            continue
        best, source = min(cands)
        target = best * (1 + a.within)
        out.append(f"## {kernel} @ {workload}\n")
        out.append(f"Device: {', '.join(devices) or '?'}. Budget per run: {', '.join(f'{b:g} s' for b in budgets)}. "
                   f"Best known: **{best:.5g} ms** ({source}); target ≤ {target:.5g} ms.\n")
        header = ["tool", "runs", "reached", f"s to {pct} %", f"evals to {pct} %", "best ms", "evals/s", "first eval s"]
        if bf:
            header += [f"BF-scored s to {pct} %", "BF-scored evals"]
            bf_target = bf["best"] * (1 + a.within)
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        by_tool = defaultdict(list)
        for r in rs:
            by_tool[r.tool].append(r)
        for tool, trs in sorted(by_tool.items(), key=lambda kv: (not kv[0].startswith("kfoundry"), kv[0])):
            secs, evals, bests, rates, firsts, bfs, bfe = [], [], [], [], [], [], []
            reached = 0
            for r in trs:
                hit = r.first_reaching(lambda e: e[1] is not None and e[1] <= target)
                n = len(r.window())
                if hit:
                    reached += 1
                    secs.append((hit[0], False))
                    evals.append((hit[1], False))
                else:
                    secs.append((r.budget, True))
                    evals.append((n, True))
                b = r.best()
                if b is not None:
                    bests.append(b)
                if r.rate():
                    rates.append(r.rate())
                if r.evals:
                    firsts.append(r.evals[0][0])
                if bf:
                    order = bf["order"]

                    def good(e):
                        if e[1] is None:
                            return False
                        key = tuple(int(e[2][p]) for p in order)
                        return bf["times"].get(key, math.inf) <= bf_target

                    h = r.first_reaching(good)
                    bfs.append((h[0], False) if h else (r.budget, True))
                    bfe.append((h[1], False) if h else (n, True))
            s_med, s_c = median_censored(secs)
            e_med, e_c = median_censored(evals)
            row = [tool, str(len(trs)), f"{reached}/{len(trs)}", fmt(s_med, s_c), fmt(e_med, e_c, 0 if float(e_med).is_integer() else 1),
                   fmt(statistics.median(bests), nd=4) if bests else "–",
                   fmt(statistics.median(rates), nd=2) if rates else "–",
                   fmt(statistics.median(firsts), nd=1) if firsts else "–"]
            if bf:
                b_med, b_c = median_censored(bfs)
                be_med, be_c = median_censored(bfe)
                row += [fmt(b_med, b_c), fmt(be_med, be_c, 0 if float(be_med).is_integer() else 1)]
            out.append("| " + " | ".join(row) + " |")
        out.append("")
        # The tools time a configuration differently (see the doc): where both measured the same
        # configuration, how their times compare.
        per_tool = defaultdict(lambda: defaultdict(list))
        for r in rs:
            fam = "kfoundry" if r.tool.startswith("kfoundry") else "Kernel Tuner"
            for e in r.evals:
                if e[1] is not None:
                    per_tool[fam][tuple(sorted((k, int(v)) for k, v in e[2].items()))].append(e[1])
        common = set(per_tool["kfoundry"]) & set(per_tool["Kernel Tuner"])
        if common:
            ratios = sorted(statistics.median(per_tool["Kernel Tuner"][c]) / statistics.median(per_tool["kfoundry"][c]) for c in common)
            out.append(f"Same configuration timed by both tools ({len(common)}): Kernel Tuner's time / kfoundry's, "
                       f"median {statistics.median(ratios):.3f} (range {ratios[0]:.3f} to {ratios[-1]:.3f}).\n")
        if bf:
            for fam, confs in sorted(per_tool.items()):
                order = bf["order"]
                rs_ = sorted(statistics.median(v) / bf["times"][key] for c, v in confs.items()
                             if (key := tuple(dict(c)[p] for p in order)) in bf["times"])
                if rs_:
                    out.append(f"{fam}'s times / the brute force's for the same configuration ({len(rs_)}): "
                               f"median {statistics.median(rs_):.3f} (range {rs_[0]:.3f} to {rs_[-1]:.3f}).\n")
        per_run = []
        for r in sorted(rs, key=lambda r: (r.tool, r.seed if r.seed is not None else -1)):
            hit = r.first_reaching(lambda e: e[1] is not None and e[1] <= target)
            per_run.append(f"{r.tool} seed {r.seed}: {len(r.window())} evals in budget ({len(r.evals)} in all), "
                           f"best {fmt(r.best(), nd=4)} ms, "
                           + (f"within {pct} % at {hit[0]:.1f} s / eval {hit[1]}" if hit else f"not within {pct} %")
                           + f", first eval at {fmt(r.evals[0][0] if r.evals else None)} s, {r.status}")
        out.append("<details><summary>runs</summary>\n\n" + "\n".join("- " + p for p in per_run) + "\n\n</details>\n")
    if skipped:
        out.append("Skipped traces: " + ", ".join(skipped) + "\n")
    text = "\n".join(out)
    if a.out:
        open(a.out, "w").write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
