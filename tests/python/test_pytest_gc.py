# tests/python/test_pytest_gc.py — the pytest plugin leaves garbage collection as the suite has it, and
# memory a reference cycle held until a later collection is not a test's leak.
"""The pytest plugin (tools/python/gpumemtrace_pytest.py) and garbage collection, on a generated suite
run by `gpumemtrace run -- python -m pytest` with the simulated CUDA runtime and the stand-in torch.

The suite's conftest calls gc.disable(); test_a leaves a reference cycle that holds a CUDA allocation
(ctypes cudaMalloc, freed by __del__) and one that holds a PyTorch tensor, and keeps weak references to
them; test_b asserts that both are still alive; test_leaks keeps a tensor in a module-level list (a
real leak). Plainly, the suite passes. Under gpumemtrace it passes too: the plugin calls no
gc.collect() between tests (the one it used to call freed test_a's cycles before test_b ran, so
test_b failed). The trace has "gc" records; gpumem-report does not call test_a a leak but lists its
memory as held until garbage collection (text, JSON, the pytest summary), freed by the plugin's collect
at the session's end; test_leaks is still a leak and fails --fail-on-leak. GPUMEMTRACE_PYTEST_GC=1
brings back the per-test collect (test_b fails, as it did). Outside pytest, gpumemtrace.gc_callback()
writes one record per collection that freed objects, and gpumemtrace_report_gc() refuses a start of 0
or in the future.
"""
import json
import os
import subprocess
import tempfile
import time
import unittest

from python_testlib import BUILD, LIB, ROOT, SIM, python_with_pytest, set_preload

sys_path_tests = os.path.join(ROOT, "tests")
import sys  # noqa: E402
sys.path.insert(0, sys_path_tests)
import tracefile  # noqa: E402

TOOLS = os.path.join(ROOT, "tools", "python")
FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")
LAUNCHER = os.path.join(BUILD, "gpumemtrace")
REPORT = os.path.join(BUILD, "gpumem-report")
PYTHON = python_with_pytest()
MiB = 1 << 20

CONFTEST = '''
import gc

gc.disable()   # the suite manages garbage collection itself
'''

SUITE = '''
import ctypes
import os
import weakref

import torch

ctypes.CDLL(os.environ["SIM_CUDART"], mode=ctypes.RTLD_GLOBAL)
cuda = ctypes.CDLL(None)   # through the global scope, where the recorder's hooks are


class Buffer:
    """3 MiB of device memory, freed when the object is."""

    def __init__(self, size):
        self.ptr = ctypes.c_void_p()
        assert cuda.cudaMalloc(ctypes.byref(self.ptr), ctypes.c_size_t(size)) == 0
        self.me = self                        # a reference cycle: only the collector frees it

    def __del__(self):
        cuda.cudaFree(self.ptr)


class Holder:
    def __init__(self):
        self.tensor = torch.empty(5 << 20, device="cuda")
        self.me = self                        # a reference cycle around a tensor


ALIVE = []
KEPT = []


def test_a():
    ALIVE.append(weakref.ref(Buffer(3 << 20)))
    ALIVE.append(weakref.ref(Holder()))


def test_b():
    assert [r() is not None for r in ALIVE] == [True, True], "test_a's objects were collected"


def test_leaks():
    KEPT.append(torch.empty(7 << 20, device="cuda"))   # kept for good: a leak
'''

A, B, LEAKS = "test_suite.py::test_a", "test_suite.py::test_b", "test_suite.py::test_leaks"


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM) and os.access(LAUNCHER, os.X_OK),
                     "needs build/libgpumemtrace.so, the launcher and the sim")
