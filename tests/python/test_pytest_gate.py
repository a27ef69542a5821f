# tests/python/test_pytest_gate.py — `gpumemtrace ci --fail-on-leak` inside pytest: a test the gate fails
# is a failed test in pytest's output and JUnit XML, and a test's own limit takes precedence.
"""`gpumemtrace ci --fail-on-leak=1MiB -- python -m pytest --junitxml=...` on generated suites with
the stand-in torch on the simulated runtime (the launcher sets everything up, as for a user):

- a test that keeps 2 MiB fails inside pytest: FAILED in its summary, a <failure> in the JUnit XML
  with the limit, the figure and the stack (as pytest-memray's limits are), never a pass there while
  the report after the run fails it;
- a test with @pytest.mark.gpu_leak_limit("8 MiB") that keeps 4 MiB passes: its own limit takes
  precedence over the session gate, inside pytest and in the report's gate after the run (a suite of
  such tests passes `gpumemtrace ci`);
- a test that frees what it allocated passes;
- the gate runs the analyzer only for a test that left something live (the recorder's bound,
  interpose/writer/scope_bound.h), not once per test: a suite of clean tests costs no analyzer runs
  beyond the summary's.
"""
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

from python_testlib import BUILD, LIB, ROOT, SIM, python_with_pytest
from testenv import sanitizer_runtime

FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")
LAUNCHER = os.path.join(BUILD, "gpumemtrace")
REPORT = os.path.join(BUILD, "gpumem-report")
PYTHON = python_with_pytest()

OWN_LIMIT = '''
import pytest
import torch

KEPT = []


@pytest.mark.gpu_leak_limit("8 MiB")
def test_keeps_within_its_own_limit():
    KEPT.append(torch.empty(4 << 20, device="cuda"))


def test_frees():
    t = torch.empty(4 << 20, device="cuda")
    del t
'''

NO_LIMIT = '''
import torch

KEPT = []


def test_keeps_without_a_limit():
    KEPT.append(torch.empty(2 << 20, device="cuda"))
'''


CLEAN_MANY = "import torch\n\n" + "".join(f'''
def test_clean_{i}():
    t = torch.empty(1 << 20, device="cuda")
    del t
''' for i in range(12))

# The analyzer as the plugin finds it through GPUMEMTRACE_REPORT, counting its runs.
# In Python, not sh: under ThreadSanitizer the launcher hands its runtime on in LD_PRELOAD, and dash
# crashes with that runtime loaded.
COUNTING_REPORT = '''#!{python}
import os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "report-runs"), "a") as f:
    f.write("run\\n")
os.execv({report!r}, [{report!r}] + sys.argv[1:])
'''


@unittest.skipUnless(all(os.path.exists(p) for p in (LIB, SIM, LAUNCHER, REPORT)),
                     "needs build/libgpumemtrace.so, the sim, the launcher and gpumem-report")
@unittest.skipUnless(PYTHON, "needs pytest (make deps installs python3-pytest)")
class PytestGateTest(unittest.TestCase):
    def run_ci(self, suites, extra_env=None, d=None):
        d = d or tempfile.mkdtemp(prefix="gpumemtrace-pytest-gate-")
        for name, text in suites.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GPUMEMTRACE_", "PYTEST_")) and k not in ("LD_PRELOAD", "PYTHONPATH")}
        env.update(FAKE_TORCH_CUDART=SIM, PYTHONPATH=FAKE)
        if sanitizer_runtime():  # the launcher adds the recorder in front of it
            env["LD_PRELOAD"] = sanitizer_runtime()
        env.update(extra_env or {})
        proc = subprocess.run([LAUNCHER, "ci", "-o", "traces", "--fail-on-leak=1MiB", "--", PYTHON, "-m", "pytest",
                               "-p", "no:cacheprovider", "-rA", "--junitxml=junit.xml", *sorted(suites)],
                              cwd=d, capture_output=True, text=True, env=env, timeout=300)
        cases = {}
        for case in ET.parse(os.path.join(d, "junit.xml")).getroot().iter("testcase"):
            failure = case.find("failure")
            cases[case.get("name")] = None if failure is None else (failure.get("message"), failure.text)
        return proc, cases

    def test_a_test_the_gate_fails_is_a_failure_in_pytest_and_junit(self):
        proc, cases = self.run_ci({"test_own.py": OWN_LIMIT, "test_gate.py": NO_LIMIT})
        out = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 1, out)
        self.assertIn("FAILED test_gate.py::test_keeps_without_a_limit", proc.stdout)
        self.assertIn("1 failed, 2 passed", out)
        message, text = cases["test_keeps_without_a_limit"]
        self.assertIn("Test leaked 2.0 MiB of GPU memory in 1 allocation", message)
        self.assertIn("over the --fail-on-leak limit of 1.0 MiB", message)
        self.assertRegex(text, r"allocated here:\n\s+test_keeps_without_a_limit \(.*test_gate\.py:\d+\)")
        self.assertEqual((cases["test_keeps_within_its_own_limit"], cases["test_frees"]), (None, None))
        # The report after the run agrees: it fails the same test, and only that one.
        self.assertIn("FAILED: ", proc.stderr)
        self.assertIn("test_gate.py::test_keeps_without_a_limit leaked 2.0 MiB", proc.stderr)
        self.assertNotIn("test_keeps_within_its_own_limit leaked", proc.stderr)

    def test_a_tests_own_limit_takes_precedence_over_the_gate(self):
        proc, cases = self.run_ci({"test_own.py": OWN_LIMIT})
        out = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, out)
        self.assertIn("2 passed", out)
        self.assertEqual(cases, {"test_keeps_within_its_own_limit": None, "test_frees": None})
        self.assertNotIn("FAILED", out)
        self.assertRegex(proc.stdout, r"test_own\.py::test_keeps_within_its_own_limit\s+4\.0 MiB\s+4\.0 MiB  "
                                      r"LEAKED  \(within its gpu_leak_limit\)")

    def test_the_analyzer_runs_only_for_tests_that_left_memory_live(self):
        d = tempfile.mkdtemp(prefix="gpumemtrace-pytest-gate-")
        counting = os.path.join(d, "counting-report")
        with open(counting, "w") as f:
            f.write(COUNTING_REPORT.format(python=sys.executable, report=REPORT))
        os.chmod(counting, 0o755)
        proc, cases = self.run_ci({"test_clean.py": CLEAN_MANY, "test_gate.py": NO_LIMIT},
                                  extra_env={"GPUMEMTRACE_REPORT": counting}, d=d)
        out = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 1, out)
        self.assertIn("1 failed, 12 passed", out)
        self.assertIsNotNone(cases["test_keeps_without_a_limit"])
        with open(os.path.join(d, "report-runs")) as f:
            runs = len(f.read().split())
        # One for the leaking test, one for the first clean test (the caching allocator's segment it
        # made is still live at its end: the analyzer says it is a cache), one for pytest's summary,
        # one for the launcher's report after the run; the other clean tests (1 MiB each, freed, in
        # the cached segment) need none. Before the bound: one per test, 13 + 2.
        self.assertLessEqual(runs, 4, out)


if __name__ == "__main__":
    unittest.main()
