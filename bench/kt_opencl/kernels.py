"""The benchmark kernels of kfoundry's examples, translated into Kernel Tuner 1.5 terms.

Each entry below is a hand translation of one `#[kfoundry::evolve(...)]` annotation
(examples/src/lib.rs, examples/src/suite.rs) for `kernel_tuner.tune_kernel(lang="OpenCL")`:

| kfoundry annotation            | here / in Kernel Tuner                                            |
| ------------------------------ | ----------------------------------------------------------------- |
| `params(A = [..], B = pow2(..))` | `params`: tune_params, in the annotation's order (pow2 and ranges expanded) |
| `reference(...)`               | `reference`: the configuration whose output is the `answer`       |
| `require(...)`                 | `require`: restriction strings; `{size}` is replaced by the workload's size; constraints on sizes alone are `size_require` (checked, must hold) |
| `global = .., local = ..`      | `problem_size`, `grid_div`, `block_size_names`: KT's global size is grid × block with grid = ceil(problem_size / grid_div) |
| `buffers(...)`                 | `args`: one entry per kernel argument in signature order, with its length |
| `inputs(...)`                  | `inputs`; kfoundry's default is uniform(-1, 1) (kfoundry-rt/src/model/spec.rs, `Distribution::default`) |
| `check(buf, rtol, atol)`       | `checks`; verified by `make_verify` with kfoundry's rule (cargo-kfoundry/src/evaluate/compare.rs) |
| `workloads(...)`               | `workloads`                                                       |

How kfoundry fills buffers (cargo-kfoundry/src/evaluate/mod.rs, `Bench::prepare`): a buffer that is
read-only (`const`) or named in `inputs(...)` is drawn from its distribution; any other buffer is an
output and starts as NaN (poison), so an element a candidate forgets to write fails verification.
`make_arguments` does the same. Sizes are `int` kernel arguments; tuning parameters are `-D NAME=VALUE`
build options in kfoundry and `#define NAME VALUE` lines that Kernel Tuner prepends: the same thing.
None of the sources includes another file (checked by `load_source`).

`__local` pointer arguments (ConvGroupNorm's `wl`): kfoundry sizes them per configuration from
`buffers(...)`. Kernel Tuner's OpenCL backend cannot pass local memory arguments, so the argument list
holds a numpy scalar placeholder (`LOCAL_PLACEHOLDER`) there, and tune_kt.py wraps each compiled
kernel so that, at launch, the placeholder becomes `pyopencl.LocalMemory(len * 4)` with the length of
that configuration (`local_arg_bytes`): exactly kfoundry's size for every configuration.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KERNEL_DIR = os.path.join(REPO, "examples", "kernels")

# Stands in for a `__local` pointer in Kernel Tuner's argument list (see the module doc).
LOCAL_PLACEHOLDER = np.uint8(0)


# ---------------------------------------------------------------------------------------------
# Specification types


@dataclass(frozen=True)
class Dist:
    """An input distribution, as kfoundry's `Distribution`."""

    kind: str  # "uniform" | "normal" | "constant"
    a: float = -1.0  # lo / mean / value
    b: float = 1.0  # hi / std


UNIFORM_DEFAULT = Dist("uniform", -1.0, 1.0)  # kfoundry's Distribution::default()


def uniform(lo, hi):
    return Dist("uniform", float(lo), float(hi))


def constant(v):
    return Dist("constant", float(v))


@dataclass(frozen=True)
class Arg:
    """A kernel argument in signature order.

    role: "size" (an int scalar whose value is the size of the same name), "scalar" (drawn from
    `inputs`), "global" (a __global buffer), "local" (a __local buffer).
    length: for buffers, a function (params, sizes) -> elements (params only matter for "local").
    """

    name: str
    role: str
    dtype: str = "float32"
    read_only: bool = False
    length: Callable[[dict, dict], int] | None = None


