# Tables from bench/kernelbench/run.py's results: per problem, and per level the import count,
# the tuned count, the geomean speedup over eager and over torch.compile, and fast_p (the share of
# problems correct under KernelBench's rule and faster than PyTorch by more than p, KernelBench's
# metric). Speedups use the whole imported graph's wall time (`cargo kfoundry run`) where it was
# measured, else the sum of the tuned kernels' medians (marked "kernels only").
#   python3 bench/kernelbench/table.py RESULTS.jsonl [...]
import json, math, sys

rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip()]
by_level = {}
for r in rows:
    by_level.setdefault(r.get("level", "?"), []).append(r)
for level, rs in sorted(by_level.items()):
    print(f"\n### {level}: {len(rs)} problems\n")
    print("| problem | kernels | PyTorch eager ms | torch.compile ms | kfoundry ms (tuned) | reference ms | graph wall ms | vs eager | vs compile | correct (KernelBench / FP32) | note |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    se, sc, fast = [], [], []
    for r in sorted(rs, key=lambda r: int(r["problem"].split("_")[0])):
        k = r.get("graph_wall_ms") or r.get("kfoundry_ms")
        kernels_only = r.get("graph_wall_ms") is None and r.get("kfoundry_ms") is not None
        e, c = r.get("eager_ms"), r.get("compile_ms")
        ve = e / k if k and e else None
        vc = c / k if k and c else None
        if ve:
            se.append(ve)
            fast.append((ve, r.get("correct_kernelbench")))
        if vc:
            sc.append(vc)
        note = r.get("error") or r.get("tune_error") or r.get("run_error") or r.get("exception") or ""
        if kernels_only:
            note = "kernels only " + note
        if r.get("untuned"):
            note = "untuned (reference kernels) " + note
        yes = lambda v: "" if v is None else ("yes" if v else "NO")
        correct = "" if r.get("correct_kernelbench") is None else f"{yes(r.get('correct_kernelbench'))} / {yes(r.get('correct_fp32'))}"
        kept = sum(1 for t in r.get("tuned", []) if t.get("reference_kept"))
        if kept:
            note = f"{kept} reference(s) kept " + note
        f = lambda v, d=3: "" if v is None else f"{v:.{d}f}"
        print(f"| {r['problem']} | {len(r.get('kernels') or [])} | {f(e)} | {f(c)} | {f(k)} | {f(r.get('reference_ms'))} | {f(r.get('graph_wall_ms'))} | {f(ve, 2)} | {f(vc, 2)} | {correct} | {note[:120]} |")
    geo = lambda v: math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")
    imported = sum(1 for r in rs if r.get("import"))
    checked = [r for r in rs if r.get("correct_kernelbench") is not None]
    print(f"\ncorrect under KernelBench's rule: {sum(1 for r in checked if r['correct_kernelbench'])} of {len(checked)} run; under the FP32 rule: {sum(1 for r in checked if r.get('correct_fp32'))}")
    print(f"imported {imported} of {len(rs)}; tuned {len(se)}; geomean vs eager {geo(se):.3f}x; vs compile {geo(sc):.3f}x ({len(sc)} with compile)")
    unknown = sum(1 for _, ok in fast if ok is None)
    for p in (1.0, 1.5):
        hits = sum(1 for v, ok in fast if v > p and ok)
        print(f"fast_{p:g} over eager (correct and faster): {hits} of {len(rs)} ({100 * hits / max(len(rs), 1):.0f}%)"
              + (f"; {sum(1 for v, ok in fast if v > p and ok is None)} more faster with correctness not checked" if unknown else ""))
