# tests/python/test_pytest_results.py — each test's GPU memory in pytest's own output: the terminal
# summary's section and the gpu_memory_limit / gpu_leak_limit markers (gpumemtrace_pytest_results.py).
"""The per-test results of the pytest plugin on a generated suite with the stand-in torch, under
LD_PRELOAD=libgpumemtrace.so and the simulated CUDA runtime: pytest's terminal summary lists each
test's leak and own peak as gpumem-report finds them, and which own limit a test went over (so does
gpumem-report, in JSON and text: never clean); a test over its gpu_memory_limit or gpu_leak_limit
fails inside pytest with the limit, the figure and where the memory was allocated; a test within its
limits passes; a size that is not one fails its test saying so, and so does a limit the recorder
cannot check (nothing reached it); --most-allocations N and --stacks N as pytest-memray has them;
without the library the markers do nothing and no section is printed. The session gate of
`gpumemtrace ci` inside pytest is test_pytest_gate.py's."""
import json
import os
import re
import subprocess
import tempfile
import unittest

from python_testlib import BUILD, LIB, ROOT, SIM, python_with_pytest, set_preload

TOOLS = os.path.join(ROOT, "tools", "python")
FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")
PYTHON = python_with_pytest()
REPORT = os.path.join(BUILD, "gpumem-report")
MiB = 1 << 20

SUITE = '''
import pytest
import torch

KEPT = []


def test_small():
    t = torch.empty(1 << 20, device="cuda")
    del t


@pytest.mark.gpu_memory_limit("4 MiB")
def test_peak_over_limit():
    t = torch.empty(8 << 20, device="cuda")
    del t


@pytest.mark.gpu_memory_limit("16 MiB")
def test_peak_within_limit():
    t = torch.empty(8 << 20, device="cuda")
    del t


@pytest.mark.gpu_leak_limit("1 MiB")
def test_keeps_too_much():
    KEPT.append(torch.empty(2 << 20, device="cuda"))


@pytest.mark.gpu_leak_limit("4 MiB")
def test_keeps_little_enough():
    KEPT.append(torch.empty(2 << 20, device="cuda"))


@pytest.mark.gpu_memory_limit("lots")
def test_limit_is_not_a_size():
    pass
'''


# A test whose 96 MiB the recorder cannot see: the runtime through its own handle, not the global scope.
INVISIBLE = '''
import ctypes, os
import pytest

KEPT = []


@pytest.mark.gpu_memory_limit("64 MiB")
def test_96_mib_unseen():
    runtime = ctypes.CDLL(os.environ["FAKE_TORCH_CUDART"])
    p = ctypes.c_void_p()
    assert runtime.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(96 << 20)) == 0
    KEPT.append(p)
'''

# Peaks of 32, 16, 2 and 1 MiB, and a leak two frames deep.
DEEP = '''
import pytest
import torch

KEPT = []


def _keep(n):
    KEPT.append(torch.empty(n, device="cuda"))


@pytest.mark.gpu_leak_limit("1 MiB")
def test_deep():
    _keep(2 << 20)


def test_big():
    t = torch.empty(32 << 20, device="cuda")
    del t


def test_middle():
    t = torch.empty(16 << 20, device="cuda")
    del t


def test_small():
    t = torch.empty(1 << 20, device="cuda")
    del t
'''


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM) and os.path.exists(REPORT),
                     "needs build/libgpumemtrace.so, the sim and gpumem-report")
