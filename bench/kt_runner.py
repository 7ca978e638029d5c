#!/usr/bin/env python3
"""Replay Kernel Tuner 1.5.0 strategies in simulation mode on a Kernel Tuner cache file.

For every (strategy, seed) it records the order in which configurations were visited for
the first time (that is what the scoring needs: a repeated visit costs nothing) and writes
one JSON line {"space", "strategy", "seed", "trace": [key, ...], "seconds": wall} (and
"error" when the run crashed) for each seed SEED_FROM..SEED_TO-1.

Usage: kt_runner.py STRIPPED_CACHE.json STRATEGY SEED_FROM SEED_TO MAX_FEVALS OUT.jsonl
The stripped cache is written by prepare_cache.py: the original file, decompressed, with
the `times` arrays dropped (Kernel Tuner does not read them in simulation mode).
OUT.jsonl appears complete or not at all: the lines go to OUT.jsonl.part.PID, renamed at the
end (an interrupted run leaves only that temporary file; an existing OUT.jsonl is replaced).
"""
import json
import os
import random
import sys
import time
import warnings

import numpy as np

warnings.filterwarnings("ignore")

from kernel_tuner import tune_kernel  # noqa: E402
from kernel_tuner.runners import simulation  # noqa: E402
from kernel_tuner import util  # noqa: E402

TRACE = []
_orig_run = simulation.SimulationRunner.run


def _traced_run(self, parameter_space, tuning_options):
    parameter_space = list(parameter_space)
    before = set(self.visited_results)
    out = _orig_run(self, parameter_space, tuning_options)
    for element in parameter_space:
        key = ",".join(str(i) for i in element)
        if key not in before and key in self.visited_results:
            before.add(key)
            TRACE.append(key)
    return out


simulation.SimulationRunner.run = _traced_run

# Parse the (large) cache once per process instead of once per tune_kernel call.
_orig_read_cache = util.read_cache
_CACHE_MEMO = {}


def _memo_read_cache(cachefile, open_cache=True):
    if open_cache:
        return _orig_read_cache(cachefile, open_cache=open_cache)
    if cachefile not in _CACHE_MEMO:
        _CACHE_MEMO[cachefile] = _orig_read_cache(cachefile, open_cache=False)
    data = _CACHE_MEMO[cachefile]
    # shallow copies: the simulation runner copies each record before touching it
    return dict(data, cache=dict(data["cache"]))


util.read_cache = _memo_read_cache
import kernel_tuner.interface  # noqa: E402

if hasattr(kernel_tuner.interface, "read_cache"):
    kernel_tuner.interface.read_cache = _memo_read_cache


def main():
    cache_path, strategy, s0, s1, max_fevals, out_path = sys.argv[1:7]
    s0, s1, max_fevals = int(s0), int(s1), int(max_fevals)
    with open(cache_path) as f:
        data = json.load(f)
    keys = set(data["cache"].keys())
    names = data["tune_params_keys"]
    tune_params = {k: data["tune_params"][k] for k in names}

    def restrict(p):
        return ",".join(str(p[n]) for n in names) in keys

    tmp_path = "%s.part.%d" % (out_path, os.getpid())
    with open(tmp_path, "w") as out:
        for seed in range(s0, s1):
            TRACE.clear()
            random.seed(seed)
            np.random.seed(seed)
            t0 = time.time()
            err = None
            try:
                tune_kernel(
                    data["kernel_name"], "__global__ void dummy() {}", data["problem_size"], [],
                    tune_params, restrictions=restrict, cache=cache_path, simulation_mode=True,
                    strategy=strategy, strategy_options={"max_fevals": max_fevals}, quiet=True,
                    verbose=False,
                )
            except Exception as e:  # record and go on: a crashing strategy gets a short trace
                err = repr(e)
            rec = {"space": data["kernel_name"], "strategy": strategy, "seed": seed,
                   "trace": list(TRACE), "seconds": time.time() - t0}
            if err:
                rec["error"] = err
            out.write(json.dumps(rec) + "\n")
            out.flush()
    os.replace(tmp_path, out_path)


if __name__ == "__main__":
    main()