@dataclass
class KernelDef:
    name: str  # kfoundry id: kfoundry-examples::<name>
    source: str  # file under examples/kernels
    entry: str  # the __kernel function
    params: dict  # name -> list of values, annotation order
    reference: dict
    require: list  # KT restriction strings; {size} placeholders
    size_require: list  # predicates of the sizes alone (must hold)
    args: list
    inputs: dict  # name -> Dist
    checks: list  # (buffer, rtol, atol)
    workloads: dict  # name -> sizes
    # Geometry in Kernel Tuner terms (functions of the sizes):
    problem_size: Callable[[dict], tuple]
    grid_div: tuple  # (grid_div_x, grid_div_y, grid_div_z)
    block_size_names: list
    # The same geometry as kfoundry writes it (for the docs / the report only).
    kfoundry_geometry: str = ""
    notes: list = field(default_factory=list)

    @property
    def kfoundry_id(self):
        return "kfoundry-examples::" + self.name


def pow2(lo, hi):
    """kfoundry's `pow2(lo..=hi)`: the powers of two from lo to hi, inclusive."""
    out, v = [], 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    return out


def irange(lo, hi):
    """kfoundry's `lo..=hi`."""
    return list(range(lo, hi + 1))


def ceil_div(a, b):
    return -(-a // b)


# ---------------------------------------------------------------------------------------------
# The kernels

F32 = "float32"

KERNELS: dict[str, KernelDef] = {}


def _add(k: KernelDef):
    KERNELS[k.name] = k


# Saxpy (examples/src/lib.rs)
#   params(WG = [32, 64, 128, 256], VEC = [1, 2, 4, 8], ITEMS = 1..=8, STRIDED = [0, 1]),
#   reference(WG = 64, VEC = 1, ITEMS = 1, STRIDED = 0),
#   require(STRIDED <= ITEMS - 1),
#   global = ceil_div(n, WG * VEC * ITEMS) * WG, local = WG,
#   buffers(x = n, y = n), inputs(x = uniform(-1.0, 1.0), y = uniform(-1.0, 1.0)),
#   check(y, rtol = 1e-6, atol = 1e-6), workloads(small(n = 1 << 16), large(n = 1 << 22))
_add(
    KernelDef(
        name="Saxpy",
        source="saxpy.cl",
        entry="saxpy",
        params={"WG": [32, 64, 128, 256], "VEC": [1, 2, 4, 8], "ITEMS": irange(1, 8), "STRIDED": [0, 1]},
        reference={"WG": 64, "VEC": 1, "ITEMS": 1, "STRIDED": 0},
        require=["STRIDED <= ITEMS - 1"],
        size_require=[],
        args=[
            Arg("n", "size", "int32"),
            Arg("a", "scalar", F32),  # no inputs(a = ...): kfoundry's default uniform(-1, 1)
            Arg("x", "global", F32, True, lambda p, s: s["n"]),
            Arg("y", "global", F32, False, lambda p, s: s["n"]),
        ],
        inputs={"x": uniform(-1.0, 1.0), "y": uniform(-1.0, 1.0)},
        checks=[("y", 1e-6, 1e-6)],
        workloads={"small": {"n": 1 << 16}, "large": {"n": 1 << 22}},
        problem_size=lambda s: (s["n"],),
        grid_div=(["WG", "VEC", "ITEMS"], None, None),
        block_size_names=["WG"],
        kfoundry_geometry="global = ceil_div(n, WG * VEC * ITEMS) * WG, local = WG",
    )
)

# Sgemm (examples/src/lib.rs)
#   params(WGX = [4, 8, 16, 32], WGY = [4, 8, 16, 32], TM = [1, 2, 4, 8], TN = [1, 2, 4, 8],
#          VEC = [1, 2, 4, 8], USE_LOCAL = [0, 1], TK = [8, 16, 32], UNROLL = [1, 2, 4, 8]),
#   reference(WGX = 8, WGY = 8, TM = 1, TN = 1, VEC = 1, USE_LOCAL = 0, TK = 8, UNROLL = 1),
#   require(TN % VEC == 0, n % VEC == 0, WGX * WGY <= 256, USE_LOCAL == 1 || TK == 8,
#           USE_LOCAL * TK * (WGY * TM + WGX * TN) <= 8192),
#   global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY), local = (WGX, WGY),
#   buffers(a = m * k, b = k * n, c = m * n), check(c, rtol = 1e-4, atol = 1e-4),
#   workloads(small(m = 128, n = 128, k = 128), large(m = 256, n = 256, k = 256))
# The two GEMMs' arguments and launch geometry (the same in both annotations).
_GEMM_LAUNCH = dict(
    problem_size=lambda s: (s["n"], s["m"]),
    grid_div=(["WGX", "TN"], ["WGY", "TM"], None),
    block_size_names=["WGX", "WGY"],
    kfoundry_geometry="global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY), local = (WGX, WGY)",
)
_GEMM_ARGS = [
    Arg("m", "size", "int32"),
    Arg("n", "size", "int32"),
    Arg("k", "size", "int32"),
    Arg("a", "global", F32, True, lambda p, s: s["m"] * s["k"]),
    Arg("b", "global", F32, True, lambda p, s: s["k"] * s["n"]),
    Arg("c", "global", F32, False, lambda p, s: s["m"] * s["n"]),
]
_add(
    KernelDef(
        name="Sgemm",
        source="sgemm.cl",
        entry="sgemm",
        params={
            "WGX": [4, 8, 16, 32],
            "WGY": [4, 8, 16, 32],
            "TM": [1, 2, 4, 8],
            "TN": [1, 2, 4, 8],
            "VEC": [1, 2, 4, 8],
            "USE_LOCAL": [0, 1],
            "TK": [8, 16, 32],
            "UNROLL": [1, 2, 4, 8],
        },
        reference={"WGX": 8, "WGY": 8, "TM": 1, "TN": 1, "VEC": 1, "USE_LOCAL": 0, "TK": 8, "UNROLL": 1},
        require=[
            "TN % VEC == 0",
            "{n} % VEC == 0",
            "WGX * WGY <= 256",
            "USE_LOCAL == 1 or TK == 8",
            "USE_LOCAL * TK * (WGY * TM + WGX * TN) <= 8192",
        ],
        size_require=[],
        args=_GEMM_ARGS,
        inputs={},  # a and b: kfoundry's default uniform(-1, 1); c is an output (NaN)
        checks=[("c", 1e-4, 1e-4)],
        workloads={"small": {"m": 128, "n": 128, "k": 128}, "large": {"m": 256, "n": 256, "k": 256}},
        **_GEMM_LAUNCH,
    )
)

# SuiteSgemm (examples/src/suite.rs)
#   params(WGX = [8, 16, 32], WGY = [8, 16, 32], TM = [1, 2, 4, 8], TN = [1, 2, 4, 8], VEC = [1, 2, 4],
#          USE_LOCAL = [0, 1], TK = [8, 16, 32], PAD = [0, 1, 4], LVEC = [1, 4], UNROLL = [1, 2, 4, 8],
#          PREFETCH = [0, 1]),
#   reference(WGX = 16, WGY = 16, TM = 1, TN = 1, VEC = 1, USE_LOCAL = 0, TK = 8, PAD = 0, LVEC = 1,
#             UNROLL = 1, PREFETCH = 0),
#   require(WGX * WGY <= 256, TN % VEC == 0, n % VEC == 0,
#           USE_LOCAL == 1 || (TK == 8 && PAD == 0 && LVEC == 1 && PREFETCH == 0),
#           USE_LOCAL * TK * (WGY * TM + WGX * TN + 2 * PAD) <= 12288,
#           LVEC == 1 || (k % 4 == 0 && n % 4 == 0)),
#   global/local as Sgemm, buffers(a = m * k, b = k * n, c = m * n), check(c, rtol = 1e-4, atol = 1e-4),
#   workloads(small(m = 128, n = 128, k = 128), full(m = 4096, n = 4096, k = 4096))
_add(
    KernelDef(
        name="SuiteSgemm",
        source="gemm.cl",
        entry="gemm",
        params={
            "WGX": [8, 16, 32],
            "WGY": [8, 16, 32],
            "TM": [1, 2, 4, 8],
            "TN": [1, 2, 4, 8],
            "VEC": [1, 2, 4],
            "USE_LOCAL": [0, 1],
            "TK": [8, 16, 32],
            "PAD": [0, 1, 4],
            "LVEC": [1, 4],
            "UNROLL": [1, 2, 4, 8],
            "PREFETCH": [0, 1],
        },
        reference={
            "WGX": 16, "WGY": 16, "TM": 1, "TN": 1, "VEC": 1, "USE_LOCAL": 0,
            "TK": 8, "PAD": 0, "LVEC": 1, "UNROLL": 1, "PREFETCH": 0,
        },
        require=[
            "WGX * WGY <= 256",
            "TN % VEC == 0",
            "{n} % VEC == 0",
            "USE_LOCAL == 1 or (TK == 8 and PAD == 0 and LVEC == 1 and PREFETCH == 0)",
            "USE_LOCAL * TK * (WGY * TM + WGX * TN + 2 * PAD) <= 12288",
            "LVEC == 1 or ({k} % 4 == 0 and {n} % 4 == 0)",
        ],
        size_require=[],
        args=_GEMM_ARGS,
        inputs={},
        checks=[("c", 1e-4, 1e-4)],
        workloads={"small": {"m": 128, "n": 128, "k": 128}, "full": {"m": 4096, "n": 4096, "k": 4096}},
        **_GEMM_LAUNCH,
    )
)

# SumDim1 (examples/src/suite.rs)
#   params(TX = [16, 32, 64, 128, 256], TY = pow2(1..=32), VEC = [1, 2, 4], ITEMS = [1, 2, 4, 8]),
#   reference(TX = 64, TY = 1, VEC = 1, ITEMS = 1), require(TX * TY <= 1024),
#   global = (ceil_div(cols, TX * VEC) * TX, TY, batch), local = (TX, TY, 1),
#   buffers(x = batch * rows * cols, out = batch * cols), inputs(x = uniform(0.0, 1.0)),
#   check(out, rtol = 1e-4, atol = 1e-4),
#   workloads(small(batch = 4, rows = 256, cols = 255), full(batch = 128, rows = 4096, cols = 4095))
_add(
    KernelDef(
        name="SumDim1",
        source="sum_dim1.cl",
        entry="sum_dim1",
        params={"TX": [16, 32, 64, 128, 256], "TY": pow2(1, 32), "VEC": [1, 2, 4], "ITEMS": [1, 2, 4, 8]},
        reference={"TX": 64, "TY": 1, "VEC": 1, "ITEMS": 1},
        require=["TX * TY <= 1024"],
        size_require=[],
        args=[
            Arg("batch", "size", "int32"),
            Arg("rows", "size", "int32"),
            Arg("cols", "size", "int32"),
            Arg("x", "global", F32, True, lambda p, s: s["batch"] * s["rows"] * s["cols"]),
            Arg("out", "global", F32, False, lambda p, s: s["batch"] * s["cols"]),
        ],
        inputs={"x": uniform(0.0, 1.0)},
        checks=[("out", 1e-4, 1e-4)],
        workloads={
            "small": {"batch": 4, "rows": 256, "cols": 255},
            "full": {"batch": 128, "rows": 4096, "cols": 4095},
        },
        # grid = (ceil(cols / (TX*VEC)), ceil(1 / 1), ceil(batch / 1)); block = (TX, TY, 1)
        problem_size=lambda s: (s["cols"], 1, s["batch"]),
        grid_div=(["TX", "VEC"], 1, 1),
        block_size_names=["TX", "TY"],
        kfoundry_geometry="global = (ceil_div(cols, TX * VEC) * TX, TY, batch), local = (TX, TY, 1)",
    )
)

# ConvGroupNorm (examples/src/suite.rs)
#   params(WG = pow2(64..=1024), PX = [1, 2, 4, 8], CB = [1, 2, 4], RECOMPUTE = [0, 1], WLOCAL = [0, 1]),
#   reference(WG = 256, PX = 1, CB = 1, RECOMPUTE = 0, WLOCAL = 0),
#   require(h >= 3, w >= 3, cout % groups == 0, (cout / groups) % CB == 0),
#   global = (WG * groups, n), local = (WG, 1),
#   buffers(x = n * cin * h * w, weight = cout * cin * 9, conv_bias = cout, bias = cout, scale = cout,
#           gamma = cout, beta = cout, out = n * cout * (h - 2) * (w - 2),
#           wl = max(1, WLOCAL * (cout / groups) * cin * 9)),
#   inputs(eps = constant(0.00001)), check(out, rtol = 1e-3, atol = 1e-3),
#   workloads(small(n = 2, cin = 8, h = 34, w = 34, cout = 32, groups = 8),
#             full(n = 128, cin = 8, h = 256, w = 256, cout = 32, groups = 8))
_add(
    KernelDef(
        name="ConvGroupNorm",
        source="conv_gn.cl",
        entry="conv_gn",
        params={"WG": pow2(64, 1024), "PX": [1, 2, 4, 8], "CB": [1, 2, 4], "RECOMPUTE": [0, 1], "WLOCAL": [0, 1]},
        reference={"WG": 256, "PX": 1, "CB": 1, "RECOMPUTE": 0, "WLOCAL": 0},
        require=["{cout} // {groups} % CB == 0"],
        size_require=[
            lambda s: s["h"] >= 3,
            lambda s: s["w"] >= 3,
            lambda s: s["cout"] % s["groups"] == 0,
        ],
        args=[
            Arg("n", "size", "int32"),
            Arg("cin", "size", "int32"),
            Arg("h", "size", "int32"),
            Arg("w", "size", "int32"),
            Arg("cout", "size", "int32"),
            Arg("groups", "size", "int32"),
            Arg("eps", "scalar", F32),
            Arg("x", "global", F32, True, lambda p, s: s["n"] * s["cin"] * s["h"] * s["w"]),
            Arg("weight", "global", F32, True, lambda p, s: s["cout"] * s["cin"] * 9),
            Arg("conv_bias", "global", F32, True, lambda p, s: s["cout"]),
            Arg("bias", "global", F32, True, lambda p, s: s["cout"]),
            Arg("scale", "global", F32, True, lambda p, s: s["cout"]),
            Arg("gamma", "global", F32, True, lambda p, s: s["cout"]),
            Arg("beta", "global", F32, True, lambda p, s: s["cout"]),
            Arg("out", "global", F32, False, lambda p, s: s["n"] * s["cout"] * (s["h"] - 2) * (s["w"] - 2)),
            Arg("wl", "local", F32, False, lambda p, s: max(1, p["WLOCAL"] * (s["cout"] // s["groups"]) * s["cin"] * 9)),
        ],
        inputs={"eps": constant(0.00001)},
        checks=[("out", 1e-3, 1e-3)],
        workloads={
            "small": {"n": 2, "cin": 8, "h": 34, "w": 34, "cout": 32, "groups": 8},
            "full": {"n": 128, "cin": 8, "h": 256, "w": 256, "cout": 32, "groups": 8},
        },
        # grid = (groups, n) work-groups of (WG, 1, 1) items
        problem_size=lambda s: (s["groups"], s["n"]),
        grid_div=(1, 1, None),
        block_size_names=["WG"],
        kfoundry_geometry="global = (WG * groups, n), local = (WG, 1)",
    )
)

# The kernel and workload each benchmark runs at (the small workloads are for local tests).
BENCHMARKS = [("Sgemm", "large"), ("SuiteSgemm", "full"), ("ConvGroupNorm", "full"), ("Saxpy", "large"), ("SumDim1", "full")]


# ---------------------------------------------------------------------------------------------
# Translation helpers


def get(name: str) -> KernelDef:
    for k, v in KERNELS.items():
        if k.lower() == name.lower() or v.kfoundry_id.lower() == name.lower():
            return v
    raise SystemExit(f"unknown kernel {name!r}; known: {', '.join(KERNELS)}")


def sizes_of(kdef: KernelDef, workload: str) -> dict:
    if workload not in kdef.workloads:
        raise SystemExit(f"{kdef.name} has no workload {workload!r}; it has {', '.join(kdef.workloads)}")
    return dict(kdef.workloads[workload])


LIBRARY_DIR = os.path.join(REPO, "crates", "kfoundry-tooling", "library")


def expand_includes(text: str, base_dir: str, depth: int = 0) -> str:
    """`text` with each `#include <kfoundry/NAME>` (kfoundry's template library) and
    `#include "file"` (relative to `base_dir`) line replaced by the file's text, as kfoundry's
    tooling expands them when it reads an annotation (crates/kfoundry-tooling/src/library.rs)."""
    if depth > 8:
        raise SystemExit("includes nest deeper than 8")
    out = []
    for line in text.splitlines(keepends=True):
        m = re.match(r'\s*#\s*include\s*(<kfoundry/[^>]+>|"[^"]+")\s*$', line)
        if not m:
            out.append(line)
            continue
        target = m.group(1)
        if target.startswith("<"):
            path = os.path.join(LIBRARY_DIR, target[1:-1])
        else:
            path = os.path.join(base_dir, target[1:-1])
        body = expand_includes(open(path).read(), os.path.dirname(path), depth + 1)
        out.append(body if body.endswith("\n") or not line.endswith("\n") else body + "\n")
    return "".join(out)


def load_source(kdef: KernelDef) -> str:
    """The kernel source as kfoundry builds it: its includes expanded."""
    path = os.path.join(KERNEL_DIR, kdef.source)
    return expand_includes(open(path).read(), KERNEL_DIR)


def restrictions(kdef: KernelDef, sizes: dict, max_work_group: int | None = None, max_item_sizes=None) -> list:
    """Kernel Tuner restriction strings at `sizes`. With the device's limits, also kfoundry's device
    check (cargo-kfoundry/src/evaluate/mod.rs, `check_launchable`: the work-group size and each local
    dimension within the device's limits), which kfoundry applies before a configuration enters the
    search (Kernel Tuner's own block-size check only looks at parameters named block_size_x/y/z)."""
    for i, pred in enumerate(kdef.size_require):
        if not pred(sizes):
            raise SystemExit(f"{kdef.name}: size constraint {i} does not hold at {sizes}: no configuration is valid")
    out = [r.format(**sizes) for r in kdef.require]
    names = [n for n in kdef.block_size_names if n in kdef.params]
    if max_work_group and names:
        out.append(" * ".join(names) + f" <= {int(max_work_group)}")
    if max_item_sizes:
        for d, n in enumerate(kdef.block_size_names):
            if n in kdef.params and d < len(max_item_sizes):
                out.append(f"{n} <= {int(max_item_sizes[d])}")
    return list(dict.fromkeys(out))


def kt_geometry(kdef: KernelDef, sizes: dict) -> dict:
    """Keyword arguments of tune_kernel / run_kernel that make kfoundry's global and local sizes."""
    gx, gy, gz = kdef.grid_div
    return dict(
        problem_size=kdef.problem_size(sizes),
        grid_div_x=gx,
        grid_div_y=gy,
        grid_div_z=gz,
        block_size_names=list(kdef.block_size_names),
    )


def kt_global_local(kdef: KernelDef, sizes: dict, params: dict):
    """(global, local) as Kernel Tuner computes them (3-D), using Kernel Tuner's own code."""
    from kernel_tuner import util

    geo = kt_geometry(kdef, sizes)
    names = list(geo["block_size_names"])
    util.append_default_block_size_names(names)
    threads, grid = util.setup_block_and_grid(
        geo["problem_size"], (geo["grid_div_x"], geo["grid_div_y"], geo["grid_div_z"]), params, names
    )
    return tuple(g * t for g, t in zip(grid, threads)), tuple(threads)


def local_arg_bytes(kdef: KernelDef, sizes: dict) -> dict:
    """{argument index: function(params) -> bytes} for the `__local` pointer arguments."""
    out = {}
    for i, a in enumerate(kdef.args):
        if a.role == "local":
            itemsize = np.dtype(a.dtype).itemsize
            out[i] = (lambda a=a, itemsize=itemsize: lambda p: a.length(p, sizes) * itemsize)()
    return out


def _draw(dist: Dist, n: int, dtype, rng_seed: int, threads: int) -> np.ndarray:
    """n values of dist, as kfoundry draws them (distribution-wise; the generator differs)."""
    dtype = np.dtype(dtype)
    out = np.empty(n, dtype=dtype)
    if dist.kind == "constant":
        out[:] = dist.a
        return out
    ss = np.random.SeedSequence(rng_seed)
    chunk = 1 << 24
    pieces = [(lo, min(n, lo + chunk)) for lo in range(0, n, chunk)]
    seeds = ss.spawn(len(pieces))

    def fill(i):
        lo, hi = pieces[i]
        g = np.random.Generator(np.random.PCG64(seeds[i]))
        view = out[lo:hi]
        if dist.kind == "uniform":
            if dtype == np.float32:
                g.random(out=view, dtype=np.float32)
            else:
                view[:] = g.random(hi - lo)
            view *= dtype.type(dist.b - dist.a)
            view += dtype.type(dist.a)
            # [lo, hi): float rounding of lo + (hi - lo) * u can reach hi; keep it below, as kfoundry does
            np.minimum(view, np.nextafter(dtype.type(dist.b), dtype.type(dist.a)), out=view)
        elif dist.kind == "normal":
            view[:] = g.normal(dist.a, dist.b, hi - lo)
        else:
            raise ValueError(dist.kind)

    if len(pieces) == 1:
        fill(0)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as ex:
            list(ex.map(fill, range(len(pieces))))
    return out


def make_arguments(kdef: KernelDef, sizes: dict, seed: int = 0, threads: int | None = None):
    """Kernel Tuner's argument list for `sizes`: sizes as np.int32, drawn scalars, input buffers drawn
    from their distributions, output buffers NaN, `__local` arguments as LOCAL_PLACEHOLDER."""
    threads = threads or min(16, os.cpu_count() or 1)
    args = []
    for i, a in enumerate(kdef.args):
        dist = kdef.inputs.get(a.name, UNIFORM_DEFAULT)
        if a.role == "size":
            args.append(np.dtype(a.dtype).type(sizes[a.name]))
        elif a.role == "scalar":
            args.append(_draw(dist, 1, a.dtype, seed * 1000 + i, 1)[0])
        elif a.role == "global":
            n = a.length({}, sizes)
            if a.read_only or a.name in kdef.inputs:
                args.append(_draw(dist, n, a.dtype, seed * 1000 + i, threads))
            else:
                arr = np.empty(n, dtype=a.dtype)
                arr.fill(np.nan)
                args.append(arr)
        elif a.role == "local":
            args.append(LOCAL_PLACEHOLDER)
        else:
            raise ValueError(a.role)
    return args


def check_indices(kdef: KernelDef):
    names = [a.name for a in kdef.args]
    return [(names.index(b), b, rtol, atol) for b, rtol, atol in kdef.checks]


def kfoundry_compare(x: np.ndarray, r: np.ndarray, rtol: float, atol: float, chunk: int = 1 << 21, threads: int | None = None):
    """kfoundry's element-wise rule (cargo-kfoundry/src/evaluate/compare.rs), in float64:
    where the reference is finite, |x - r| <= atol + rtol * |r| and x finite; where it is NaN, x is
    NaN; where it is +-inf, x equals it. Returns (mismatches, first index or None, max abs error).
    Large outputs are compared in chunks on several threads (numpy releases the GIL)."""
    x = np.ravel(x)
    r = np.ravel(r)
    if x.shape != r.shape:
        return (max(x.size, r.size), 0, math.inf)

    def part(lo):
        xs = x[lo : lo + chunk].astype(np.float64)
        rs = r[lo : lo + chunk].astype(np.float64)
        rf = np.isfinite(rs)
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(xs - rs)
            ok = np.where(rf, np.isfinite(xs) & (d <= atol + rtol * np.abs(rs)), np.where(np.isnan(rs), np.isnan(xs), xs == rs))
            both = rf & np.isfinite(xs)
            m = float(d[both].max()) if both.any() else 0.0
        nbad = int(ok.size - np.count_nonzero(ok))
        return nbad, (lo + int(np.argmin(ok))) if nbad else None, m

    starts = range(0, r.size, chunk)
    if len(starts) > 1:
        with concurrent.futures.ThreadPoolExecutor(max_workers=threads or min(16, os.cpu_count() or 1)) as ex:
            parts = list(ex.map(part, starts))
    else:
        parts = [part(0)]
    bad = sum(p[0] for p in parts)
    firsts = [p[1] for p in parts if p[1] is not None]
    return bad, (min(firsts) if firsts else None), max(p[2] for p in parts)


def make_verify(kdef: KernelDef, log: list | None = None):
    """A Kernel Tuner `verify(answer, result_host, atol)` applying kfoundry's rule with each checked
    buffer's own rtol and atol (Kernel Tuner's default check is atol only). Why a candidate failed
    is appended to `log` when given."""
    checks = check_indices(kdef)

    def verify(answer, result_host, atol=None):
        for idx, name, rtol, a in checks:
            res = result_host[idx]
            if res is None:
                if log is not None:
                    log.append(f"{name}: no result")
                return False
            bad, first, max_abs = kfoundry_compare(res, answer[idx], rtol, a)
            if bad:
                if log is not None:
                    i = first or 0
                    log.append(
                        f"`{name}`: {bad} of {np.size(answer[idx])} elements differ (first at {i}: "
                        f"{float(np.ravel(res)[i])} vs {float(np.ravel(answer[idx])[i])}); max abs error {max_abs:.3e}"
                    )
                return False
        return True

    return verify


def answer_list(kdef: KernelDef, outputs: dict) -> list:
    """Kernel Tuner's `answer`: the reference's checked outputs, None elsewhere."""
    names = [a.name for a in kdef.args]
    ans = [None] * len(names)
    for b, _, _ in kdef.checks:
        ans[names.index(b)] = outputs[b]
    return ans


def compute_answer(kdef: KernelDef, sizes: dict, args: list, platform: int, device: int) -> tuple[dict, float]:
    """Runs the reference configuration once through pyopencl, with the source and geometry Kernel
    Tuner would give it, and returns ({checked buffer: output}, kernel seconds)."""
    import pyopencl as cl
    from kernel_tuner import util

    params = dict(kdef.reference)
    glob, loc = kt_global_local(kdef, sizes, params)
    names = list(kdef.block_size_names)
    util.append_default_block_size_names(names)
    grid = tuple(g // t for g, t in zip(glob, loc))
    _, src = util.prepare_kernel_string(kdef.entry, load_source(kdef), params, grid, loc, names, "OpenCL", None)
    dev = cl.get_platforms()[platform].get_devices()[device]
    ctx = cl.Context(devices=[dev])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    knl = getattr(cl.Program(ctx, src).build(), kdef.entry)
    mf = cl.mem_flags
    dev_args, bufs = [], {}
    locals_ = local_arg_bytes(kdef, sizes)
    for i, (a, v) in enumerate(zip(kdef.args, args)):
        if a.role == "local":
            dev_args.append(cl.LocalMemory(locals_[i](params)))
        elif isinstance(v, np.ndarray):
            b = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=v)
            bufs[a.name] = b
            dev_args.append(b)
        else:
            dev_args.append(v)
    ev = knl(q, glob, loc, *dev_args)
    q.finish()
    seconds = (ev.profile.end - ev.profile.start) * 1e-9
    out = {}
    for b, _, _ in kdef.checks:
        i = [a.name for a in kdef.args].index(b)
        host = np.empty_like(args[i])
        cl.enqueue_copy(q, host, bufs[b])
        out[b] = host
    q.finish()
    for b in bufs.values():
        b.release()
    return out, seconds


def select_device(platform: int | None, device: int | None, select: str | None):
    """(platform index, device index) from explicit indices or a selector 'gpu', 'gpu:K', 'cpu',
    'cpu:K' (the K-th such device over all platforms, in the order the ICD loader lists them, which
    is the order `cargo kfoundry devices` uses) or text found in the device or platform name."""
    import pyopencl as cl

    plats = cl.get_platforms()
    if select is None:
        return (platform or 0, device or 0)
    s = select.lower()
    flat = [(pi, di, d) for pi, p in enumerate(plats) for di, d in enumerate(p.get_devices())]
    m = re.fullmatch(r"(gpu|cpu)(?::(\d+))?", s)
    if m:
        want = cl.device_type.GPU if m.group(1) == "gpu" else cl.device_type.CPU
        hits = [(pi, di) for pi, di, d in flat if d.type & want]
        k = int(m.group(2) or 0)
        if k >= len(hits):
            raise SystemExit(f"no {m.group(1)} number {k}: {len(hits)} found")
        return hits[k]
    for pi, di, d in flat:
        if s in d.name.lower() or s in d.platform.name.lower():
            return (pi, di)
    raise SystemExit(f"no OpenCL device matches {select!r}")
