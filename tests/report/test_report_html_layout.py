# tests/report/test_report_html_layout.py — the HTML report of the real traces, laid out as a person
# sees it: headless Chromium at 1024, 1280 and 1920 px, screenshots at 1280 and 1920.
"""The HTML pages of the real traces (tests/report/real/) in headless Chromium at the widths people
use (1024, 1280, 1920 px): no word of a table cell breaks across lines or leaves its cell (a cell is
never narrower than its longest word), no table or card is clipped or scrolls sideways, with every
stack closed, with every stack's view open, and with its raw frames open too (whole C++ signatures
wrap anywhere there, but widen nothing); the charts of a device share one x range, put one
moment at one x and follow a zoom together; for a run that hit an OOM, the OOM is what the first
screen shows. Screenshots at 1280 and 1920 px go to the build folder's html-screenshots (look at them). One
browser for every page."""
import os

from browser import PageTests
from reportlib import BUILD, ROOT, SNAPSHOT_CORPUS, ReportTestCase, run_report, snapshot_corpus

REAL = os.path.join(ROOT, "tests", "report", "real")
WIDTHS = (1024, 1280, 1920)
SCREENSHOT_WIDTHS = (1280, 1920)
HEIGHT = 1000

# Every problem of the layout, as text: words broken across lines or wider than their cell, tables
# and cards wider than their box, a page wider than the window. A word is a run of letters, digits
# and underscores: a line may break at spaces, hyphens and brackets, and where the page offers it
# (<wbr> after a path's or a qualified name's separators), never inside a word.
LAYOUT_PROBLEMS = r"""(() => {
  const problems = [];
  const cells = document.querySelectorAll("main td, main th");
  for (const cell of cells) {
    const box = cell.getBoundingClientRect();
    if (!box.width) continue;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.parentElement.checkVisibility()) continue;  // inside a closed <details>
      // A word: a run of letters, digits and underscores (an identifier, a number, a file name's
      // part). Lines may break at spaces, hyphens, brackets and the page's <wbr>, never inside one.
      const text = node.textContent;
      // A text on one line: none of its words is broken; it only has to lie inside its cell.
      const whole = document.createRange();
      whole.selectNodeContents(node);
      const wholeRects = Array.from(whole.getClientRects()).filter((r) => r.width > 0);
      if (wholeRects.length === 1) {
        const r = wholeRects[0];
        if (r.left < box.left - 1 || r.right > box.right + 1) problems.push(`text wider than its cell (${Math.round(box.width)} px): "${text}"`);
        continue;
      }
      const re = /\w+/g;
      let m;
      while ((m = re.exec(text))) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const rects = Array.from(range.getClientRects()).filter((r) => r.width > 0);
        if (!rects.length) continue;
        const lines = new Set(rects.map((r) => Math.round(r.top)));
        if (lines.size > 1) problems.push(`word broken across ${lines.size} lines: "${m[0]}" (in "${cell.closest("section").querySelector("h3").textContent}")`);
        const left = Math.min(...rects.map((r) => r.left)), right = Math.max(...rects.map((r) => r.right));
        if (left < box.left - 1 || right > box.right + 1) problems.push(`word wider than its cell (${Math.round(box.width)} px): "${m[0]}"`);
      }
    }
  }
  for (const el of document.querySelectorAll("main .table-wrap, main section.card, main .incident")) {
    if (el.scrollWidth > el.clientWidth + 1) problems.push(`${el.className} is clipped: ${el.scrollWidth} px in ${el.clientWidth} px (in "${(el.closest("section").querySelector("h3") || {}).textContent}")`);
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1) problems.push(`the page is ${document.documentElement.scrollWidth} px wide in a ${window.innerWidth} px window`);
  return problems.slice(0, 20);
})()"""

# Open: every stack's view (the text report's lines, where no word may break); then also every
# stack's raw frames (whole C++ signatures, which may wrap anywhere but must not widen a table).
OPEN_VIEWS = "document.querySelectorAll('main details:not(.frames)').forEach((d) => { d.open = true; })"
OPEN_FRAMES = "document.querySelectorAll('main details').forEach((d) => { d.open = true; })"


def real_traces():
    return sorted(n for n in os.listdir(REAL) if n.endswith(".jsonl.zst"))


