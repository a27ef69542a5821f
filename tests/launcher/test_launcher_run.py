"""The launcher for real: build/gpumemtrace with build/libgpumemtrace.so, the simulated CUDA runtime
(build/sim/libcudart.so.13) and build/gpumem-report, on tests/launcher/launcher_prog.py."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launcher_testlib import CUDART, LIB, PROG, PYTHON, REPORT, LauncherTestCase, is_elf  # noqa: E402

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

    def test_run_json_report_options(self):
        p = self.launch(["run", "-o", "t", "--format", "json", "--", *self.prog("leak")])
        self.assertEqual(p.returncode, 0, p.stderr)
        report = json.loads(p.stdout)
        self.assertEqual(report["leaks"][0]["bytes"], 3 * MiB)
        self.assertIn("leak_buffer", [f["function"] for f in report["leaks"][0]["stack"]])

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
        traces = sorted(os.listdir(os.path.join(self.tmp, "t")))
        self.assertEqual(len(traces), 3, traces)  # parent and both children
        self.assertEqual(p.returncode, 1, p.stderr)  # the `leak` child leaked
        report = json.loads(p.stdout)
        self.assertEqual(report["summary"]["processes"], 3)
        self.assertEqual(sum(l["bytes"] for l in report["leaks"]), 3 * MiB)

    def test_user_preload_is_kept(self):
        p = self.launch(["run", "-o", "t", "--", *self.prog("clean")], env={"LD_PRELOAD": CUDART})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(os.listdir(os.path.join(self.tmp, "t"))), 1)


if __name__ == "__main__":
    unittest.main()
