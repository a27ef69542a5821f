#!/usr/bin/env bash
# examples/run_demo.sh BUILD_DIR CUDA_HOME — `make demo`: run the bundled training loop under the
# recorder, on the real CUDA runtime when a GPU driver is present, otherwise on the simulated runtime
# (and say so), then print where the trace is and its report.
set -euo pipefail
build=$(cd "$1" && pwd)
cuda_home=${2:-/usr/local/cuda}
out="$build/demo"
rm -rf "$out"
mkdir -p "$out"

if nvidia-smi -L >/dev/null 2>&1 && [ -e "$cuda_home/lib64/libcudart.so.13" ]; then
  runtime_dir="$cuda_home/lib64"
  echo "demo: GPU driver found: running on the real CUDA runtime ($runtime_dir)"
else
  runtime_dir="$build/sim"
  echo "demo: no GPU driver found: running on the SIMULATED CUDA runtime that ships with gpumemtrace"
  echo "      ($runtime_dir/libcudart.so.13, a fake address space; no GPU is used)"
fi
echo "demo: LD_PRELOAD=$build/libgpumemtrace.so $build/examples/train_loop"
echo
LD_LIBRARY_PATH="$runtime_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
LD_PRELOAD="$build/libgpumemtrace.so" GPUMEMTRACE_OUTPUT="$out/" \
  "$build/examples/train_loop" 50
trace=$(ls "$out"/gpumemtrace.*.jsonl.zst | head -n 1)
echo
echo "demo: trace written to $trace ($(zstd -dc "$trace" | wc -l) lines, $(wc -c <"$trace") bytes; read it with zstdcat)"
echo "demo: its report (gpumem-report $trace):"
echo
status=0
"$build/gpumem-report" --fail-on-leak "$trace" || status=$?
echo
if [ "$status" = 1 ]; then
  echo "demo: gpumem-report --fail-on-leak exited 1: the planted leak and accumulation were found."
else
  echo "demo: unexpected gpumem-report exit status $status"
  exit 1
fi
