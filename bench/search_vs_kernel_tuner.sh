#!/usr/bin/env bash
# kfoundry's search engine against Kernel Tuner 1.5.0, offline, on brute-forced search spaces
# (Kernel Tuner cache files, *.json.gz or *.json). Run by hand from anywhere:
#
#   bash bench/search_vs_kernel_tuner.sh [SPACE.json.gz ...]   # default: every space in $SPACES
#   SEEDS=20 BO_SEEDS=4 JOBS=2 bash bench/search_vs_kernel_tuner.sh   # quicker
#   STRATEGIES="random_sample pso" KF_VARIANTS=default bash ...        # fewer rows
#   FRESH=1 bash ...   # discard the traces of earlier runs
#
# Every run of every strategy is a job of one pool of $JOBS processes: Kernel Tuner's
# strategies replayed by kt_runner.py (in chunks of seeds) and kfoundry's variants by the
# scorer (`bench --trace`), side by side. As soon as all the traces of a space are there, the
# space is scored, its table printed and written to $OUT/table-SPACE.md; at the end a summary
# across spaces is printed and written to $OUT/summary.md.
#
# Per space and strategy the table gives the methodology score (Willemsen et al. 2024, as in
# shared/spaces/README.md; on the evaluation axis, with its 90% bootstrap interval, and on the
# time axis), the share of the score axis where the median best-so-far is worse than random
# search's ("below random"), and the median fraction of the optimum reached after 50, 100, 200
# and 500 evaluations. The summary gives per strategy the mean score over the spaces, the
# worst space, and the below-random share (mean over spaces, and the worst space's). Every
# strategy is scored by the same code (kfoundry_search::methodology) from its sequence of
# first visits.
#
# Resuming: each chunk of traces is one file, $OUT/SPACE/kt-STRATEGY-sA-B-eEVALS.jsonl or
# $OUT/SPACE/kf-VARIANT-sA-B-eEVALS-ENGINE.jsonl (seeds A..B-1, runs of EVALS evaluations,
# ENGINE a hash of the scorer binary, so that kfoundry traces are redone when the engine
# changes), written under a temporary name and renamed when complete. A rerun with the same
# settings reuses every complete chunk and redoes only the missing ones; an interrupted run
# (Ctrl-C, kill) stops its jobs and leaves no partial chunk behind under a final name.
#
# Environment (all optional):
#   SPACES      directory of the spaces when no file is given (default ../shared/spaces beside
#               the repository, else /work/shared/spaces)
#   OUT         output and scratch folder (default bench/out)
#   VENV        Python venv with kernel_tuner==1.5.0 (default bench/.venv; created and
#               installed there when missing, which needs PyPI once)
#   BENCH       a prebuilt scorer binary (the example `bench` of kfoundry-search); without it,
#               the scorer is built with cargo from MANIFEST
#   MANIFEST    Cargo.toml of kfoundry-search (default crates/kfoundry-search/Cargo.toml); the
#               binary is looked up in the target directory cargo metadata reports (so
#               CARGO_TARGET_DIR is respected)
#   SEEDS       seeds per strategy (default 100)
#   BO_SEEDS    seeds of Kernel Tuner's bayes_opt (default 100; 0.5-3 min per run)
#   BO_SHORT    1 (default): bayes_opt stops at the end of the score axis, M_0.96 (the scores
#               are the same, @500 may be lower); 0: it gets the full budget
#   STRATEGIES  Kernel Tuner strategies, space-separated (default: random_sample
#               genetic_algorithm simulated_annealing dual_annealing diff_evo pso greedy_ils
#               bayes_opt; empty: none, and no venv is needed)
#   KF_VARIANTS kfoundry variants, comma-separated (unset: default, gradient, previous,
#               single-cell, no-screening; empty: none; see crates/kfoundry-search/examples/bench.rs)
#   CHUNK       seeds per job (default 25; bayes_opt: 1)
#   JOBS        parallel jobs (default: the number of cores)
#   MIN_AXIS    skip spaces whose score axis ends before this many evaluations (default 0)
#   FRESH       1: delete the earlier traces and tables of the spaces first (default 0;
#               reusing is the default, the REUSE_KT=1 of earlier versions is not needed)
#   TITLE       the summary's title (default "kfoundry search vs Kernel Tuner 1.5.0
#               (simulation mode)")
#   CURVE       set: the tables also list the standardised curve P(M)
#
# Needs: bash, python3 (with venv, for Kernel Tuner), cargo unless BENCH is given. Job errors
# go to $OUT/jobs-stderr.log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"

