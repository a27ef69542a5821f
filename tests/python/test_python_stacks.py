# tests/python/test_python_stacks.py — Python frames in native stacks, on every CPython this machine has.
"""Python frames in native stacks, on every CPython this machine has.

Runs tests/python/progs/python_stack_prog.py under each interpreter with the frame reader built into a
test library (build/tests/python/libpython_stack_probe.so, `make python-probe`). The program captures
stacks from named functions with the GIL released (ctypes.CDLL, like PyTorch) and held (ctypes.PyDLL),
from a thread, through a C -> Python callback (a second eval loop), a generator, a deep recursion, a
non-ASCII name, and from a function whose code object is freed before the stack is resolved.
"""
import glob
import json
import os
import subprocess
import sys
import unittest

from python_testlib import set_preload

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
PROBE = os.path.join(BUILD, "tests", "python", "libpython_stack_probe.so")
PROG = os.path.join(ROOT, "tests", "python", "progs", "python_stack_prog.py")


def interpreters():
    """(label, path) of every supported CPython found: Debian's and pyenv's 3.9-3.13."""
    found = []
    if os.path.exists("/usr/bin/python3"):
        found.append(("system", "/usr/bin/python3"))
    for d in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*")) +
                    glob.glob("/root/.pyenv/versions/3.*")):
        exe = os.path.join(d, "bin", "python3")
        name = os.path.basename(d)
        parts = name.split(".")
        if os.path.exists(exe) and len(parts) >= 2 and parts[1].isdigit() and 9 <= int(parts[1]) <= 13 \
                and not name.endswith("t") and (name, exe) not in found:
            found.append((name, exe))
    seen, out = set(), []
    for label, exe in found:
        real = os.path.realpath(exe)
        if real not in seen:
            seen.add(real)
            out.append((label, exe))
    return out


def unsupported_interpreter():
    for d in sorted(glob.glob("/root/.pyenv/versions/3.[5678].*")):
        exe = os.path.join(d, "bin", "python3")
        if os.path.exists(exe):
            return exe
    return None


def prog_line(text):
    with open(PROG, encoding="utf-8") as f:
        return f.read().splitlines().index(text) + 1


def pyframes(stack):
    return [f for f in stack if f[0] == "P"]


