# tests/report/reportlib.py — helpers for the gpumem-report tests: run the binary, parse its JSON.
"""Helpers for the gpumem-report tests: run the binary, parse its JSON."""
import json
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
REPORT = os.path.join(BUILD, "gpumem-report")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from testenv import sanitizer_runtime  # noqa: E402

# For tests that bound a process's memory or time (run_measured): a sanitized build (make asan, make
# tsan) has shadow memory, a quarantine of freed blocks and slower code of its own.
skip_bounds_under_sanitizer = unittest.skipIf(sanitizer_runtime() is not None,
                                              "memory and time bounds do not hold for a sanitized build")


# A sanitized build runs several times slower (the 1M-event page of test_report_html_lod took over a
# minute under ThreadSanitizer on a busy 2-core machine).
REPORT_TIMEOUT = 60 if sanitizer_runtime() is None else 300


def run_report(*args, check_rc=None):
    proc = subprocess.run([REPORT, *map(str, args)], capture_output=True, text=True, timeout=REPORT_TIMEOUT)
    if check_rc is not None and proc.returncode != check_rc:
        raise AssertionError(f"exit {proc.returncode} (wanted {check_rc}) for {args}:\n{proc.stdout}\n{proc.stderr}")
    return proc


# Runs argv from a fresh, small Python and reports on it alone. A child's ru_maxrss starts from the
# high-water mark of the process it was forked from (Linux keeps it across exec), so a measurement
# taken straight from a test runner that has grown to 80 MiB would read at least 80 MiB.
_MEASURE = """
import resource, subprocess, sys, time
start = time.monotonic()
try:
    rc = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, timeout=float(sys.argv[1])).returncode
except subprocess.TimeoutExpired:
    rc = "timeout"
print(rc, time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def run_measured(argv, limit_s=60):
    """(exit status or "timeout", stderr, seconds, max RSS in bytes) of one run of argv."""
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(limit_s), *map(str, argv)], capture_output=True,
                          text=True, timeout=limit_s + 30)
    rc, seconds, rss = proc.stdout.split()
    return (int(rc) if rc != "timeout" else rc), proc.stderr, float(seconds), int(rss)


# Real PyTorch snapshots recorded outside this project (never copied into the repository): tests
# that read them skip when the folder is absent; PYTORCH_SNAPSHOT_CORPUS names another (as for
# tests/snapshot/).
SNAPSHOT_CORPUS = os.environ.get("PYTORCH_SNAPSHOT_CORPUS") or os.path.join(ROOT, "..", "shared", "corpus",
                                                                                "pytorch-snapshots")


def snapshot_corpus():
    """The corpus's snapshots (paths), or [] when the folder is absent."""
    if not os.path.isdir(SNAPSHOT_CORPUS):
        return []
    return sorted(os.path.join(SNAPSHOT_CORPUS, n) for n in os.listdir(SNAPSHOT_CORPUS)
                  if n.endswith((".pickle", ".pkl", ".json")))


def zstd(path, chunks, long_window=False):
    """Writes the chunks (bytes) zstd-compressed to `path` (the zstd tool, from a pipe). `long_window`:
    zstd's --long=27 (a 128 MiB window: far smaller files of repeated data, and a 128 MiB decoder)."""
    with open(path, "wb") as out:
        proc = subprocess.Popen(["zstd", "-q", "-c", "-3", *(["--long=27"] if long_window else [])],
                                stdin=subprocess.PIPE, stdout=out)
        for chunk in chunks:
            proc.stdin.write(chunk)
        proc.stdin.close()
        assert proc.wait(timeout=600) == 0


def report_json(*args, rc=0):
    return json.loads(run_report("--format", "json", *args, check_rc=rc).stdout)


def functions(stack):
    return [frame["function"] for frame in stack]


class ReportTestCase(unittest.TestCase):
    def setUp(self):
        if not os.path.exists(REPORT):
            self.skipTest(f"{REPORT} not built")
