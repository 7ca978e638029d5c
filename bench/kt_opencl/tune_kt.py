#!/usr/bin/env python3
"""Kernel Tuner 1.5 (OpenCL backend, pyopencl) on one of kfoundry's benchmark kernels, with a trace.

    python tune_kt.py --kernel Sgemm --workload large --strategy genetic_algorithm --seed 3 \
        --max-seconds 60 --out trace.jsonl [--platform N --device N | --select gpu:K]

The kernel, its space, restrictions, geometry, inputs and verification are kernels.py's translation
of the kfoundry annotation. Kernel Tuner runs at its defaults: `iterations` (7 timed launches per
configuration; the time is their mean, from OpenCL profiling events), observers (the OpenCL
backend's own timing observer), the strategy's own options; only `time_limit` is set, and the
global `random` and `numpy.random` generators (the ones Kernel Tuner's strategies draw from) are
seeded with --seed. Verification is on: `answer` is the reference configuration's output, computed
once through pyopencl with the same inputs, and `verify` applies kfoundry's rule per checked buffer.

The wall clock starts when this script starts (before Python imports numpy, pyopencl and
kernel_tuner); `time_limit` is the budget minus what setup took, so the whole run, setup included,
ends at about --max-seconds (after the evaluation in progress), as a kfoundry run is judged.

Trace (JSON lines, flushed as they happen):
  {"type": "meta", ...}                 what ran, where, and with which versions
  {"type": "setup", "t": s, "setup_s": s, ...}   imports, input data, the reference's answer
  {"type": "eval", "t": s, "i": n, "config": {...}, "time_ms": x | null, "error": str | null,
   "best_ms": x | null, "compile_ms", "verification_ms", "benchmark_ms"}
                                         one line per configuration Kernel Tuner evaluated (not
                                         for re-visits answered from its cache), at the wall-clock
                                         second (since start) the evaluation ended
  {"type": "end", "t": s, "status": "ok" | "error: ...", "evaluations": n, "best_ms": x, ...}

Four small patches keep one configuration from ending the run (Kernel Tuner 1.5 would abort the
whole tune) and let `__local` arguments through; none changes what the search sees for a
configuration that works:
  1. a `__local` pointer argument is passed as pyopencl.LocalMemory of kfoundry's size for that
     configuration (kernels.py explains);
  2. a launch failing with INVALID_WORK_GROUP_SIZE during verification is skipped as Kernel Tuner
     already skips it while benchmarking (NVIDIA limits some kernels to 256 items a group; Kernel
     Tuner's verification only knows the CUDA wording of that failure);
  3. a configuration whose output fails verification, or that fails in a way Kernel Tuner does not
     recognise, becomes a failed configuration (RuntimeFailedConfig) instead of an exception that
     stops the tune;
  4. each freshly evaluated configuration is written to the trace as Kernel Tuner stores it in its
     cache (`store_cache`).
"""

import time

T0 = time.time()

import os  # noqa: E402
import sys  # noqa: E402

# Kernel Tuner's search space comes from python-constraint, whose solver iterates over sets of
# parameter names: with Python's per-process string hashing, the order of the space (and so which
# configuration a seeded random index picks) would change from run to run. Fix it.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ["KT_OPENCL_T0"] = repr(T0)
    os.execv(sys.executable, [sys.executable] + sys.argv)
T0 = float(os.environ.pop("KT_OPENCL_T0", T0))

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def wall():
    return time.time() - T0


