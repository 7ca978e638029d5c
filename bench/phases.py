"""Where a tune's wall time went, summed over its kernels, from `tune --message-format json`
output (each `tuned` message's `seconds` and `phases`).

    python3 bench/phases.py TUNE.jsonl [...]   (a .gz file is read decompressed)
"""
import gzip
import json
import signal
import sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the output quietly

rows = []
for path in sys.argv[1:]:
    for line in (gzip.open(path, "rt") if path.endswith(".gz") else open(path)):
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "tuned" and m["result"].get("phases"):
            rows.append(m["result"])
if not rows:
    sys.exit("no tuned message with phases")
total = sum(r["seconds"] for r in rows)
ph = {k: sum(r["phases"][k] for r in rows) for k in ("start", "search", "proof", "remeasure")}
parts = {k: sum(r["phases"]["proof_parts"][k] for r in rows) for k in rows[0]["phases"]["proof_parts"]}
cases = sum(r.get("proof_cases", 0) for r in rows)
print(f"{len(rows)} tunes, {total:.1f} s in all ({total / len(rows):.2f} s a tune), {cases} proof cases")
other = total - sum(ph.values())
for k, v in list(ph.items()) + [("other", other)]:
    print(f"  {k:<10} {v:8.1f} s  {100 * v / total:5.1f}%")
print("  proof parts (worker-timed):")
for k, v in sorted(parts.items(), key=lambda kv: -kv[1]):
    print(f"    {k:<16} {v:8.1f} s  {100 * v / total:5.1f}%")
print("  slowest tunes outside the search:")
for r in sorted(rows, key=lambda r: r["search_seconds"] - r["seconds"])[:8]:
    p = r["phases"]
    print(f"    {r['kernel']:<28} {r['workload']:<6} total {r['seconds']:6.2f}  search {p['search']:5.2f}  start {p['start']:4.2f}  proof {p['proof']:5.2f} ({r.get('proof_cases', 0)} cases)  remeasure {p['remeasure']:4.2f}")
