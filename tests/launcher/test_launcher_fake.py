# tests/launcher/test_launcher_fake.py — the launcher with stand-ins: environment, command line, exit codes.
"""The launcher with stand-ins (no recorder, no analyzer needed): a harmless preload library, a fake
gpumem-report (GPUMEMTRACE_REPORT) and fake commands that write a 'trace' into GPUMEMTRACE_OUTPUT.
Checks the environment CMD gets, the report's command line, every exit-code rule, usage errors and
signal forwarding."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launcher_testlib import (LAUNCHER, PYTHON, ROOT, SIGNALS_UNDER_TSAN, LauncherTestCase,  # noqa: E402
                              signal_handlers_wait_for_waitpid)

FAKE_CMD = r'''
import json, os, sys, time, signal
out = os.environ["GPUMEMTRACE_OUTPUT"]
with open(os.path.join(out, "gpumemtrace.fake.%d.jsonl" % os.getpid()), "w") as f:
    json.dump({k: os.environ.get(k) for k in ("LD_PRELOAD", "GPUMEMTRACE_OUTPUT", "PYTHONPATH",
                                              "PYTEST_PLUGINS")}, f)
mode = sys.argv[1]
if mode == "exit":
    sys.exit(int(sys.argv[2]))
if mode == "kill":
    os.kill(os.getpid(), int(sys.argv[2]))
if mode == "wait":
    signal.signal(signal.SIGTERM, lambda *a: (print("child got SIGTERM", flush=True), sys.exit(42)))
    signal.signal(signal.SIGUSR1, lambda *a: (print("child got SIGUSR1", flush=True), sys.exit(43)))
    print("ready", flush=True)
    time.sleep(60)
    sys.exit(99)
if mode == "nothing":
    os.remove(f.name)
'''

FAKE_REPORT = r'''#!PYTHON
import json, os, sys
log = os.environ["FAKE_REPORT_LOG"]
with open(log, "w") as f:
    json.dump({"argv": sys.argv[1:], "ld_preload": os.environ.get("LD_PRELOAD"),
               "files": [os.path.basename(a) for a in sys.argv[1:] if os.path.isfile(a)]}, f)
print("FAKE REPORT")
sys.exit(int(os.environ.get("FAKE_REPORT_RC", "0")))
'''


class FakeLauncher(LauncherTestCase):
    def setUp(self):
        super().setUp()
        self.lib = os.path.join(self.tmp, "libfake.so")
        src = os.path.join(self.tmp, "fake.c")
        with open(src, "w") as f:
            f.write("int gpumemtrace_fake_symbol = 1;\n")
        if subprocess.run(["cc", "-shared", "-fPIC", src, "-o", self.lib]).returncode != 0:
            self.skipTest("no C compiler for the stand-in library")
        self.report = os.path.join(self.tmp, "fake-report")
        with open(self.report, "w") as f:
            f.write(FAKE_REPORT.replace("PYTHON", PYTHON))
        os.chmod(self.report, 0o755)
        self.cmd = os.path.join(self.tmp, "fake_cmd.py")
        with open(self.cmd, "w") as f:
            f.write(FAKE_CMD)
        self.log = os.path.join(self.tmp, "report.json")
        self.env = {"GPUMEMTRACE_LIBRARY": self.lib, "GPUMEMTRACE_REPORT": self.report, "FAKE_REPORT_LOG": self.log}

    def run_fake(self, args, extra_env=None):
        env = dict(self.env)
        env.update(extra_env or {})
        return self.launch(args, env=env)

    def report_log(self):
        with open(self.log) as f:
            return json.load(f)

    def child_env(self, out_dir):
        files = [n for n in os.listdir(out_dir) if n.startswith("gpumemtrace.fake.")]
        self.assertEqual(len(files), 1, files)
        with open(os.path.join(out_dir, files[0])) as f:
            return json.load(f)

    def test_run_sets_up_the_environment_and_reports(self):
        out = os.path.join(self.tmp, "traces")
        user_lib = os.path.join(self.tmp, "libuser.so")
        shutil.copy(self.lib, user_lib)
        p = self.run_fake(["run", "-o", out, "--format", "json", "--", PYTHON, self.cmd, "exit", "0"],
                          {"LD_PRELOAD": user_lib, "PYTHONPATH": "/user/path"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("FAKE REPORT", p.stdout)
        env = self.child_env(out)
        self.assertEqual(env["LD_PRELOAD"], self.lib + ":" + user_lib)  # ours first, the user's kept
        self.assertEqual(env["GPUMEMTRACE_OUTPUT"], out + "/")
        python_dir = os.path.join(ROOT, "tools", "python")
        if os.path.exists(os.path.join(python_dir, "sitecustomize.py")):
            self.assertEqual(env["PYTHONPATH"], os.path.realpath(python_dir) + ":/user/path")
        else:
            self.assertEqual(env["PYTHONPATH"], "/user/path")
        log = self.report_log()
        # The report gets this run's trace files (not DIR: it may hold earlier runs' traces); a JSON
        # report goes into DIR, never onto CMD's standard output.
        traces = sorted(os.path.join(out, n) for n in os.listdir(out) if n.endswith(".jsonl"))
        self.assertEqual(log["argv"], ["--format", "json", "-o", os.path.join(out, "report.json"), *traces])
        self.assertEqual(log["ld_preload"], user_lib)  # the analyzer itself is not traced

    def test_pytest_plugin_appended_unless_switched_off(self):
        # tools/python/gpumemtrace_pytest.py: PYTEST_PLUGINS gets it after the user's plugins, once.
        for i, (user, switch, expected) in enumerate((
                (None, None, "gpumemtrace_pytest"),
                ("mine,other", None, "mine,other,gpumemtrace_pytest"),
                ("gpumemtrace_pytest,mine", None, "gpumemtrace_pytest,mine"),
                ("mine", "0", "mine"),
                (None, "off", None),
                (None, "1", "gpumemtrace_pytest"))):
            with self.subTest(user=user, switch=switch):
                env = {}
                if user is not None:
                    env["PYTEST_PLUGINS"] = user
                if switch is not None:
                    env["GPUMEMTRACE_PYTEST"] = switch
                out = os.path.join(self.tmp, "t%d" % i)
                p = self.run_fake(["run", "-o", out, "--", PYTHON, self.cmd, "exit", "0"], env)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(self.child_env(out)["PYTEST_PLUGINS"], expected)

    def test_run_keeps_the_commands_exit_status(self):
        p = self.run_fake(["run", "-o", "t", "--", PYTHON, self.cmd, "exit", "5"], {"FAKE_REPORT_RC": "1"})
        self.assertEqual(p.returncode, 5)
        self.assertIn("FAKE REPORT", p.stdout)  # the report is printed even when CMD failed

    def test_ci_verdicts(self):
        for report_rc, expected in (("0", 0), ("1", 1), ("2", 2), ("9", 2)):
            with self.subTest(report_rc=report_rc):
                p = self.run_fake(["ci", "-o", "t" + report_rc, "--fail-on-leak", "--", PYTHON, self.cmd, "exit", "0"],
                                  {"FAKE_REPORT_RC": report_rc})
                self.assertEqual(p.returncode, expected, p.stderr)
        self.assertEqual(self.report_log()["argv"][0], "--fail-on-leak")

    def test_ci_failing_command_keeps_its_code(self):
        p = self.run_fake(["ci", "-o", "t", "--", PYTHON, self.cmd, "exit", "3"], {"FAKE_REPORT_RC": "1"})
        self.assertEqual(p.returncode, 3)

    def test_ci_signal_is_128_plus_n(self):
        p = self.run_fake(["ci", "-o", "t", "--", PYTHON, self.cmd, "kill", str(int(signal.SIGKILL))])
        self.assertEqual(p.returncode, 128 + signal.SIGKILL)
        self.assertIn("signal 9", p.stderr)

    def check_not_run(self, cmd, code, said):
        """CMD cannot be run: said in one line, before DIR is made, no report, no 'no trace' note."""
        p = self.run_fake(["ci", "-o", "t", "--", cmd])
        self.assertEqual(p.returncode, code, p.stderr)
        self.assertEqual(p.stderr, "gpumemtrace: %s: %s\n" % (cmd, said))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "t")))
        self.assertFalse(os.path.exists(self.log))  # the analyzer did not run

    def test_command_not_found_is_127(self):
        self.check_not_run(os.path.join(self.tmp, "no-such-program"), 127, "No such file or directory")
        self.check_not_run("gpumemtrace-no-such-program", 127, "command not found")

    def test_command_that_cannot_be_executed_is_126(self):
        plain = os.path.join(self.tmp, "not-executable")
        with open(plain, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(plain, 0o644)
        self.check_not_run(plain, 126, "Permission denied")
        self.check_not_run(self.tmp, 126, "Permission denied")  # a directory

    def test_exit_statuses_in_help_are_the_real_ones(self):
        # --help's sentence about commands that cannot be run, against what the launcher does.
        text = " ".join(self.launch(["--help"]).stdout.split())
        found = re.search(r"cannot be found gives (\d+), one that cannot be executed (\d+)", text)
        self.assertIsNotNone(found, text)
        missing = self.run_fake(["run", "-o", "t", "--", os.path.join(self.tmp, "missing")])
        self.assertEqual(missing.returncode, int(found.group(1)))
        self.assertEqual(self.run_fake(["run", "-o", "t", "--", self.tmp]).returncode, int(found.group(2)))

    def test_no_trace_written(self):
        p = self.run_fake(["ci", "-o", "t", "--", PYTHON, self.cmd, "nothing"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("no trace was written", p.stderr)

    def test_reused_directory_reports_only_this_run(self):
        out = os.path.join(self.tmp, "traces")
        p = self.run_fake(["run", "-o", out, "--", PYTHON, self.cmd, "exit", "0"])
        self.assertEqual(p.returncode, 0, p.stderr)
        first = self.report_log()["files"]
        self.assertEqual(len(first), 1, first)
        p = self.run_fake(["run", "-o", out, "--", PYTHON, self.cmd, "exit", "0"])
        self.assertEqual(p.returncode, 0, p.stderr)
        second = self.report_log()["files"]
        self.assertEqual(len(second), 1, second)
        self.assertNotEqual(second, first)
        self.assertEqual(len(os.listdir(out)), 2)  # the earlier trace is kept
        # A run that writes nothing into a directory with old traces is still "no trace written".
        p = self.run_fake(["ci", "-o", out, "--", PYTHON, self.cmd, "nothing"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("no trace was written", p.stderr)

    def test_default_output_directory(self):
        p = self.run_fake(["run", "--", PYTHON, self.cmd, "exit", "0"])
        self.assertEqual(p.returncode, 0, p.stderr)
        dirs = [n for n in os.listdir(self.tmp) if n.startswith("gpumemtrace-")]
        self.assertEqual(len(dirs), 1, os.listdir(self.tmp))
        self.assertRegex(dirs[0], r"^gpumemtrace-\d{8}-\d{6}-\d+$")
        self.assertIn(dirs[0], p.stderr)

    def test_output_option_forms(self):
        for form in (["--output", "a"], ["--output=b"], ["-oc"]):
            with self.subTest(form=form):
                p = self.run_fake(["run", *form, "--", PYTHON, self.cmd, "exit", "0"])
                self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(all(os.path.isdir(os.path.join(self.tmp, d)) for d in "abc"))

    def test_quiet(self):
        p = self.run_fake(["run", "-q", "-o", "t", "--", PYTHON, self.cmd, "exit", "0"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("gpumemtrace: tracing into", p.stderr)  # (the child's own lines may remain)
        self.assertNotIn("gpumemtrace: traces kept", p.stderr)

    @unittest.skipIf(signal_handlers_wait_for_waitpid(), SIGNALS_UNDER_TSAN)
    def test_sigterm_is_forwarded(self):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env.update(self.env)
        proc = subprocess.Popen([LAUNCHER, "run", "-o", "t", "--", PYTHON, self.cmd, "wait"], cwd=self.tmp, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertEqual(proc.stdout.readline().strip(), "ready")
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.assertIn("child got SIGTERM", out)
        self.assertEqual(proc.returncode, 42, err)  # CMD's own status
        self.assertIn("FAKE REPORT", out)  # and the report still printed

    def start_waiting(self, extra_args=()):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env.update(self.env)
        proc = subprocess.Popen([LAUNCHER, "run", "-o", "t", *extra_args, "--", PYTHON, self.cmd, "wait"], cwd=self.tmp,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.assertEqual(proc.stdout.readline().strip(), "ready")
        return proc

    @unittest.skipIf(signal_handlers_wait_for_waitpid(), SIGNALS_UNDER_TSAN)
    def test_sigusr1_is_forwarded(self):
        proc = self.start_waiting()
        proc.send_signal(signal.SIGUSR1)
        out, err = proc.communicate(timeout=30)
        self.assertIn("child got SIGUSR1", out)
        self.assertEqual(proc.returncode, 43, err)

    def test_command_dies_with_the_launcher(self):
        proc = self.start_waiting()
        (trace,) = os.listdir(os.path.join(self.tmp, "t"))
        child = int(trace.split(".")[2])  # gpumemtrace.fake.PID.jsonl
        proc.kill()  # SIGKILL: nothing can be forwarded; PR_SET_PDEATHSIG ends CMD
        proc.wait(timeout=30)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            with open("/proc/%d/stat" % child) as f:  # a zombie of an init that has not reaped yet
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
            time.sleep(0.05)
        else:
            os.kill(child, signal.SIGKILL)
            self.fail("CMD outlived the launcher")

    def test_report_options_are_checked_before_cmd_runs(self):
        marker = os.path.join(self.tmp, "t")
        for args in (["--fail-on-lek"], ["--top", "x"], ["--format", "xml"], ["diff"], ["stray"],
                     ["--suppressions", os.path.join(self.tmp, "missing.supp")]):
            with self.subTest(args=args):
                p = self.run_fake(["ci", "-o", marker, *args, "--", PYTHON, self.cmd, "exit", "0"])
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
                self.assertTrue(p.stderr.startswith("gpumemtrace: "), p.stderr)
                self.assertFalse(os.path.exists(marker))  # CMD never ran
                self.assertFalse(os.path.exists(self.log))  # nor the report

    def test_slips_are_told_what_to_write(self):
        # A misspelt option or command gets the nearest one, the launcher's own and the report's; a
        # size after --fail-on-leak gets the '=' it needs.
        marker = os.path.join(self.tmp, "t")
        for args, said in ((["ci", "--fail-on-lek"], "unknown option --fail-on-lek; did you mean --fail-on-leak?"),
                           (["ci", "--reprot", "r.txt"], "unknown option --reprot; did you mean --report?"),
                           (["run", "--outptu=t"], "unknown option --outptu; did you mean --output?"),
                           (["run", "--no-such-thing"], "unknown option --no-such-thing"),
                           (["rnu"], "unknown command 'rnu'; did you mean run?"),
                           (["ci", "--fail-on-leak", "1MiB"], "--fail-on-leak takes its size after '=': --fail-on-leak=1MiB")):
            with self.subTest(args=args):
                p = self.run_fake([*args, "--", PYTHON, self.cmd, "exit", "0"])
                self.assertEqual((p.returncode, p.stderr), (2, f"gpumemtrace: {said} (see gpumemtrace --help)\n"))
                self.assertFalse(os.path.exists(marker))  # CMD never ran

    def test_report_file(self):
        p = self.run_fake(["run", "-o", "t", "--report", "rep.txt", "--", PYTHON, self.cmd, "exit", "0"])
        self.assertEqual(p.returncode, 0, p.stderr)
        argv = self.report_log()["argv"]
        self.assertEqual(argv[:2], ["-o", os.path.join(self.tmp, "rep.txt")])
        p = self.run_fake(["run", "--report", os.path.join(self.tmp, "no", "dir", "r.txt"), "--", "true"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--report", p.stderr)

    def test_quiet_passes_quiet_on(self):
        p = self.run_fake(["run", "-q", "-o", "t", "--", PYTHON, self.cmd, "exit", "0"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        self.assertIn("--no-progress", self.report_log()["argv"])

    def test_relative_report_is_resolved_against_the_current_directory(self):
        p = self.run_fake(["run", "-o", "t", "--", PYTHON, self.cmd, "exit", "0"],
                          {"GPUMEMTRACE_REPORT": os.path.basename(self.report)})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("FAKE REPORT", p.stdout)
        p = self.run_fake(["run", "-o", "t", "--", PYTHON, self.cmd, "exit", "0"], {"GPUMEMTRACE_REPORT": "nope"})
        self.assertEqual(p.returncode, 2)
        self.assertIn(os.path.join(self.tmp, "nope"), p.stderr)

    def test_missing_library_or_report(self):
        p = self.run_fake(["run", "--", "true"], {"GPUMEMTRACE_LIBRARY": os.path.join(self.tmp, "nope.so")})
        self.assertEqual(p.returncode, 2)
        self.assertIn("does not exist", p.stderr)
        p = self.run_fake(["run", "--", "true"], {"GPUMEMTRACE_LIBRARY": self.cmd})
        self.assertEqual(p.returncode, 2)
        self.assertIn("not an ELF", p.stderr)
        p = self.run_fake(["run", "--", "true"], {"GPUMEMTRACE_REPORT": os.path.join(self.tmp, "nope")})
        self.assertEqual(p.returncode, 2)
        self.assertIn("analyzer", p.stderr)


class Usage(LauncherTestCase):
    def test_help(self):
        for args in (["--help"], ["-h"], ["run", "--help"], ["ci", "-h"]):
            p = self.launch(args)
            self.assertEqual(p.returncode, 0)
            for word in ("run", "ci", "--fail-on-leak", "--fail-on-growth", "GPUMEMTRACE_REPORT", "GPUMEMTRACE_LIBRARY",
                         "LD_PRELOAD", "PYTHONPATH", "128+N", "-o DIR"):
                self.assertIn(word, p.stdout)

    def test_version(self):
        for args in (["--version"], ["run", "--version"]):
            p = self.launch(args)
            self.assertEqual(p.returncode, 0)
            self.assertRegex(p.stdout, r"^gpumemtrace \d+\.\d+")

    def test_bad_usage_is_one_line_and_exit_2(self):
        cases = [[], ["bogus"], ["run"], ["run", "true"], ["run", "--"], ["ci", "-o"], ["run", "-o", "--", "true"],
                 ["run", "--output=", "--", "true"], ["ci", "stray", "--", "true"]]
        for args in cases:
            with self.subTest(args=args):
                p = self.launch(args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
                self.assertTrue(p.stderr.startswith("gpumemtrace: "), p.stderr)
                self.assertEqual(p.stdout, "")


if __name__ == "__main__":
    unittest.main()
