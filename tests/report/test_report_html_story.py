# tests/report/test_report_html_story.py — the HTML page read as a person reads it: the crash first,
# rows told apart, flame graphs without the interpreter's noise, the event-index axis, one cursor,
# the segment map's legend and words, a view for every key, the allocator state history.
"""The HTML report as a person reads it (docs/report.md, "HTML report"), in headless Chromium: a run
that died of an OOM shows the OOM first and calls what was live then "live when it crashed"; rows
of a table are named by the first frame that tells them apart; flame graphs leave out the
interpreter's, pytest's and the profiler's own frames (a toggle shows them) and do not split one
path into `_start` and `_main` trees; tensor timelines count events, not seconds, so a run's idle
start-up takes no room; hovering one chart of a device shows the moment on all of them; the segment
map has a legend and names an allocator cap; every key of the JSON report has a view of its own;
the allocator state history steps through the events. Real traces (tests/report/real/) and small
planted ones; one browser for every page."""
import json
import os

from browser import PageTests
from reportlib import ROOT, ReportTestCase, run_report
from tracegen import MiB, Trace

REAL = os.path.join(ROOT, "tests", "report", "real")


class HtmlStory(PageTests, ReportTestCase):
    def open(self, name, trace=None):
        if name not in self.pages:
            out = os.path.join(self.dir, name + ".html")
            run_report("--format", "html", "-o", out, trace or os.path.join(REAL, name + ".jsonl.zst"))
            self.pages[name] = out
        return self.load(self.pages[name])

    # --- the story of a crashed run ----------------------------------------------------------------

    def crashed_trace(self):
        """A step loop on a 256 MiB device whose helper keeps 2 MiB per step, until a step's 64 MiB
        workspace no longer fits; the program exits 1."""
        path = os.path.join(self.dir, "crashed.jsonl")
        t = Trace(path, devices=((0, "Simulated GPU", 256 * MiB),))
        keep = t.stack("normalize", line=61)
        work = t.stack("step", line=67)
        for i in range(100):
            t.alloc(0x10000000 + i * 2 * MiB, 2 * MiB, keep)
            t.alloc(0x70000000, 16 * MiB, work)
            t.free(0x70000000)
        t.failed_alloc(64 * MiB, work)
        t.meminfo(56 * MiB, 256 * MiB)
        t.close(end="exit", exit_status=1)
        return path

    def test_a_crashed_run_reads_oom_first_and_live_memory_is_not_a_leak(self):
        page = self.open("crashed", self.crashed_trace())
        cards = self.texts(page, "header + .stats .stat .label")
        self.assertEqual(cards[0].lower(), "ran out of memory")
        self.assertNotIn("leaked at exit", [c.lower() for c in cards])
        self.assertIn("live when it crashed", [c.lower() for c in cards])
        # The first section of the process: the OOM, its verdict and why, before any chart.
        first = page.evaluate("document.querySelector('section.process > section.card')")
        titles = self.texts(page, "section.process > section.card > h3")
        self.assertEqual(titles[0], "It ran out of memory")
        self.assertIsNotNone(first)
        self.assertIn("capacity", self.texts(page, ".incident .verdict")[0])
        self.assertTrue(self.texts(page, ".incident .why")[0])
        # Then what filled the device, and one advice.
        cause = self.texts(page, ".incident .cause")[0]
        self.assertIn("normalize (app.cu:61)", cause)
        self.assertRegex(cause, r"this site grew by 198 MiB over \d+ steps and held 200 MiB \(78% of the device\) at the crash")
        self.assertEqual(len(self.texts(page, ".incident .advice")), 1)
        self.assertIn("the run ended here", self.texts(page, ".incident h4")[0])
        self.assertLess(titles.index("It ran out of memory"), titles.index("Memory over time"))
        # What was live at the crash is listed as such, after the charts.
        live = [t for t in titles if t.startswith("Live when it crashed")]
        self.assertEqual(len(live), 1, titles)
        self.assertFalse([t for t in titles if t.startswith("Leaks")], titles)
        self.assertEqual(page.errors, [])

    # --- rows told apart ------------------------------------------------------------------------------

    def test_rows_are_named_by_the_first_frame_that_tells_them_apart(self):
        page = self.open("roles")
        # The peak's table: nine of its ten rows start at transformer_step.py:12.
        names = page.evaluate("Array.from(document.querySelector('h4 + .table-wrap').querySelectorAll('tbody details.stack > summary')).map((s) => s.textContent)")
        self.assertEqual(len(names), 10)
        self.assertGreaterEqual(sum(1 for n in names if n.startswith("<module> (transformer_step.py:12)")), 8)
        self.assertEqual(len(set(names)), len(names), names)
        self.assertIn("<module> (transformer_step.py:12) · dropout (functional.py:1443)", names)
        # So are the top call sites.
        sites = page.evaluate("Array.from(document.querySelector('.sites-view tbody').querySelectorAll('details.stack > summary')).map((s) => s.textContent)")
        self.assertEqual(len(set(sites)), len(sites), sites)
        self.assertEqual(page.errors, [])

    # --- flame graphs --------------------------------------------------------------------------------

    def flame_names(self, page):
        return page.evaluate("""(() => {
          const names = [], walk = (n, depth) => { names.push([depth, n.name]); (n.children || []).forEach((c) => walk(c, depth + 1)); };
          walk(d3.select('.flame svg g').datum().data, 0);
          return names; })()""")

    def show_flame(self, page, title, every=False):
        page.evaluate(f"(() => {{ const box = document.querySelector('input.every-frame'); box.checked = {json.dumps(every)}; "
                      f"Array.from(document.querySelectorAll('section.card .tabs button')).find((b) => b.textContent === {json.dumps(title)}).click(); }})()")

    def test_flame_graphs_fold_the_interpreter_pytest_and_the_profiler(self):
        noise = ("_start", "__libc_start_main", "Py_BytesMain", "Py_RunMain", "PyEval_EvalCode", "_PyEval_EvalFrameDefault",
                 "ffi_call", "scope_begin", "install.<locals>.backward", "_PyObject_MakeTpCall")
        page = self.open("roles")
        self.show_flame(page, "Allocated at peak")
        names = [n for _, n in self.flame_names(page)]
        self.assertFalse([n for n in names if n in noise], "interpreter or profiler frames in the flame graph")
        roots = {n for d, n in self.flame_names(page) if d == 1}
        self.assertEqual(roots, {"<module>"}, "one tree per script line, no _start tree beside it")
        # The toggle shows every recorded frame.
        self.show_flame(page, "Allocated at peak", every=True)
        names = [n for _, n in self.flame_names(page)]
        for frame in ("_start", "scope_begin", "install.<locals>.backward", "ffi_call"):
            self.assertIn(frame, names)
        # pytest: the tests' stacks, whole or cut at the recorder's depth limit inside pytest's
        # frames, are one tree under the test functions, with no pluggy in it.
        page = self.open("pytest")
        self.show_flame(page, "Bytes allocated")
        tree = self.flame_names(page)
        roots = {n for d, n in tree if d == 1}
        self.assertFalse(roots & {"_start", "_main", "_run_code", "__call__", "_multicall"}, roots)
        self.assertIn("test_keeps_tensor", {n for _, n in tree})
        self.assertFalse([n for _, n in tree if n in ("_multicall", "_hookexec", "pytest_pyfunc_call")])
        self.assertEqual(page.errors, [])

    # --- the x axis ----------------------------------------------------------------------------------

    def test_tensor_timelines_count_events_and_wall_clock_is_beside_them(self):
        page = self.open("roles")
        axis = "GpuMem.charts[0].axis"
        self.assertEqual(page.evaluate(f"{axis}.mode"), "events")
        # A few tensors, 5 s of imports, then 0.3 s of work: the median tensor comes near the end of
        # the wall clock, but halfway along the events.
        median = page.evaluate("(() => { const D = GpuMem.views[0].decoded.blocks; return D.start[D.n >> 1]; })()")
        share = f"(() => {{ const a = {axis}, [x0, x1] = a.range; return (a.toX({median}) - x0) / (x1 - x0); }})()"
        self.assertTrue(0.25 < page.evaluate(share) < 0.75, page.evaluate(share))
        self.assertEqual(page.evaluate(f"{axis}.format(1234)"), "#1,234")  # the ticks count events
        page.evaluate("document.querySelector('.axis-toggle button[data-axis=time]').click()")
        self.assertEqual(page.evaluate(f"{axis}.mode"), "time")
        self.assertGreater(page.evaluate(share), 0.9)
        page.evaluate("document.querySelector('.axis-toggle button[data-axis=events]').click()")
        self.assertTrue(0.25 < page.evaluate(share) < 0.75)
        # A trace without tensor blocks keeps the wall clock.
        page = self.open("jax")
        self.assertEqual(page.evaluate(f"{axis}.mode"), "time")
        self.assertEqual(page.errors, [])

    def test_one_cursor_for_every_chart_of_a_device(self):
        page = self.open("roles")
        page.scroll_into_view("canvas.bands")
        box = page.evaluate("(() => { const r = document.querySelector('canvas.bands').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
        x = box[0] + 0.6 * box[2]
        page.hover(x, box[1] + box[3] / 2)
        # Each uPlot chart of the device draws its cursor at the same page x.
        cursors = page.evaluate("GpuMem.charts.filter((c) => c.plot).map((c) => c.plot.over.getBoundingClientRect().left + c.plot.cursor.left)")
        self.assertGreaterEqual(len(cursors), 2)
        for at in cursors:
            self.assertAlmostEqual(at, x, delta=1.5)
        # And hovering a uPlot chart moves the allocation view's cursor line.
        over = page.evaluate("(() => { const o = GpuMem.charts.find((c) => c.plot).plot.over; o.scrollIntoView({block: 'center'}); const r = o.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
        x = over[0] + 0.3 * over[2]
        page.hover(x, over[1] + over[3] / 2)
        line = page.evaluate("(() => { const l = document.querySelector('.alloc-view .cursor-line'); return l.hidden ? null : l.getBoundingClientRect().left; })()")
        self.assertIsNotNone(line)
        self.assertAlmostEqual(line, x, delta=1.5)
        self.assertEqual(page.errors, [])

    # --- the segment map -----------------------------------------------------------------------------

    def test_segment_map_has_a_legend_and_names_a_cap(self):
        page = self.open("capped")
        summary = self.texts(page, ".segment-summary")[0]
        self.assertIn("The allocator's own cap refused the request of 2.00 GiB with 256 MiB reserved", summary)
        self.assertIn("78.4 GiB free", summary)
        self.assertNotIn("larger than the largest free block", summary)
        legend = self.texts(page, ".segment-view .legend li")
        self.assertIn("block: other", legend)
        self.assertIn("free in a segment", legend)
        self.assertIn("the largest free block", legend)
        page = self.open("roles")
        legend = self.texts(page, ".segment-view .legend li")
        for role in ("parameters", "gradients", "optimizer state", "activations"):
            self.assertIn(f"block: {role}", legend)
        self.assertEqual(page.errors, [])

    def test_the_allocator_state_history_steps_through_the_events(self):
        # One 1 GiB segment, then 16 blocks of 32 MiB carved from it, then every other one freed.
        path = os.path.join(self.dir, "history.jsonl")
        t = Trace(path)
        seg = t.stack("c10::cuda::CUDACachingAllocator::malloc", line=940, python="train")
        block = t.stack("make_tensor", line=5, python="forward")
        t.alloc(0x7f0000000000, 1024 * MiB, seg)
        for i in range(16):
            t.block_alloc(0x7f0000000000 + i * 64 * MiB, 32 * MiB, block, segment=0x7f0000000000)
        for i in range(0, 16, 2):
            t.block_free(0x7f0000000000 + i * 64 * MiB)
        t.close()
        page = self.open("history", path)
        self.assertEqual(page.evaluate("GpuMem.views[0].history.events.length"), 1 + 16 + 8)
        page.scroll_into_view(".history-view")
        summary = lambda: self.texts(page, ".segment-summary")[0]
        page.evaluate("GpuMem.views[0].history.select(0)")
        self.assertTrue(summary().startswith("1 segment, 1.00 GiB reserved; 0 B in 0 blocks"), summary())
        page.evaluate("document.querySelector('.history-controls button[aria-label=\"next event\"]').click()")
        self.assertTrue(summary().startswith("1 segment, 1.00 GiB reserved; 32.0 MiB in 1 block;"), summary())
        page.evaluate("GpuMem.views[0].history.select(16)")
        self.assertTrue(summary().startswith("1 segment, 1.00 GiB reserved; 512 MiB in 16 blocks"), summary())
        # Keyboard: the list steps on, to the first free.
        page.evaluate("document.querySelector('.history-list').dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowDown'}))")
        self.assertTrue(summary().startswith("1 segment, 1.00 GiB reserved; 480 MiB in 15 blocks"), summary())
        self.assertIn("−32.0 MiB block", self.texts(page, ".history-list li.current")[0])
        self.assertIn("after event #17", self.texts(page, ".segment-view h4")[0])
        self.assertEqual(page.errors, [])

    # --- every key ----------------------------------------------------------------------------------

    def test_every_key_of_the_report_has_a_view(self):
        path = os.path.join(self.dir, "keys.jsonl")
        t = Trace(path, rank=1, world_size=4, local_rank=1)
        s = t.stack("load_batch", line=7)
        t.alloc(0x10000000, 64 * MiB, s)
        t.alloc(0x7f0000000000, 512 * MiB, t.stack("pin_staging", line=9), kind="host", api="cudaHostAlloc")
        t.event("alloc", "physical", 0, 20 * MiB, s, api="cuMemCreate", result=800)
        t.close(end="exit", exit_status=0)
        for name, trace in [("keys", path)] + [(n.split(".")[0], None) for n in sorted(os.listdir(REAL)) if n.endswith(".jsonl.zst")]:
            with self.subTest(trace=name):
                page = self.open(name, trace)
                generic = self.texts(page, "section.generic > h3")
                self.assertEqual(generic, [], "keys shown raw, without a view of their own")
                # No section is titled by a bare key of the report (as the generic view titles them).
                keys = page.evaluate("(() => { const d = JSON.parse(document.getElementById('gpumem-data').textContent); "
                                     "return Object.keys(d).concat(...d.processes.map((p) => Object.keys(p))); })()")
                titles = set(self.texts(page, "section.card > h3"))
                self.assertFalse({k.replace("_", " ") for k in keys} & titles, "a key titles its raw dump")
                self.assertFalse([c for c in self.texts(page, "main code") if c.startswith("{")], "an object dumped as JSON")
        page = self.open("keys", path)
        text = page.evaluate("document.querySelector('main').innerText")
        self.assertIn("rank 1 of 4 (local rank 1)", text)
        self.assertIn("Pinned host memory", self.texts(page, "section.card > h3"))
        self.assertIn("Failed calls, not out of memory (1)", self.texts(page, "section.card > h3"))
        self.assertIn("CUDA_ERROR_NOT_PERMITTED (800)", text)
        page = self.open("clean")
        held = [t for t in self.texts(page, "section.card > h3") if t.startswith("Held at exit")]
        self.assertEqual(len(held), 1)
        self.assertIn("held by cuBLAS", page.evaluate("document.querySelector('main').innerText"))
