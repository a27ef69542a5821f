# tests/report/test_report_scope_limits.py — a pytest test's own limits as the report reads them from its
# scope_end: precedence over --fail-on-leak, and limit failures shown, never "clean".
"""The pytest plugin ends a test's scope with result bits (trace/format.h, kScope*;
docs/trace-format.md, "Scopes"): 2 the test had a gpu_leak_limit of its own, 4 and 8 it went over
its gpu_memory_limit / gpu_leak_limit (with 1: it failed). On a planted trace of four tests:
--fail-on-leak gates neither the test that kept 4 MiB within its own limit (its limit takes
precedence) nor the one that failed for its own limit (pytest failed it already), but gates the
plain leak; the JSON says `own_leak_limit` and `over_own_limits`, and the leak of a test that only
went over its own limit is counted (it raised nothing); the text report names the limits; the HTML
page's tests table says "over its gpu_memory_limit", never "clean"."""
import json
import os
import shutil
import tempfile

from browser import Page, chromium
from reportlib import ReportTestCase, run_report
from tracegen import MiB, Trace


class ScopeLimits(ReportTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gpumem-scope-limits-")
        cls.trace = os.path.join(cls.dir, "suite.jsonl")
        t = Trace(cls.trace)
        address = [0x10000000]
        kept = []

        def test(name, result, keep=0, peak=0):
            t.event("scope_begin", "none", device=-1, api="pytest", label=name)
            if peak:
                address[0] += 0x10000000
                t.alloc(address[0], peak, t.stack(name.split("::")[1], 5))
                t.free(address[0])
            if keep:
                address[0] += 0x10000000
                t.alloc(address[0], keep, t.stack(name.split("::")[1], 7))
                kept.append(address[0])
            t.event("scope_end", "none", device=-1, api="pytest", label=name, result=result)

        test("t.py::test_within_its_own_leak_limit", 2, keep=4 * MiB)
        test("t.py::test_over_its_memory_limit", 1 | 4, peak=96 * MiB)
        test("t.py::test_over_its_leak_limit", 1 | 2 | 8, keep=16 * MiB)
        test("t.py::test_plain_leak", 0, keep=2 * MiB)
        for a in kept:  # at the session's end: the process itself leaks nothing
            t.free(a)
        t.close()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_the_gate_leaves_a_tests_own_limit_to_it(self):
        proc = run_report("--fail-on-leak=1MiB", self.trace)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        failed = [line for line in proc.stderr.splitlines() if "FAILED" in line]
        self.assertEqual(len(failed), 1, proc.stderr)
        self.assertIn("t.py::test_plain_leak leaked 2.0 MiB", failed[0])

    def test_json_says_which_limits(self):
        proc = run_report("--format", "json", self.trace, check_rc=0)
        scopes = {s["name"].split("::")[1]: s for s in json.loads(proc.stdout)["scopes"]}
        self.assertEqual({n: (s["checked"], s["own_leak_limit"], s["over_own_limits"]) for n, s in scopes.items()}, {
            "test_within_its_own_leak_limit": (True, True, []),
            "test_over_its_memory_limit": (False, False, ["memory"]),
            "test_over_its_leak_limit": (False, True, ["leak"]),
            "test_plain_leak": (True, False, [])})
        self.assertEqual(scopes["test_over_its_leak_limit"]["leaked_bytes"], 16 * MiB)  # it raised nothing
        self.assertEqual(scopes["test_within_its_own_leak_limit"]["leaked_bytes"], 4 * MiB)

    def test_text_names_the_limits(self):
        text = run_report(self.trace, check_rc=0).stdout
        self.assertIn("scopes: 2 checked, 2 leaked, 2 over their own limit", text)
        self.assertIn("OVER ITS OWN LIMIT t.py::test_over_its_memory_limit: gpu_memory_limit", text)
        self.assertIn("OVER ITS OWN LIMIT t.py::test_over_its_leak_limit: gpu_leak_limit", text)
        self.assertIn("LEAK t.py::test_within_its_own_leak_limit: 4.0 MiB in 1 allocation still live at its end "
                      "(its own leak limit decided it, within pytest)", text)
        self.assertNotIn("not checked", text)

    def test_html_tests_table_shows_the_limit_failures(self):
        if not chromium():
            self.skipTest("chromium is not installed (make deps installs it)")
        page_file = os.path.join(self.dir, "suite.html")
        run_report("--format", "html", "-o", page_file, self.trace, check_rc=0)
        page = Page.open(width=1280, height=1000)
        if page is None:
            self.skipTest("chromium cannot start here")
        try:
            page.load(page_file)
            rows = page.evaluate("Array.from(document.querySelectorAll('.tests-view tbody tr'))"
                                 ".map(r => [r.cells[0].innerText, r.cells[1].innerText])")
            self.assertEqual(page.errors, [])
        finally:
            page.close()
        results = {name.split("::")[1]: result for name, result in rows}
        self.assertEqual(results, {"test_within_its_own_leak_limit": "leaked",
                                   "test_over_its_memory_limit": "over its gpu_memory_limit",
                                   "test_over_its_leak_limit": "over its gpu_leak_limit",
                                   "test_plain_leak": "leaked"})
