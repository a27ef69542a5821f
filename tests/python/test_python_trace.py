# tests/python/test_python_trace.py — Python frames in the trace of a Python program under the recorder.
"""End to end: Python frames in the trace of a Python program under LD_PRELOAD=libgpumemtrace.so.

tests/python/progs/python_cuda_prog.py calls the simulated runtime (build/sim/libcudart.so.13) through
ctypes from named functions, with the GIL released (CDLL) and held (PyDLL), on the main thread and a
worker thread, on every CPython 3.9-3.13 the machine has. The trace's stacks must name those functions
with file and line, merged with the native frames; the program's output and exit code are unchanged.
"""
import glob
import os
import signal
import subprocess
import tempfile
import unittest

from test_python_stacks import interpreters

import python_testlib
from python_testlib import BUILD, LIB, ROOT, SIM, read_trace
PROG = os.path.join(ROOT, "tests", "python", "progs", "python_cuda_prog.py")


def prog_line(marker):
    return python_testlib.prog_line(PROG, marker)


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM),
                     "needs build/libgpumemtrace.so and build/sim/libcudart.so.13")
class PythonTraceTest(unittest.TestCase):
    def run_prog(self, exe, mode, extra_env=None):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "trace.jsonl")
            env = dict(os.environ, LD_PRELOAD=python_testlib.PRELOAD, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_QUIET="1",
                       GPUMEMTRACE_FREE_STACKS="1")  # stacks of every event, frees included
            env.update(extra_env or {})
            proc = subprocess.run([exe, PROG, SIM, mode], capture_output=True, text=True, env=env,
                                  timeout=120)
            self.assertEqual(proc.returncode, 3, proc.stderr[-3000:])
            self.assertEqual(proc.stdout, "program output\n")
            return read_trace(out)

    def test_stacks_name_python_lines(self):
        malloc_line, free_line = prog_line("LINE_MALLOC"), prog_line("LINE_FREE")
        for label, exe in interpreters():
            for mode in ("cdll", "pydll"):
                with self.subTest(python=label, mode=mode):
                    events, stack_of = self.run_prog(exe, mode)
                    allocs = [e for e in events if e["op"] == "alloc" and e.get("api") == "cudaMalloc"]
                    self.assertEqual(len(allocs), 2, events)
                    for ev, caller in zip(allocs, ("forward", "worker")):
                        st = stack_of(ev)
                        py = [f for f in st if f.get("lang") == "python"]
                        self.assertTrue(py, f"no Python frames: {st}")
                        self.assertEqual(py[0]["function"], "allocate_activations")
                        self.assertEqual((py[0]["file"], py[0]["line"]), (PROG, malloc_line))
                        self.assertTrue(py[1]["function"].endswith(caller), py)
                        # merged, not appended: native frames both inside and outside the Python run
                        first = st.index(py[0])
                        self.assertGreater(first, 0)
                        self.assertNotIn("_PyEval_EvalFrameDefault",
                                         [f.get("function") for f in st if f.get("lang") != "python"])
                    frees = [e for e in events if e["op"] == "free" and e.get("api") == "cudaFree"]
                    self.assertEqual(len(frees), 2)
                    py = [f for f in stack_of(frees[0]) if f.get("lang") == "python"]
                    self.assertEqual((py[0]["function"], py[0]["line"]), ("release", free_line))

    def test_libpython_loaded_late(self):
        # A host that is not Python allocates first (no CPython yet), then loads libpython and runs
        # Python that allocates: the writer notes the new libpython and the next capture finds it.
        host = os.path.join(BUILD, "tests", "python", "late_python_host")
        libs = [(exe, glob.glob(os.path.join(os.path.dirname(os.path.dirname(exe)), "lib", "libpython3.*.so.1.0")))
                for _, exe in interpreters()]
        libs = [(exe, l[0]) for exe, l in libs if l]
        if not os.path.exists(host) or not libs:
            self.skipTest("needs build/tests/python/late_python_host and a shared libpython")
        exe, libpython = libs[0]
        code = ("import ctypes\n"
                "def alloc_late():\n"
                "    p = ctypes.c_void_p()\n"
                "    ctypes.CDLL(None).cudaMalloc(ctypes.byref(p), 5353)  # LINE_LATE\n"
                "alloc_late()\n")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "trace.jsonl")
            env = dict(os.environ, LD_PRELOAD=python_testlib.PRELOAD, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_QUIET="1",
                       PYTHONHOME=os.path.dirname(os.path.dirname(exe)))
            env.pop("PYTHONPATH", None)
            proc = subprocess.run([host, libpython, code], capture_output=True, text=True, env=env,
                                  timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            events, stack_of = read_trace(out)
        allocs = {e["size"]: e for e in events if e["op"] == "alloc"}
        self.assertFalse([f for f in stack_of(allocs[4242]) if f.get("lang") == "python"])
        py = [f for f in stack_of(allocs[5353]) if f.get("lang") == "python"]
        self.assertEqual([(f["function"], f["line"]) for f in py], [("alloc_late", 4), ("<module>", 5)])

    def test_disabled(self):
        label, exe = interpreters()[0]
        events, stack_of = self.run_prog(exe, "cdll", {"GPUMEMTRACE_PYTHON": "0"})
        allocs = [e for e in events if e["op"] == "alloc"]
        self.assertTrue(allocs)
        self.assertFalse([f for f in stack_of(allocs[0]) if f.get("lang") == "python"])



@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM),
                     "needs build/libgpumemtrace.so and build/sim/libcudart.so.13")
class PythonKillsItself(unittest.TestCase):
    """A Python program that ends by killing itself after putting the signal's default action back
    (CPython does so for an uncaught KeyboardInterrupt, after its exit handlers, without exit()) still
    leaves a whole trace whose footer names the signal (interpose/hooks/self_kill.cpp)."""

    CODE = ("import ctypes, os, signal, sys\n"
            "ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)\n"
            "rt = ctypes.CDLL(None)\n"
            "p = ctypes.c_void_p()\n"
            "assert rt.cudaMalloc(ctypes.byref(p), 6161) == 0\n"
            "if sys.argv[2] == 'interrupt':\n"
            "    raise KeyboardInterrupt\n"
            "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n")

    def run_prog(self, how):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "trace.jsonl")
            env = dict(os.environ, LD_PRELOAD=python_testlib.PRELOAD, GPUMEMTRACE_OUTPUT=out,
                       GPUMEMTRACE_QUIET="1")
            proc = subprocess.run(["python3", "-c", self.CODE, SIM, how], capture_output=True, text=True,
                                  env=env, timeout=120)
            records = [r for r in tracefile_records(out)]
            return proc, records

    def check(self, how, sig):
        proc, records = self.run_prog(how)
        self.assertEqual(proc.returncode, -sig, proc.stderr[-3000:])
        footers = [r for r in records if r["type"] == "footer"]
        self.assertEqual(len(footers), 1, records[-3:])
        self.assertEqual((footers[0]["end"], footers[0]["signal"]), ("signal", sig))
        sizes = [r["size"] for r in records if r["type"] == "event" and r.get("op") == "alloc"]
        self.assertIn(6161, sizes)

    def test_uncaught_keyboard_interrupt(self):
        self.check("interrupt", signal.SIGINT)

    def test_kill_self_after_restoring_the_default(self):
        self.check("kill", signal.SIGTERM)


def tracefile_records(path):
    import tracefile
    return tracefile.read_records(path)[0]

if __name__ == "__main__":
    unittest.main()
