# KernelBench through `cargo kfoundry import` on a GPU machine (PyTorch there, no Rust toolchain).
#
# For each problem of a level: PyTorch eager and torch.compile timed on the GPU (CUDA events,
# TF32 off, median), the model exported by torch.onnx.export (eval mode, opset 17, the problem's
# own sizes), imported with `import --bundle`, and every generated kernel tuned at `full` with a
# fixed budget by `tune --bundle`. One JSON line per problem is appended to RESULTS; problems
# already there are skipped (the harness resumes where the last call stopped).
#
#   python3 bench/kernelbench/run.py --problems DIR --level level2 --cli target/release/cargo-kfoundry \
#       --results OUT.jsonl [--only 2,4] [--secs 6] [--evals 40] [--compile] [--deadline SECONDS] [--no-tune]
#
# What a line holds: eager_ms, compile_ms (when --compile), the import's outcome and kernels, for
# each kernel the tuner's reference and best times (medians of profiling events at the problem's
# sizes) and whether the reference was kept; kfoundry_ms is the sum of the tuned kernels' times.
# Then the whole imported model runs once through dispatch's choices from that lockfile
# (`cargo kfoundry run`) on the problem's inputs, and its outputs are compared with PyTorch's:
# KernelBench's rule (torch.allclose, atol = rtol = 1e-2, against the FP32 eager output) and
# kfoundry's FP32 rule (relative error norm against an FP64 run of the model at most twice
# PyTorch FP32's own, plus 1e-6). graph_wall_ms is that run's median wall time of the whole
# graph (launches and the gaps between them).
import argparse, glob, importlib.util, json, os, shutil, signal, subprocess, sys, time
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--problems", required=True)
ap.add_argument("--level", default="level2")
ap.add_argument("--cli", required=True)
ap.add_argument("--results", required=True)
ap.add_argument("--only", default="")
ap.add_argument("--secs", type=float, default=6)
ap.add_argument("--evals", type=int, default=40)
ap.add_argument("--compile", action="store_true")
ap.add_argument("--deadline", type=float, default=1e9, help="stop starting problems after this many seconds")
ap.add_argument("--work", default="/tmp/kbh")
ap.add_argument("--repeats", type=int, default=20, help="timed runs of the whole imported graph")
ap.add_argument("--no-tune", action="store_true", help="run the imported model with its reference kernels (no tune, no lockfile)")
ap.add_argument("--total-secs", type=float, help="one budget for the model's whole tune (`tune --budget-total-secs`), with --secs and --evals still each search's cap")
ap.add_argument("--tune-timeout", type=float, help="stop the model's tune after this many seconds (what finished is kept and run)")
ap.add_argument("--tune-log", help="append the tune's JSON messages to this file")
ap.add_argument("--cpu", action="store_true", help="a dry run of the harness without a GPU: PyTorch on the CPU, the tune at `small` on the default OpenCL device")
args = ap.parse_args()

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
start = time.time()
done = set()
if os.path.exists(args.results):
    for line in open(args.results):
        try:
            r = json.loads(line)
        except Exception:
            continue
        # A problem that ended in an exception (a timeout, memory) is tried again.
        if "exception" not in r:
            done.add(r["problem"])
only = {s for s in args.only.split(",") if s}
files = sorted(glob.glob(os.path.join(args.problems, args.level, "*.py")), key=lambda p: int(os.path.basename(p).split("_")[0]))
os.makedirs(args.work, exist_ok=True)


DEV = "cpu" if args.cpu else "cuda"


