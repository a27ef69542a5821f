"""Helpers for the gpumem-report tests: run the binary, parse its JSON."""
import json
import os
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
REPORT = os.path.join(BUILD, "gpumem-report")


def run_report(*args, check_rc=None):
    proc = subprocess.run([REPORT, *map(str, args)], capture_output=True, text=True, timeout=60)
    if check_rc is not None and proc.returncode != check_rc:
        raise AssertionError(f"exit {proc.returncode} (wanted {check_rc}) for {args}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def run_measured(argv, limit_s=60):
    """(exit status, stderr, seconds, max RSS in bytes) of one child, killed after limit_s. Measured with
    os.wait4 on that child alone: RUSAGE_CHILDREN's ru_maxrss is the maximum over every child this
    test process ever waited for."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        deadline = start + limit_s
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    return proc.returncode, stderr, time.monotonic() - start, usage.ru_maxrss * 1024


def report_json(*args, rc=0):
    return json.loads(run_report("--format", "json", *args, check_rc=rc).stdout)


def functions(stack):
    return [frame["function"] for frame in stack]


class ReportTestCase(unittest.TestCase):
    def setUp(self):
        if not os.path.exists(REPORT):
            self.skipTest(f"{REPORT} not built")
