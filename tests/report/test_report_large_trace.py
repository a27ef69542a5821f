# tests/report/test_report_large_trace.py — a 1M-event trace: a small HTML report and a progress line.
"""A trace of 1M events: the HTML report stays small and quick to draw, and reading shows a progress
line on a terminal (a pty), with how far along it is (of the file's bytes, compressed ones for .zst)
and the time left, but not in a pipe."""
import os
import pty
import re
import select
import shutil
import subprocess
import tempfile
import time

from browser import chromium, rendered_dom
from demo_trace import write_large_trace
from reportlib import REPORT, ReportTestCase, run_report

EVENTS = 1_000_000


def size_text(n):
    """n bytes as the report writes sizes (report/outputs/units.cpp, format_bytes)."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return "%.1f %s" % (n / factor, unit)
    return "%d B" % n


class LargeTrace(ReportTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gpumem-large-")
        cls.trace = os.path.join(cls.dir, "big.jsonl")
        write_large_trace(cls.trace, EVENTS)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_html_of_1m_events_is_small_and_renders_quickly(self):
        page = os.path.join(self.dir, "big.html")
        run_report("--format", "html", "-o", page, self.trace, check_rc=0)
        self.assertLess(os.path.getsize(page), 5 << 20)
        if not chromium():
            self.skipTest("chromium is not installed (make deps installs it)")
        # Rendering is checked here, not timed: a test's wall clock on a shared 2-core machine is no
        # measure of speed. The page records its own render time (data-render-ms), printed for the docs.
        dom = rendered_dom(page, budget_ms=60000, timeout=120)
        if dom is None:
            self.skipTest("chromium cannot start here")
        self.assertTrue('data-rendered="true"' in dom, "the report's script did not finish")
        render_ms = int(re.search(r'data-render-ms="(\d+)"', dom).group(1))  # from navigation to charts drawn
        print(f"\n  1M-event HTML report: {os.path.getsize(page)} bytes, rendered in {render_ms} ms", flush=True)
        self.assertTrue(f"{EVENTS} events" in dom)

    def run_on_pty(self, *args):
        """Runs gpumem-report with stderr on a pseudo-terminal; returns (rc, what the terminal got)."""
        controller, terminal = pty.openpty()
        proc = subprocess.Popen([REPORT, *args], stdout=subprocess.DEVNULL, stderr=terminal, stdin=subprocess.DEVNULL)
        os.close(terminal)
        got = b""
        deadline = time.time() + 900  # a bound, not a speed check: make tsan's build reads at a tenth of the speed
        while time.time() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(controller, 65536)
                except OSError:  # the child closed its end
                    break
                if not chunk:
                    break
                got += chunk
            elif proc.poll() is not None:
                break
        os.close(controller)
        return proc.wait(timeout=900), got.decode("utf-8", "replace")

    # How far along and how long to go, where the input's size is known: a percentage (never 100 while
    # reading) of the file's bytes, the rate, and the time left.
    PROGRESS = r": (\d{1,2})% of ([\d.]+ [KMG]iB), [\d.]+ M events/s, about \d+ (s|min) left"

    def check_progress(self, shown, name, size):
        lines = re.findall(r"reading " + name + self.PROGRESS, shown)
        self.assertTrue(lines, shown[-300:])
        percents = [int(p) for p, _, _ in lines]
        self.assertEqual(percents, sorted(percents))  # only forward
        self.assertEqual({total for _, total, _ in lines}, {size})
        self.assertTrue(shown.endswith("\r\x1b[K"), f"the line is not cleared at the end: {shown[-80:]!r}")

    def test_progress_line_on_a_terminal_then_cleared(self):
        rc, shown = self.run_on_pty("--format", "json", self.trace)
        self.assertEqual(rc, 0)
        self.check_progress(shown, r".*big\.jsonl", size_text(os.path.getsize(self.trace)))

    def test_progress_of_a_compressed_trace_counts_its_compressed_bytes(self):
        if not shutil.which("zstd"):
            self.skipTest("no zstd program")
        packed = os.path.join(self.dir, "big.jsonl.zst")
        if not os.path.exists(packed):
            subprocess.run(["zstd", "-q", "-1", self.trace, "-o", packed], check=True)
        rc, shown = self.run_on_pty("--format", "json", packed)
        self.assertEqual(rc, 0)
        self.check_progress(shown, r".*big\.jsonl\.zst", size_text(os.path.getsize(packed)))

    def test_one_progress_line_for_traces_read_at_once(self):
        ranks = os.path.join(self.dir, "ranks")
        os.makedirs(ranks, exist_ok=True)
        for rank in (0, 1):
            if not os.path.exists(os.path.join(ranks, "rank%d.jsonl" % rank)):
                os.link(self.trace, os.path.join(ranks, "rank%d.jsonl" % rank))
        rc, shown = self.run_on_pty("-j", "2", "--format", "json", ranks)
        self.assertEqual(rc, 0)
        self.check_progress(shown, "2 traces", size_text(2 * os.path.getsize(self.trace)))  # both files
        self.assertNotIn("rank0", shown)
        self.assertTrue(shown.endswith("\r\x1b[K"), f"the line is not cleared at the end: {shown[-80:]!r}")

    def test_no_progress_line_when_asked(self):
        rc, shown = self.run_on_pty("--no-progress", "--format", "json", self.trace)
        self.assertEqual(rc, 0)
        self.assertEqual(shown, "")

    def test_no_progress_line_in_a_pipe(self):
        proc = run_report("--format", "json", self.trace, check_rc=0)
        self.assertEqual(proc.stderr, "")