@unittest.skipUnless(PYTHON, "needs pytest (make deps installs python3-pytest)")
class PytestResultsTest(unittest.TestCase):
    @staticmethod
    def run_suite(preload=True, env_extra=None, suite=SUITE, args=()):
        d = tempfile.mkdtemp(prefix="gpumemtrace-pytest-results-")
        with open(os.path.join(d, "test_limits.py"), "w") as f:
            f.write(suite)
        out = os.path.join(d, "trace.jsonl")
        env = dict(os.environ, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_QUIET="1", FAKE_TORCH_CUDART=SIM,
                   PYTHONPATH=os.pathsep.join([TOOLS, FAKE]), PYTEST_PLUGINS="gpumemtrace_pytest")
        for k in ("PYTEST_ADDOPTS", "GPUMEMTRACE_PYTEST", "GPUMEMTRACE_REPORT"):
            env.pop(k, None)
        set_preload(env, recorder=preload)
        env.update(env_extra or {})
        proc = subprocess.run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *args, "test_limits.py"],
                              cwd=d, capture_output=True, text=True, env=env, timeout=180)
        return proc, out

    @classmethod
    def setUpClass(cls):
        cls.proc, cls.trace = cls.run_suite()
        cls.out = cls.proc.stdout + cls.proc.stderr

    def outcome(self, test):
        """PASSED / FAILED as pytest's short summary (-rA) says."""
        m = re.search(r"^(PASSED|FAILED|ERROR) test_limits\.py::%s\b" % test, self.proc.stdout, re.M)
        return m.group(1) if m else None

    def test_markers_fail_the_tests_over_their_limits_inside_pytest(self):
        self.assertEqual(self.proc.returncode, 1, self.out)
        self.assertIn("3 failed, 3 passed", self.proc.stdout.strip().splitlines()[-1])
        self.assertEqual(self.outcome("test_small"), "PASSED")
        self.assertEqual(self.outcome("test_peak_over_limit"), "FAILED")
        self.assertEqual(self.outcome("test_peak_within_limit"), "PASSED")
        self.assertEqual(self.outcome("test_keeps_too_much"), "FAILED")
        self.assertEqual(self.outcome("test_keeps_little_enough"), "PASSED")
        self.assertEqual(self.outcome("test_limit_is_not_a_size"), "FAILED")

    def test_failure_messages_say_the_limit_the_figure_and_where(self):
        self.assertIn("Test was limited to 4.0 MiB of GPU memory (gpu_memory_limit) but its peak was 8.0 MiB", self.out)
        m = re.search(r"Test was limited to 1\.0 MiB of leaked GPU memory \(gpu_leak_limit\) but leaked 2\.0 MiB in 1 allocation, "
                      r"allocated here:\n\s+test_keeps_too_much \(.*test_limits\.py:\d+\)", self.out)
        self.assertTrue(m, self.out)
        self.assertIn("test_limit_is_not_a_size: gpu_memory_limit: expected a size like '2 GiB'", self.out)

    def test_terminal_summary_lists_each_tests_leak_and_peak(self):
        section = self.proc.stdout.split("GPU memory per test (gpumemtrace)", 1)
        self.assertEqual(len(section), 2, self.out)
        lines = {line.split()[0]: line for line in section[1].splitlines()
                 if line.startswith("test_limits.py::")}
        self.assertEqual(len(lines), 6, section[1])
        self.assertRegex(lines["test_limits.py::test_keeps_little_enough"],
                         r"\s2\.0 MiB\s+2\.0 MiB\s+LEAKED  \(within its gpu_leak_limit\)$")
        self.assertRegex(lines["test_limits.py::test_peak_within_limit"], r"\s0 B\s+8\.0 MiB$")
        self.assertRegex(lines["test_limits.py::test_small"], r"\s0 B\s+1\.0 MiB$")
        # The two tests that keep memory come first.
        order = [line.split()[0] for line in section[1].splitlines() if line.startswith("test_limits.py::")]
        self.assertEqual(set(order[:2]), {"test_limits.py::test_keeps_too_much", "test_limits.py::test_keeps_little_enough"})
        self.assertIn("6 tests; 2 leaked 4.0 MiB; highest peak 8.0 MiB", section[1])

    def test_limit_failures_are_shown_never_as_clean(self):
        # The summary's table, gpumem-report's JSON (which the HTML page reads) and its text report all
        # say which of its own limits a test went over; the leak of a test over its leak limit counts.
        section = self.proc.stdout.split("GPU memory per test (gpumemtrace)", 1)[1]
        lines = {line.split()[0]: line for line in section.splitlines() if line.startswith("test_limits.py::")}
        self.assertRegex(lines["test_limits.py::test_peak_over_limit"], r"\s0 B\s+8\.0 MiB  OVER gpu_memory_limit$")
        self.assertRegex(lines["test_limits.py::test_keeps_too_much"], r"\s2\.0 MiB\s+2\.0 MiB  OVER gpu_leak_limit$")
        proc = subprocess.run([REPORT, "--format", "json", "--no-progress", self.trace], capture_output=True, text=True)
        scopes = {s["name"]: s for s in json.loads(proc.stdout)["scopes"]}
        over = {name.split("::")[1]: s["over_own_limits"] for name, s in scopes.items() if s["over_own_limits"]}
        self.assertEqual(over, {"test_peak_over_limit": ["memory"], "test_keeps_too_much": ["leak"]})
        self.assertEqual(scopes["test_limits.py::test_keeps_too_much"]["leaked_bytes"], 2 * MiB)
        self.assertEqual({n.split("::")[1] for n, s in scopes.items() if s["own_leak_limit"]},
                         {"test_keeps_too_much", "test_keeps_little_enough"})
        text = subprocess.run([REPORT, "--no-progress", self.trace], capture_output=True, text=True).stdout
        self.assertIn("2 over their own limit", text)
        self.assertIn("OVER ITS OWN LIMIT test_limits.py::test_peak_over_limit: gpu_memory_limit", text)
        self.assertIn("OVER ITS OWN LIMIT test_limits.py::test_keeps_too_much: gpu_leak_limit", text)

    def test_figures_are_gpumem_reports(self):
        proc = subprocess.run([REPORT, "--format", "json", "--no-progress", self.trace], capture_output=True, text=True)
        scopes = {s["name"]: s for s in json.loads(proc.stdout)["scopes"]}
        self.assertEqual(scopes["test_limits.py::test_keeps_too_much"]["leaked_bytes"], 2 * MiB)
        self.assertEqual(scopes["test_limits.py::test_peak_over_limit"]["peak_bytes"], 8 * MiB)

    def test_without_the_library_nothing_is_added(self):
        proc, _ = self.run_suite(preload=False)
        self.assertNotIn("GPU memory per test", proc.stdout)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)  # the markers check nothing untraced
        self.assertIn("6 passed", proc.stdout.strip().splitlines()[-1])

    def test_a_limit_the_recorder_cannot_see_is_not_a_pass(self):
        # The CUDA runtime called through its own dlopen handle (RTLD_LOCAL): no GPU memory event reaches
        # the recorder, and every figure is 0 B. A limit is then not a pass but a failure that says why.
        proc, _ = self.run_suite(suite=INVISIBLE)
        out = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 1, out)
        self.assertIn("1 failed", proc.stdout.strip().splitlines()[-1])
        self.assertIn("the GPU memory limits of test_limits.py::test_96_mib_unseen cannot be checked: no GPU memory "
                      "event of this process has reached the recorder", out)
        self.assertIn("no GPU memory event of this process reached the recorder: 0 B means nothing was seen", out)

    def test_most_allocations_and_stacks_as_pytest_memray_has_them(self):
        proc, _ = self.run_suite(suite=DEEP, args=("--most-allocations", "2", "--stacks", "1"))
        section = proc.stdout.split("GPU memory per test (gpumemtrace)", 1)[1]
        rows = [line.split()[0] for line in section.splitlines() if line.startswith("test_limits.py::")]
        self.assertEqual(rows, ["test_limits.py::test_big", "test_limits.py::test_middle"])  # the 2 highest peaks
        self.assertIn("... and 2 more", section)
        m = re.search(r"allocated here:\n\s+_keep \(.*test_limits\.py:\d+\)\n(.*)", proc.stdout)
        self.assertTrue(m, proc.stdout)
        self.assertNotIn("test_deep (", m.group(1))  # one frame only
        proc, _ = self.run_suite(suite=DEEP)  # the defaults: every test, more frames
        section = proc.stdout.split("GPU memory per test (gpumemtrace)", 1)[1]
        self.assertEqual(len([line for line in section.splitlines() if line.startswith("test_limits.py::")]), 4)
        self.assertRegex(proc.stdout, r"allocated here:\n\s+_keep \(.*\)\n\s+test_deep \(.*test_limits\.py:\d+\)")

    def test_summary_can_be_turned_off(self):
        proc, _ = self.run_suite(env_extra={"GPUMEMTRACE_PYTEST_SUMMARY": "0"})
        self.assertNotIn("GPU memory per test", proc.stdout)
        self.assertIn("3 failed, 3 passed", proc.stdout.strip().splitlines()[-1])
