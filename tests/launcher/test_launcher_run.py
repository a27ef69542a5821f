# tests/launcher/test_launcher_run.py — the launcher with the real recorder and analyzer, simulated runtime.
"""The launcher for real: build/gpumemtrace with build/libgpumemtrace.so, the simulated CUDA runtime
(build/sim/libcudart.so.13) and build/gpumem-report, on tests/launcher/launcher_prog.py."""
import json
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launcher_testlib import (CUDART, LIB, PROG, PYTHON, REPORT, ROOT, LauncherTestCase, is_elf,  # noqa: E402
                              recorder_preload)

sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from python_testlib import python_with_pytest, tracefile  # noqa: E402

MiB = 1 << 20


class RealLauncher(LauncherTestCase):
    def setUp(self):
        super().setUp()
        for path in (LIB, CUDART):
            if not is_elf(path):
                self.skipTest(f"{path} not built")
        if not os.access(REPORT, os.X_OK):
            self.skipTest(f"{REPORT} not built")

    def prog(self, mode):
        return [PYTHON, PROG, mode, CUDART]

    def test_run_prints_the_report(self):
        p = self.launch(["run", "-o", "t", "--", *self.prog("leak")])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("3.0 MiB", p.stdout)
        self.assertIn("launcher_prog.py", p.stdout)  # the text report names the Python file
        traces = os.listdir(os.path.join(self.tmp, "t"))
        self.assertEqual(len(traces), 1, traces)

    def test_a_reader_that_left_is_not_an_error(self):
        # `gpumemtrace ci ... | head`: the reader leaves before CMD and the report write. Nothing is said
        # about it, and the gate still decides, whether SIGPIPE is ignored (as Python and some CI runners
        # leave it for their children) or not.
        for ignored in (False, True):
            with self.subTest(sigpipe_ignored=ignored):
                read, write = os.pipe()
                os.close(read)
                preexec = (lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN)) if ignored else None
                try:
                    p = self.launch(["ci", "-o", "t%d" % ignored, "--fail-on-leak", "--", *self.prog("leak")],
                                    stdout=write, preexec_fn=preexec)
                finally:
                    os.close(write)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn("FAILED:", p.stderr)
                for noise in ("Broken pipe", "cannot write", "exited with status", "killed by signal"):
                    self.assertNotIn(noise, p.stderr)

    def read_json_report(self, directory):
        with open(os.path.join(self.tmp, directory, "report.json")) as f:
            return json.load(f)

    def test_run_json_report_options(self):
        p = self.launch(["run", "-o", "t", "--format", "json", "--", *self.prog("leak")])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("{", p.stdout)  # JSON never goes to CMD's standard output: into DIR
        report = self.read_json_report("t")
        self.assertEqual(report["leaks"][0]["bytes"], 3 * MiB)
        self.assertIn("leak_buffer", [f["function"] for f in report["leaks"][0]["stack"]])

    def test_report_file_keeps_stdout_for_the_program(self):
        p = self.launch(["run", "-q", "-o", "t", "--report", "leaks.txt", "--", *self.prog("leak")])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "")  # the program printed nothing, and the report is in the file
        self.assertEqual(p.stderr, "")  # -q: no launcher note, no recorder line
        with open(os.path.join(self.tmp, "leaks.txt")) as f:
            self.assertIn("3.0 MiB", f.read())

    def test_reports_and_traces_are_private(self):
        # docs/launcher.md, "Files": DIR 0700, reports 0600, as the traces.
        p = self.launch(["run", "-o", "t", "--format", "json", "--", *self.prog("leak")])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.launch(["run", "-o", "t", "--report", "leaks.txt", "--", *self.prog("leak")])
        self.assertEqual(p.returncode, 0, p.stderr)
        mode = lambda *path: os.stat(os.path.join(self.tmp, *path)).st_mode & 0o777  # noqa: E731
        self.assertEqual(mode("t"), 0o700)
        self.assertEqual(mode("leaks.txt"), 0o600)
        for name in os.listdir(os.path.join(self.tmp, "t")):
            self.assertEqual(mode("t", name), 0o600, name)  # traces and report.json alike

    def test_unknown_recorder_value_warns(self):
        p = self.launch(["run", "-o", "t", "--", *self.prog("clean")], env={"GPUMEMTRACE_BACKEND": "nvtx"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ignoring GPUMEMTRACE_BACKEND=nvtx (expected interpose, cupti or auto)", p.stderr)

    def test_launcher_variables_are_not_flagged_as_unknown(self):
        # The launcher's own variables reach the program's environment; with -q it adds GPUMEMTRACE_QUIET
        # and GPUMEMTRACE_OUTPUT: none of them is taken for a misspelt recorder setting.
        env = {"GPUMEMTRACE_LIBRARY": LIB, "GPUMEMTRACE_REPORT": REPORT, "GPUMEMTRACE_PYTEST": "0",
               "GPUMEMTRACE_TORCH": "0"}
        p = self.launch(["run", "-q", "-o", "t", "--report", "r.txt", "--", *self.prog("clean")], env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        p = self.launch(["run", "-q", "-o", "u", "--report", "r.txt", "--", *self.prog("clean")],
                        env=dict(env, GPUMEMTRACE_FLUSH_MSS="10"))
        self.assertEqual(p.stderr, "gpumemtrace: ignoring GPUMEMTRACE_FLUSH_MSS=10 (not a gpumemtrace variable; "
                                   "did you mean GPUMEMTRACE_FLUSH_MS?)\n")

    def test_ci_clean_program_exits_0(self):
        p = self.launch(["ci", "-o", "t", "--fail-on-leak", "--fail-on-growth", "--", *self.prog("clean")])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_ci_leaking_program_exits_1(self):
        p = self.launch(["ci", "-o", "t", "--fail-on-leak", "--", *self.prog("leak")])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("leaked 3.0 MiB", p.stdout + p.stderr)
        p = self.launch(["ci", "-o", "t2", "--fail-on-leak=4MiB", "--", *self.prog("leak")])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_ci_failing_program_keeps_its_code(self):
        p = self.launch(["ci", "-o", "t", "--fail-on-leak", "--", *self.prog("fail")])
        self.assertEqual(p.returncode, 7, p.stdout + p.stderr)

    def test_run_failing_program_keeps_its_code(self):
        p = self.launch(["run", "-o", "t", "--", *self.prog("fail")])
        self.assertEqual(p.returncode, 7, p.stderr)

    def test_multi_process_directory(self):
        p = self.launch(["ci", "-o", "t", "--format", "json", "--fail-on-leak", "--", *self.prog("multi")])
        traces = sorted(n for n in os.listdir(os.path.join(self.tmp, "t")) if n.endswith(".jsonl.zst"))
        self.assertEqual(len(traces), 3, traces)  # parent and both children
        self.assertEqual(p.returncode, 1, p.stderr)  # the `leak` child leaked
        report = self.read_json_report("t")
        self.assertEqual(report["summary"]["processes"], 3)
        self.assertEqual(sum(l["bytes"] for l in report["leaks"]), 3 * MiB)

    def test_user_preload_is_kept(self):
        # (A sanitized build's runtime stays ahead of the user's library: recorder_preload.)
        p = self.launch(["run", "-o", "t", "--", *self.prog("clean")], env={"LD_PRELOAD": recorder_preload(CUDART)})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(os.listdir(os.path.join(self.tmp, "t"))), 1)


PYTEST_SUITE = """
import ctypes, os

def test_allocates():
    ctypes.CDLL(os.environ["SIM_CUDART"], mode=ctypes.RTLD_GLOBAL)
    p = ctypes.c_void_p()
    assert ctypes.CDLL(None).cudaMalloc(ctypes.byref(p), ctypes.c_size_t(8192)) == 0
"""


class LauncherPytest(LauncherTestCase):
    """`gpumemtrace run -- python -m pytest` loads the pytest plugin: each test is a scope."""

    def setUp(self):
        super().setUp()
        for path in (LIB, CUDART):
            if not is_elf(path):
                self.skipTest(f"{path} not built")
        self.python = python_with_pytest()
        if not self.python:
            self.skipTest("needs pytest (make deps installs python3-pytest)")
        with open(os.path.join(self.tmp, "test_one.py"), "w") as f:
            f.write(PYTEST_SUITE)

    def scopes(self, extra_env=None):
        env = {"SIM_CUDART": CUDART, "GPUMEMTRACE_QUIET": "1"}
        env.update(extra_env or {})
        p = self.launch(["run", "-o", "t", "--", self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                         "test_one.py"], env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("1 passed", p.stdout)
        (trace,) = os.listdir(os.path.join(self.tmp, "t"))
        events = [r for r in tracefile.read_records(os.path.join(self.tmp, "t", trace))[0] if r["type"] == "event"]
        return [(e["op"], e["api"], e["label"]) for e in events if e["op"].startswith("scope_")]

    def test_each_test_is_a_scope(self):
        name = "test_one.py::test_allocates"
        self.assertEqual(self.scopes(), [("scope_begin", "pytest", name), ("scope_end", "pytest", name)])

    def test_gpumemtrace_pytest_0_turns_it_off(self):
        self.assertEqual(self.scopes({"GPUMEMTRACE_PYTEST": "0"}), [])


if __name__ == "__main__":
    unittest.main()
