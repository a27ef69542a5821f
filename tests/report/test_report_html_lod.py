# tests/report/test_report_html_lod.py — the HTML report's level of detail on 1M events: the rules the
# 100M-event benchmark (bench/html_bench.py) measures, checked on a trace make test can afford.
"""The allocation timeline's level of detail (docs/report.md, "Every allocation") on a 1M-event
training run (lod_trace.py): the page stays under 10 MiB, keeps individually everything live at the
peak and at the OOM, every leak and the growing site's allocations, aggregates the rest and says so;
gpumem-report's memory does not grow with the events; headless Chromium opens it without an error.
How fast it opens is measured by the benchmark (bench/html_bench.py), not asserted here."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from browser import Page, chromium
from lod_trace import write_lod_trace
from reportlib import REPORT, ReportTestCase, run_measured, run_report, skip_bounds_under_sanitizer

EVENTS = 1_000_000
PAGE_LIMIT = 10 << 20
# Peak RSS may differ by allocator noise between sizes, never grow with them (as bench/report_bench.py).
RSS_GROWTH_ALLOWED = 1.25
RSS_SLACK = 8 << 20


class HtmlLevelOfDetail(ReportTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gpumem-lod-")
        cls.trace = os.path.join(cls.dir, "run.jsonl")
        cls.planted = write_lod_trace(cls.trace, EVENTS)
        cls.page = os.path.join(cls.dir, "run.html")
        run_report("--format", "html", "-o", cls.page, cls.trace, check_rc=0)
        with open(cls.page, encoding="utf-8") as f:
            cls.html = f.read()
        cls.data = json.loads(re.search(r'id="gpumem-data">(.*?)</script>', cls.html, re.S).group(1))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def timeline(self):
        return self.data["allocation_timelines"][0]

    def bands_of(self, level, function):
        """Indices of the bands whose stack has a frame named `function`."""
        tl = self.timeline()
        frames = {i for i, f in enumerate(tl["frames"]) if f[0] == function}
        stacks = {i for i, s in enumerate(tl["stacks"]) if frames & set(s["f"])}
        return [i for i, s in enumerate(level["bands"]["stack"]) if s in stacks]

    def test_page_is_small(self):
        self.assertLess(os.path.getsize(self.page), PAGE_LIMIT)

    def test_everything_live_at_the_peak_and_the_oom_is_drawn(self):
        blocks = self.timeline()["devices"][0]["blocks"]
        peak = blocks["peak"]
        self.assertGreater(peak["count"], 100)
        self.assertEqual((peak["shown_bytes"], peak["shown_count"]), (peak["bytes"], peak["count"]))
        self.assertTrue(blocks["ooms"], "the planted OOM is not on the timeline")
        for moment in blocks["ooms"]:
            self.assertEqual((moment["shown_bytes"], moment["shown_count"]), (moment["bytes"], moment["count"]))
        # The burst that makes the peak: its 16 blocks are bands.
        self.assertEqual(len(self.bands_of(blocks, "attention_scores")), 16)

    def test_every_leak_and_the_growing_sites_allocations_are_drawn(self):
        blocks = self.timeline()["devices"][0]["blocks"]
        live_at_end = 16
        flags = blocks["bands"]["flags"]
        leak = self.bands_of(blocks, "cache_embeddings")
        self.assertEqual(len(leak), 1)
        self.assertTrue(flags[leak[0]] & live_at_end)
        history = self.bands_of(blocks, "append_history")
        self.assertEqual(len(history), self.planted["history"])
        self.assertTrue(all(flags[i] & live_at_end for i in history))
        table = self.data["stack_table"]  # the page keeps each stack once: "stack" is an index
        growth = [g for g in self.data["growth"] if any(f["function"] == "append_history" for f in table[g["stack"]]["frames"])]
        self.assertEqual(len(growth), 1, "the planted growth is not reported")

    def test_the_rest_is_aggregated_and_the_page_says_so(self):
        blocks = self.timeline()["devices"][0]["blocks"]
        self.assertGreater(blocks["aggregated"], 100_000)
        self.assertEqual(blocks["shown"] + blocks["aggregated"], blocks["allocations"])
        self.assertEqual(blocks["bands"]["n"], blocks["shown"])
        self.assertLessEqual(blocks["shown"], 60_000)
        self.assertTrue(blocks["groups"], "no aggregated group")
        # The groups hold every aggregated allocation.
        self.assertEqual(sum(g["count"] for g in blocks["groups"]), blocks["aggregated"])

    @skip_bounds_under_sanitizer
    def test_memory_does_not_grow_with_the_events(self):
        small = os.path.join(self.dir, "small.jsonl")
        write_lod_trace(small, EVENTS // 10)
        sizes = []
        for trace in (small, self.trace):
            rc, err, _, rss = run_measured([REPORT, "--format", "html", "-o", os.path.join(self.dir, "m.html"), trace])
            self.assertEqual(rc, 0, err)
            sizes.append(rss)
        self.assertLessEqual(sizes[1], sizes[0] * RSS_GROWTH_ALLOWED + RSS_SLACK,
                             f"max RSS {sizes[0] >> 20} MiB at {EVENTS // 10} events, {sizes[1] >> 20} MiB at {EVENTS}")

    def test_chromium_opens_it_without_an_error(self):
        if not chromium():
            self.skipTest("chromium is not installed (make deps installs it)")
        page = Page.open(width=1280, height=1000)
        if page is None:
            self.skipTest("chromium cannot start here")
        with page:
            seconds = page.load(self.page, timeout=120)
            self.assertEqual(page.evaluate("document.body.getAttribute('data-rendered')"), "true")
            self.assertEqual(page.errors, [])
            lod = page.evaluate("document.querySelector('.alloc-view .lod').textContent")
            self.assertRegex(lod, r"of [\d,]+ allocations are drawn individually")
            self.assertIn("are aggregated by call site", lod)
            self.assertIn("every allocation is a band", lod)
            print(f"\n  {EVENTS}-event HTML page: {os.path.getsize(self.page)} bytes, drawn {seconds:.2f} s after navigation "
                  "(a figure, not a test: bench/html_bench.py measures it)", flush=True)


class HtmlBenchHarness(ReportTestCase):
    """bench/html_bench.py runs end to end on a small run (its figures mean nothing here)."""

    def test_bench_runs_and_prints_its_table(self):
        if not chromium():
            self.skipTest("chromium is not installed (make deps installs it)")
        bench = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench", "html_bench.py")
        proc = subprocess.run([sys.executable, bench, "--build", os.path.dirname(REPORT), "--events", "200000",
                               "--runs", "1", "--snapshot-events", "20000"], capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for row in ("| page size |", "| events in the page |", "| drawn (navigation to report drawn) |",
                    "| first contentful paint |", "| analyzer |", "load average after:"):
            self.assertIn(row, proc.stdout)
        self.assertIn("everything live at the peak and the OOM: all", proc.stdout)
        self.assertIn("console errors: none", proc.stdout)
