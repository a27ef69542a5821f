# tests/python/test_python_scopes.py — gpumemtrace.scope and the PyTorch hook's backward() scopes.
"""gpumemtrace.scope (tools/python/gpumemtrace) and the PyTorch hook's backward() scopes
(tools/python/gpumemtrace_torch/backward_scope.py), under LD_PRELOAD=libgpumemtrace.so with the
simulated CUDA runtime and the stand-in torch: the begin/end events (names, api, threads, order, the
caller's Python frame), long names, exceptions passing through, and nothing at all without the library.
"""
import os
import subprocess
import sys
import tempfile
import unittest

import python_testlib
from python_testlib import LIB, PROGS, ROOT, SIM, read_trace

TOOLS = os.path.join(ROOT, "tools", "python")
FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")
PROG = os.path.join(PROGS, "scope_prog.py")
SCOPE_OPS = ("scope_begin", "scope_end")


def run_prog(mode, preload=True, env_extra=None):
    """(CompletedProcess, events, stack_of) of scope_prog.py MODE."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "trace.jsonl")
        env = dict(os.environ, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_QUIET="1", FAKE_TORCH_CUDART=SIM,
                   PYTHONPATH=os.pathsep.join([TOOLS, FAKE]))
        python_testlib.set_preload(env, recorder=preload)
        env.update(env_extra or {})
        proc = subprocess.run([sys.executable, PROG, SIM, mode], capture_output=True, text=True, env=env,
                              timeout=120)
        events, stack_of = read_trace(out) if os.path.exists(out) else ([], None)
        return proc, events, stack_of


def scopes(events):
    return [(e["op"], e["label"]) for e in events if e["op"] in SCOPE_OPS]


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM),
                     "needs build/libgpumemtrace.so and build/sim/libcudart.so.13")
class PythonScopeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, cls.events, stack_of = run_prog("scopes")
        cls.stack_of = staticmethod(stack_of)

    def test_program_sees_the_same_with_and_without_the_library(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        self.assertEqual(self.proc.stderr, "")
        bare, events, _ = run_prog("scopes", preload=False)
        self.assertEqual((bare.returncode, bare.stderr), (0, ""))
        self.assertEqual(events, [])
        traced_lines = self.proc.stdout.splitlines()
        bare_lines = bare.stdout.splitlines()
        self.assertEqual((traced_lines[0], bare_lines[0]), ("active True", "active False"))
        strip_tids = lambda lines: [l for l in lines[1:] if not l.startswith("thread")]  # noqa: E731
        self.assertEqual(strip_tids(traced_lines), strip_tids(bare_lines))
        self.assertIn("returns 4004 6006", traced_lines)
        self.assertIn("caught ValueError('body')", traced_lines)
        self.assertIn("caught KeyError('inside')", traced_lines)
        self.assertIn("enter returns gpumemtrace.scope('eval')", traced_lines)

    def test_context_manager_decorator_nesting_and_exceptions(self):
        main_tid = self.events[0]["tid"]
        main = [e for e in self.events if e["tid"] == main_tid]
        seen = [(e["op"], e.get("label", e.get("size"))) for e in main if e["op"] in SCOPE_OPS + ("alloc",)]
        long_name = [s for s in scopes(self.events) if len(s[1]) > 100][0][1]
        self.assertEqual(seen, [
            ("scope_begin", "eval"), ("alloc", 1001), ("scope_end", "eval"),
            ("scope_begin", "epoch"),
            ("scope_begin", "step"), ("alloc", 2002), ("scope_end", "step"),
            ("scope_begin", "step"), ("alloc", 3003), ("scope_end", "step"),
            ("scope_end", "epoch"),
            ("scope_begin", "boom"), ("scope_end", "boom"),            # the body raised
            ("scope_begin", "failing"), ("alloc", 4004), ("scope_end", "failing"),
            ("scope_begin", long_name), ("alloc", 6006), ("scope_end", long_name)])
        for e in self.events:
            if e["op"] in SCOPE_OPS:
                self.assertEqual((e["api"], e["kind"]), ("gpumemtrace.scope", "none"), e)
                self.assertNotIn("addr", e)

    def test_long_name_survives_intact(self):
        long_name = self.proc.stdout.splitlines()[-1].split(" ", 1)[1]
        self.assertEqual(len(long_name.encode()), 250)
        self.assertEqual([label for _, label in scopes(self.events) if len(label) > 100], [long_name] * 2)

    def test_stack_is_the_callers_python_frame(self):
        begin = [e for e in self.events if e["op"] == "scope_begin" and e["label"] == "eval"][0]
        py = [f for f in self.stack_of(begin) if f.get("lang") == "python"]
        self.assertTrue(py, self.stack_of(begin))
        # Captured like any event: the package's own frames first (scope_begin, __enter__), then
        # the program's.
        package = os.path.join(TOOLS, "gpumemtrace", "__init__.py")
        self.assertEqual([(f["file"], f["function"]) for f in py[:2]],
                         [(package, "scope_begin"), (package, "scope.__enter__")])
        callers = [(f["function"], f["line"]) for f in py]
        self.assertIn(("run_eval", python_testlib.prog_line(PROG, "LINE_EVAL")), callers)

    def test_threads_get_their_own_pairs(self):
        lines = [l.split() for l in self.proc.stdout.splitlines() if l.startswith("thread")]
        self.assertEqual(len(lines), 3)
        for _, i, tid, result in lines:
            mine = [(e["op"], e.get("label", e.get("size"))) for e in self.events
                    if e["tid"] == int(tid) and e["op"] in SCOPE_OPS + ("alloc",)]
            self.assertEqual(mine, [("scope_begin", "step"), ("alloc", 5000 + int(i)), ("scope_end", "step")])
            self.assertEqual(int(result), 2 * (5000 + int(i)))


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM),
                     "needs build/libgpumemtrace.so and build/sim/libcudart.so.13")
class BackwardScopeTest(unittest.TestCase):
    def test_every_backward_call_is_bracketed(self):
        proc, events, stack_of = run_prog("backward")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        out = proc.stdout.splitlines()
        self.assertEqual(out[:3], ["returns None", "wrapped name backward", "caught RuntimeError('grad failed')"])
        thread_tid = int(out[3].split()[1])
        back = [e for e in events if e["op"] in SCOPE_OPS]
        for e in back:
            self.assertEqual((e["api"], e["label"], e["kind"]), ("torch.backward", "backward", "none"), e)
        main_tid = back[0]["tid"]
        self.assertNotEqual(main_tid, thread_tid)
        main_ops = [e["op"] for e in back if e["tid"] == main_tid]
        self.assertEqual(main_ops, [
            "scope_begin", "scope_end",                                  # loss.backward()
            "scope_begin", "scope_begin", "scope_end", "scope_end",      # re-entered from inside
            "scope_begin", "scope_end"])                                 # raised; still closed
        self.assertEqual([e["op"] for e in back if e["tid"] == thread_tid], ["scope_begin", "scope_end"])
        # The begin's stack is the caller of backward(): Tensor.backward in the program.
        py = [(f["function"], f["line"]) for f in stack_of(back[0]) if f.get("lang") == "python"]
        self.assertIn(("<module>", python_testlib.prog_line(PROG, "LINE_BACKWARD")), py)
        inner = [e for e in back if e["tid"] == main_tid][3]
        py = [(f["function"], f["line"]) for f in stack_of(inner) if f.get("lang") == "python"]
        self.assertIn(("reenter", python_testlib.prog_line(PROG, "LINE_REENTER")), py)

    def test_off_with_gpumemtrace_torch_0(self):
        proc, events, _ = run_prog("backward", env_extra={"GPUMEMTRACE_TORCH": "0"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.splitlines()[1], "wrapped name backward")
        self.assertTrue([e for e in events if e["api"] == "cudaMalloc"])
        self.assertEqual([e for e in events if e["op"] in SCOPE_OPS], [])


if __name__ == "__main__":
    unittest.main()