def call(cmd, timeout, stop_gently=False):
    """Runs cmd in a session of its own; on a timeout the whole group (the tuner's workers too)
    is killed, and subprocess.TimeoutExpired raised. With stop_gently, a timeout sends the
    tuner SIGTERM first (it records what finished and stops) and returns what it printed."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        if stop_gently:
            p.terminate()
            try:
                out, err = p.communicate(timeout=60)
                return subprocess.CompletedProcess(cmd, p.returncode, out, err)
            except subprocess.TimeoutExpired:
                pass
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def bench(fn, reps=20, warm=3):
    if args.cpu:
        fn()
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1e3)
        return sorted(ts)[1]
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


for f in files:
    n = os.path.basename(f).split("_")[0]
    name = os.path.basename(f)[:-3]
    if (only and n not in only) or name in done:
        continue
    if time.time() - start > args.deadline:
        print(f"deadline reached before {name}", file=sys.stderr)
        break
    r = {"problem": name, "level": args.level}
    try:
        spec = importlib.util.spec_from_file_location("p" + n, f)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        torch.manual_seed(0)
        model = m.Model(*m.get_init_inputs()).to(DEV).eval()
        inputs = [x.to(DEV) if torch.is_tensor(x) else x for x in m.get_inputs()]
        with torch.no_grad():
            r["eager_ms"] = round(bench(lambda: model(*inputs)), 4)
            if args.compile:
                t = time.time()
                compiled = torch.compile(model)
                compiled(*inputs)
                r["compile_s"] = round(time.time() - t, 1)
                r["compile_ms"] = round(bench(lambda: compiled(*inputs)), 4)
        with torch.no_grad():
            outs = model(*inputs)
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            ref32 = [o.float().cpu().numpy() for o in outs]
        onnx_path = os.path.join(args.work, f"{args.level}_{n}.onnx")
        t = time.time()
        with torch.no_grad():
            try:
                torch.onnx.export(model, tuple(inputs), onnx_path, opset_version=17, dynamo=False, do_constant_folding=True)
            except RuntimeError as e:
                # Some exporters' traces mix devices (a transformers Llama on CUDA: "cuda:0 and
                # cpu"); the graph does not depend on where it was traced, so trace on the CPU.
                if args.cpu or "device" not in str(e):
                    raise
                r["export_on_cpu"] = repr(e)[:200]
                model.cpu()
                torch.onnx.export(model, tuple(x.cpu() if torch.is_tensor(x) else x for x in inputs), onnx_path, opset_version=17,
                                  dynamo=False, do_constant_folding=True)
                model.to(DEV)
        r["export_s"] = round(time.time() - t, 1)
        tensors = [x for x in inputs if torch.is_tensor(x)]
        with torch.no_grad():
            try:
                outs = model.double()(*[x.double() if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs])
                outs = outs if isinstance(outs, (tuple, list)) else (outs,)
                ref64 = [o.double().cpu().numpy() for o in outs]
            except Exception as e:
                ref64 = None
                r["fp64_error"] = repr(e)[:200]
        input_files = []
        for j, x in enumerate(tensors):
            path = os.path.join(args.work, f"{args.level}_{n}-in{j}.bin")
            x.float().cpu().numpy().astype("<f4").tofile(path)
            input_files.append(path)
        del model, inputs, tensors
        if not args.cpu:
            torch.cuda.empty_cache()
        crate = f"kb-{args.level[-1]}-{n}"
        bundle = os.path.join(args.work, f"{crate}.json")
        crate_dir = os.path.join(args.work, crate)
        c = call([args.cli, "import", onnx_path, "--name", crate, "-o", crate_dir, "--force", "--bundle", bundle], 600)
        r["import"] = c.returncode == 0
        if c.returncode != 0:
            r["error"] = (c.stderr.strip().splitlines() or ["?"])[0][:300]
        else:
            r["kernels"] = [l.split()[0] for l in c.stderr.splitlines() if l.startswith("  K")]
            lock = os.path.join(args.work, f"{crate}.lock")
            t = time.time()
            c = subprocess.CompletedProcess([], 0, "", "") if args.no_tune else call(
                [args.cli, "tune", "--bundle", bundle, "--lockfile", lock, *([] if args.cpu else ["--device", "gpu"]),
                 *([] if args.cpu else ["--workload", "full"]), "--budget-evals", str(args.evals),
                 "--budget-secs", str(args.secs), "--seed", "1", "--message-format", "json",
                 *([] if args.total_secs is None else ["--budget-total-secs", str(args.total_secs)])],
                args.tune_timeout or 60 + len(r["kernels"]) * (args.secs + 120), stop_gently=args.tune_timeout is not None)
            r["tune_s"] = round(time.time() - t, 1)
            r["tune_rc"] = c.returncode
            if args.tune_log:
                with open(args.tune_log, "a") as f:
                    f.write(c.stdout)
            tuned = []
            for line in c.stdout.splitlines():
                try:
                    msg = json.loads(line)
                except Exception:
                    continue
                if msg.get("reason") == "tuned":
                    x = msg["result"]
                    tuned.append({k: x.get(k) for k in ("kernel", "reference_ns", "best_ns", "params", "evaluations", "failures", "reference_kept", "gflops", "seconds", "phases")})
            r["tuned"] = tuned
            if args.no_tune:
                r["untuned"] = True
            elif len(tuned) == len(r["kernels"]):
                r["kfoundry_ms"] = round(sum(x["best_ns"] for x in tuned) / 1e6, 4)
                r["reference_ms"] = round(sum(x["reference_ns"] for x in tuned) / 1e6, 4)
            else:
                r["tune_error"] = (c.stderr.strip().splitlines() or ["?"])[-1][:300]
            out_dir = os.path.join(args.work, f"{crate}-out")
            # Without a lockfile (a tune that wrote none) the references run, and the line says so.
            cmd = [args.cli, "run", onnx_path, "--name", crate, "--output-dir", out_dir, "--repeats", str(args.repeats)]
            if os.path.exists(lock):
                cmd += ["--lockfile", lock]
            else:
                r["run_without_lockfile"] = True
            cmd += [] if args.cpu else ["--device", "gpu"]
            for path in input_files:
                cmd += ["--input", path]
            c = call(cmd, 600)
            if c.returncode != 0:
                r["run_error"] = (c.stderr.strip().splitlines() or ["?"])[0][:300]
            else:
                summary = json.loads(c.stdout)
                r["graph_wall_ms"] = round(summary["graph_wall_ms"], 4)
                r["graph_kernels_ms"] = round(summary["kernels_ms"], 4)
                ours = [np.fromfile(o["file"], dtype="<f4").reshape(o["shape"]) for o in summary["outputs"]]
                if len(ours) != len(ref32) or any(a.size != b.size for a, b in zip(ours, ref32)):
                    r["run_error"] = f"outputs {[a.shape for a in ours]} where PyTorch gives {[b.shape for b in ref32]}"
                else:
                    ours = [a.reshape(b.shape) for a, b in zip(ours, ref32)]
                    r["correct_kernelbench"] = bool(all(np.allclose(a, b, atol=1e-2, rtol=1e-2) for a, b in zip(ours, ref32)))
                    r["max_abs_diff"] = float(max(np.max(np.abs(a.astype(np.float64) - b)) for a, b in zip(ours, ref32)))
                    if ref64 is not None:
                        norm = lambda v: float(np.sqrt(sum(np.sum(np.square(x)) for x in v)))
                        scale = max(norm(ref64), 1e-30)
                        ours_err = norm([a.astype(np.float64) - e for a, e in zip(ours, ref64)]) / scale
                        torch_err = norm([b.astype(np.float64) - e for b, e in zip(ref32, ref64)]) / scale
                        r["rel_err_kfoundry"], r["rel_err_torch_fp32"] = ours_err, torch_err
                        r["correct_fp32"] = bool(ours_err <= 2 * torch_err + 1e-6)
            shutil.rmtree(out_dir, ignore_errors=True)
        for path in input_files:
            os.remove(path)
        # What this problem wrote, but the lockfile: the crate (its weights, a model copy), the
        # model and its external data.
        shutil.rmtree(crate_dir, ignore_errors=True)
        for f in glob.glob(os.path.join(args.work, f"{args.level}_{n}.onnx*")) + [bundle]:
            if os.path.isfile(f):
                os.remove(f)
    except Exception as e:
        r["exception"] = repr(e)[:300]
    with open(args.results, "a") as out:
        out.write(json.dumps(r) + "\n")
    print(json.dumps({k: r.get(k) for k in ("problem", "eager_ms", "compile_ms", "kfoundry_ms", "graph_wall_ms", "correct_kernelbench", "correct_fp32", "import", "error", "tune_error", "run_error", "exception")}), flush=True)