# One job of the pool (called by xargs): a line of tab-separated fields
# KIND SPACE_NAME SPACE_FILE KT_CACHE STRATEGY SEED_FROM SEED_TO EVALS OUT_FILE.
if [ "${1:-}" = --job ]; then
  IFS=$'\t' read -r kind name space kt_cache strategy a b evals out <<< "$2"
  t0=$SECONDS rc=0
  case "$kind" in
    kt) "$VENV/bin/python" -W ignore "$HERE/kt_runner.py" "$kt_cache" "$strategy" "$a" "$b" "$evals" "$out" 2>> "$OUT/jobs-stderr.log" || rc=$? ;;
    kf) "$BENCH" --trace "$space" "$strategy" "$a" "$b" "$evals" "$out" 2>> "$OUT/jobs-stderr.log" || rc=$? ;;
    *) echo "unknown job kind $kind" >&2; exit 2 ;;
  esac
  if [ "$rc" = 0 ]; then
    echo "  done: $name $kind $strategy seeds $a..$((b - 1)) ($((SECONDS - t0)) s)" >&2
  else
    echo "  FAILED (status $rc): $name $kind $strategy seeds $a..$((b - 1)), see $OUT/jobs-stderr.log" >&2
  fi
  exit "$rc"
fi

SEEDS="${SEEDS:-100}"
BO_SEEDS="${BO_SEEDS:-100}"
BO_SHORT="${BO_SHORT:-1}"
JOBS="${JOBS:-$(nproc)}"
CHUNK="${CHUNK:-25}"
MIN_AXIS="${MIN_AXIS:-0}"
FRESH="${FRESH:-0}"
STRATEGIES="${STRATEGIES-random_sample genetic_algorithm simulated_annealing dual_annealing diff_evo pso greedy_ils bayes_opt}"
TITLE="${TITLE:-kfoundry search vs Kernel Tuner 1.5.0 (simulation mode)}"
if [ -z "${SPACES:-}" ]; then
  SPACES="$(cd "$ROOT/../shared/spaces" 2>/dev/null && pwd || echo /work/shared/spaces)"
fi
OUT="${OUT:-$HERE/out}"
VENV="${VENV:-$HERE/.venv}"
MANIFEST="${MANIFEST:-$ROOT/crates/kfoundry-search/Cargo.toml}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
START=$SECONDS

