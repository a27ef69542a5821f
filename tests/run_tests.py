#!/usr/bin/env python3
# tests/run_tests.py — runs every test of `make test` and prints 'N passed, N failed'.
"""Runs every test of `make test` and prints one closing line: 'N passed, N failed'.

Suites:
  - GoogleTest binaries given on the command line (each test case counts once);
  - every tests/e2e/test_*.py and tests/**/test_*.py module (Python unittest; each test method counts);
GPU-only tests skip themselves where there is no GPU (counted as skipped, never as passed).
"""
import argparse
import os
import re
import subprocess
import sys
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_gtest(binary):
    start = time.time()
    proc = subprocess.run([binary, "--gtest_brief=1"], capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    passed = failed = skipped = 0
    m = re.search(r"\[  PASSED  \] (\d+) test", out)
    if m:
        passed = int(m.group(1))
    m = re.search(r"\[  FAILED  \] (\d+) test", out)
    if m:
        failed = int(m.group(1))
    m = re.search(r"\[  SKIPPED \] (\d+) test", out)
    if m:
        skipped = int(m.group(1))
    if proc.returncode != 0 and failed == 0:
        failed = 1  # crashed or could not run
    status = "ok" if proc.returncode == 0 else "FAILED"
    print(f"[{status}] {os.path.relpath(binary, ROOT)}: {passed} passed, {failed} failed, "
          f"{skipped} skipped ({time.time() - start:.1f}s)", flush=True)
    if proc.returncode != 0:
        print(out[-6000:], flush=True)
    return passed, failed, skipped


def run_python_suites(pattern_dirs):
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for d in pattern_dirs:
        if os.path.isdir(d):
            suite.addTests(loader.discover(d, pattern="test_*.py", top_level_dir=d))
    runner = unittest.TextTestRunner(verbosity=2, stream=sys.stdout)
    start = time.time()
    result = runner.run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print(f"[{'ok' if failed == 0 else 'FAILED'}] python suites: {passed} passed, {failed} failed, "
          f"{skipped} skipped ({time.time() - start:.1f}s)", flush=True)
    return passed, failed, skipped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("gtests", nargs="*")
    args = ap.parse_args()
    os.environ["GPUMEMTRACE_BUILD"] = os.path.abspath(args.build)
    total = [0, 0, 0]
    for b in args.gtests:
        for i, v in enumerate(run_gtest(os.path.abspath(b))):
            total[i] += v
    dirs = sorted(os.path.join(ROOT, "tests", d) for d in os.listdir(os.path.join(ROOT, "tests"))
                  if os.path.isdir(os.path.join(ROOT, "tests", d)) and d not in ("unit", "gpu"))
    for i, v in enumerate(run_python_suites(dirs)):
        total[i] += v
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main())
