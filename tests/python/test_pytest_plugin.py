# tests/python/test_pytest_plugin.py — the pytest plugin: one scope per test, checked on a generated suite.
"""The pytest plugin (tools/python/gpumemtrace_pytest.py) on a small generated suite with the
stand-in torch, under LD_PRELOAD=libgpumemtrace.so and the simulated CUDA runtime: one scope per test
named by its node id, opened after fixture setup and closed after teardown; before each end
torch.cuda.synchronize, clearCublasWorkspaces and a drain of PyTorch's history, and a gc.collect only
with GPUMEMTRACE_PYTEST_GC=1 (the suite disables automatic collections, so a full collection inside
a scope is the plugin's; test_pytest_gc.py has why and what the report makes of cycles); a leaking
test's block inside its scope with no free; a test that failed or errored ends its scope marked
failed (not checked: pytest keeps its traceback, and its locals with it), unless
GPUMEMTRACE_PYTEST_CHECK_FAILED=1; the test run itself unchanged, and no plugin effect without the
library or with GPUMEMTRACE_PYTEST=0.
"""
import os
import subprocess
import tempfile
import unittest

from python_testlib import BUILD, LIB, ROOT, SIM, python_with_pytest, read_trace, set_preload

TOOLS = os.path.join(ROOT, "tools", "python")
FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")
PYTHON = python_with_pytest()

CONFTEST = '''
import gc, os, time

gc.disable()   # so that a full collection inside a test's scope can only be an explicit one

def _note_full_collection(phase, info):
    if phase == "start" and info["generation"] == 2:
        with open(os.environ["FAKE_TORCH_CALL_LOG"], "a") as f:
            f.write("gc %d\\n" % time.monotonic_ns())

gc.callbacks.append(_note_full_collection)
'''

SUITE = '''
import pytest
import torch

KEPT = []


@pytest.fixture
def weights():
    return torch.empty(7168, device="cuda")   # during setup: outside the test's scope


@pytest.fixture
def scratch():
    held = []
    yield held
    held.clear()                               # frees at teardown what the test put here


def test_clean(weights, scratch):
    t = torch.empty(3072, device="cuda")
    del t
    scratch.append(torch.empty(4096, device="cuda"))


def test_leaks():
    KEPT.append(torch.empty(5120, device="cuda"))   # module-level list: never freed


@pytest.fixture
def broken():
    raise RuntimeError("setup fails")


def test_setup_error(broken):
    pass


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass


def test_fails_holding_a_tensor():
    t = torch.empty(6144, device="cuda")
    assert t is None                           # fails: pytest keeps the traceback, and t with it


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown fails")


def test_teardown_error(broken_teardown):
    KEPT.append(torch.empty(2048, device="cuda"))
'''

