#!/usr/bin/env python3
"""Decompress a Kernel Tuner cache file for Kernel Tuner's simulation mode, dropping the
`times` arrays (32 samples per record) that it does not read: a smaller file parses faster.

Usage: prepare_cache.py IN.json[.gz] OUT.json
OUT.json appears complete or not at all (written under a temporary name, then renamed).
"""
import gzip
import json
import os
import sys

src, dst = sys.argv[1:3]
opener = gzip.open if open(src, "rb").read(2) == b"\x1f\x8b" else open
with opener(src, "rt") as f:
    data = json.load(f)
for rec in data["cache"].values():
    rec.pop("times", None)
# Kernel Tuner's reader needs `cache` to be the last field (it reopens the file by cutting its
# last three characters); files written by other tools may order the fields otherwise
data["cache"] = data.pop("cache")
tmp = "%s.part.%d" % (dst, os.getpid())
with open(tmp, "w") as f:
    json.dump(data, f)
os.replace(tmp, dst)
