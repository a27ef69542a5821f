# tests/report/test_report_format_v2.py — the same events as trace format version 1 and 2 give the same report.
"""Trace format version 2 (docs/trace-format.md): the same events written as version 1 and as version
2 (plain and zstd) must give the same report. The version 1 fixtures (tests/report/golden, the real
H100 traces in tests/report/real) are re-written as version 2 by tests/tracefile.py, the way the
recorder writes it. Also: the jq program of docs/trace-format.md expands version 2 events to the
same records as tests/tracefile.py."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from make_golden import GOLDEN, normalized_report
from reportlib import REPORT, ReportTestCase

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import tracefile  # noqa: E402

FIXTURES = sorted(glob.glob(os.path.join(GOLDEN, "*.jsonl")) + glob.glob(os.path.join(HERE, "real", "*.jsonl.zst")))


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def without_file_names(report):
    """The report with each trace's file name left out (the copies are named differently)."""
    text = json.dumps(report, sort_keys=True)
    for entry in report.get("processes", []):
        text = text.replace(json.dumps(entry["file"]), '"TRACE"')
    return json.loads(text)


class FormatVersion2(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="gpumem-v2-test-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def copies(self, fixture):
        """(v1 path, v2 path, v2 .zst path) of the fixture's complete lines."""
        records, _ = tracefile.read_records(fixture)
        self.assertEqual(records[0]["version"], 1, fixture)
        name = os.path.basename(fixture).split(".")[0]
        v1 = os.path.join(self.dir, name + ".v1.jsonl")
        v2 = os.path.join(self.dir, name + ".v2.jsonl")
        # The v1 records as read (a truncated last line left out, as in the v2 copy).
        write_lines(v1, [json.dumps(r, separators=(",", ":")) for r in records])
        write_lines(v2, tracefile.encode(records, version=2))
        subprocess.run(["zstd", "-q", "-3", "--check", v2, "-o", v2 + ".zst"], check=True)
        return v1, v2, v2 + ".zst"

    def test_same_report_from_both_versions(self):
        self.assertGreaterEqual(len(FIXTURES), 10)
        for fixture in FIXTURES:
            with self.subTest(trace=os.path.basename(fixture)):
                v1, v2, v2_zst = self.copies(fixture)
                self.maxDiff = None
                expected = without_file_names(normalized_report(REPORT, v1))
                self.assertTrue(expected["processes"], expected)
                self.assertEqual(without_file_names(normalized_report(REPORT, v2)), expected)
                self.assertEqual(without_file_names(normalized_report(REPORT, v2_zst)), expected)

    def test_version_2_is_smaller(self):
        v1, v2, _ = self.copies(os.path.join(HERE, "real", "roles.jsonl.zst"))
        self.assertLess(os.path.getsize(v2), os.path.getsize(v1) * 0.6)

    def test_cut_version_2_trace_keeps_what_came_before(self):
        _, v2, _ = self.copies(os.path.join(GOLDEN, "mixed.jsonl"))
        with open(v2) as f:
            lines = f.read().splitlines()
        events = [i for i, line in enumerate(lines) if line.startswith('{"e":')]
        cut = os.path.join(self.dir, "cut.jsonl")
        with open(cut, "w") as f:  # killed in the middle of an event line
            f.write("\n".join(lines[:events[10]]) + "\n" + lines[events[10]][:9])
        proc = subprocess.run([REPORT, "--format", "json", cut], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        report = json.loads(proc.stdout)
        self.assertFalse(report["processes"][0]["complete"])
        self.assertEqual(report["processes"][0]["events"], 10)

    def test_streaming_reader_gives_the_same_records(self):
        # tests/tracefile.py's iter_records (the benchmarks' bounded-memory reader) against read_records,
        # on a plain and a zstd copy, and on a trace cut in the middle of an event line.
        _, v2, v2_zst = self.copies(os.path.join(GOLDEN, "mixed.jsonl"))
        whole, _ = tracefile.read_records(v2)
        self.assertGreater(len(whole), 20)
        self.assertEqual(list(tracefile.iter_records(v2)), whole)
        self.assertEqual(list(tracefile.iter_records(v2_zst)), whole)
        with open(v2) as f:
            text = f.read()
        cut = os.path.join(self.dir, "cut.jsonl")
        with open(cut, "w") as f:
            f.write(text[:text.rindex('{"e":') + 9])
        cut_records, truncated = tracefile.read_records(cut)
        self.assertTrue(truncated)
        self.assertEqual(list(tracefile.iter_records(cut)), cut_records)
        self.assertLess(len(cut_records), len(whole))

    @unittest.skipUnless(shutil.which("jq"), "jq is not installed")
    def test_documented_jq_program_expands_events(self):
        with open(os.path.join(ROOT, "docs", "trace-format.md")) as f:
            doc = f.read()
        start = doc.index("EXPAND='") + len("EXPAND='")
        program = doc[start:doc.index("'\n", start)]
        _, v2, _ = self.copies(os.path.join(GOLDEN, "blocks.jsonl"))
        proc = subprocess.run(["jq", "-c", "-n", program, v2], capture_output=True, text=True, check=True)
        expanded = [json.loads(line) for line in proc.stdout.splitlines()]
        decoded, _ = tracefile.read_records(v2)
        self.assertEqual(len(expanded), len(decoded))
        events = 0
        for by_jq, by_python in zip(expanded, decoded):
            # Same fields and values; jq's adds size 0 to the events that have no range.
            self.assertEqual({k: by_jq.get(k) for k in by_python}, by_python)
            events += by_python["type"] == "event"
        self.assertGreater(events, 10)


if __name__ == "__main__":
    unittest.main()
