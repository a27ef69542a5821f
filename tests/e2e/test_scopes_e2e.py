# tests/e2e/test_scopes_e2e.py — named scopes through include/gpumemtrace.h, end to end.
"""End-to-end tests of named scopes through include/gpumemtrace.h (tests/e2e/programs/scopes.cpp):
scope_begin/scope_end events with their names, threads, order and the caller's stack; long names."""
import os
import subprocess
import unittest

from recorder_testlib import BUILD, Trace, program, run_traced, tempdir, trace_files

SCOPE_OPS = ("scope_begin", "scope_end")


def names(trace, event, depth=3):
    """The innermost `depth` function names of the event's stack, without parameter lists."""
    return [f.split("(")[0] for f in trace.functions(event)[:depth]]


def traced_scopes(*args):
    """(CompletedProcess, Trace) of `scopes ARGS` under the recorder."""
    out = tempdir()
    proc = run_traced([program("scopes")] + list(args), out)
    files = trace_files(out)
    if proc.returncode != 0 or len(files) != 1:
        raise AssertionError("scopes %s: rc %d, traces %s\n%s" % (args, proc.returncode, files, proc.stderr))
    return proc, Trace(files[0])


class NestedScopes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, cls.trace = traced_scopes("nested")

    def test_begin_end_in_program_order_around_the_allocations(self):
        seen = [(e["op"], e.get("label", e.get("size"))) for e in self.trace.events
                if e["op"] in SCOPE_OPS or e["op"] == "alloc"]
        self.assertEqual(seen, [("scope_begin", "outer"), ("alloc", 1111),
                                ("scope_begin", "inner"), ("alloc", 2222), ("scope_end", "inner"),
                                ("scope_begin", "inner"), ("alloc", 3333), ("scope_end", "inner"),
                                ("scope_end", "outer")])

    def test_fields_of_a_scope_event(self):
        for e in [e for e in self.trace.events if e["op"] in SCOPE_OPS]:
            self.assertEqual((e["kind"], e["api"]), ("none", "gpumemtrace_scope"), e)
            for absent in ("addr", "size", "result", "delayed"):
                self.assertNotIn(absent, e)
            self.assertEqual(e["tid"], self.trace.events[0]["tid"])

    def test_stacks_name_the_caller(self):
        scopes = [e for e in self.trace.events if e["op"] in SCOPE_OPS]
        for e in scopes:
            self.assertNotEqual(e["stack"], 0, e)
            functions = self.trace.functions(e)
            self.assertFalse([f for f in functions if "report_scope" in f or "report_labelled" in f],
                             functions)  # the library's own frames are skipped
        inner = [e for e in scopes if e.get("label") == "inner"]
        self.assertIn("open_inner_scope", names(self.trace, inner[0]))
        outer = scopes[0]
        self.assertIn("run_nested", names(self.trace, outer))
        self.assertNotIn("open_inner_scope", names(self.trace, outer, 64))

    def test_the_report_reads_the_trace(self):
        # The analyzer accepts the new ops (what it makes of them is docs/report.md's business).
        out = subprocess.run([os.path.join(BUILD, "gpumem-report"), self.trace.path],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)


class ThreadScopes(unittest.TestCase):
    def test_each_thread_brackets_its_own_allocation(self):
        n = 4
        proc, trace = traced_scopes("threads", str(n))
        tids = {int(i): int(t) for _, i, t in (line.split() for line in proc.stdout.splitlines())}
        self.assertEqual(len(set(tids.values())), n)
        for i, tid in tids.items():
            mine = [e for e in trace.events if e["tid"] == tid]
            seen = [(e["op"], e.get("label", e.get("size"))) for e in mine if e["op"] in SCOPE_OPS + ("alloc",)]
            name = "thread-%d" % i
            self.assertEqual(seen, [("scope_begin", "worker"), ("scope_begin", name), ("alloc", 4096 + i),
                                    ("scope_end", name), ("scope_end", "worker")])
            for e in mine:
                if e["op"] in SCOPE_OPS:
                    self.assertIn("scope_worker", names(trace, e))
        self.assertEqual(len([e for e in trace.events if e["op"] in SCOPE_OPS]), 4 * n)


class LongNames(unittest.TestCase):
    def test_names_survive_up_to_the_limit_and_are_cut_at_a_character(self):
        proc, trace = traced_scopes("long")
        name250 = proc.stdout.strip()
        self.assertEqual(len(name250.encode()), 250)
        labels = [e["label"] for e in trace.events if e["op"] in SCOPE_OPS]
        # 1024 bytes ending in U+00E9 (bytes 1023-1024): cut to 1022, never inside the character.
        self.assertEqual(labels, [name250, name250, "n" * 1022, "n" * 1022])
        begin = [e for e in trace.events if e["op"] == "scope_begin"][0]
        self.assertNotEqual(begin["stack"], 0)


if __name__ == "__main__":
    unittest.main()