class HtmlLayout(PageTests, ReportTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.shots = os.path.join(BUILD, "html-screenshots")
        os.makedirs(cls.shots, exist_ok=True)

    def page_of(self, name):
        if name not in self.pages:
            out = os.path.join(self.dir, name.split(".")[0] + ".html")
            run_report("--format", "html", "-o", out, os.path.join(REAL, name), check_rc=0)
            self.pages[name] = out
        return self.pages[name]

    def open(self, name, width):
        return self.load(self.page_of(name), width, HEIGHT)

    def test_real_traces_at_1024_1280_and_1920(self):
        # One load per trace and width: the screenshot first (the page as it opens), then the charts,
        # then the layout with the stacks closed, their views open and (at the narrowest) every frame.
        for name in real_traces():
            for width in WIDTHS:
                page = self.open(name, width)
                if width in SCREENSHOT_WIDTHS:
                    with self.subTest(trace=name, width=width, check="screenshot: the OOM first"):
                        self.check_screenshot(page, name, width)
                if width == 1280:
                    with self.subTest(trace=name, check="the charts of a device"):
                        self.check_charts(page)
                with self.subTest(trace=name, width=width, check="layout"):
                    self.assertEqual(page.evaluate(LAYOUT_PROBLEMS), [], "stacks closed")
                    page.evaluate(OPEN_VIEWS)
                    self.assertEqual(page.evaluate(LAYOUT_PROBLEMS), [], "every stack's view open")
                    if width == WIDTHS[0]:
                        page.evaluate(OPEN_FRAMES)
                        self.assertEqual([p for p in page.evaluate(LAYOUT_PROBLEMS) if not p.startswith("word")], [],
                                         "every stack's frames open")
                    self.assertEqual(page.errors, [])

    def test_real_snapshots_lay_out_without_an_error(self):
        # PyTorch snapshots people recorded (Windows paths, CPython's frames, four GPUs, an empty one).
        files = snapshot_corpus()
        if not files:
            self.skipTest(f"no real PyTorch snapshots at {SNAPSHOT_CORPUS}")
        for path in files:
            name = os.path.basename(path)
            with self.subTest(snapshot=name):
                out = os.path.join(self.dir, name + ".html")
                run_report("--format", "html", "-o", out, path, check_rc=0)
                self.pages[name] = out
                page = self.open(name, 1280)
                page.evaluate(OPEN_VIEWS)
                self.assertEqual(page.evaluate(LAYOUT_PROBLEMS), [])
                self.assertEqual(page.errors, [])

    def check_screenshot(self, page, name, width):
        """Saves the first screen; for a run that hit an OOM, that screen shows the OOM's card above any
        chart, its verdict drawn in the verdict's colour."""
        with open(os.path.join(self.shots, f"{name.split('.')[0]}-{width}.png"), "wb") as f:
            f.write(page.screenshot_png(0, 0, width, HEIGHT))
        if not page.evaluate("JSON.parse(document.getElementById('gpumem-data').textContent).ooms.length"):
            return
        box = page.evaluate("(() => { const r = document.querySelector('.incident').getBoundingClientRect(); return [r.top, r.bottom]; })()")
        self.assertLess(box[1], HEIGHT, "the OOM is below the first screen")
        first_chart = page.evaluate("document.querySelector('.uplot, canvas.bands').getBoundingClientRect().top")
        self.assertLess(box[0], first_chart)
        verdict = page.evaluate("(() => { const r = document.querySelector('.incident .verdict').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
        colour = page.evaluate("getComputedStyle(document.querySelector('.incident .verdict')).color")
        rgb = tuple(int(v) for v in colour[colour.index("(") + 1:colour.index(")")].split(",")[:3])
        shot = page.screenshot(*[int(v) for v in verdict])
        inked = sum(n for c, n in shot.colours().items() if all(abs(a - b) <= 40 for a, b in zip(c, rgb)))
        self.assertGreater(inked, 20, "the verdict is not drawn in its colour")

    def check_charts(self, page):
        """The charts of each device share one x range, put one moment at one x, and follow a zoom
        and a change of axis together."""
        devices = page.evaluate("[...new Set(GpuMem.charts.map((c) => c.device))]")
        self.assertTrue(devices)
        for device in devices:
            self.check_device_charts(page, device)
            # Zoom the allocation view by dragging across its middle fifth: every chart follows.
            canvas = page.evaluate(f"(() => {{ const c = GpuMem.charts.find((c) => c.device === {device} && c.kind === 'allocations'); "
                                   "if (!c) return null; c.element.scrollIntoView({block: 'center'}); const r = c.element.getBoundingClientRect(); "
                                   "return [r.x, r.y, r.width, r.height]; })()")
            if not canvas:
                continue
            before = page.evaluate(f"GpuMem.charts.find((c) => c.device === {device}).axis.range")
            x, y, w, hgt = canvas
            page.mouse("mousePressed", x + 0.4 * w, y + hgt / 2, "left", 1)
            page.mouse("mouseMoved", x + 0.6 * w, y + hgt / 2, "left")
            page.mouse("mouseReleased", x + 0.6 * w, y + hgt / 2, "left", 1)
            after = page.evaluate(f"GpuMem.charts.find((c) => c.device === {device}).axis.range")
            self.assertLess(after[1] - after[0], 0.5 * (before[1] - before[0]), "the drag did not zoom")
            self.check_device_charts(page, device)
            # Switching the axis keeps them together too.
            page.evaluate(f"GpuMem.charts.find((c) => c.device === {device}).axis.setMode('time')")
            self.check_device_charts(page, device)
            page.evaluate("window.scrollTo(0, 0)")

    def check_device_charts(self, page, device):
        """Every chart of the device shows the axis's range, and one moment lies at one x on all."""
        charts = f"GpuMem.charts.filter((c) => c.device === {device})"
        ranges = page.evaluate(f"{charts}.map((c) => c.plot ? [c.plot.scales.x.min, c.plot.scales.x.max] : c.axis.range)")
        axis = page.evaluate(f"{charts}[0].axis.range")
        for r in ranges:
            self.assertAlmostEqual(r[0], axis[0], delta=1e-6 * max(1, abs(axis[1])))
            self.assertAlmostEqual(r[1], axis[1], delta=1e-6 * max(1, abs(axis[1])))
        xs = page.evaluate(f"""(() => {{
          const charts = {charts}, a = charts[0].axis, [x0, x1] = a.range;
          return [0.1, 0.5, 0.9].map((f) => charts.map((c) => c.pageX(a.toT(x0 + f * (x1 - x0)))));
        }})()""")
        for at in xs:
            self.assertLess(max(at) - min(at), 1.5, f"one moment at different x on the charts of GPU {device}: {at}")