@unittest.skipUnless(PYTHON, "needs pytest (make deps installs python3-pytest)")
class PytestGarbageCollectionTest(unittest.TestCase):
    def run_suite(self, traced=True, env_extra=None):
        """(CompletedProcess, trace path or None)."""
        d = tempfile.mkdtemp(prefix="gpumemtrace-pytest-gc-")
        for name, text in (("conftest.py", CONFTEST), ("test_suite.py", SUITE)):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        env = dict(os.environ, SIM_CUDART=SIM, FAKE_TORCH_CUDART=SIM, GPUMEMTRACE_QUIET="1",
                   PYTHONPATH=FAKE)
        for k in ("PYTEST_PLUGINS", "PYTEST_ADDOPTS", "GPUMEMTRACE_PYTEST", "GPUMEMTRACE_PYTEST_GC",
                  "GPUMEMTRACE_OUTPUT", "GPUMEMTRACE_LIBRARY", "GPUMEMTRACE_REPORT"):
            env.pop(k, None)
        set_preload(env, recorder=False)  # the launcher adds the recorder
        env.update(env_extra or {})
        pytest = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_suite.py"]
        cmd = [LAUNCHER, "run", "-o", "t", "--", *pytest] if traced else pytest
        proc = subprocess.run(cmd, cwd=d, capture_output=True, text=True, env=env, timeout=120)
        traces = os.listdir(os.path.join(d, "t")) if traced else []
        if len(traces) != int(traced):  # (also from setUpClass: no assert* there)
            raise AssertionError(f"{len(traces)} traces: {proc.stdout}{proc.stderr}")
        return proc, os.path.join(d, "t", traces[0]) if traces else None

    @classmethod
    def setUpClass(cls):
        cls.proc, cls.trace = cls.run_suite(cls)

    def report(self, *args):
        return subprocess.run([REPORT, "--no-progress", *args, self.trace], capture_output=True, text=True,
                              timeout=120)

    def scopes(self):
        p = self.report("--format", "json")
        self.assertIn(p.returncode, (0, 1), p.stderr)
        return {s["name"]: s for s in json.loads(p.stdout)["scopes"]}

    def test_suite_passes_plainly_and_under_gpumemtrace(self):
        plain, _ = self.run_suite(traced=False)
        self.assertEqual(plain.returncode, 0, plain.stdout + plain.stderr)
        self.assertIn("3 passed", plain.stdout)
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout + self.proc.stderr)
        self.assertIn("3 passed", self.proc.stdout)

    def test_collections_are_recorded(self):
        records = tracefile.read_records(self.trace)[0]
        windows = [r for r in records if r["type"] == "gc"]
        self.assertTrue(windows)  # the session-end collect at least (the suite disabled the others)
        ends = [r for r in records if r["type"] == "event" and r["op"] == "scope_end"]
        last = windows[-1]
        self.assertLessEqual(last["t"], last["end_time"])
        self.assertGreater(last["t"], max(e["t"] for e in ends))  # after every test's end
        # The cycle's cudaFree ran inside it, on its thread.
        buffer = next(r for r in records if r["type"] == "event" and r["op"] == "alloc" and r["size"] == 3 * MiB)
        (free,) = [r for r in records if r["type"] == "event" and r["op"] == "free" and r["addr"] == buffer["addr"]]
        self.assertTrue(last["t"] <= free["t"] <= last["end_time"], (last, free))
        self.assertEqual(free["tid"], last["tid"])

    def test_cycle_is_held_until_garbage_collection_not_a_leak(self):
        scopes = self.scopes()
        a = scopes[A]
        self.assertEqual((a["leaked_bytes"], a["leaked_count"], a["leaks"]), (0, 0, []))
        # The CUDA buffer (exact times) and the tensor's block (PyTorch's times, drained at the end).
        self.assertEqual(a["held_until_gc_bytes"], 8 * MiB)
        self.assertEqual(a["held_until_gc_count"], 2)
        self.assertEqual(sorted(h["bytes"] for h in a["held_until_gc"]), [3 * MiB, 5 * MiB])
        where = {f.get("function") for h in a["held_until_gc"] for f in h["stack"]}
        self.assertIn("Buffer.__init__", where)
        self.assertEqual(scopes[B]["held_until_gc_bytes"], 0)
        self.assertEqual((scopes[LEAKS]["leaked_bytes"], scopes[LEAKS]["held_until_gc_bytes"]), (7 * MiB, 0))

    def test_text_and_gate(self):
        p = self.report("--fail-on-leak")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # test_leaks
        failed = [line for line in p.stderr.splitlines() if "FAILED" in line and "::" in line]
        self.assertEqual(len(failed), 1, p.stderr)
        self.assertIn(LEAKS + " leaked", failed[0])
        self.assertIn("scopes: 3 checked, 1 leaked, 1 held memory until garbage collection", p.stdout)
        self.assertIn("held until garbage collection: " + A + ": 8.0 MiB in 2 allocations", p.stdout)
        self.assertNotIn("LEAK " + A, p.stdout)

    def test_pytest_summary_names_it(self):
        line = next(l for l in self.proc.stdout.splitlines() if l.startswith(A + " "))
        self.assertIn("held until garbage collection: 8.0 MiB", line)
        self.assertNotIn("LEAKED", line)
        self.assertIn("LEAKED", next(l for l in self.proc.stdout.splitlines() if l.startswith(LEAKS + " ")))

    def test_collect_per_test_on_request(self):
        proc, trace = self.run_suite(env_extra={"GPUMEMTRACE_PYTEST_GC": "1"})
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("test_a's objects were collected", proc.stdout)
        self.assertIn("1 failed, 2 passed", proc.stdout)
        p = subprocess.run([REPORT, "--no-progress", "--format", "json", trace], capture_output=True, text=True,
                           timeout=120)
        a = next(s for s in json.loads(p.stdout)["scopes"] if s["name"] == A)
        # Collected before the test's end: freed inside its scope, neither a leak nor held.
        self.assertEqual((a["leaked_bytes"], a["held_until_gc_bytes"]), (0, 0))