def main():
    # SIGINT (the driver's `timeout -s INT`) or SIGTERM end the run with an end line, whatever the
    # disposition this process inherited (a background job of a shell may start with SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", required=True, help="Sgemm, SuiteSgemm, ConvGroupNorm, Saxpy, SumDim1")
    ap.add_argument("--workload", required=True)
    ap.add_argument("--strategy", default="genetic_algorithm")
    ap.add_argument("--seed", type=int, default=0, help="seeds random, numpy.random and the input data")
    ap.add_argument("--max-seconds", type=float, required=True, help="wall-clock budget of the whole run")
    ap.add_argument("--out", required=True)
    ap.add_argument("--platform", type=int, default=0)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--select", help="instead of --platform/--device: gpu, gpu:K, cpu, cpu:K or name text")
    ap.add_argument("--x0-reference", action="store_true",
                    help="start the strategy at kfoundry's reference configuration (strategy option x0; off by default)")
    a = ap.parse_args()

    out = open(a.out, "w")

    def emit(obj):
        out.write(json.dumps(obj, default=str) + "\n")
        out.flush()

    t_import = time.time()
    import numpy as np
    import pyopencl as cl
    import kernel_tuner

    import kernels as K
    import ktpatch

    import_s = time.time() - t_import

    kdef = K.get(a.kernel)
    sizes = K.sizes_of(kdef, a.workload)
    platform, device = K.select_device(a.platform, a.device, a.select)
    dev = cl.get_platforms()[platform].get_devices()[device]
    max_wg = dev.max_work_group_size
    max_items = tuple(dev.max_work_item_sizes)
    emit({
        "type": "meta", "tool": "kernel_tuner", "kernel": kdef.name, "kfoundry_id": kdef.kfoundry_id,
        "workload": a.workload, "sizes": sizes, "strategy": a.strategy, "seed": a.seed, "budget_s": a.max_seconds,
        "platform": platform, "device": device, "device_name": dev.name, "platform_name": dev.platform.name,
        "driver": dev.driver_version, "max_work_group_size": max_wg, "max_work_item_sizes": max_items,
        "kernel_tuner": kernel_tuner.__version__ if hasattr(kernel_tuner, "__version__") else "?",
        "pyopencl": cl.VERSION_TEXT, "numpy": np.__version__, "python": sys.version.split()[0],
        "x0_reference": a.x0_reference, "t0_unix": T0, "argv": sys.argv,
    })

    # Inputs and the reference's answer (the same host arrays Kernel Tuner gets).
    t = time.time()
    args = K.make_arguments(kdef, sizes, seed=a.seed)
    data_s = time.time() - t
    t = time.time()
    outputs, ref_kernel_s = K.compute_answer(kdef, sizes, args, platform, device)
    answer = K.answer_list(kdef, outputs)
    answer_s = time.time() - t
    verify_log = []
    verify = K.make_verify(kdef, verify_log)
    restrictions = K.restrictions(kdef, sizes, max_wg, max_items)

    # --- patches (see the module doc and ktpatch.py) ---
    state = {"n": 0, "best": None, "best_config": None, "failures": 0}
    pnames = list(kdef.params)

    def on_eval(params, why):
        state["n"] += 1
        err = params.get("__error__")
        tms = params.get("time")
        ok = err is None and isinstance(tms, (int, float)) and np.isfinite(tms)
        if ok:
            if state["best"] is None or tms < state["best"]:
                state["best"], state["best_config"] = float(tms), {p: int(params[p]) for p in pnames}
        else:
            state["failures"] += 1
        emit({
            "type": "eval", "t": round(wall(), 6), "i": state["n"], "config": {p: int(params[p]) for p in pnames},
            "time_ms": float(tms) if ok else None,
            "error": None if ok else (why or str(err or tms)),
            "best_ms": state["best"],
            "compile_ms": params.get("compile_time"), "verification_ms": params.get("verification_time"),
            "benchmark_ms": params.get("benchmark_time"), "timestamp": params.get("timestamp"),
        })

    ktpatch.install(kdef, sizes, verify_log, on_eval)

    random.seed(a.seed)
    np.random.seed(a.seed)

    setup_s = wall()
    emit({"type": "setup", "t": round(setup_s, 6), "setup_s": round(setup_s, 6), "import_s": round(import_s, 3),
          "data_s": round(data_s, 3), "answer_s": round(answer_s, 3), "reference_kernel_ms": ref_kernel_s * 1e3,
          "restrictions": restrictions, "geometry": {k: v for k, v in K.kt_geometry(kdef, sizes).items()}})

    time_limit = max(1.0, a.max_seconds - wall())
    strategy_options = {"time_limit": time_limit}
    if a.x0_reference:
        strategy_options["x0"] = [kdef.reference[p] for p in pnames]
    geo = K.kt_geometry(kdef, sizes)
    status = "ok"
    env = {}
    # Kernel Tuner writes temp files into the working directory on errors: keep them out of the way.
    cwd = os.getcwd()
    tmp = tempfile.mkdtemp(prefix="kt_opencl_")
    os.chdir(tmp)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. the placeholder's dtype against `__local float* wl`
            _, env = kernel_tuner.tune_kernel(
                kdef.entry,
                K.load_source(kdef),
                geo["problem_size"],
                args,
                dict(kdef.params),
                grid_div_x=geo["grid_div_x"],
                grid_div_y=geo["grid_div_y"],
                grid_div_z=geo["grid_div_z"],
                block_size_names=geo["block_size_names"],
                restrictions=restrictions,
                answer=answer,
                atol=max(c[2] for c in kdef.checks),
                verify=verify,
                lang="OpenCL",
                platform=platform,
                device=device,
                strategy=a.strategy,
                strategy_options=strategy_options,
                quiet=True,
            )
    except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001
        status = f"error: {type(e).__name__}: {e}"
        traceback.print_exc()
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)
    emit({"type": "end", "t": round(wall(), 6), "status": status, "evaluations": state["n"],
          "failures": state["failures"], "best_ms": state["best"], "best_config": state["best_config"],
          "kt_best_config": {k: v for k, v in (env.get("best_config") or {}).items() if k in pnames or k == "time"}})
    out.close()
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