@unittest.skipUnless(os.path.exists(PROBE), "probe library not built (make python-probe)")
class PythonStackTest(unittest.TestCase):
    results = {}

    @classmethod
    def setUpClass(cls):
        for label, exe in interpreters():
            proc = subprocess.run([exe, PROG, PROBE], capture_output=True, text=True, timeout=120,
                                  env=set_preload(dict(os.environ), recorder=False))
            cls.results[label] = (proc, exe)

    def each(self):
        self.assertTrue(self.results, "no CPython 3.9-3.13 found")
        for label, (proc, exe) in self.results.items():
            with self.subTest(python=label):
                self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
                self.assertNotIn("gpumemtrace:", proc.stderr)  # no warning on a supported version
                yield label, json.loads(proc.stdout)

    def assert_names(self, stack, names, label):
        got = [f[1] for f in pyframes(stack)]
        self.assertEqual(got[:len(names)], names, f"{label}: {stack}")

    def assert_no_eval_frames_left(self, stack, label):
        """Every native eval-loop frame was replaced by the Python frames it ran."""
        evals = [f for f in stack if f[0] == "N" and f[1] == "_PyEval_EvalFrameDefault"]
        self.assertEqual(evals, [], f"{label}: {stack}")

    def test_gil_released_cdll(self):
        for label, r in self.each():
            st = r["cdll"]
            self.assert_names(st, ["probe", "alloc_cdll"], label)
            names = [f[1] for f in pyframes(st)]
            self.assertIn(names[2], ("forward", "Model.forward"))  # co_qualname on 3.11+
            self.assertEqual(names[3:], ["train_step", "<module>"])
            for f in pyframes(st):
                self.assertEqual(f[2], PROG)
            line = prog_line("    return probe(cdll)  # LINE_CDLL")
            self.assertEqual(pyframes(st)[1][3], line)
            self.assert_no_eval_frames_left(st, label)
            # The merged stack keeps native frames on both sides: the ctypes call inside, the
            # interpreter's entry outside.
            first_py = next(i for i, f in enumerate(st) if f[0] == "P")
            self.assertTrue(any("ffi_call" in f[1] for f in st[:first_py]), st)
            self.assertTrue(any(f[0] == "N" and "Py_RunMain" in f[1] for f in st[first_py:]), st)

    def test_gil_held_pydll(self):
        for label, r in self.each():
            self.assert_names(r["pydll"], ["probe", "alloc_pydll", "<module>"], label)
            line = prog_line("    return probe(pydll)  # LINE_PYDLL")
            self.assertEqual(pyframes(r["pydll"])[1][3], line)

    def test_thread(self):
        for label, r in self.each():
            names = [f[1] for f in pyframes(r["thread"])]
            self.assertEqual(names[:3], ["probe", "alloc_cdll", "thread_body"], label)
            self.assertTrue(names[-1].endswith("_bootstrap"), names)

    def test_callback_two_eval_loops(self):
        """Python -> qsort -> Python: the native frames of the C call sit between the two runs."""
        for label, r in self.each():
            st = r["callback"]
            self.assert_names(st, ["probe", "alloc_cdll", "compare", "sort_with_callback", "<module>"],
                              label)
            i = next(i for i, f in enumerate(st) if f[0] == "P" and f[1] == "compare")
            j = next(i for i, f in enumerate(st) if f[0] == "P" and f[1] == "sort_with_callback")
            between = [f[1] for f in st[i + 1:j]]
            self.assertTrue(any("ffi_call" in n or "qsort" in n or "msort" in n for n in between),
                            f"{label}: {between}")
            self.assert_no_eval_frames_left(st, label)

    def test_generator(self):
        for label, r in self.each():
            self.assert_names(r["generator"], ["probe", "alloc_cdll", "gen", "use_generator", "<module>"],
                              label)

    def test_freed_code_object(self):
        """Resolved after the function was deleted and its memory churned: still right."""
        for label, r in self.each():
            st = pyframes(r["freed"])
            self.assertEqual([f[1] for f in st], ["ephemeral_fn", "store_from_exec", "<module>"], label)
            self.assertEqual((st[0][2], st[0][3]), ("<ephemeral>", 3))

    def test_deep_stack_keeps_outermost(self):
        for label, r in self.each():
            depth, frames = r["deep"]
            self.assertEqual(depth, 32, label)
            self.assertTrue(frames[0].startswith("recurse:"), frames)
            self.assertTrue(frames[-1].startswith("<module>:"), frames)

    def test_unicode_names(self):
        for label, r in self.each():
            names = [f[1] for f in pyframes(r["unicode"])]
            self.assertEqual(names[2], "größe_berechnen", label)

    def test_code_table_bounded(self):
        for label, r in self.each():
            # Only the code objects that were on a captured stack are copied (not the 2000 junk ones).
            self.assertLess(r["code_entries"], 100, label)

    # GPUMEMTRACE_PYTHON=0 is decided by the recorder (Config::python_frames), not by the frame reader
    # this probe drives: test_python_trace.PythonTraceTest.test_disabled checks it end to end.


@unittest.skipUnless(os.path.exists(PROBE), "probe library not built (make python-probe)")
class UnsupportedPythonTest(unittest.TestCase):
    def test_unknown_version_warns_once_and_captures_nothing(self):
        exe = unsupported_interpreter()
        if not exe:
            self.skipTest("no CPython older than 3.9 installed")
        code = ("import ctypes,sys\nlib=ctypes.CDLL(sys.argv[1])\nb=ctypes.create_string_buffer(65536)\n"
                "n=[lib.gpumemtrace_probe_stack(b,65536) for _ in range(5)]\nprint(sum(n))\n")
        proc = subprocess.run([exe, "-c", code, PROBE], capture_output=True, text=True, timeout=60,
                              env=set_preload(dict(os.environ), recorder=False))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "0")
        self.assertEqual(proc.stderr.count("gpumemtrace:"), 1, proc.stderr)
        self.assertIn("not supported for Python frames", proc.stderr)


if __name__ == "__main__":
    unittest.main()
