# tests/report/test_report_html_views.py — the HTML report driven in headless Chromium: hover, click,
# sort, screenshots, console errors.
"""The HTML report as a person uses it, in headless Chromium over the DevTools protocol (browser.py,
Page): hover a band of the allocation timeline and read its stack, click a moment and read the
segment map, sort the tests, read the OOM's why; no console error; screenshots' key regions hold the
colours the data says. Real PyTorch traces (tests/report/real/) and small planted ones."""
import json
import os
import re

from browser import PageTests
from demo_trace import write_training_trace
from reportlib import ROOT, ReportTestCase, run_report
from tracegen import MiB, Trace

REAL = os.path.join(ROOT, "tests", "report", "real")
EVIL = '<img src=x onerror="window.__pwned=1">'


def hex_rgb(text):
    return tuple(int(text[i:i + 2], 16) for i in (1, 3, 5))


def near(pixel, colour, tolerance=12):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


class HtmlViews(PageTests, ReportTestCase):
    def page_for(self, name, trace):
        if name not in self.pages:
            out = os.path.join(self.dir, name + ".html")
            run_report("--format", "html", "-o", out, trace, check_rc=0)
            self.pages[name] = out
        return self.pages[name]

    def open(self, name, trace):
        return self.load(self.page_for(name, trace))

    def text(self, page, selector):
        return page.evaluate(f"Array.from(document.querySelectorAll({json.dumps(selector)})).map(e => e.innerText).join('\\n')")

    def data(self, path):
        with open(path, encoding="utf-8") as f:
            return json.loads(re.search(r'id="gpumem-data">(.*?)</script>', f.read(), re.S).group(1))

    # --- the defects of issue 22 ---------------------------------------------------------------------

    def test_oom_table_shows_why(self):
        trace = os.path.join(REAL, "capacity.jsonl.zst")
        page = self.open("capacity", trace)
        why = self.data(self.pages["capacity"])["ooms"][0]["explanation"]
        self.assertTrue(why)
        self.assertIn(why, self.text(page, "main section.card"))
        self.assertEqual(page.errors, [])

    def test_a_run_that_leaked_nothing_says_so_without_a_count(self):
        page = self.open("capped", os.path.join(REAL, "capped.jsonl.zst"))
        cards = self.text(page, "header + .stats .stat")
        self.assertRegex(cards, r"LEAKED AT EXIT\s+0 B\b")
        self.assertNotIn("0 B in 0", cards)

    def test_tests_are_a_sortable_table_and_the_cards_count_their_leaks(self):
        page = self.open("pytest", os.path.join(REAL, "pytest.jsonl.zst"))
        cards = self.text(page, "header + .stats .stat")
        self.assertRegex(cards, r"TESTS THAT LEAKED\s+1 of 3 · 16\.0 MiB")
        self.assertIn("Nothing leaked at exit; 1 test or scope leaked during the run", self.text(page, "section.card"))
        names = lambda: page.evaluate("Array.from(document.querySelectorAll('.tests-view tbody tr')).map(r => r.cells[0].innerText)")
        # Most leaked first; every name whole, as pytest prints it.
        self.assertEqual(names()[0], "tests/gpu/scenarios/leaky_suite.py::test_keeps_tensor")
        self.assertEqual(sorted(names()), ["tests/gpu/scenarios/leaky_suite.py::test_keeps_tensor",
                                           "tests/gpu/scenarios/leaky_suite.py::test_linear_backward",
                                           "tests/gpu/scenarios/leaky_suite.py::test_matmul"])
        table = self.text(page, ".tests-view")
        self.assertNotIn('{"', table)  # no stack dumped as JSON
        self.assertNotRegex(table, r"\d{9,}")  # no monotonic nanoseconds
        # Sorting by peak puts the test with the highest peak first.
        page.evaluate("Array.from(document.querySelectorAll('.tests-view th')).find(t => t.innerText.startsWith('Peak')).click()")
        self.assertEqual(names()[0], "tests/gpu/scenarios/leaky_suite.py::test_linear_backward")
        page.evaluate("Array.from(document.querySelectorAll('.tests-view th')).find(t => t.innerText.startsWith('Test')).click()")
        self.assertEqual(names(), sorted(names()))
        self.assertEqual(page.errors, [])

    def test_stacks_are_named_by_the_users_line_not_the_profilers_wrapper(self):
        page = self.open("roles", os.path.join(REAL, "roles.jsonl.zst"))
        summaries = page.evaluate("Array.from(document.querySelectorAll('details.stack > summary')).map(s => s.innerText)")
        self.assertTrue(summaries)
        self.assertFalse([s for s in summaries if "backward_scope.py" in s], "the PyTorch hook's wrapper names a stack")
        # The gradients the autograd engine allocated are the user's backward() call's.
        self.assertTrue([s for s in summaries if "transformer_step.py:15" in s])

    def test_timeline_steps_and_draws_no_allocated_line_without_blocks(self):
        trace = os.path.join(self.dir, "step.jsonl")
        t = Trace(trace)
        s = t.stack("hold_buffer", line=7)
        t.alloc(0x10000000, 10 * MiB, s, dt=1_000_000)
        t.free(0x10000000, dt=110_000_000)
        t.alloc(0x20000000, 1 * MiB, s, dt=1_000_000)
        t.close()
        page = self.open("step", trace)
        legend = self.text(page, ".u-legend")
        self.assertIn("reserved", legend)
        self.assertNotIn("allocated", legend)
        page.scroll_into_view(".uplot")
        box = page.evaluate("(() => { const r = document.querySelector('.uplot .u-over').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
        x, y, w, hgt = [int(v) for v in box]
        shot = page.screenshot(x, y, w, hgt)
        # Halfway between the allocation (1 ms) and its free (111 ms) the line is still at 10 MiB: in
        # the top quarter of the plot. Interpolated, it would be halfway down.
        column = w // 2
        blue = [yy for yy in range(hgt) if near(shot.pixel(column, yy), hex_rgb("#3867d6"), 40)]
        self.assertTrue(blue, "no reserved line in the middle of the plot")
        self.assertLess(min(blue), hgt // 4)

    def test_flame_graphs_for_every_allocation_at_the_peak_and_more_views(self):
        page = self.open("roles", os.path.join(REAL, "roles.jsonl.zst"))
        tabs = page.evaluate("Array.from(document.querySelectorAll('.flame')).length ? Array.from(document.querySelectorAll('section.card .tabs button')).map(b => b.innerText) : []")
        for title in ("Allocated at peak", "Reserved at peak", "Bytes allocated", "Allocations", "Temporary", "At the chosen moment"):
            self.assertIn(title, tabs)
        data = self.data(self.pages["roles"])
        live_at_peak = data["allocation_timelines"][0]["devices"][0]["blocks"]["peak"]["count"]
        # The peak's flame graph counts every block live then, not only the largest culprits.
        count = page.evaluate("d3.select('.flame svg g').datum().data.count")
        self.assertEqual(count, live_at_peak)
        self.assertGreater(live_at_peak, sum(c["count"] for c in data["peaks"][0]["allocated"]["culprits"]))

    # --- every allocation, the segment map -------------------------------------------------------------

    def locate(self, page, want):
        """The page position of a band whose stack's first line contains `want` (tensor level)."""
        return page.evaluate(f"""(() => {{
          const v = GpuMem.views[0], tl = (JSON.parse(document.getElementById('gpumem-data').textContent)).allocation_timelines[0];
          const D = v.decoded[v.level()];
          for (let i = 0; i < D.n; i++) {{
            if (GpuMem.stackLines(tl, D.stack[i]).join('\\n').includes({json.dumps(want)})) {{
              const at = v.locateBand(i); if (at) return {{i, x: at.x, y: at.y, size: D.size[i]}};
            }}
          }}
          return null; }})()""")

    def train_page(self):
        """The demo training trace's page, its allocation view in sight."""
        trace = os.path.join(self.dir, "train.jsonl")
        if not os.path.exists(trace):
            write_training_trace(trace, steps=6)
        page = self.open("train", trace)
        page.scroll_into_view(".alloc-view")
        return page

    def test_hover_a_band_shows_its_size_times_and_stack(self):
        page = self.train_page()
        band = self.locate(page, "cache_embeddings")
        self.assertIsNotNone(band, "the leaked cache has no band")
        page.hover(band["x"], band["y"])
        tip = page.evaluate("(() => { const t = document.querySelector('.alloc-view .band-tip'); return t.hidden ? '' : t.innerText; })()")
        self.assertIn("256 MiB", tip)
        self.assertIn("still live at the end", tip)
        self.assertIn("cache_embeddings (/src/train.cu:77)", tip)
        self.assertIn("warmup (train.py:42)", tip)
        self.assertEqual(page.errors, [])

    def test_click_a_moment_shows_the_segment_map_then(self):
        page = self.train_page()
        band = self.locate(page, "conv2d")
        page.click(band["x"], band["y"])
        title = self.text(page, ".segment-view h4")
        self.assertRegex(title, r"^Segments at \d")
        self.assertIn("conv2d", self.text(page, ".pinned"))
        summary = self.text(page, ".segment-summary")
        # The activations' segment (4 GiB) holds the clicked block among others.
        self.assertRegex(summary, r"\d+ segments, [\d.]+ GiB reserved; [\d.]+ [MG]iB in \d+ blocks")
        self.assertIn("4.00 GiB", self.text(page, ".segment-table"))
        # The flame graph of the chosen moment follows the click.
        page.evaluate("Array.from(document.querySelectorAll('section.card .tabs button')).find(b => b.innerText === 'At the chosen moment').click()")
        root = page.evaluate("d3.select('.flame svg g').datum().data")
        self.assertGreater(root["count"], 0)
        self.assertEqual(page.errors, [])

    def test_real_trace_every_allocation_has_its_stack_and_the_oom_its_segment_map(self):
        page = self.open("capacity", os.path.join(REAL, "capacity.jsonl.zst"))
        page.scroll_into_view(".alloc-view")
        n = page.evaluate("GpuMem.views[0].decoded[GpuMem.views[0].level()].n")
        self.assertGreater(n, 0)
        checked = 0
        for i in range(n):
            at = page.evaluate(f"GpuMem.views[0].locateBand({i})")
            if not at:
                continue
            page.hover(at["x"], at["y"])
            tip = page.evaluate("document.querySelector('.alloc-view .band-tip').innerText")
            self.assertIn("oom_capacity.py", tip)
            checked += 1
        self.assertEqual(checked, n, "a band of the real trace is not drawn")
        # The map shown first is the OOM's, and it says why the request failed.
        self.assertIn("(OOM 1)", self.text(page, ".segment-view h4"))
        self.assertRegex(self.text(page, ".segment-summary"), r"The request of 4\.00 GiB is larger than the largest free block \(0 B\)")
        self.assertIn("Exact: every block live then is placed", self.text(page, ".segment-view .hint"))
        self.assertEqual(page.errors, [])

    def test_no_console_errors_on_the_real_traces(self):
        for name in sorted(os.listdir(REAL)):
            if not name.endswith(".jsonl.zst"):
                continue
            with self.subTest(trace=name):
                page = self.open(name.split(".")[0], os.path.join(REAL, name))
                self.assertEqual(page.errors, [])

    def test_screenshot_regions_hold_the_colours_the_data_says(self):
        page = self.open("capacity", os.path.join(REAL, "capacity.jsonl.zst"))
        # Without PyTorch's roles every band is "other": the page colours by call site unless asked.
        page.evaluate("(() => { const s = document.querySelector('.alloc-view select'); s.value = 'role'; s.dispatchEvent(new Event('change')); })()")
        page.scroll_into_view(".alloc-view canvas.bands")
        box = page.evaluate("(() => { const r = document.querySelector('canvas.bands').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
        x, y, w, hgt = [int(v) for v in box]
        shot = page.screenshot(x, y, w, hgt)
        # Coloured by role: the 19 blocks are "other" (no PyTorch frames the role rules know), and
        # they fill most of the plot from the first moment on (74 px from the left: the axis).
        colour = hex_rgb("#4b6584")
        plot = [(xx, yy) for xx in range(80, w - 160, 7) for yy in range(40, hgt - 30, 7)]
        filled = sum(1 for xx, yy in plot if near(shot.pixel(xx, yy), colour))
        self.assertGreater(filled / len(plot), 0.5)
        # The segment map at the OOM: no free gap, so no light pixel inside the segments' boxes, and
        # no outline of a largest free block.
        page.scroll_into_view("canvas.segments")
        box = page.evaluate("(() => { const r = document.querySelector('canvas.segments').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
        shot = page.screenshot(*[int(v) for v in box])
        colours = shot.colours()
        self.assertFalse([c for c in colours if near(c, hex_rgb("#d63031"), 30)], "a largest free block is outlined")
        self.assertGreater(sum(n for c, n in colours.items() if near(c, colour)), shot.width * shot.height // 3)

    def test_fragmentation_shows_in_the_segment_map(self):
        # Blocks with gaps between them in one segment, then a request larger than any gap but not
        # than the free bytes in all: the map's largest free block is outlined and the summary says so.
        trace = os.path.join(self.dir, "frag.jsonl")
        t = Trace(trace)
        seg = t.stack("c10::cuda::CUDACachingAllocator::malloc", line=940, python="train")
        block = t.stack("make_tensor", line=5, python="forward")
        boom = t.stack("big_tensor", line=9, python="forward")
        t.alloc(0x7f0000000000, 1024 * MiB, seg)
        for i in range(16):
            t.block_alloc(0x7f0000000000 + i * 64 * MiB, 32 * MiB, block, segment=0x7f0000000000)
        t.event("alloc", "device", 0, 128 * MiB, boom, result=2)
        t.meminfo(0, 1 << 30)
        t.block_oom(128 * MiB, boom)
        t.close()
        page = self.open("frag", trace)
        self.assertRegex(self.text(page, ".segment-summary"),
                         r"1 segment, 1\.00 GiB reserved; 512 MiB in 16 blocks; 512 MiB free in 16 gaps; largest free block 32\.0 MiB\. "
                         r"The request of 128 MiB is larger than the largest free block \(32\.0 MiB\), though 512 MiB is free in all: fragmentation\.")
        page.scroll_into_view("canvas.segments")
        box = page.evaluate("(() => { const r = document.querySelector('canvas.segments').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
        shot = page.screenshot(*[int(v) for v in box])
        colours = shot.colours()
        light = sum(n for c, n in colours.items() if near(c, hex_rgb("#f1f3f6"), 6))
        red = sum(n for c, n in colours.items() if near(c, hex_rgb("#d63031"), 30))
        self.assertGreater(red, 20, "the largest free block is not outlined")
        self.assertGreater(light, shot.width * shot.height // 5, "the free gaps are not drawn")

    def test_names_stay_text_in_tooltips_and_tables(self):
        trace = os.path.join(self.dir, "evil.jsonl")
        t = Trace(trace)
        s = t.stack("load", line=3, python=EVIL)  # a Python name is shown as recorded
        t.alloc(0x10000000, 64 * MiB, s)
        t.close()
        page = self.open("evil", trace)
        page.scroll_into_view(".alloc-view")
        at = page.evaluate("GpuMem.views[0].locateBand(0)")
        page.hover(at["x"], at["y"])
        self.assertIn(EVIL, page.evaluate("document.querySelector('.band-tip').innerText"))
        self.assertEqual(page.evaluate("document.querySelectorAll('main img').length"), 0)
        self.assertIsNone(page.evaluate("window.__pwned === undefined ? null : window.__pwned"))
        self.assertEqual(page.errors, [])
