# tests/report/test_dwarf_lookup_bench.py — bench/dwarf_lookup_bench.py runs and measures what it claims.
"""bench/dwarf_lookup_bench.py (make bench-dwarf-lookup) in a brief run: its frames are return addresses
in code with inlining (gpumem-report names them, inlined levels among them), every gpumem-report given
gets its row, and a bad --report is refused. The figures of such a run mean nothing; only the shape is
asserted (the lead measures on a quiet machine)."""
import os
import re
import subprocess
import sys
import unittest

from reportlib import REPORT, ROOT

BENCH = os.path.join(ROOT, "bench", "dwarf_lookup_bench.py")


def run_bench(*args):
    return subprocess.run([sys.executable, BENCH, "--build", os.path.dirname(REPORT), "--reps", "1", *args],
                          capture_output=True, text=True, timeout=300)


@unittest.skipUnless(os.path.exists(REPORT), "needs build/gpumem-report")
class DwarfLookupBench(unittest.TestCase):
    def test_rows_name_frames_with_inlined_levels(self):
        proc = run_bench("--frames", "40", "--report", f"again={REPORT}")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = re.findall(r"^\| (this build|again) \(.*?\) \| (\d+) / (\d+) \| .* s \| .* s \| -?[\d.]+ us \|$",
                          proc.stdout, re.M)
        self.assertEqual([r[0] for r in rows], ["this build", "again"], proc.stdout)
        for _, named, inlined in rows:
            self.assertEqual(int(named), 40)  # every frame looked up and named
            self.assertGreater(int(inlined), 0)  # the workload reaches inlined code
        self.assertIn("load average", proc.stdout)

    def test_report_without_a_path_is_refused(self):
        proc = run_bench("--frames", "5", "--report", "main")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--report main: expected NAME=PATH", proc.stderr)


if __name__ == "__main__":
    unittest.main()
