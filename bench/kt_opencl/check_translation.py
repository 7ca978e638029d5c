"""Cross-checks the hand translation in kernels.py against kfoundry's own specification of each kernel.

kfoundry's side is read from a bundle (`cargo kfoundry bundle -o examples-bundle.json`: every
annotation as kfoundry parsed it, expressions included) and evaluated here by a separate small
interpreter of kfoundry's expression language, with kfoundry's validity rule
(`KernelSpec::geometry` in kfoundry-rt/src/model/spec.rs plus `check_launchable` in
cargo-kfoundry/src/evaluate/mod.rs: every `require` holds, every global and local size is positive,
global is a multiple of local, the work-group fits the device). Kernel Tuner's side is what Kernel
Tuner itself computes from kernels.py: its Searchspace (python-constraint, the restriction strings)
and its grid/block arithmetic (`util.setup_block_and_grid`).

For every kernel and workload it checks: parameter domains and order, reference, signature (names,
roles, types, const), inputs, checks, workload sizes, buffer lengths (and the `__local` length of
every configuration); the set of valid configurations (equal as sets, not only in number); global
and local size of every valid configuration; and, where an H200 brute force of kfoundry exists
(bench/spaces-dev/h200_*.json.gz), that its keys are exactly Kernel Tuner's valid configurations
and its `valid_configurations` equals the count.

Usage: python check_translation.py [--bundle FILE] [--json OUT]
Exit status 1 on any mismatch.
"""

import argparse
import gzip
import itertools
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import kernels as K  # noqa: E402

# Device limits kfoundry checks (check_launchable): (max work-group size, max work-item sizes).
DEVICES = {
    "h200": (1024, (1024, 1024, 64)),  # NVIDIA H200 through NVIDIA's OpenCL
    "pocl": (4096, (4096, 4096, 4096)),  # PoCL 3.1 CPU device of the development machine
}
SPACES = os.path.join(K.REPO, "bench", "spaces-dev")