@unittest.skipUnless(os.path.exists(LIB), "needs build/libgpumemtrace.so")
class GcCallbackTest(unittest.TestCase):
    """gpumemtrace.gc_callback() outside pytest, and the library's gpumemtrace_report_gc()."""

    def run_python(self, code, preload=True):
        out = os.path.join(tempfile.mkdtemp(prefix="gpumemtrace-gc-"), "t.jsonl")
        env = dict(os.environ, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_QUIET="1", PYTHONPATH=TOOLS)
        set_preload(env, recorder=preload)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.split(), [r for r in tracefile.read_records(out)[0] if r["type"] == "gc"] if preload else []

    def test_one_record_per_collection_that_freed_objects(self):
        out, windows = self.run_python(
            "import gc, gpumemtrace\n"
            "gc.disable(); gc.collect()\n"
            "gc.callbacks.append(gpumemtrace.gc_callback())\n"
            "print(gc.collect())\n"            # nothing to free: no record
            "for _ in range(3):\n"
            "    a = []; a.append(a); del a\n"
            "    print(gc.collect())\n")       # a cycle each time: a record each
        self.assertEqual(out, ["0", "1", "1", "1"])
        self.assertEqual(len(windows), 3)
        for w in windows:
            self.assertLessEqual(w["t"], w["end_time"])
        self.assertEqual(len({w["tid"] for w in windows}), 1)

    def test_report_refuses_a_start_of_zero_or_in_the_future(self):
        out, windows = self.run_python(
            "import ctypes, time\n"
            "r = ctypes.CDLL(None).gpumemtrace_report_gc\n"
            "r.argtypes = [ctypes.c_uint64]\n"
            "now = time.monotonic_ns()\n"
            "print(r(0), r(now + 10**12), r(now))\n")
        self.assertEqual(out, ["-1", "-1", "1"])
        (window,) = windows
        self.assertLessEqual(window["t"], window["end_time"])
        self.assertLess(window["end_time"] - window["t"], 10 * 10**9)

    def test_none_without_the_library(self):
        out, _ = self.run_python("import gpumemtrace; print(gpumemtrace.gc_callback())", preload=False)
        self.assertEqual(out, ["None"])


if __name__ == "__main__":
    unittest.main()