if [ $# -gt 0 ]; then
  FILES=("$@")
else
  shopt -s nullglob
  FILES=("$SPACES"/*.json.gz "$SPACES"/*.json)
  shopt -u nullglob
  [ ${#FILES[@]} -gt 0 ] || { echo "error: no *.json.gz or *.json space in $SPACES (set SPACES or name files)" >&2; exit 1; }
fi
for f in "${FILES[@]}"; do
  [ -f "$f" ] || { echo "error: no such space file: $f" >&2; exit 1; }
done

if [ -n "$STRATEGIES" ]; then
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import kernel_tuner, importlib.metadata as m; assert m.version("kernel_tuner") == "1.5.0"' 2>/dev/null; then
    echo "installing kernel_tuner==1.5.0 into $VENV" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q kernel_tuner==1.5.0
  fi
fi

if [ -n "${BENCH:-}" ]; then
  if [ ! -f "$BENCH" ] || [ ! -x "$BENCH" ]; then echo "error: BENCH=$BENCH is not an executable" >&2; exit 1; fi
  BENCH="$(cd "$(dirname "$BENCH")" && pwd)/$(basename "$BENCH")"
else
  echo "building the scorer (cargo, release, $MANIFEST)" >&2
  cargo build -q --release --manifest-path "$MANIFEST" --example bench
  TARGET="$(cargo metadata --format-version 1 --no-deps --manifest-path "$MANIFEST" | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
  BENCH="$TARGET/release/examples/bench"
fi
ENGINE="$(sha1sum < "$BENCH" | cut -c1-10)"
variants_text="$("$BENCH" --variants)"
VARIANTS=()
[ -z "$variants_text" ] || mapfile -t VARIANTS <<< "$variants_text"
[ ${#VARIANTS[@]} -gt 0 ] || [ -n "$STRATEGIES" ] || { echo "error: neither KF_VARIANTS nor STRATEGIES name anything to run" >&2; exit 1; }
export VENV BENCH OUT

# a file name part from a variant or strategy name
tag() { printf '%s' "$1" | tr -c 'A-Za-z0-9._=+-' '_'; }

# The jobs, space by space (so that the first spaces' tables come early), within a space the
# slow bayes_opt first; the trace files each space needs go to $OUT/SPACE/expected.txt.
NAMES=()
SPACE_FILES=()
JOBLIST="$OUT/jobs.txt"
: > "$JOBLIST"
reused=0
for f in "${FILES[@]}"; do
  name="$(basename "$f")"; name="${name%.gz}"; name="${name%.json}"
  for n in "${NAMES[@]}"; do
    [ "$n" != "$name" ] || { echo "error: two spaces are named $name" >&2; exit 1; }
  done
  axis_end="$("$BENCH" --axis-end "$f")"
  if [ "$axis_end" -lt "$MIN_AXIS" ]; then
    echo "skip $name (its score axis ends at $axis_end evaluations, before MIN_AXIS=$MIN_AXIS)" >&2
    continue
  fi
  budget="$("$BENCH" --budget "$f")"
  dir="$OUT/$name"
  [ "$FRESH" != 1 ] || rm -rf "$dir" "$OUT/table-$name.md"
  mkdir -p "$dir"
  rm -f "$dir/scores.jsonl"
  NAMES+=("$name")
  SPACE_FILES+=("$f")
  expected=()
  jobs_kt_slow=()
  jobs_rest=()
  if [ -n "$STRATEGIES" ]; then
    # Kernel Tuner reads its own layout only (`cache` last): prepare_cache.py writes it
    kt_cache="$dir/kt-cache.json"
    [ "$kt_cache" -nt "$f" ] || "$VENV/bin/python" "$HERE/prepare_cache.py" "$f" "$kt_cache"
    for s in $STRATEGIES; do
      evals="$budget"; n="$SEEDS"; chunk="$CHUNK"
      if [ "$s" = bayes_opt ]; then
        n="$BO_SEEDS"; chunk=1
        # its cost grows with the evaluations done; nothing after M_0.96 enters the scores
        [ "$BO_SHORT" != 1 ] || evals="$axis_end"
      fi
      for ((a = 0; a < n; a += chunk)); do
        b=$((a + chunk < n ? a + chunk : n))
        out="$dir/kt-$(tag "$s")-s$a-$b-e$evals.jsonl"
        expected+=("$out")
        if [ -s "$out" ]; then reused=$((reused + 1)); continue; fi
        line="$(printf 'kt\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$name" "$f" "$kt_cache" "$s" "$a" "$b" "$evals" "$out")"
        if [ "$s" = bayes_opt ]; then jobs_kt_slow+=("$line"); else jobs_rest+=("$line"); fi
      done
    done
  fi
  for v in "${VARIANTS[@]}"; do
    for ((a = 0; a < SEEDS; a += CHUNK)); do
      b=$((a + CHUNK < SEEDS ? a + CHUNK : SEEDS))
      out="$dir/kf-$(tag "$v")-s$a-$b-e$budget-$ENGINE.jsonl"
      expected+=("$out")
      if [ -s "$out" ]; then reused=$((reused + 1)); continue; fi
      jobs_rest+=("$(printf 'kf\t%s\t%s\t-\t%s\t%s\t%s\t%s\t%s' "$name" "$f" "$v" "$a" "$b" "$budget" "$out")")
    done
  done
  printf '%s\n' "${expected[@]}" > "$dir/expected.txt"
  for line in "${jobs_kt_slow[@]}" "${jobs_rest[@]}"; do
    printf '%s\n' "$line" >> "$JOBLIST"
  done
done
[ ${#NAMES[@]} -gt 0 ] || { echo "error: no space left to run" >&2; exit 1; }

# Scores every space whose traces are all there (with $1 = 1, the pool being over, also those
# with traces missing, from what is there), once: prints its table, writes table-SPACE.md.
SCORED=()
MISSING=0
score_ready() {
  local final=$1 i name dir t missing
  local files present
  for i in "${!NAMES[@]}"; do
    [ -z "${SCORED[$i]:-}" ] || continue
    name="${NAMES[$i]}"; dir="$OUT/$name"
    mapfile -t files < "$dir/expected.txt"
    present=(); missing=0
    for t in "${files[@]}"; do
      if [ -s "$t" ]; then present+=("$t"); else missing=$((missing + 1)); fi
    done
    if [ "$missing" -gt 0 ]; then
      [ "$final" = 1 ] || continue
      echo "warning: $name: $missing of ${#files[@]} trace files missing (failed jobs? see $OUT/jobs-stderr.log); scoring the rest" >&2
      MISSING=$((MISSING + missing))
    fi
    SCORED[i]=1
    if [ ${#present[@]} -eq 0 ]; then
      echo "warning: $name: no traces, no table" >&2
      continue
    fi
    if "$BENCH" --score "${SPACE_FILES[$i]}" --scores "$dir/scores.jsonl" "${present[@]}" > "$OUT/table-$name.md.part"; then
      mv "$OUT/table-$name.md.part" "$OUT/table-$name.md"
      echo "table of $name after $((SECONDS - START)) s ($OUT/table-$name.md):" >&2
      cat "$OUT/table-$name.md"
    else
      echo "warning: scoring $name failed" >&2
    fi
  done
}

njobs="$(wc -l < "$JOBLIST")"
echo "${#NAMES[@]} spaces; $njobs jobs on $JOBS processes ($reused chunks reused from earlier runs, in $OUT)" >&2
POOL=""
stop_pool() {
  if [ -n "$POOL" ] && kill -0 "$POOL" 2>/dev/null; then
    echo "stopping the jobs" >&2
    kill -TERM -- "-$POOL" 2>/dev/null || true
  fi
  POOL=""
}
trap 'stop_pool; exit 130' INT
trap 'stop_pool; exit 143' TERM
trap 'stop_pool' EXIT
# the pool runs in a process group of its own (set -m), so that stop_pool ends all its jobs
set -m
xargs -r -d '\n' -n 1 -P "$JOBS" bash "$HERE/search_vs_kernel_tuner.sh" --job < "$JOBLIST" &
POOL=$!
set +m
while kill -0 "$POOL" 2>/dev/null; do
  score_ready 0
  sleep 2
done
pool_status=0
wait "$POOL" || pool_status=$?
POOL=""
[ "$pool_status" = 0 ] || echo "warning: some jobs failed (xargs status $pool_status), see $OUT/jobs-stderr.log" >&2
score_ready 1
for n in "${NAMES[@]}"; do
  # temporary files of jobs killed in an earlier run
  rm -f "$OUT/$n/"*.part.*
done

scores=()
for n in "${NAMES[@]}"; do
  [ ! -s "$OUT/$n/scores.jsonl" ] || scores+=("$OUT/$n/scores.jsonl")
done
[ ${#scores[@]} -gt 0 ] || { echo "error: no space could be scored" >&2; exit 1; }
# shellcheck disable=SC1091
OS="$( (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") || uname -s)"
{
  echo "# $TITLE"
  echo
  bo=""
  case " $STRATEGIES " in *" bayes_opt "*) bo=" (Kernel Tuner bayes_opt: $BO_SEEDS$([ "$BO_SHORT" != 1 ] || echo ", to the end of the score axis"))" ;; esac
  echo "date $(date -u +%Y-%m-%d), $OS $(uname -m), $(nproc) cores; seeds: $SEEDS$bo; wall time $((SECONDS - START)) s;"
  echo "kfoundry variants: ${VARIANTS[*]:-none}; Kernel Tuner strategies: ${STRATEGIES:-none}; tables: $OUT/table-SPACE.md"
  echo "score: mean standardised performance over the budget axis, 0 = random search, 1 = optimum"
  [ "$MISSING" = 0 ] || echo "INCOMPLETE: $MISSING trace files missing (failed jobs, see $OUT/jobs-stderr.log); rerun to redo them"
  echo
  "$BENCH" --summary "${scores[@]}"
} > "$OUT/summary.md.part"
mv "$OUT/summary.md.part" "$OUT/summary.md"
cat "$OUT/summary.md"
# a failed job: the summary is there, but not complete
[ "$pool_status" = 0 ] && [ "$MISSING" = 0 ]
