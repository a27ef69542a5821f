#!/usr/bin/env bash
# tests/gpu/scenarios/capture.sh OUT — record every scenario of this folder on a real GPU with the
# built recorder (build/), and write for each one OUT/<name>/: the trace(s), the launcher's log, and
# gpumem-report's text and JSON. Used to build CPU tests from real programs' traces and to check the
# verdicts on real frameworks. Environment: PYTHON (default python3), BUILD (default build).
set -u
cd "$(dirname "$0")/../../.."
OUT=${1:?usage: capture.sh OUT}
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
S=tests/gpu/scenarios
mkdir -p "$OUT"
record() {  # name, env..., -- cmd...
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  mkdir -p "$OUT/$name"
  local t0=$(date +%s%N)
  env "${envs[@]}" "$BUILD/gpumemtrace" ci --fail-on-leak=1MiB --fail-on-growth -o "$OUT/$name/traces" -- "$@" \
    > "$OUT/$name/run.log" 2>&1
  local rc=$?
  echo "exit $rc wall_ms $(( ($(date +%s%N) - t0) / 1000000 ))" >> "$OUT/$name/run.log"
  "$BUILD/gpumem-report" --format json "$OUT/$name/traces" > "$OUT/$name/report.json" 2>> "$OUT/$name/run.log"
  "$BUILD/gpumem-report" "$OUT/$name/traces" > "$OUT/$name/report.txt" 2>&1
  echo "== $name: $(tail -1 "$OUT/$name/run.log")"
}
record clean_train X=1 -- "$PY" $S/clean_train.py
record pytest_suite X=1 -- "$PY" -m pytest -q -p no:cacheprovider $S/leaky_suite.py
record oom_capacity X=1 -- "$PY" $S/oom_capacity.py
record oom_capped X=1 -- "$PY" $S/oom_capped.py
record expandable_growth_oom PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- "$PY" $S/expandable_growth_oom.py
record eval_without_no_grad X=1 -- "$PY" $S/eval_without_no_grad.py
record transformer_step X=1 -- "$PY" $S/transformer_step.py
record jax_clean XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 -- "$PY" $S/jax_clean.py
