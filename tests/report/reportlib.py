"""Helpers for the gpumem-report tests: run the binary, parse its JSON."""
import json
import os
import subprocess
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
REPORT = os.path.join(BUILD, "gpumem-report")


def run_report(*args, check_rc=None):
    proc = subprocess.run([REPORT, *map(str, args)], capture_output=True, text=True, timeout=60)
    if check_rc is not None and proc.returncode != check_rc:
        raise AssertionError(f"exit {proc.returncode} (wanted {check_rc}) for {args}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def report_json(*args, rc=0):
    return json.loads(run_report("--format", "json", *args, check_rc=rc).stdout)


def functions(stack):
    return [frame["function"] for frame in stack]


class ReportTestCase(unittest.TestCase):
    def setUp(self):
        if not os.path.exists(REPORT):
            self.skipTest(f"{REPORT} not built")
