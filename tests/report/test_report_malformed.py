# tests/report/test_report_malformed.py — every malformed trace gives exit status 2 and one clear error.
"""Bad input: every trace in tests/report/malformed/ must give exit status 2 and one clear error
naming the file and the line (expected.json lists the line and a piece of the message)."""
import json
import os

from reportlib import ReportTestCase, run_report

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "malformed")


class Malformed(ReportTestCase):
    def test_corpus(self):
        with open(os.path.join(CORPUS, "expected.json")) as f:
            expected = json.load(f)
        self.assertGreaterEqual(len(expected), 20)
        for name, want in sorted(expected.items()):
            with self.subTest(trace=name):
                path = os.path.join(CORPUS, name)
                proc = run_report(path)
                self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                lines = proc.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertIn(f"{path}:{want['line']}: ", lines[0])
                self.assertIn(want["message"], lines[0])

    def test_truncated_last_line_is_a_warning(self):
        path = os.path.join(HERE, "golden", "killed_truncated.jsonl")
        proc = run_report(path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("truncated last line ignored", proc.stdout)
