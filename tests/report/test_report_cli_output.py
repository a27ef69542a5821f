"""The report itself: a report that cannot be written is an error (exit 2, one line), and JSON
output survives names that are not UTF-8."""
import json
import os
import shutil
import subprocess
import tempfile

from reportlib import REPORT, ReportTestCase, run_report

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "golden", "blocks.jsonl")


class CliOutput(ReportTestCase):
    def test_output_file_that_cannot_be_written_exits_2(self):
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full")
        for fmt in ("text", "json"):
            with self.subTest(format=fmt):
                proc = run_report("--format", fmt, "-o", "/dev/full", TRACE)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                lines = proc.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertIn("/dev/full: cannot write the report", lines[0])

    def test_standard_output_that_cannot_be_written_exits_2(self):
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full")
        with open("/dev/full", "w") as full:
            proc = subprocess.run([REPORT, TRACE], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertIn("standard output: cannot write the report", proc.stderr)

    def test_json_of_a_file_name_that_is_not_utf8(self):
        work = tempfile.mkdtemp()
        try:
            path = os.path.join(os.fsencode(work), b"trace-\xff.jsonl")
            shutil.copy(TRACE, path)
            proc = subprocess.run([os.fsencode(REPORT), b"--format", b"json", path], capture_output=True, timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            data = json.loads(proc.stdout.decode("utf-8"))
            self.assertTrue(data["processes"][0]["file"].endswith("trace-\ufffd.jsonl"))
        finally:
            shutil.rmtree(work)
