#!/usr/bin/env bash
# tests/gpu/run.sh — every GPU check in one device call: from a prebuilt gpumemtrace (nothing is built here), results under $OUT.
#
#   tests/gpu/run.sh          # from the repository root, or anywhere
#
# Environment (the contract with `make gpu-bundle`, docs/pytorch.md "Checks on a GPU"):
#   GPUMEMTRACE_HOME  the unpacked release bundle (bin/, lib/, python/); default dist/gpu/gpumemtrace
#   GPU_PROGRAMS      the prebuilt GPU programs (GPU_CHECK_PROGRAMS); default dist/gpu/programs
#   OUT               where the results go (default: a new temporary folder, printed): summary.txt (one
#                     line per check: PASS/FAIL/SKIP and its figure), summary.json, run.log,
#                     traces.tar.gz (traces, reports, logs, benchmark tables), corpus.tar.gz
#   GPU_CHECKS_SECONDS  the time budget (default 510: under 9 minutes); checks that would not fit are
#                     SKIPped, saying so
#   PYTHON            the interpreter with PyTorch (default python3)
# Needs no LD_LIBRARY_PATH and no network. Without a GPU every check reports SKIP and it exits 0; with
# one, it exits 1 if any check failed.
set -u
cd "$(dirname "$0")/../.."
start=$(date +%s)
PYTHON=${PYTHON:-python3}
GPUMEMTRACE_HOME=$(realpath -m "${GPUMEMTRACE_HOME:-dist/gpu/gpumemtrace}")
GPU_PROGRAMS=$(realpath -m "${GPU_PROGRAMS:-dist/gpu/programs}")
RESULTS=${OUT:-$(mktemp -d -t gpumemtrace-gpu-XXXXXX)}
mkdir -p "$RESULTS"
RESULTS=$(realpath "$RESULTS")
SCRATCH=$(mktemp -d -t gpumemtrace-gpu-work-XXXXXX)
BUDGET=${GPU_CHECKS_SECONDS:-510}
# The checks get the bundle as GPU_BUNDLE (tests/gpu/gpuenv.py): a GPUMEMTRACE_* name the recorder does
# not know would draw its warning in every traced child.
export GPU_BUNDLE=$GPUMEMTRACE_HOME GPU_PROGRAMS
unset GPUMEMTRACE_HOME
export OUT=$SCRATCH
export GPU_CHECKS_DEADLINE=$((start + BUDGET))
unset GPUMEMTRACE_BUILD LD_PRELOAD

have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then have_gpu=1; fi
notes=()
{
  echo "gpumemtrace GPU checks: GPUMEMTRACE_HOME=$GPU_BUNDLE GPU_PROGRAMS=$GPU_PROGRAMS OUT=$RESULTS"
  if [ "$have_gpu" = 1 ]; then nvidia-smi -L; else echo "no NVIDIA GPU (nvidia-smi -L failed): every check SKIPs"; fi
  for bin in lib/libgpumemtrace.so bin/gpumem-report bin/gpumemtrace; do
    if [ ! -e "$GPU_BUNDLE/$bin" ]; then
      if [ "$have_gpu" = 1 ]; then
        notes+=("$GPU_BUNDLE/$bin is missing (make gpu-bundle, then carry dist/gpu)")
      fi
      echo "missing: $GPU_BUNDLE/$bin"
    fi
  done
  if [ "$have_gpu" = 1 ] && [ ${#notes[@]} -gt 0 ]; then
    echo "the bundle is incomplete: no check can run"
  else
    # Order: what the issue needs first, the long benchmarks last (they SKIP when time runs out).
    for check in torch_history_checks batch_checks snapshot_corpus torch_checks driver_checks verdict_checks cost_checks; do
      left=$((GPU_CHECKS_DEADLINE - $(date +%s)))
      if [ "$left" -le 5 ]; then
        notes+=("$check: not started, the time budget ($BUDGET s) is spent")
        continue
      fi
      echo "== $check ($left s left)"
      if [ "$have_gpu" = 1 ]; then
        timeout --kill-after=10 "$left" "$PYTHON" "tests/gpu/$check.py"
      else
        GPU_CHECKS_NO_GPU=1 "$PYTHON" "tests/gpu/$check.py"
      fi
      rc=$?
      if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then notes+=("$check: stopped by the time budget ($BUDGET s)"); fi
      if [ "$rc" -gt 1 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]; then notes+=("$check: exited $rc (run.log)"); fi
    done
  fi
} > "$RESULTS/run.log" 2>&1
"$PYTHON" tests/gpu/summarize.py "$SCRATCH" "$RESULTS" "$(( $(date +%s) - start ))" "${notes[@]}"
status=$?
rm -rf "$SCRATCH"
cat "$RESULTS/summary.txt"
echo "results in $RESULTS"
exit $status
