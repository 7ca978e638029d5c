"""Verification self-test of the Kernel Tuner setup, per kernel (small workloads by default).

For each kernel: inputs and the reference's answer as tune_kt.py makes them, then Kernel Tuner's
brute force over a few configurations (the reference and up to --configs others, drawn from the
valid space with --seed) three times:
  1. with the true answer: every configuration must pass verification and get a time;
  2. with an answer changed in one element by 10 × (atol + rtol·|r|): Kernel Tuner 1.5 itself
     (no patches but the `__local` one) must stop with "Kernel result verification failed";
  3. the same wrong answer with tune_kt.py's patches: every configuration must come back as a
     failed configuration whose reason starts with "wrong:".
Also checks kfoundry_compare on NaN / inf / tolerance edge cases.

Usage: python selftest.py [--kernels Saxpy,...] [--workload small] [--select cpu] [--configs 3]
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import kernel_tuner  # noqa: E402
from kernel_tuner.searchspace import Searchspace  # noqa: E402

import kernels as K  # noqa: E402
import ktpatch  # noqa: E402


def compare_cases():
    c = K.kfoundry_compare
    r = np.array([1.0, 2.0, np.nan, np.inf, 0.0], np.float32)
    assert c(r, r, 1e-6, 0)[0] == 0
    assert c(np.array([1.0 + 1e-7, 2.0, np.nan, np.inf, 1e-9], np.float32), r, 1e-6, 1e-8)[0] == 0
    assert c(np.array([np.nan, 2.0, np.nan, np.inf, 0.0], np.float32), r, 1e-6, 0)[:2] == (1, 0)
    assert c(np.array([1.0, 2.0, 3.0, np.inf, 0.0], np.float32), r, 1e-6, 0)[0] == 1
    assert c(np.array([1.0, 2.0, np.nan, -np.inf, 0.0], np.float32), r, 1e-6, 0)[0] == 1
    assert c(np.array([1.1, 2.0, np.nan, np.inf, 0.0], np.float32), r, 1e-6, 0)[0] == 1
    # the bound is inclusive: |x - r| <= atol + rtol * |r|
    assert c(np.array([1.5], np.float64), np.array([1.0]), 0.25, 0.25)[0] == 0
    assert c(np.array([1.5000001], np.float64), np.array([1.0]), 0.25, 0.25)[0] == 1
    print("kfoundry_compare: the cases of compare.rs's test hold")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", default=",".join(K.KERNELS))
    ap.add_argument("--workload", default="small")
    ap.add_argument("--select", default=None)
    ap.add_argument("--configs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    compare_cases()
    platform, device = K.select_device(0, 0, a.select)
    # Kernel Tuner writes the sources of a failing configuration into the working directory.
    tmp = tempfile.mkdtemp(prefix="kt_selftest_")
    os.chdir(tmp)
    failed = 0
    for name in a.kernels.split(","):
        kdef = K.get(name)
        sizes = K.sizes_of(kdef, a.workload)
        args = K.make_arguments(kdef, sizes, seed=a.seed)
        outputs, _ = K.compute_answer(kdef, sizes, args, platform, device)
        answer = K.answer_list(kdef, outputs)
        # the reference and a few valid configurations, as a space of their own
        ss = Searchspace(dict(kdef.params), K.restrictions(kdef, sizes), 1 << 30)
        random.seed(a.seed)
        picks = [tuple(kdef.reference[p] for p in kdef.params)] + random.sample(list(ss.list), min(a.configs, ss.size))
        names = list(kdef.params)
        picks = list(dict.fromkeys(tuple(c) for c in picks))
        # tune_kernel takes a Cartesian product: restrict it to exactly the picked configurations
        tune_params = {p: sorted({c[i] for c in picks}) for i, p in enumerate(names)}
        only = [dict(zip(names, c)) for c in picks]
        restrict = " or ".join("(" + " and ".join(f"{k} == {v}" for k, v in o.items()) + ")" for o in only)

        def run(ans, verify):
            geo = K.kt_geometry(kdef, sizes)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return kernel_tuner.tune_kernel(
                    kdef.entry, K.load_source(kdef), geo["problem_size"], args, tune_params,
                    grid_div_x=geo["grid_div_x"], grid_div_y=geo["grid_div_y"], grid_div_z=geo["grid_div_z"],
                    block_size_names=geo["block_size_names"], restrictions=[restrict],
                    answer=ans, atol=max(c[2] for c in kdef.checks), verify=verify, lang="OpenCL",
                    platform=platform, device=device, strategy="brute_force", quiet=True,
                )[0]

        # 1. the true answer
        log = []
        evals = []
        ktpatch.install(kdef, sizes, log, on_eval=lambda p, why: evals.append((p, why)))
        res = run(answer, K.make_verify(kdef, log))
        ok1 = len(res) == len(picks) and all("__error__" not in r and isinstance(r.get("time"), float) for r in res)
        print(f"{name}: true answer: {len(res)} configurations, "
              f"{sum('__error__' not in r for r in res)} passed verification"
              + ("" if ok1 else f"  FAILED {[e[1] for e in evals if e[1]]}"))
        # 2. a wrong answer, Kernel Tuner unpatched (but for the __local argument)
        wrong = [None if x is None else x.copy() for x in answer]
        idx, b, rtol, atol = K.check_indices(kdef)[0]
        j = int(np.argmax(np.isfinite(wrong[idx])))
        wrong[idx][j] += np.float32(10 * (atol + rtol * abs(float(wrong[idx][j]))))
        ktpatch.install(kdef, sizes, [], on_eval=None, failures_as_configs=False)
        try:
            run(wrong, K.make_verify(kdef))
            ok2, why2 = False, "no exception"
        except RuntimeError as e:
            ok2, why2 = "verification failed" in str(e), str(e).splitlines()[0]
        print(f"{name}: wrong answer, Kernel Tuner as is: {'stopped: ' + why2 if ok2 else 'NOT STOPPED: ' + why2}")
        # 3. the wrong answer with tune_kt.py's patches
        log, evals = [], []
        ktpatch.install(kdef, sizes, log, on_eval=lambda p, why: evals.append((p, why)))
        res = run(wrong, K.make_verify(kdef, log))
        ok3 = len(evals) == len(picks) and all(why and why.startswith("wrong:") for _, why in evals)
        print(f"{name}: wrong answer, patched: {sum(bool(w) and w.startswith('wrong:') for _, w in evals)} of {len(evals)} "
              f"failed as wrong; e.g. {evals[0][1] if evals else None}")
        ktpatch.uninstall()
        failed += not (ok1 and ok2 and ok3)
    shutil.rmtree(tmp, ignore_errors=True)
    print("selftest:", "OK" if not failed else f"{failed} kernels FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
