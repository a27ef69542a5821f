# tests/report/test_report_growth_total.py — growth is a rise of the device's total that a site explains, never memory that only moved.
"""Growth (report/analyses/growth.h) is a rise of the level's total (the device's blocks or allocations,
pinned host memory) that a site explains:

- a bounded cache whose entries are replaced from a second call site (tests/e2e/programs/
  report_bounded_cache.cpp, recorded on the simulated runtime) moves memory from one site to the other
  while the device's total stays flat: no growth, --fail-on-growth passes, and no time to OOM (nothing
  is live at the end either);
- memory the trace starts with (a PyTorch snapshot's state before its history) is the baseline of its
  site, not a rise, however it is spread over sites and addresses;
- the planted accumulation of report_growth still is growth (the control).
"""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "snapshot"))

import snapshot_samples as samples  # noqa: E402
from recorder_testlib import LIB, program, run_traced, tempdir, trace_files  # noqa: E402
from reportlib import REPORT, functions, report_json, run_report  # noqa: E402

MiB = 1 << 20


class BoundedCache(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = [p for p in (REPORT, LIB, program("report_bounded_cache"), program("report_growth"))
                   if not os.path.exists(p)]
        if missing:
            raise unittest.SkipTest(f"not built: {', '.join(missing)}")
        cls.root = tempdir()
        cls.traces = {}
        for key, args in (("cache", [program("report_bounded_cache"), "64"]),
                          ("growth", [program("report_growth"), "50"])):
            out = os.path.join(cls.root, key)
            os.makedirs(out)
            proc = run_traced(args, out)
            files = trace_files(out)
            if proc.returncode != 0 or len(files) != 1:
                raise AssertionError(f"{args}: exit {proc.returncode}, traces {files}\n{proc.stdout}{proc.stderr}")
            cls.traces[key] = files[0]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def test_memory_that_moved_between_sites_is_no_growth(self):
        r = report_json(self.traces["cache"])
        self.assertEqual(r["growth"], [])
        self.assertEqual(r["time_to_oom"], [])
        proc = run_report("--fail-on-growth", self.traces["cache"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("growth: none", proc.stdout)

    def test_the_planted_accumulation_still_grows(self):
        r = report_json(self.traces["growth"])
        self.assertEqual([functions(g["stack"])[0].split("(")[0] for g in r["growth"]], ["plant_accumulation"])
        run_report("--fail-on-growth", self.traces["growth"], check_rc=1)


class SnapshotBaseline(unittest.TestCase):
    def setUp(self):
        if not os.path.exists(REPORT):
            self.skipTest(REPORT + " not built")
        self.dir = tempfile.mkdtemp(prefix="gpumem-report-growth-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_memory_from_before_the_history_is_no_growth(self):
        # 40 blocks of two sites at rising addresses, all live before a short history (the shape of model
        # weights loaded before _record_memory_history): no growth, and named as what they are.
        layer = (samples.py_stack("load_weight", 20), samples.py_stack("load_bias", 21))
        blocks = [(MiB, MiB, "active_allocated", layer[i % 2]) for i in range(40)] + [(24 * MiB, 0, "inactive", None)]
        h = samples.History()
        for i in range(3):
            h.alloc(samples.SEG_A + 40 * MiB, MiB, samples.py_stack("step", 30))
            h.free(samples.SEG_A + 40 * MiB, MiB)
        path = os.path.join(self.dir, "weights.pickle")
        samples.dump(samples.snapshot([samples.segment(samples.SEG_A, 64 * MiB, blocks)], [h.entries]), path)
        r = report_json(path)
        self.assertEqual(r["growth"], [])
        text = run_report(path).stdout
        self.assertIn("40.0 MiB in 40 blocks allocated before recording started", text)
