# tests/transparency/test_transparency_compare.py — the transparency harness reads and compares outcomes right.
"""`make test-transparency` is long and runs outside `make test`; what decides its verdict (reading
JUnit XML from CPython's regrtest and from pytest, and comparing two runs test by test) is checked
here on small files, in `make test`."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transparency  # noqa: E402

REGRTEST = """<testsuites tests="4" errors="0" failures="1"><testsuite tests="4">
<testcase name="test.test_os.FileTests.test_access" status="run" result="completed" time="0.1" />
<testcase name="test.test_os.FileTests.test_write" status="run" result="completed" time="0.1"><failure type="AssertionError" message="1 != 2">Traceback ...</failure></testcase>
<testcase name="test.test_os.Win.test_x" status="run" result="completed" time="0"><skipped>requires Windows</skipped></testcase>
<testcase name="test.test_os.FileTests.test_err" status="run" result="completed" time="0"><error message="boom" /></testcase>
</testsuite></testsuites>"""

PYTEST = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="2">
<testcase classname="pyflakes.test.test_api.IntegrationTests" name="test_errors_io" time="0.2" />
<testcase classname="pyflakes.test.test_api.IntegrationTests" name="test_goodFile" time="0.2"><failure message="AssertionError: b'gpumemtrace: ...' != b''">...</failure></testcase>
</testsuite></testsuites>"""


class ReadAndCompare(unittest.TestCase):
    def parse(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        return transparency.outcomes_from_junit(f.name)

    def test_regrtest_outcomes(self):
        out = self.parse(REGRTEST)
        self.assertEqual(out["test.test_os.FileTests.test_access"], ("passed", ""))
        self.assertEqual(out["test.test_os.FileTests.test_write"], ("failed", "1 != 2"))
        self.assertEqual(out["test.test_os.Win.test_x"][0], "skipped")
        self.assertEqual(out["test.test_os.FileTests.test_err"], ("error", "boom"))

    def test_pytest_outcomes_are_named_by_class_and_test(self):
        out = self.parse(PYTEST)
        self.assertEqual(out["pyflakes.test.test_api.IntegrationTests::test_errors_io"][0], "passed")
        self.assertEqual(out["pyflakes.test.test_api.IntegrationTests::test_goodFile"][0], "failed")

    def test_every_difference_counts_a_test_run_one_way_only_too(self):
        plain = {"a": ("passed", ""), "b": ("failed", "x"), "c": ("passed", ""), "d": ("skipped", "")}
        traced = {"a": ("passed", ""), "b": ("failed", "x"), "c": ("error", "fd 1000 open"), "e": ("passed", "")}
        same, differences = transparency.compare(plain, traced)
        self.assertEqual(same, 2)  # a, b: a test that fails both ways is the same outcome
        self.assertEqual([d[:3] for d in differences],
                         [("c", "passed", "error"), ("d", "skipped", "not run"), ("e", "not run", "passed")])
        self.assertEqual(differences[0][3], "fd 1000 open")

    def test_a_missing_report_reads_as_no_test(self):
        self.assertEqual(transparency.outcomes_from_junit("/nonexistent/junit.xml"), {})


if __name__ == "__main__":
    unittest.main()
