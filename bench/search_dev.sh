#!/usr/bin/env bash
# Development benchmark of the search engine: kfoundry variants on the development spaces in
# bench/spaces-dev/ (never the judged spaces in shared/spaces/), then the summary per variant
# (mean score over the spaces, the worst space, and the share of the score axis below random
# search). Settings are chosen here and on the synthetic landscapes, then judged once by
# bench/search_vs_kernel_tuner.sh.
#
#   KF_VARIANTS=default,screening=8 SEEDS=50 bash bench/search_dev.sh [SPACE.json.gz ...]
#
# This is bench/search_vs_kernel_tuner.sh with development defaults (it does the work: one job
# pool, a table per space as soon as it is done, resuming from earlier traces, the summary):
#   KF_VARIANTS    kfoundry variants, comma-separated (default: default)
#   SEEDS          seeds per variant (default 50)
#   JOBS           parallel jobs (default 2)
#   DEV_OUT        output folder (default bench/out/dev): table-SPACE.md per space, summary.md
#   MIN_AXIS       spaces whose score axis ends before MIN_AXIS evaluations (default 40) are
#                  skipped: on them the score measures the initial random samples, not the
#                  search
#   KT_STRATEGIES  Kernel Tuner strategies, comma-separated (default: none): replayed too (the
#                  venv of bench/search_vs_kernel_tuner.sh, bench/.venv) with the same seeds
#                  and budgets (bayes_opt: BO_SEEDS, default SEEDS)
#   FRESH=1        recompute everything instead of reusing the traces of earlier runs (kfoundry
#                  traces are redone anyway when the scorer binary, hence the engine, changed)
# Also passed through: SPACES (default bench/spaces-dev), VENV, BENCH, MANIFEST,
# CARGO_TARGET_DIR, CHUNK, BO_SEEDS, BO_SHORT, CURVE, TITLE (see bench/search_vs_kernel_tuner.sh).
# Relative paths (space files, DEV_OUT, SPACES) are taken from the repository root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export KF_VARIANTS="${KF_VARIANTS:-default}"
export SEEDS="${SEEDS:-50}"
export JOBS="${JOBS:-2}"
export MIN_AXIS="${MIN_AXIS:-40}"
export OUT="${DEV_OUT:-bench/out/dev}"
export SPACES="${SPACES:-bench/spaces-dev}"
KT_STRATEGIES="${KT_STRATEGIES:-}"
export STRATEGIES="${KT_STRATEGIES//,/ }"
export BO_SEEDS="${BO_SEEDS:-$SEEDS}"
export TITLE="${TITLE:-kfoundry search on the development spaces}"
exec bash bench/search_vs_kernel_tuner.sh "$@"
