# tests/report/test_report_golden.py — each golden trace produces exactly its expected JSON report.
"""Golden files: each checked-in trace in tests/report/golden/ must produce exactly its
NAME.expected.json (file paths reduced to names). Regenerate with make_golden.py --update."""
import glob
import json
import os

from make_golden import GOLDEN, normalized_report
from reportlib import REPORT, ReportTestCase


class Golden(ReportTestCase):
    def test_golden_reports(self):
        traces = sorted(glob.glob(os.path.join(GOLDEN, "*.jsonl")))
        self.assertGreaterEqual(len(traces), 3)
        for trace in traces:
            with self.subTest(trace=os.path.basename(trace)):
                with open(trace + ".expected.json") as f:
                    expected = json.load(f)
                self.maxDiff = None
                self.assertEqual(normalized_report(REPORT, trace), expected)
