#!/usr/bin/env python3
# bench/python_stack_bench.py — ns per event of Python stack capture and resolution on each installed CPython.
"""Cost of Python frames per event: capture_python_stack() on the hook's path (ns per call, GIL
released, code table warm) at Python depths 5, 20 and 50, and the writer-side merge + key + resolve,
on every CPython 3.9-3.13 found. Uses build/tests/python/libpython_stack_probe.so (make python-probe).
Figures go to docs/performance.md (## Python stacks)."""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from test_python_stacks import interpreters  # noqa: E402

CHILD = r'''
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.gpumemtrace_probe_bench.restype = ctypes.c_double
lib.gpumemtrace_probe_bench_resolve.restype = ctypes.c_double
def at_depth(n, fn):
    return fn() if n <= 1 else at_depth(n - 1, fn)
out = []
for depth in (5, 20, 50):
    best = min(at_depth(depth, lambda: lib.gpumemtrace_probe_bench(200000)) for _ in range(3))
    out.append("%.0f" % best)
at_depth(20, lambda: lib.gpumemtrace_probe_store(0))
res = min(lib.gpumemtrace_probe_bench_resolve(20000) for _ in range(3))
print(" ".join(out), "%.0f" % res)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    probe = os.path.join(args.build, "tests", "python", "libpython_stack_probe.so")
    print("| CPython | capture, depth 5 | depth 20 | depth 50 (32 kept) | merge+resolve, depth 20 (writer) |")
    print("|---|---|---|---|---|")
    for label, exe in interpreters():
        r = subprocess.run([exe, "-c", CHILD, probe], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print("| %s | failed: %s |" % (label, r.stderr.strip()[-200:]))
            continue
        d5, d20, d50, res = r.stdout.split()
        print("| %s | %s ns | %s ns | %s ns | %s ns |" % (label, d5, d20, d50, res))


if __name__ == "__main__":
    main()
