# tests/report/test_report_html.py — the HTML report, as a file and as rendered by headless Chromium.
"""`--format html`: one self-contained page, checked as a file and as rendered by headless Chromium
(the DOM after the scripts ran): the culprits, figures, charts, escaping, several processes."""
import os
import re
import shutil
import tempfile

from browser import chromium, rendered_dom
from demo_trace import write_training_trace
from reportlib import ReportTestCase, run_report


class HtmlReport(ReportTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gpumem-html-")
        cls.trace = os.path.join(cls.dir, "train.jsonl")
        write_training_trace(cls.trace, steps=10, evil_name=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def html(self, *inputs):
        out = os.path.join(self.dir, "report.html")
        run_report("--format", "html", "-o", out, *inputs, check_rc=0)
        with open(out, encoding="utf-8") as f:
            return out, f.read()

    def dom(self, page):
        if not chromium():
            self.skipTest("chromium is not installed (make deps installs it)")
        dom = rendered_dom(page)
        if dom is None:
            self.skipTest("chromium cannot start here")
        self.assertTrue('data-rendered="true"' in dom, "the report's script did not finish")
        # Only what the app drew: the page also holds the data and the scripts as text.
        drawn = re.search(r'<main id="report">(.*)</main>', dom, re.S)
        self.assertTrue(drawn, "no <main> in the rendered page")
        # Paths and qualified names carry line-break points (<wbr>) after their separators.
        return drawn.group(1).replace("<wbr>", "")

    def assertDrawn(self, text, drawn):
        self.assertTrue(text in drawn, f"`{text}` is not in the rendered report")

    def test_file_is_self_contained(self):
        _, text = self.html(self.trace)
        self.assertNotRegex(text, r"<script[^>]+src=|<link[^>]+href=|@import|url\(http")
        self.assertIn("Content-Security-Policy", text)
        self.assertIn("default-src 'none'", text)
        # The libraries are inlined, with their versions named.
        self.assertRegex(text, r"uplot@\d+\.\d+\.\d+")
        self.assertRegex(text, r"d3-flame-graph@\d+\.\d+\.\d+")

    def test_function_names_cannot_close_the_script(self):
        _, text = self.html(self.trace)
        data = re.search(r'<script type="application/json" id="gpumem-data">(.*?)</script>', text, re.S).group(1)
        self.assertNotIn("<", data)
        self.assertIn("\\u003cscript>alert(1)\\u003c/script>", data)

    def test_rendered_report_shows_culprits_figures_and_charts(self):
        page, _ = self.html(self.trace)
        dom = self.dom(page)
        for culprit in ("at::native::conv2d", "at::empty_cuda", "at::native::matmul", "at::native::clone"):
            self.assertDrawn(culprit, dom)
        # At the allocated peak: 4 x 600 MiB weights, 256 MiB cache, 10 x 48 MiB history, the 3 GiB block.
        self.assertDrawn("Live at the allocated peak: 6.06 GiB", dom)
        self.assertDrawn('<td class="num">3.00 GiB</td>', dom)
        self.assertDrawn('class="uplot', dom)       # the timeline was drawn
        self.assertDrawn('class="d3-flame-graph', dom)  # the flame graph was drawn
        self.assertDrawn(">capacity<", dom)         # the OOM's verdict
        self.assertDrawn("Growth (1)", dom)

    def test_script_in_a_function_name_shows_as_text(self):
        page, _ = self.html(self.trace)
        dom = self.dom(page)
        self.assertDrawn("&lt;script&gt;alert(1)&lt;/script&gt;", dom)
        self.assertFalse("<script" in dom, "a function name became an element")

    def test_directory_of_traces_has_a_section_per_process_and_the_spread(self):
        ranks = os.path.join(self.dir, "ranks")
        os.makedirs(ranks, exist_ok=True)
        write_training_trace(os.path.join(ranks, "rank0.jsonl"), steps=2, pid=100)
        write_training_trace(os.path.join(ranks, "rank1.jsonl"), steps=5, pid=101)
        page, _ = self.html(ranks)
        dom = self.dom(page)
        self.assertDrawn("Across 2 processes", dom)
        self.assertDrawn('id="pid-100"', dom)
        self.assertDrawn('id="pid-101"', dom)
        # Rank 1 ran more steps: its history list (a leak) holds 3 x 48 MiB more.
        self.assertDrawn("Leaked: min 5.69 GiB (pid 100), max 5.83 GiB (pid 101)", dom)
