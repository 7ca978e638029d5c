#!/usr/bin/env python3
"""Checks torch_suite.py's generator (the int64 array path it runs on CUDA) against plain
Python integers and against the golden values with which examples/tests/suite.rs checks the
Rust generator, itself checked bit for bit against the OpenCL `hash_fill` on PoCL there.

    python3 bench/test_hash.py            # needs numpy (or torch); CPU only

numpy's int64 arithmetic stands in for torch's: the function uses only &, ^, >>, <<, *, +.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_suite import M32, hash_codes, mix_int  # noqa: E402

GOLDEN = [
    (0, 0, -1.0),
    (0, 1, -0.3050144910812378),
    (1, 0, -0.3050144910812378),
    (7016, 12345, 0.4451010227203369),
    (4294967295, 4294967295, -0.6536140441894531),
    (123456789, 2146959359, 0.08108901977539062),
    (42, 1000000007, -0.09798789024353027),
]


def plain(seed, i):
    h = mix_int((mix_int(i) + mix_int(seed)) & M32)
    return ((h >> 8) - 8388608) / 8388608.0


def main():
    try:
        import torch as lib

        def arr(v):
            return lib.tensor(v, dtype=lib.int64)

        def f32(c):
            return (c.to(lib.float32) * (1.0 / 8388608.0)).tolist()
    except ImportError:
        import numpy as lib

        def arr(v):
            return lib.array(v, dtype=lib.int64)

        def f32(c):
            return (c.astype(lib.float32) * lib.float32(1.0 / 8388608.0)).tolist()

    for s, i, v in GOLDEN:
        assert plain(s, i) == v, (s, i, plain(s, i), v)
        got = f32(hash_codes(arr([i]), s))[0]
        assert got == v, (s, i, got, v)
    # a range of indices, including those near 2^31 and 2^32, for several seeds
    idx = list(range(0, 200_000)) + list(range(2**31 - 1000, 2**31 + 1000)) + list(range(2**32 - 1000, 2**32))
    for s in (0, 3, 7016, 0xDEADBEEF, M32):
        got = f32(hash_codes(arr(idx), s))
        want = [plain(s, i) for i in idx]
        bad = sum(1 for g, w in zip(got, want) if g != w)
        assert bad == 0, f"seed {s}: {bad} of {len(idx)} differ"
        assert all(-1.0 <= g < 1.0 for g in got)
    print(f"ok: {lib.__name__} int64 path == plain integers == golden values ({len(GOLDEN)} golden, {5 * len(idx)} compared)")


if __name__ == "__main__":
    main()