CLEAN = "test_suite.py::test_clean"
LEAKS = "test_suite.py::test_leaks"
FAILS = "test_suite.py::test_fails_holding_a_tensor"
TEARDOWN_ERROR = "test_suite.py::test_teardown_error"
SUMMARY = "1 failed, 3 passed, 1 skipped, 2 errors"
REPORT = os.path.join(BUILD, "gpumem-report")


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM), "needs build/libgpumemtrace.so and the sim")
@unittest.skipUnless(PYTHON, "needs pytest (make deps installs python3-pytest)")
class PytestPluginTest(unittest.TestCase):
    def run_suite(self, preload=True, plugin=True, env_extra=None):
        """(CompletedProcess, events, calls): the trace's events and the stand-in's call log
        [(name, t)]."""
        d = tempfile.mkdtemp(prefix="gpumemtrace-pytest-")
        for name, text in (("conftest.py", CONFTEST), ("test_suite.py", SUITE)):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        out, log = os.path.join(d, "trace.jsonl"), os.path.join(d, "calls.log")
        env = dict(os.environ, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_QUIET="1", FAKE_TORCH_CUDART=SIM,
                   FAKE_TORCH_CALL_LOG=log, PYTHONPATH=os.pathsep.join([TOOLS, FAKE]))
        for k in ("PYTEST_PLUGINS", "PYTEST_ADDOPTS", "GPUMEMTRACE_PYTEST"):
            env.pop(k, None)
        set_preload(env, recorder=preload)
        if plugin:
            env["PYTEST_PLUGINS"] = "gpumemtrace_pytest"
        env.update(env_extra or {})
        proc = subprocess.run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_suite.py"],
                              cwd=d, capture_output=True, text=True, env=env, timeout=120)
        self.last_trace = out
        events = read_trace(out)[0] if os.path.exists(out) else []
        calls = []
        if os.path.exists(log):
            with open(log) as f:
                calls = [(name, int(t)) for name, t in (line.split() for line in f)]
        return proc, events, calls

    @classmethod
    def setUpClass(cls):
        cls.proc, cls.events, cls.calls = cls.run_suite(cls)
        cls.trace = cls.last_trace

    def scope(self, node_id):
        (begin,) = [e for e in self.events if e["op"] == "scope_begin" and e["label"] == node_id]
        (end,) = [e for e in self.events if e["op"] == "scope_end" and e["label"] == node_id]
        return begin, end

    def test_one_scope_per_test_that_ran(self):
        self.assertEqual(self.proc.returncode, 1, self.proc.stdout + self.proc.stderr)  # the failures
        scopes = [(e["op"], e["label"]) for e in self.events if e["op"] in ("scope_begin", "scope_end")]
        self.assertEqual(scopes, [("scope_begin", CLEAN), ("scope_end", CLEAN),
                                  ("scope_begin", LEAKS), ("scope_end", LEAKS),
                                  ("scope_begin", FAILS), ("scope_end", FAILS),
                                  ("scope_begin", TEARDOWN_ERROR), ("scope_end", TEARDOWN_ERROR)])
        for e in self.events:
            if e["op"].startswith("scope_"):
                self.assertEqual((e["api"], e["kind"]), ("pytest", "none"))

    def test_failed_and_errored_tests_end_marked_failed(self):
        # A scope_end with result 1: the work inside failed (docs/trace-format.md, "Scopes").
        results = {e["label"]: e.get("result", 0) for e in self.events if e["op"] == "scope_end"}
        self.assertEqual(results, {CLEAN: 0, LEAKS: 0, FAILS: 1, TEARDOWN_ERROR: 1})
        # The failed test's tensor is alive at its end (the traceback): a leak but for the failure.
        begin, end = self.scope(FAILS)
        (held,) = [e for e in self.events if e["op"] == "block_alloc" and e["size"] == 6144]
        self.assertTrue(begin["t"] < held["t"] < end["t"])
        freed = [e for e in self.events if e["op"] == "block_free" and e["addr"] == held["addr"]]
        self.assertTrue(not freed or freed[0]["seq"] > end["seq"], freed)

    def gate(self, trace):
        return subprocess.run([REPORT, "--fail-on-leak", "--no-progress", trace], capture_output=True, text=True,
                              timeout=120)

    def test_report_lists_failed_tests_as_not_checked(self):
        p = self.gate(self.trace)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # test_leaks still fails the gate
        self.assertIn("not checked: the test failed: " + FAILS, p.stdout)
        self.assertIn("not checked: the test failed: " + TEARDOWN_ERROR, p.stdout)
        failures = [line for line in p.stderr.splitlines() if "FAILED" in line and "::" in line]
        self.assertEqual(len(failures), 1, p.stderr)
        self.assertIn(LEAKS + " leaked", failures[0])

    def test_check_failed_tests_on_request(self):
        proc, events, _ = self.run_suite(env_extra={"GPUMEMTRACE_PYTEST_CHECK_FAILED": "1"})
        self.assertIn(SUMMARY, proc.stdout)
        self.assertEqual([e.get("result", 0) for e in events if e["op"] == "scope_end"], [0, 0, 0, 0])
        p = self.gate(self.last_trace)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertNotIn("not checked", p.stdout)
        failed = " ".join(line for line in p.stderr.splitlines() if "FAILED" in line)
        for node_id in (LEAKS, TEARDOWN_ERROR):
            self.assertIn(node_id + " leaked", failed)
        # The failed test's tensor: kept by the traceback pytest holds until the next test's call, a
        # reference cycle once let go, freed by the collect at the session's end: no leak of the test.
        self.assertNotIn(FAILS + " leaked", failed)
        self.assertIn("held until garbage collection: " + FAILS + ": 6.0 KiB in 1 allocation", p.stdout)

    def test_test_run_unchanged(self):
        bare, events, _ = self.run_suite(plugin=False)
        self.assertEqual([e for e in events if e["op"].startswith("scope_")], [])
        summary = lambda p: p.stdout.strip().splitlines()[-1].split(" in ")[0]  # noqa: E731
        self.assertEqual(summary(self.proc), summary(bare))
        self.assertIn(SUMMARY, summary(self.proc))
        self.assertEqual(self.proc.returncode, bare.returncode)

    def test_setup_outside_teardown_inside(self):
        begin, end = self.scope(CLEAN)
        blocks = {e["size"]: e for e in self.events if e["op"] == "block_alloc"}
        self.assertLess(blocks[7168]["t"], begin["t"])               # fixture setup: before the scope
        for size in (3072, 4096):
            self.assertTrue(begin["t"] < blocks[size]["t"] < end["t"], size)
        frees = {e["addr"]: e for e in self.events if e["op"] == "block_free"}
        teardown_free = frees[blocks[4096]["addr"]]                   # freed by the fixture's teardown
        self.assertTrue(begin["t"] < teardown_free["t"] < end["t"])
        self.assertLess(teardown_free["seq"], end["seq"])            # drained before the end mark

    def test_leaking_block_inside_its_scope_never_freed(self):
        begin, end = self.scope(LEAKS)
        (leak,) = [e for e in self.events if e["op"] == "block_alloc" and e["size"] == 5120]
        self.assertTrue(begin["t"] < leak["t"] < end["t"])
        self.assertLess(leak["seq"], end["seq"])  # drained before the end mark
        self.assertEqual([e for e in self.events if e["op"] == "block_free" and e["addr"] == leak["addr"]], [])

    def calls_inside(self, events, calls, node_id):
        (begin,) = [e for e in events if e["op"] == "scope_begin" and e["label"] == node_id]
        (end,) = [e for e in events if e["op"] == "scope_end" and e["label"] == node_id]
        return [(name, t) for name, t in calls if begin["t"] < t < end["t"]]

    def test_settles_memory_before_each_end(self):
        for node_id in (CLEAN, LEAKS):
            inside = self.calls_inside(self.events, self.calls, node_id)
            names = [name for name, _ in inside]
            for name in ("synchronize", "clearCublasWorkspaces"):
                self.assertIn(name, names, (node_id, inside))
            self.assertNotIn("gc", names, (node_id, inside))  # garbage collection left as the suite has it
            last = lambda n: max(t for name, t in inside if name == n)  # noqa: E731
            self.assertLess(last("synchronize"), last("clearCublasWorkspaces"))
        # The plugin's one collect: at the session's end, after every test's scope.
        last_end = max(e["t"] for e in self.events if e["op"] == "scope_end")
        self.assertEqual(len([t for name, t in self.calls if name == "gc" and t > last_end]), 1, self.calls)

    def test_collects_before_each_end_on_request(self):
        proc, events, calls = self.run_suite(env_extra={"GPUMEMTRACE_PYTEST_GC": "1"})
        self.assertIn(SUMMARY, proc.stdout)
        for node_id in (CLEAN, LEAKS):
            inside = self.calls_inside(events, calls, node_id)
            last = lambda n: max(t for name, t in inside if name == n)  # noqa: E731
            self.assertLess(last("gc"), last("synchronize"), (node_id, inside))
            self.assertLess(last("synchronize"), last("clearCublasWorkspaces"))

    def test_nothing_without_the_library(self):
        proc, events, calls = self.run_suite(preload=False)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn(SUMMARY, proc.stdout)
        self.assertEqual(events, [])
        self.assertEqual([c for c in calls if c[0] not in ("gc", "snapshot")], [])  # no synchronize, no clear

    def test_off_with_gpumemtrace_pytest_0(self):
        proc, events, calls = self.run_suite(env_extra={"GPUMEMTRACE_PYTEST": "0"})
        self.assertIn(SUMMARY, proc.stdout)
        self.assertEqual([e for e in events if e["op"].startswith("scope_")], [])
        self.assertTrue([e for e in events if e["op"] == "block_alloc"])
        # The PyTorch hook still turns the history on; the plugin calls nothing (no synchronize, no clear).
        self.assertEqual([c for c in calls if c[0] not in ("gc", "snapshot")
                          and not c[0].startswith("record_memory_history/")], [])


if __name__ == "__main__":
    unittest.main()
