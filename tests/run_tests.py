#!/usr/bin/env python3
# tests/run_tests.py — runs every test of `make test` and prints 'N passed, N failed'.
"""Runs every test of `make test` and prints one closing line: 'N passed, N failed'.

Suites:
  - GoogleTest binaries given on the command line (each test case counts once);
  - every tests/e2e/test_*.py and tests/**/test_*.py module (Python unittest; each test method counts);
    --suites names the folders to run (default: all but unit/, gpu/ and dist/), -k a test name pattern;
GPU-only tests skip themselves where there is no GPU (counted as skipped, never as passed).

--sanitizer asan|tsan (make asan, make tsan; --build is then the sanitized build): the sanitizer's
runtime is preloaded ahead of the recorder (tests/testenv.py), its options set (reports into a
folder of their own, tests/sanitizers/*.supp), and every report any process wrote counts as a failure.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from testenv import TEST_PRELOAD_VARIABLE

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


def run_python_suites(pattern_dirs, name_patterns=None):
    loader = unittest.TestLoader()
    if name_patterns:
        loader.testNamePatterns = [p if "*" in p else f"*{p}*" for p in name_patterns]
    suite = unittest.TestSuite()
    for d in pattern_dirs:
        if os.path.isdir(d):
            suite.addTests(loader.discover(d, pattern="test_*.py", top_level_dir=d))
    runner = unittest.TextTestRunner(verbosity=2, stream=sys.stdout)
    start = time.time()
    result = runner.run(suite)
    # A test counts once however many of its subtests failed; a failed setUpClass counts once too.
    failed_tests = {getattr(t, "test_case", t).id() for t, _ in result.failures + result.errors}
    failed = len(failed_tests) + len(result.unexpectedSuccesses)
    skipped = len({getattr(t, "test_case", t).id() for t, _ in result.skipped})
    ran_and_failed = sum(1 for t in failed_tests if not t.startswith(("setUpClass", "setUpModule")))
    passed = result.testsRun - ran_and_failed - len(result.unexpectedSuccesses) - skipped
    print(f"[{'ok' if failed == 0 else 'FAILED'}] python suites: {passed} passed, {failed} failed, "
          f"{skipped} skipped ({time.time() - start:.1f}s)", flush=True)
    return passed, failed, skipped


SUPPRESSIONS = os.path.join(ROOT, "tests", "sanitizers")


def set_up_sanitizer(name):
    """Preloads the sanitizer runtime ahead of the recorder in every suite's programs and sends every
    report into a new folder (its options: halt at the first report, so that nothing is missed after
    it). Returns that folder."""
    cxx = shlex.split(os.environ.get("CXX") or "g++")
    runtime_name = {"asan": "libasan.so", "tsan": "libtsan.so"}[name]
    runtime = subprocess.run([*cxx, f"-print-file-name={runtime_name}"], capture_output=True, text=True,
                             check=True).stdout.strip()
    if not os.path.isabs(runtime):
        sys.exit(f"run_tests.py: {' '.join(cxx)} has no {runtime_name}")
    reports = tempfile.mkdtemp(prefix=f"gpumemtrace-{name}-")
    os.environ[TEST_PRELOAD_VARIABLE] = runtime
    if name == "asan":
        # verify_asan_link_order=0: the launcher puts the recorder first in LD_PRELOAD, ahead of the
        # runtime the harness put there; the runtime is still loaded before any program code runs.
        # intercept_tls_get_addr=0: with it, GCC 12's LeakSanitizer walks glibc 2.36's dynamic TLS blocks
        # and can read one whose bounds are garbage ("DTLS 9 at 0x2c6-0x8000013c8"): its tracer dies of
        # SIGSEGV and the program exits 1 instead of with its own status (a stand-in torch program
        # under GPUMEMTRACE_TORCH=0). The static TLS blocks and every thread's stack are still scanned.
        os.environ["ASAN_OPTIONS"] = (f"log_path={reports}/asan:halt_on_error=1:detect_leaks=1:"
                                      "verify_asan_link_order=0:check_initialization_order=1:log_exe_name=1:"
                                      "intercept_tls_get_addr=0")
        os.environ["UBSAN_OPTIONS"] = f"log_path={reports}/ubsan:halt_on_error=1:print_stacktrace=1"
        os.environ["LSAN_OPTIONS"] = f"suppressions={SUPPRESSIONS}/lsan.supp:print_suppressions=0"
    else:
        os.environ["TSAN_OPTIONS"] = (f"log_path={reports}/tsan:halt_on_error=1:second_deadlock_stack=1:"
                                      f"suppressions={SUPPRESSIONS}/tsan.supp:print_suppressions=0")
    return reports


# LeakSanitizer's own failures to check a process: at exit it stops every thread with a ptrace-ing
# tracer, and a thread it cannot stop (one exiting, on a loaded machine) leaves that thread's stack
# unscanned, so what only that stack holds is reported as leaked, with this warning first; or the
# tracer itself dies. Such a report says the check did not happen, not that memory leaked.
LSAN_VOID = re.compile(r"Running thread \d+ was not suspended\. False leaks are possible\.|"
                       r"Tracer caught signal \d+|LeakSanitizer has encountered a fatal error")
OTHER_SANITIZER_ERROR = re.compile(r"ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|ThreadSanitizer)|"
                                   r"runtime error:|WARNING: ThreadSanitizer")


def collect_sanitizer_reports(reports):
    """Prints every report in `reports` (one file per process that had something to say); returns
    their number, less the leak checks LeakSanitizer itself says it could not make (printed, not
    counted)."""
    files = sorted(os.listdir(reports))
    failed = 0
    for name in files:
        with open(os.path.join(reports, name), errors="replace") as f:
            text = f.read()
        if LSAN_VOID.search(text) and not OTHER_SANITIZER_ERROR.search(text):
            print(f"[note] sanitizer report {name}: LeakSanitizer could not stop every thread, its leak "
                  f"check of that process is void (not counted):\n{text[-2000:]}", flush=True)
            continue
        print(f"[FAILED] sanitizer report {name}:\n{text[-8000:]}", flush=True)
        failed += 1
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--suites", help="the tests/ folders to run, separated by spaces or commas")
    ap.add_argument("-k", dest="patterns", action="append", help="only Python tests whose name matches")
    ap.add_argument("--sanitizer", choices=("asan", "tsan"))
    ap.add_argument("gtests", nargs="*")
    args = ap.parse_args()
    os.environ["GPUMEMTRACE_BUILD"] = os.path.abspath(args.build)
    reports = set_up_sanitizer(args.sanitizer) if args.sanitizer else None
    total = [0, 0, 0]
    for b in args.gtests:
        for i, v in enumerate(run_gtest(os.path.abspath(b))):
            total[i] += v
    if args.suites:
        names = args.suites.replace(",", " ").split()
    else:
        # gpu: a GPU's (tests/gpu/run.sh); dist: the release bundle's, after make dist (make dist-test).
        names = [d for d in os.listdir(os.path.join(ROOT, "tests")) if d not in ("unit", "gpu", "dist")]
    dirs = sorted(os.path.join(ROOT, "tests", d) for d in names if os.path.isdir(os.path.join(ROOT, "tests", d)))
    for i, v in enumerate(run_python_suites(dirs, args.patterns)):
        total[i] += v
    if reports:
        total[1] += collect_sanitizer_reports(reports)
        shutil.rmtree(reports, ignore_errors=True)
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main())
