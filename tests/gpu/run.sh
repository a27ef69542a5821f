#!/usr/bin/env bash
# tests/gpu/run.sh — build gpumemtrace and run the GPU checks on a machine with an NVIDIA GPU
# (H100/H200), PyTorch, CuPy and nvcc. Without a GPU every check reports SKIP and the script exits 0.
#   tests/gpu/run.sh            # all checks
# Environment: BUILD (default build), CUDA_HOME (default /usr/local/cuda), PYTHON (default python3).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-python3}
export GPUMEMTRACE_BUILD=$(pwd)/$BUILD
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH

make -j"$(nproc)" BUILD="$BUILD" "$BUILD/libgpumemtrace.so" >/dev/null || { echo "build failed"; exit 1; }
status=0
for check in tests/gpu/driver_checks.py tests/gpu/torch_checks.py tests/gpu/verdict_checks.py; do
  [ -f "$check" ] || continue
  echo "== $check"
  "$PYTHON" "$check" || status=1
done
exit $status