def kf_expr(text):
    """A kfoundry expression (as the bundle prints it) as a Python function of an environment."""
    if re.search(r"!(?!=)", text):
        raise ValueError(f"unary ! not supported here: {text}")
    py = text.replace("||", " or ").replace("&&", " and ")
    py = re.sub(r"(?<![/])/(?![/])", "//", py)
    code = compile(py, text, "eval")
    funcs = {
        "ceil_div": lambda a, b: (a // b) + (a % b != 0),
        "round_up": lambda a, b: ((a // b) + (a % b != 0)) * b,
        "min": min,
        "max": max,
        "log2": lambda a: a.bit_length() - 1,
    }

    def f(env):
        return int(eval(code, {"__builtins__": {}}, {**funcs, **env}))

    return f


def kf_geometry(spec, params, sizes, limits):
    """kfoundry's (global, local) of params at sizes, or None when the configuration is not valid."""
    env = {**params, **sizes}
    for r in spec["require"]:
        if not kf_expr(r)(env):
            return None
    glob = [kf_expr(e)(env) for e in spec["global"]]
    loc = [kf_expr(e)(env) for e in spec["local"]] if spec.get("local") else None
    if any(g <= 0 for g in glob) or (loc and any(v <= 0 for v in loc)):
        return None
    if loc:
        if any(g % l for g, l in zip(glob, loc)):
            return None
        max_wg, max_items = limits
        prod = 1
        for v in loc:
            prod *= v
        if prod > max_wg or any(v > max_items[d] for d, v in enumerate(loc)):
            return None
    pad = lambda v: tuple(v) + (1,) * (3 - len(v))  # noqa: E731
    return pad(glob), pad(loc) if loc else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default=os.path.join(HERE, "examples-bundle.json"))
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    from kernel_tuner.searchspace import Searchspace

    bundle = {k["spec"]["id"]: k["spec"] for k in json.load(open(a.bundle))["kernels"]}
    problems = []
    figures = []

    def need(cond, what):
        if not cond:
            problems.append(what)
            print("  MISMATCH:", what)

    for name, kdef in K.KERNELS.items():
        spec = bundle[kdef.kfoundry_id]
        print(f"{name}:")
        # parameters, reference, signature, inputs, checks, workloads
        need([(p["name"], p["values"]) for p in spec["params"]] == list(kdef.params.items()), f"{name}: params")
        need(spec["reference"] == kdef.reference, f"{name}: reference")
        need(K.load_source(kdef) == spec["source"], f"{name}: source differs from the bundle's (re-bundle?)")
        need(spec["signature"]["name"] == kdef.entry, f"{name}: entry point")
        sig = spec["signature"]["args"]
        need(len(sig) == len(kdef.args), f"{name}: argument count")
        tymap = {"i32": "int32", "f32": "float32", "u32": "uint32", "i64": "int64", "u64": "uint64", "f64": "float64"}
        for s, mine in zip(sig, kdef.args):
            if s["kind"] == "scalar":
                role = "size" if s["name"] in spec["sizes"] else "scalar"
                ok = (s["name"], role, tymap[s["ty"]]) == (mine.name, mine.role, mine.dtype)
            else:
                role = "local" if s["space"] == "local" else "global"
                ok = (s["name"], role, tymap[s["elem"]]) == (mine.name, mine.role, mine.dtype) and (
                    role == "local" or s["read_only"] == mine.read_only
                )
            need(ok, f"{name}: argument {s} vs {mine.name}/{mine.role}/{mine.dtype}")
        for arg, d in spec["inputs"].items():
            mine = kdef.inputs.get(arg)
            want = (
                K.Dist("uniform", d["lo"], d["hi"]) if d["kind"] == "uniform"
                else K.Dist("constant", d["value"]) if d["kind"] == "constant"
                else K.Dist("normal", d["mean"], d["std"])
            )
            need(mine == want, f"{name}: input {arg}: {d} vs {mine}")
        need(set(kdef.inputs) == set(spec["inputs"]), f"{name}: inputs named")
        need([(c["buffer"], c["rtol"], c["atol"]) for c in spec["checks"]] == kdef.checks, f"{name}: checks")
        need({w["name"]: w["sizes"] for w in spec["workloads"]} == kdef.workloads, f"{name}: workloads")

        names = list(kdef.params)
        for workload, sizes in kdef.workloads.items():
            for devname, limits in DEVICES.items():
                if devname == "pocl" and workload != "small":
                    continue
                # buffer lengths (global ones are size-only)
                for arg in kdef.args:
                    if arg.role == "global":
                        need(arg.length({}, sizes) == kf_expr(spec["buffers"][arg.name])(dict(sizes)),
                             f"{name}@{workload}: length of {arg.name}")
                # kfoundry's valid configurations and geometry, by enumeration
                kf_valid = {}
                for values in itertools.product(*kdef.params.values()):
                    p = dict(zip(names, values))
                    g = kf_geometry(spec, p, sizes, limits)
                    if g is not None:
                        kf_valid[values] = g
                # Kernel Tuner's space from the translation (as tune_kt.py builds it)
                restr = K.restrictions(kdef, sizes, limits[0], limits[1])
                ss = Searchspace(dict(kdef.params), restr, limits[0])
                kt_valid = set(tuple(c) for c in ss.list)
                need(kt_valid == set(kf_valid), f"{name}@{workload}/{devname}: valid sets differ "
                     f"(kfoundry {len(kf_valid)}, KT {len(kt_valid)}, only kfoundry {len(set(kf_valid) - kt_valid)}, "
                     f"only KT {len(kt_valid - set(kf_valid))})")
                # the geometry of every valid configuration, and the local lengths
                geo_bad = 0
                examples = []
                for values, (kg, kl) in kf_valid.items():
                    p = dict(zip(names, values))
                    tg, tl = K.kt_global_local(kdef, sizes, p)
                    if (tg, tl) != (kg, kl):
                        geo_bad += 1
                    if len(examples) < 3 or values == tuple(kdef.reference[n] for n in names):
                        examples.append({"params": p, "kfoundry": [kg, kl], "kernel_tuner": [tg, tl]})
                    for i, arg in enumerate(kdef.args):
                        if arg.role == "local":
                            want = kf_expr(spec["buffers"][arg.name])({**p, **sizes}) * 4
                            if K.local_arg_bytes(kdef, sizes)[i](p) != want:
                                geo_bad += 1
                need(geo_bad == 0, f"{name}@{workload}/{devname}: {geo_bad} configurations with other geometry or local size")
                product = 1
                for v in kdef.params.values():
                    product *= len(v)
                fig = {"kernel": name, "workload": workload, "device_limits": devname, "product": product,
                       "kfoundry_valid": len(kf_valid), "kt_valid": len(kt_valid), "geometry_mismatches": geo_bad,
                       "examples": examples[:4]}
                # the H200 brute force of kfoundry, if any
                bf = os.path.join(SPACES, f"h200_{name.lower()}_{workload}.json.gz")
                if devname == "h200" and os.path.exists(bf):
                    d = json.load(gzip.open(bf))
                    order = d["tune_params_keys"]
                    keys = set(tuple(int(x) for x in key.split(",")) for key in d["cache"])
                    kt_keys = set(tuple(dict(zip(names, c))[n] for n in order) for c in kt_valid)
                    need(d["kfoundry"]["valid_configurations"] == len(kt_valid), f"{name}@{workload}: brute-force valid count")
                    need(keys == kt_keys, f"{name}@{workload}: brute-force keys differ from KT's space")
                    fig["h200_brute_force"] = {"file": os.path.basename(bf), "valid_configurations": d["kfoundry"]["valid_configurations"],
                                               "keys": len(keys), "fingerprint": d["kfoundry"]["fingerprint"]}
                figures.append(fig)
                print(f"  {workload} ({devname} limits): product {product}, kfoundry valid {len(kf_valid)}, "
                      f"Kernel Tuner valid {len(kt_valid)}, geometry mismatches {geo_bad}"
                      + (f", H200 brute force {fig['h200_brute_force']['keys']} keys / valid_configurations "
                         f"{fig['h200_brute_force']['valid_configurations']}" if "h200_brute_force" in fig else ""))
    if a.json:
        json.dump(figures, open(a.json, "w"), indent=1, default=list)
    print("OK: the translation matches kfoundry's specification" if not problems else f"{len(problems)} mismatches")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
