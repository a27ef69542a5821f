# tests/report/test_report_process_end.py — how the process ended, as the report says and the gates judge it.
"""The footer says how the process ended (exit with its status, _exit, a signal, exec;
docs/trace-format.md). A process killed by a signal is reported so; what it held then is "live when
killed", not leaked, and no gate fails on it (docs/report.md, "Killed processes"), while a scope it
closed before the signal is still checked. A scope whose end says the work inside failed (a pytest
test that failed) is listed as not checked."""
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from browser import chromium, rendered_dom  # noqa: E402
from reportlib import ReportTestCase, run_report  # noqa: E402
from tracegen import MiB, Trace  # noqa: E402

EXIT_GATE = 1


class ProcessEnd(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory(prefix="gpumem-end-")

    def tearDown(self):
        self.tmp.cleanup()

    def trace(self, name, scope_leak=False, open_scope=False, failed_scope=False, **end):
        """work() keeps 4 MiB to the end. scope_leak: test_a keeps 1 MiB past its scope; open_scope:
        test_b is still open at the end with 2 MiB; failed_scope: test_c keeps 3 MiB and fails."""
        t = Trace(os.path.join(self.tmp.name, name))
        t.alloc(0x20000000, 4 * MiB, t.stack("work", 30))

        def scope(op, label, **kw):
            t.event(op, "none", device=-1, api="pytest", label=label, **kw)
        if scope_leak:
            scope("scope_begin", "test_a")
            t.alloc(0x30000000, 1 * MiB, t.stack("test_a", 40))
            scope("scope_end", "test_a")
        if failed_scope:
            scope("scope_begin", "test_c")
            t.alloc(0x50000000, 3 * MiB, t.stack("test_c", 60))
            scope("scope_end", "test_c", result=1)
        if open_scope:
            scope("scope_begin", "test_b")
            t.alloc(0x40000000, 2 * MiB, t.stack("test_b", 50))
        t.close(**end)
        return t.f.name

    def json_of(self, path):
        return json.loads(run_report("--format", "json", path, check_rc=0).stdout)

    def test_killed_process_is_reported_so(self):
        path = self.trace("killed.jsonl", end="signal", signal=15)
        text = run_report(path, check_rc=0).stdout
        self.assertRegex(text, r"events over [^,]+, killed by SIGTERM\n")
        self.assertIn("live when killed by SIGTERM (not leaks): 4.0 MiB in 1 allocation", text)
        self.assertIn("live when killed, allocated here:", text)
        self.assertNotIn("leaks: ", text)
        self.assertNotIn("INCOMPLETE", text)  # the trace is complete up to the signal
        doc = self.json_of(path)
        p = doc["processes"][0]
        self.assertEqual((p["complete"], p["killed"], p["cut"], p["end"], p["signal"], p["exit_status"]),
                         (True, True, False, "signal", "SIGTERM", None))
        self.assertEqual(p["leaked_bytes"], 0)
        self.assertEqual(doc["summary"]["leaked_bytes"], 0)
        self.assertEqual(doc["summary"]["killed_by_signal"], 1)
        self.assertEqual(doc["summary"]["live_when_killed_bytes"], 4 * MiB)
        self.assertEqual([leak.get("live_when_killed") for leak in doc["leaks"]], [True])

    def test_killed_process_fails_no_leak_gate(self):
        path = self.trace("killed.jsonl", open_scope=True, end="signal", signal=15)
        p = run_report("--fail-on-leak", "--fail-on-growth", path)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("FAILED", p.stderr)
        # The test it was killed in has no verdict, and the text does not call it a leak.
        self.assertIn("LIVE test_b: 2.0 MiB", p.stdout)
        self.assertIn("killed inside it: no verdict", p.stdout)
        self.assertIn("scopes: 0 checked, 0 leaked, 1 not checked", p.stdout)

    def test_scope_closed_before_the_signal_is_still_checked(self):
        path = self.trace("killed.jsonl", scope_leak=True, end="signal", signal=2)
        p = run_report("--fail-on-leak", path)
        self.assertEqual(p.returncode, EXIT_GATE, p.stdout + p.stderr)
        self.assertIn("test_a leaked 1.0 MiB", p.stderr)
        self.assertIn("killed by SIGINT", p.stdout)

    def test_exit_and_its_status(self):
        for fields, said in (({"end": "exit", "exit_status": 3}, "exited with status 3"),
                             ({"end": "exit"}, "exited\n"),
                             ({"end": "_exit", "exit_status": 0}, "ended by _exit with status 0"),
                             ({"end": "exec"}, "replaced by exec"),
                             ({}, "clean exit"),  # a footer that does not say (older traces)
                             ({"end": "teleported"}, "clean exit")):  # a newer writer's: unknown here
            with self.subTest(**fields):
                path = self.trace("t.jsonl", **fields)
                p = run_report("--fail-on-leak", path)
                self.assertIn(said, p.stdout)
                # The program ended on its own terms: what it kept is leaked, and gated.
                self.assertEqual(p.returncode, EXIT_GATE, p.stdout + p.stderr)
                self.assertIn("leaks: 4.0 MiB", p.stdout)
                doc = self.json_of(path)["processes"][0]
                self.assertFalse(doc["killed"])
                self.assertEqual(doc["exit_status"], fields.get("exit_status"))

    def test_failed_scope_is_listed_not_checked(self):
        path = self.trace("t.jsonl", scope_leak=True, failed_scope=True, end="exit", exit_status=1)
        p = run_report("--fail-on-leak=8MiB", path)  # the 4 MiB of work() stay under the limit
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = run_report("--fail-on-leak=512KiB", path)
        self.assertEqual(p.returncode, EXIT_GATE)
        failures = [line for line in p.stderr.splitlines() if "FAILED" in line]
        self.assertFalse(any("test_c" in line for line in failures), failures)  # failed: not checked
        self.assertTrue(any("test_a leaked 1.0 MiB" in line for line in failures), failures)
        self.assertIn("scopes: 1 checked, 1 leaked, 1 not checked", p.stdout)
        self.assertIn("not checked: the test failed: test_c", p.stdout)
        scopes = {s["name"]: s for s in self.json_of(path)["scopes"]}
        self.assertEqual((scopes["test_c"]["checked"], scopes["test_c"]["leaked_bytes"]), (False, 0))
        self.assertEqual((scopes["test_a"]["checked"], scopes["test_a"]["leaked_bytes"]), (True, 1 * MiB))

    def test_html_says_killed(self):
        path = self.trace("killed.jsonl", end="signal", signal=15)
        out = os.path.join(self.tmp.name, "report.html")
        run_report("--format", "html", "-o", out, path, check_rc=0)
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o600)  # private, as the trace is
        if not chromium():
            self.skipTest("chromium is not installed (make deps installs it)")
        dom = rendered_dom(out)
        if dom is None:
            self.skipTest("chromium cannot start here")
        drawn = re.search(r'<main id="report">(.*)</main>', dom, re.S).group(1)
        self.assertIn("killed by SIGTERM", drawn)
        self.assertIn("Live when killed, not leaks (1)", drawn)


if __name__ == "__main__":
    import unittest
    unittest.main()
