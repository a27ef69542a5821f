# tests/snapshot/test_snapshot_hostile.py — hostile snapshots stay within time and memory bounds.
"""Hostile snapshots (hostile_pickles.py) stay within time and memory bounds: shared references are
counted, not expanded without limit (billion laughs), dict lookups are hashed (a wide dict referenced
many times), and gpumem-report streams the converted trace through a temporary file instead of
holding it. Each run's time and max RSS are measured on the child alone (os.wait4)."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "report"))
import hostile_pickles as hostile  # noqa: E402
from reportlib import run_measured, skip_bounds_under_sanitizer  # noqa: E402

BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(os.path.dirname(os.path.dirname(HERE)), "build"))
REPORT = os.path.join(BUILD, "gpumem-report")
CONVERT = os.path.join(BUILD, "gpumem-snapshot2trace")
MiB = 1 << 20


@skip_bounds_under_sanitizer
class HostileSnapshots(unittest.TestCase):
    def setUp(self):
        for tool in (REPORT, CONVERT):
            if not os.access(tool, os.X_OK):
                self.skipTest(f"{tool} not built")
        self.tmp = tempfile.TemporaryDirectory(prefix="gpumem-hostile-")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def assert_refused(self, name, data):
        path = self.write(name, data)
        self.assertLess(len(data), 13000)
        for argv in ([REPORT, path], [CONVERT, path, os.path.join(self.tmp.name, "out.jsonl")]):
            rc, err, seconds, rss = run_measured(argv)
            self.assertEqual(rc, 2, err)
            lines = err.strip().splitlines()
            self.assertEqual(len(lines), 1, err)
            self.assertIn("shared references expand to more than", lines[0])
            self.assertLess(seconds, 5, argv)          # 12 KB that expands without bound if uncounted
            self.assertLess(rss, 160 * MiB, argv)      # 1 Mi history entries at most, ~60 MiB

    def test_billion_laughs_history_is_refused_quickly(self):
        self.assert_refused("laughs.pickle", hostile.billion_laughs(6000))

    def test_billion_laughs_segments_is_refused_quickly(self):
        self.assert_refused("segments.pickle", hostile.segment_laughs(6000))

    def test_wide_dict_referenced_many_times_is_linear(self):
        # 40,000 keys referenced 125,000 times: 41 s when every lookup scanned the dict.
        path = self.write("wide.pickle", hostile.wide_dict(40000, 125000))
        rc, err, seconds, rss = run_measured([REPORT, "--format", "json", "-o", os.devnull, path])
        self.assertEqual(rc, 0, err)
        self.assertLess(seconds, 5)

    def test_converted_trace_is_streamed_not_held(self):
        path = self.write("many.pickle", hostile.wide_dict(0, 400000))
        out = os.path.join(self.tmp.name, "many.jsonl")
        rc, err, _, _ = run_measured([CONVERT, path, out])
        self.assertEqual(rc, 0, err)
        converted = os.path.getsize(out)
        self.assertGreater(converted, 60 * MiB)
        rc, err, seconds, rss = run_measured([REPORT, "--format", "json", "-o", os.devnull, path])
        self.assertEqual(rc, 0, err)
        with open(out) as f:
            self.assertIn('"events":400001', f.readlines()[-1])  # the footer counts every event (and the segment)
        # Holding the converted trace would take at least its size, on top of the parsed history
        # (about 80 bytes per entry); streamed, the history is what remains.
        self.assertLess(rss, converted * 3 // 4, f"max RSS {rss >> 20} MiB for a {converted >> 20} MiB converted trace")


if __name__ == "__main__":
    unittest.main()
