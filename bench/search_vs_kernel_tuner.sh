#!/usr/bin/env bash
# kfoundry's search engine against Kernel Tuner 1.5.0, offline, on every brute-forced space in
# ../shared/spaces (Kernel Tuner cache files). Run by hand from anywhere:
#
#   bash bench/search_vs_kernel_tuner.sh            # 100 seeds, bayes_opt too
#   SEEDS=20 BO_SEEDS=4 JOBS=2 bash bench/search_vs_kernel_tuner.sh   # quicker
#   BO_SHORT=0 bash ...   # bayes_opt gets the full budget (by default it stops at the end of
#                         # the score axis, M_0.96: the scores are the same, @500 may be lower)
#   REUSE_KT=1 bash bench/search_vs_kernel_tuner.sh  # keep Kernel Tuner traces already in bench/out
#
# Prints, per space and strategy, the methodology score (Willemsen et al. 2024, as in
# shared/spaces/README.md; on the evaluation axis and on the time axis) and the median
# fraction of the optimum reached after 50, 100, 200 and 500 evaluations. Every strategy is
# scored by the same code (kfoundry_search::methodology) from its sequence of first visits.
#
# Needs: cargo, python3 (with venv), PyPI reachable on the first run (kernel_tuner==1.5.0 is
# installed into bench/.venv). Scratch files go to bench/out/.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SPACES="${SPACES:-$(cd "$ROOT/../shared/spaces" 2>/dev/null && pwd || echo /work/shared/spaces)}"
SEEDS="${SEEDS:-100}"
BO_SEEDS="${BO_SEEDS:-100}"  # Kernel Tuner's bayes_opt takes 0.5-3 min per run of 1400 evaluations
BO_SHORT="${BO_SHORT:-1}"
JOBS="${JOBS:-$(nproc)}"
STRATEGIES="${STRATEGIES:-random_sample genetic_algorithm simulated_annealing dual_annealing diff_evo pso greedy_ils bayes_opt}"
OUT="$HERE/out"
VENV="$HERE/.venv"
mkdir -p "$OUT"

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import kernel_tuner, importlib.metadata as m; assert m.version("kernel_tuner") == "1.5.0"' 2>/dev/null; then
  echo "installing kernel_tuner==1.5.0 into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q kernel_tuner==1.5.0
fi

echo "building the scorer (cargo, release)" >&2
MANIFEST="$ROOT/cargo-kfoundry/search/Cargo.toml"
cargo build -q --release --manifest-path "$MANIFEST" --example bench
TARGET="$(cargo metadata --format-version 1 --no-deps --manifest-path "$MANIFEST" | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
BENCH="$TARGET/release/examples/bench"

START=$(date +%s)
FILES=("$SPACES"/*.json.gz)
JOBLIST="$OUT/jobs.txt"
: > "$JOBLIST"
for f in "${FILES[@]}"; do
  name="$(basename "$f" .json.gz)"
  "$VENV/bin/python" "$HERE/prepare_cache.py" "$f" "$OUT/$name.json"
  budget="$("$BENCH" --budget "$f")"
  axis_end="$("$BENCH" --axis-end "$f")"
  echo "$budget" > "$OUT/$name.budget"
  [ "${REUSE_KT:-0}" = 1 ] || rm -f "$OUT/kt-$name-"*.jsonl
  for s in $STRATEGIES; do
    evals="$budget"
    if [ "$s" = bayes_opt ]; then
      n="$BO_SEEDS"; chunk=1
      # its cost grows with the evaluations done; nothing after M_0.96 enters the scores
      [ "$BO_SHORT" = 1 ] && evals="$axis_end"
    else n="$SEEDS"; chunk=25; fi
    for ((a = 0; a < n; a += chunk)); do
      b=$((a + chunk < n ? a + chunk : n))
      # REUSE_KT=1 keeps the traces of an earlier run (same seeds, same budget)
      [ -s "$OUT/kt-$name-$s-$a.jsonl" ] && continue
      echo "$OUT/$name.json $s $a $b $evals $OUT/kt-$name-$s-$a.jsonl" >> "$JOBLIST"
    done
  done
done
# slow bayes_opt jobs first, so the cores stay busy to the end
sort -t' ' -k2,2 -s <(grep ' bayes_opt ' "$JOBLIST") > "$JOBLIST.sorted" || true
grep -v ' bayes_opt ' "$JOBLIST" >> "$JOBLIST.sorted" || true
echo "Kernel Tuner: $(wc -l < "$JOBLIST.sorted") jobs on $JOBS processes" >&2
xargs -r -P "$JOBS" -L 1 "$VENV/bin/python" -W ignore "$HERE/kt_runner.py" < "$JOBLIST.sorted" 2> "$OUT/kt-stderr.log" \
  || echo "warning: some Kernel Tuner jobs failed, see $OUT/kt-stderr.log" >&2
echo "Kernel Tuner done after $(( $(date +%s) - START )) s; running kfoundry and scoring" >&2

# kfoundry runs: one process per space, in parallel
for f in "${FILES[@]}"; do
  name="$(basename "$f" .json.gz)"
  "$BENCH" "$f" "$SEEDS" "$OUT/kt-$name-"*.jsonl > "$OUT/table-$name.md" &
done
wait

echo "# kfoundry search vs Kernel Tuner 1.5.0 (simulation mode)"
echo
OS="$( (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") || uname -s)"
echo "date $(date -u +%Y-%m-%d), $OS $(uname -m), $(nproc) cores; seeds: $SEEDS (Kernel Tuner bayes_opt: $BO_SEEDS); wall time $(( $(date +%s) - START )) s"
echo "score: mean standardised performance over the budget axis, 0 = random search, 1 = optimum;"
echo "@N: median over seeds of optimum time / best time found after N evaluations"
echo
for f in "${FILES[@]}"; do
  cat "$OUT/table-$(basename "$f" .json.gz).md"
done
