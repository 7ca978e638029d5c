#!/usr/bin/env python3
"""Runs a command and writes each line of its stdout with the wall-clock second it arrived at.

    python stamp.py --out trace.jsonl [--timeout S] [--kill-after K] [--meta KEY=VALUE ...] -- CMD ARGS...

`cargo kfoundry tune --message-format json` prints one JSON message per line as it happens (an
`evaluation` message right after each evaluation, cargo-kfoundry/src/pipeline/search.rs) but the
messages carry no time. The clock starts here, before the command is started, so the first
evaluation's second includes the tool's whole start-up.

Output (JSON lines, flushed as they come):
  {"type": "meta", "tool": "kfoundry", "argv": [...], "t0_unix": ..., KEY: VALUE, ...}
  {"type": "msg", "t": s, "msg": {...}}      a JSON line of the command
  {"type": "text", "t": s, "text": "..."}    any other line
  {"type": "end", "t": s, "rc": n, "signalled": "INT" | "KILL" | null}

With --timeout, the command gets SIGINT after S seconds (kfoundry then stops its search and
records what it has) and SIGKILL K seconds later. stderr passes through.
"""

import time

T0 = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: stamp.py --out FILE [--timeout S] [--kill-after K] [--meta K=V ...] -- CMD ...")
    i = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float)
    ap.add_argument("--kill-after", type=float, default=15.0)
    ap.add_argument("--meta", action="append", default=[])
    a = ap.parse_args(argv[:i])
    cmd = argv[i + 1 :]
    out = open(a.out, "w")
    lock = threading.Lock()

    def emit(obj):
        with lock:
            out.write(json.dumps(obj) + "\n")
            out.flush()

    meta = {"type": "meta", "tool": "kfoundry", "argv": cmd, "t0_unix": T0}
    for kv in a.meta:
        k, _, v = kv.partition("=")
        try:
            meta[k] = json.loads(v)
        except ValueError:
            meta[k] = v
    emit(meta)
    proc = None

    def forward(signum, _frame):
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, bufsize=1, text=True, errors="replace")
    signalled = {"sig": None}

    def stopper():
        time.sleep(max(0.0, a.timeout - (time.time() - T0)))
        if proc.poll() is None:
            signalled["sig"] = "INT"
            proc.send_signal(signal.SIGINT)
            time.sleep(a.kill_after)
            if proc.poll() is None:
                signalled["sig"] = "KILL"
                proc.kill()

    if a.timeout:
        threading.Thread(target=stopper, daemon=True).start()

    for line in proc.stdout:
        t = time.time() - T0
        line = line.rstrip("\n")
        if not line:
            continue
        try:
            emit({"type": "msg", "t": round(t, 6), "msg": json.loads(line)})
        except ValueError:
            emit({"type": "text", "t": round(t, 6), "text": line})
    rc = proc.wait()
    emit({"type": "end", "t": round(time.time() - T0, 6), "rc": rc, "signalled": signalled["sig"]})
    out.close()
    return 0 if rc == 0 else (rc if rc > 0 else 128 - rc)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
