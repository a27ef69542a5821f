# tests/report/test_report_batch.py — the batch what-if: the peak at another batch size, and the largest batch that fits.
"""gpumem-report --at-batch / --max-batch / --batch-of (docs/what-if.md, "Another batch size").

tests/python/progs/batch_prog.py runs on the stand-in torch over the simulated runtime (a 1 GiB device),
under the recorder, at several batch sizes: requests that scale with the batch, weights and a workspace
that do not, and a temporary whose freed segment cannot hold the next activation (fragmentation). The
stand-in's allocator is not PyTorch's, so every comparison is with the allocator model's replay of a run
recorded at that size (the run given alone at its own batch), as the issue asks:

- the prediction for a size made from two other runs equals that size's own run (reserved and
  allocated peaks, fragmentation, out of memory or not, and where);
- the largest batch that fits is exact: the runs recorded at it and at one more fit and do not;
- sizes that are not a straight line in the batch (scores of batch * batch elements): the report says
  so and gives the reserved peak as a range that holds the run recorded at that size;
- leave one out, the one-run estimate from the roles, the batch read from a mark, the file name or
  --batch-of, matching by stack across runs whose traces number their stacks differently, the margin,
  the rows in the HTML what-if table, and the usage errors.
"""
import json
import os
import re
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import python_testlib  # noqa: E402
from browser import Page, chromium  # noqa: E402
from recorder_testlib import LIB, run_traced, trace_files  # noqa: E402
from reportlib import REPORT, report_json, run_report  # noqa: E402
from tracegen import MiB, Trace  # noqa: E402

PROG = os.path.join(python_testlib.PROGS, "batch_prog.py")
FAKE_TORCH = os.path.join(python_testlib.ROOT, "tests", "python", "fake_torch")
TOOLS = os.path.join(python_testlib.ROOT, "tools", "python")
REAL = os.path.join(HERE, "real")
GiB = 1 << 30


def device_row(doc, batch, settings=""):
    """The batch section's row for `batch` on device 0."""
    rows = doc["batch"]["devices"][0]["rows"]
    return next(r for r in rows if r["batch"] == batch and r["settings"] == settings and not r["recorded_sizes"])


def own_row(doc):
    """A run given alone, at its own batch: the model's replay of its recorded requests."""
    return next(r for r in doc["batch"]["devices"][0]["rows"] if r["recorded_sizes"])


def outcome(row):
    """What a prediction must equal: peaks, fragmentation at the peak, and where it runs out."""
    refused = row["refused"]
    return (row["reserved_peak"], row["allocated_peak"], row["at_peak"], row["capacity"],
            None if refused is None else (refused["request"], refused["requested"], refused["reserved"]))


class BatchRuns(unittest.TestCase):
    """The program recorded once per batch size; the tests share the traces."""

    @classmethod
    def setUpClass(cls):
        missing = [p for p in (REPORT, LIB, python_testlib.SIM) if not os.path.exists(p)]
        if missing:
            raise unittest.SkipTest(f"not built: {', '.join(missing)}")
        cls.root = tempfile.mkdtemp(prefix="gpumemtrace-batch-")
        cls.runs = {}
        for batch in (8, 16, 24, 32, 200):
            cls.record(batch)
        for batch in (8, 16, 32, 48, 64):
            cls.record(batch, "curved")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    @classmethod
    def record(cls, batch, mode="linear"):
        """The program at `batch`, as <root>/<mode>_b<batch>.jsonl.zst (its batch in its name)."""
        key = (mode, batch)
        if key in cls.runs:
            return cls.runs[key]
        out = os.path.join(cls.root, f"{mode}-{batch}")
        os.makedirs(out)
        env = {"FAKE_TORCH_CUDART": python_testlib.SIM, "FAKE_TORCH_LIMIT": str(GiB), "FAKE_TORCH_RETRY": "1",
               "GPUMEMTRACE_SIM_CAPACITY": "1G", "PYTHONPATH": os.pathsep.join([TOOLS, FAKE_TORCH]),
               "GPUMEMTRACE_QUIET": "1"}
        proc = run_traced([sys.executable, PROG, str(batch), mode], out, env=env)
        files = trace_files(out)
        # A batch too large for the device ends in the stand-in's out-of-memory error (exit 1).
        if proc.returncode not in (0, 1) or len(files) != 1:
            raise AssertionError(f"batch {batch}: exit {proc.returncode}, traces {files}\n{proc.stdout}{proc.stderr}")
        path = os.path.join(cls.root, f"{mode}_b{batch}.jsonl.zst")
        os.rename(files[0], path)
        cls.runs[key] = path
        return path

    def run_of(self, batch, mode="linear"):
        return self.record(batch, mode)

    def alone(self, batch, mode="linear"):
        """The model's replay of the run recorded at `batch`."""
        return own_row(report_json("--at-batch", str(batch), self.run_of(batch, mode)))

    # --- the prediction equals the run at that size -------------------------------------------------

    def test_prediction_from_two_runs_equals_the_run_at_that_size(self):
        doc = report_json("--at-batch", "24", "--at-batch", "32", self.run_of(8), self.run_of(16))
        self.assertEqual(doc["batch"]["template"], self.run_of(16))
        self.assertEqual([r["batch_from"] for r in doc["batch"]["runs"]], ["the file name"] * 2)
        for batch in (24, 32):
            predicted = device_row(doc, batch)
            self.assertIsNone(predicted["refused"])
            self.assertEqual(outcome(predicted), outcome(self.alone(batch)), batch)
        # Scaling, fixed and fragmenting: the fixed weights are a site that does not grow, the peak has
        # free bytes inside its segments (the temporary's).
        sites = doc["batch"]["sites"]
        self.assertTrue(any(s["kind"] == "scales" for s in sites))
        self.assertTrue(any(s["kind"] == "constant" and s["a"] == 48 * MiB for s in sites))
        self.assertGreater(device_row(doc, 24)["at_peak"]["free_in_reserved"], 0)

    def test_a_size_that_does_not_fit_runs_out_where_its_own_run_does(self):
        doc = report_json("--at-batch", "200", self.run_of(8), self.run_of(16))
        predicted, recorded = device_row(doc, 200), self.alone(200)
        self.assertIsNotNone(predicted["refused"])
        self.assertEqual(outcome(predicted), outcome(recorded))
        # The run at 200 was refused there too: its trace ends in the stand-in's OOM.
        self.assertTrue(recorded["refused"]["recorded"])
        text = run_report("--at-batch", "200", self.run_of(8), self.run_of(16), check_rc=0).stdout
        self.assertRegex(text, r"\n    200 +[0-9.]+ MiB .* yes: [0-9.]+ MiB requested with [0-9.]+ MiB of 1\.0 GiB reserved")

    def test_the_largest_batch_that_fits_is_exact(self):
        found = report_json("--max-batch", self.run_of(8), self.run_of(16))["batch"]["max_batch"]
        self.assertEqual(len(found), 1)
        largest = found[0]["largest"]
        self.assertEqual(found[0]["failing"], largest + 1)
        self.assertGreater(largest, 32)
        # The program recorded at that size and at one more, each replayed alone: one fits, one does not.
        self.assertIsNone(self.alone(largest)["refused"])
        self.assertIsNotNone(self.alone(largest + 1)["refused"])
        self.assertEqual(found[0]["refused"]["request"], self.alone(largest + 1)["refused"]["request"])
        # Any two runs give the same answer when the sizes are straight lines.
        self.assertEqual(report_json("--max-batch", self.run_of(8), self.run_of(32))["batch"]["max_batch"][0]["largest"],
                         largest)

    def test_a_margin_lowers_the_largest_batch(self):
        plain = report_json("--max-batch", self.run_of(8), self.run_of(16))["batch"]["max_batch"][0]
        kept = report_json("--max-batch=100MiB", self.run_of(8), self.run_of(16))["batch"]["max_batch"][0]
        share = report_json("--max-batch=10%", self.run_of(8), self.run_of(16))["batch"]["max_batch"][0]
        self.assertEqual(kept["margin"], 100 * MiB)
        self.assertEqual(share["margin"], GiB // 10)
        self.assertLess(kept["largest"], plain["largest"])
        self.assertLess(share["largest"], kept["largest"])  # 102.4 MiB kept free
        self.assertLessEqual(kept["refused"]["capacity"], plain["refused"]["capacity"] - 100 * MiB)

    def test_a_memory_fraction_caps_what_could_be_reserved(self):
        # set_per_process_memory_fraction(0.5) on the 1 GiB device, recorded by the hook: what PyTorch
        # could reserve is the cap, not the device's free bytes, in the device's line, each row's spare
        # bytes and the search; a margin comes off the cap.
        cap = GiB // 2
        runs = (self.run_of(8, "capped"), self.run_of(16, "capped"))
        full = report_json("--at-batch", "24", "--max-batch", *runs)
        self.assertEqual(full["batch"]["devices"][0]["capacity"], cap)
        self.assertEqual(device_row(full, 24)["capacity"], cap)
        found = full["batch"]["max_batch"][0]
        self.assertEqual(found["refused"]["capacity"], cap)
        self.assertLessEqual(found["refused"]["reserved"], cap)
        uncapped = report_json("--max-batch", self.run_of(8), self.run_of(16))["batch"]["max_batch"][0]
        self.assertLess(found["largest"], uncapped["largest"])
        # The program at the largest batch and one more, under the cap: one fits, one does not.
        self.assertIsNone(self.alone(found["largest"], "capped")["refused"])
        self.assertIsNotNone(self.alone(found["failing"], "capped")["refused"])
        kept = report_json("--max-batch=100MiB", *runs)["batch"]["max_batch"][0]
        self.assertEqual(kept["refused"]["capacity"], cap - 100 * MiB)
        self.assertLess(kept["largest"], found["largest"])
        # A share is of the cap, not of the device: 20% of 512 MiB, not of 1 GiB (which would leave
        # 307 MiB).
        share = report_json("--max-batch=20%", *runs)["batch"]["max_batch"][0]
        self.assertEqual(share["margin"], int(0.2 * cap))
        self.assertEqual(share["refused"]["capacity"], cap - int(0.2 * cap))
        text = run_report("--at-batch", "24", *runs, check_rc=0).stdout
        self.assertIn("PyTorch could reserve 512.0 MiB", text)
        spare = re.search(r"\n    24 +([0-9.]+) MiB .* no: ([0-9.]+) MiB to spare\n", text)
        self.assertAlmostEqual(float(spare.group(1)) + float(spare.group(2)), 512.0, delta=0.1)

    # --- how far to trust it -------------------------------------------------------------------------

    def test_sizes_that_are_not_linear_are_said_and_widen_the_range(self):
        runs = [self.run_of(b, "curved") for b in (8, 16, 32)]
        doc = report_json("--at-batch", "48", "--at-batch", "64", *runs)
        fit = doc["batch"]["fit"]
        self.assertTrue(fit["linearity_checked"])
        self.assertGreater(fit["not_linear"], 0)
        self.assertGreater(fit["max_residual"], 0)
        for batch in (48, 64):
            low, high = device_row(doc, batch)["reserved_range"]
            actual = self.alone(batch, "curved")["reserved_peak"]
            self.assertLess(low, high)
            self.assertTrue(low <= actual <= high, (batch, low, actual, high))
        text = run_report("--at-batch", "48", *runs, check_rc=0).stdout
        self.assertIn("sizes: NOT LINEAR in the batch", text)
        self.assertRegex(text, r"\n    48 +[0-9.]+ MiB \([0-9.]+ MiB to [0-9.]+ MiB\)")
        # The largest batch is a range too.
        found = report_json("--max-batch", *runs)["batch"]["max_batch"][0]
        low, high = found["range"]
        self.assertTrue(low <= found["largest"] <= high and low < high, found)
        # Straight lines through three sizes: checked, no range.
        doc = report_json("--at-batch", "48", self.run_of(8), self.run_of(16), self.run_of(32))
        self.assertEqual((doc["batch"]["fit"]["linearity_checked"], doc["batch"]["fit"]["not_linear"]), (True, 0))
        self.assertIsNone(device_row(doc, 48)["reserved_range"])
        # Two sizes cannot tell: the report says so.
        text = run_report("--at-batch", "48", self.run_of(8), self.run_of(16), check_rc=0).stdout
        self.assertIn("whether they are linear is not checked", text)

    def test_leave_one_out(self):
        linear = report_json("--at-batch", "48", self.run_of(8), self.run_of(16), self.run_of(32))["batch"]
        checks = linear["leave_one_out"]
        self.assertEqual(sorted(c["batch"] for c in checks), [8, 16, 32])
        for c in checks:
            self.assertEqual(c["predicted"], c["replayed"], c)
            self.assertNotEqual(c["template"], c["file"])
        curved = report_json("--at-batch", "48", *[self.run_of(b, "curved") for b in (8, 16, 32)])["batch"]
        self.assertTrue(any(c["predicted"] != c["replayed"] for c in curved["leave_one_out"]))
        # Two runs: nothing to leave out.
        self.assertEqual(report_json("--at-batch", "48", self.run_of(8), self.run_of(16))["batch"]["leave_one_out"], [])

    def test_one_run_is_an_estimate_from_the_roles(self):
        doc = report_json("--at-batch", "16", "--at-batch", "32", "--max-batch", self.run_of(16))
        b = doc["batch"]
        self.assertTrue(b["estimate"])
        # At its own batch, the model's replay of the run itself; elsewhere, only what the roles scale.
        self.assertEqual(outcome(own_row(doc)), outcome(device_row(doc, 16)))
        self.assertTrue(all(s["kind"] in ("scales", "constant") for s in b["sites"]))
        self.assertEqual({s["role"] for s in b["sites"] if s["kind"] == "scales"} - {"activations", "backward temporaries"},
                         set())
        text = run_report("--at-batch", "32", self.run_of(16), check_rc=0).stdout
        self.assertTrue(text.startswith("batch what-if (an estimate): from one run"), text[:300])

    def test_the_text_answers_first(self):
        text = run_report("--at-batch", "24", "--max-batch", self.run_of(8), self.run_of(16), check_rc=0).stdout
        lines = text.splitlines()
        self.assertTrue(lines[0].startswith("batch what-if: from 2 runs (batch 8: "), lines[0])
        self.assertIn("the model's replay of", lines[3])  # the stand-in's allocator is not PyTorch's: said
        self.assertRegex(text, r"\n    24 +[0-9.]+ MiB +[0-9.]+ MiB +0\.\d\d +no: [0-9.]+ MiB to spare\n")
        self.assertRegex(text, r"\n  largest batch that fits: \d+, with 0 B kept free; at \d+ device 0 runs out of memory: ")
        # Then each run's own report.
        self.assertLess(text.index("largest batch that fits"), text.index("\n== "))

    def test_with_what_if_settings_each_setting_has_its_rows(self):
        doc = report_json("--at-batch", "24", "--max-batch", "--what-if", "expandable_segments:True",
                          self.run_of(8), self.run_of(16))
        self.assertEqual([m["settings"] for m in doc["batch"]["max_batch"]], ["", "expandable_segments:True"])
        expandable = device_row(doc, 24, "expandable_segments:True")
        self.assertNotEqual(expandable["reserved_peak"], device_row(doc, 24)["reserved_peak"])


class BatchTraces(unittest.TestCase):
    """Generated traces (tracegen.py) of PyTorch requests: marks, stacks numbered differently in each run,
    more iterations in one run, and what the command line refuses."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(REPORT):
            raise unittest.SkipTest("gpumem-report not built")
        cls.dir = tempfile.mkdtemp(prefix="gpumemtrace-batch-gen-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def write(self, name, batch, steps=2, mark=True, extra_first=False):
        """Weights of 40 MiB, then per step an activation of 2 MiB * batch and one of 12 MiB + 1 MiB * batch,
        freed at the step's end. `extra_first`: one more stack defined first, so that the ids differ."""
        path = os.path.join(self.dir, name)
        t = Trace(path, devices=((0, "Simulated GPU", 4 << 30),))
        if extra_first:
            t.stack("unused", line=99)
        weights, act, other = t.stack("init_weights", 10), t.stack("forward", 20), t.stack("attention", 30)
        if mark:
            t.mark(f"batch={batch}")
        seg, addr = 0x7F0000000000, 0
        t.event("alloc", "device", seg, 40 * MiB, 0, api="torch.segment_alloc")
        t.event("block_alloc", "block", seg, 40 * MiB, weights, api="torch.alloc", segment="0x%x" % seg)
        for step in range(steps):
            live = []
            for i, (stack, size) in enumerate(((act, 2 * MiB * batch), (other, 12 * MiB + MiB * batch))):
                base = seg - (step * 2 + i + 1) * 0x10000000
                t.event("alloc", "device", base, size, 0, api="torch.segment_alloc")
                t.event("block_alloc", "block", base, size, stack, api="torch.alloc", segment="0x%x" % base)
                live.append((base, size))
            for base, size in reversed(live):
                t.event("block_free", "block", base, size, 0, api="torch.free_requested", segment="0x%x" % base)
        t.close()
        return path

    def test_batch_from_marks_and_stacks_matched_by_their_frames(self):
        a = self.write("first.jsonl", 8)
        b = self.write("second.jsonl", 16, extra_first=True)
        doc = report_json("--at-batch", "32", a, b)["batch"]
        self.assertEqual([(r["batch"], r["batch_from"]) for r in doc["runs"]], [(8, "a mark"), (16, "a mark")])
        self.assertEqual((doc["requests"]["scale"], doc["requests"]["constant"], doc["requests"]["unmatched"]), (4, 1, 0))
        lines = {s["stack"][1]["function"]: (s["a"], s["b"]) for s in doc["sites"]}
        self.assertEqual(lines["forward"], (0, 2 * MiB))
        self.assertEqual(lines["attention"], (12 * MiB, MiB))

    def test_more_iterations_in_one_run_take_their_stack_line(self):
        a = self.write("short.jsonl", 8, steps=2)
        b = self.write("long.jsonl", 16, steps=3)
        doc = report_json("--at-batch", "32", a, b)["batch"]
        self.assertEqual(doc["template"], b)
        # The third step's two requests have no partner in the shorter run: their stacks' lines.
        self.assertEqual((doc["requests"]["by_site"], doc["requests"]["unmatched"]), (2, 0))

    def test_batch_of_and_the_file_name(self):
        a = self.write("run_bs4.jsonl", 4, mark=False)
        b = self.write("unnamed.jsonl", 12, mark=False)
        doc = report_json("--at-batch", "20", "--batch-of", b + "=12", a, b)["batch"]
        self.assertEqual([(r["batch"], r["batch_from"]) for r in doc["runs"]], [(4, "the file name"), (12, "--batch-of")])
        # --batch-of wins over a mark.
        c = self.write("marked.jsonl", 8)
        doc = report_json("--at-batch", "20", "--batch-of", c + "=6", a, c)["batch"]
        self.assertEqual(doc["runs"][1]["batch"], 6)

    def test_what_the_command_line_refuses(self):
        a = self.write("plain_one.jsonl", 4, mark=False)
        b = self.write("run_b8.jsonl", 8, mark=False)
        c = self.write("other_b8.jsonl", 8, mark=False)
        for args, message in [
            (("--at-batch", "16", a, b), "plain_one.jsonl: its batch size is not known"),
            (("--at-batch", "16", b, c), "are both batch 8"),
            (("--at-batch", "16", "--batch-of", "nowhere.jsonl=4", b), "--batch-of nowhere.jsonl=4: not one of the traces given"),
            (("--at-batch", "0", b), "--at-batch: expected a batch size from 1 to 999999999, got `0`"),
            (("--max-batch", "1GiB", b), "--max-batch takes its size after '=': --max-batch=1GiB"),
            (("--max-batch=120%", b), "--max-batch: expected a margin like 1GiB or 5% (below 100%), got `120%`"),
            (("--batch-of", b + "=4", b), "--batch-of needs --at-batch or --max-batch"),
            (("--at-batch", "16", "--format", "perfetto", b), "--at-batch and --max-batch write text, json or html"),
            (("diff", "--at-batch", "16", b, c), "--at-batch and --max-batch do not apply to diff"),
            (("--at-batch", "16", self.dir), "traces: --at-batch and --max-batch take one trace per run"),
        ]:
            proc = run_report(*args)
            self.assertEqual(proc.returncode, 2, (args, proc.stderr))
            self.assertIn(message, proc.stderr, args)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)

    def test_nothing_that_scales_fits_at_any_batch(self):
        path = os.path.join(self.dir, "fixed_b4.jsonl")
        t = Trace(path, devices=((0, "Simulated GPU", 4 << 30),))
        stack = t.stack("load", 5)
        t.event("alloc", "device", 0x7F0000000000, 20 * MiB, 0, api="torch.segment_alloc")
        t.event("block_alloc", "block", 0x7F0000000000, 8 * MiB, stack, api="torch.alloc", segment="0x7f0000000000")
        t.close()
        found = report_json("--max-batch", path)["batch"]["max_batch"][0]
        self.assertEqual((found["unbounded"], found["largest"]), (True, None))
        self.assertIn("largest batch that fits: any: no request grows with the batch",
                      run_report("--max-batch", path, check_rc=0).stdout)


class BatchOnRealTraces(unittest.TestCase):
    """A PyTorch run on an H100 (tests/report/real/roles.jsonl.zst, a transformer step) given alone: the
    model reproduces it, so the predicted rows join its what-if table, in the JSON and on the page."""

    TRACE = os.path.join(REAL, "roles.jsonl.zst")

    def test_rows_join_the_what_if_table_of_the_page(self):
        doc = report_json("--at-batch", "16", "--batch-of", self.TRACE + "=8", self.TRACE)
        self.assertTrue(doc["batch"]["devices"][0]["replay"]["faithful"])
        # At its own batch, the recorded reserved peak exactly.
        self.assertEqual(own_row(doc)["reserved_peak"], doc["batch"]["devices"][0]["recorded_reserved_peak"])
        self.assertEqual(doc["what_if"], [])  # nothing asked for a what-if table: the JSON has the batch key
        out_dir = tempfile.mkdtemp(prefix="gpumemtrace-batch-html-")
        self.addCleanup(shutil.rmtree, out_dir, True)
        page = os.path.join(out_dir, "batch.html")
        run_report("--format", "html", "-o", page, "--at-batch", "16", "--batch-of", self.TRACE + "=8", self.TRACE,
                   check_rc=0)
        with open(page, encoding="utf-8") as f:
            data = json.loads(re.search(r'id="gpumem-data">(.*?)</script>', f.read(), re.S).group(1))
        rows = data["what_if"][0]["rows"]
        self.assertEqual([(r["recorded"], r["batch"]) for r in rows], [(True, None), (False, 16)])
        self.assertEqual(rows[1]["reserved_peak"], device_row(doc, 16)["reserved_peak"])
        self.assertTrue(rows[1]["estimate"])
        # With a --what-if setting, the page's table has that setting's row once (the what-if replay's,
        # not again as "batch 8", the run's own batch), and the batch row under it.
        run_report("--format", "html", "-o", page, "--what-if", "expandable_segments:True", "--at-batch", "16",
                   "--batch-of", self.TRACE + "=8", self.TRACE, check_rc=0)
        with open(page, encoding="utf-8") as f:
            data = json.loads(re.search(r'id="gpumem-data">(.*?)</script>', f.read(), re.S).group(1))
        names = [(r["settings"], r["batch"]) for r in data["what_if"][0]["rows"] if not r["recorded"]]
        self.assertEqual(len(names), len(set(names)), names)
        self.assertIn(("expandable_segments:True", None), names)
        self.assertNotIn(("expandable_segments:True", 8), names)
        self.assertIn(("expandable_segments:True", 16), names)
        text = run_report("--at-batch", "16", "--batch-of", self.TRACE + "=8", self.TRACE, check_rc=0).stdout
        self.assertTrue(text.startswith("batch what-if (an estimate)"))
        self.assertIn("the model reproduces", text.splitlines()[2])

    def test_the_page_shows_the_rows(self):
        if not chromium():
            self.skipTest("chromium is not installed (make deps installs it)")
        out_dir = tempfile.mkdtemp(prefix="gpumemtrace-batch-html-")
        self.addCleanup(shutil.rmtree, out_dir, True)
        page_path = os.path.join(out_dir, "batch.html")
        run_report("--format", "html", "-o", page_path, "--at-batch", "16", "--at-batch", "24",
                   "--batch-of", self.TRACE + "=8", self.TRACE, check_rc=0)
        for width in (1280, 1920):
            page = Page.open(width=width, height=1000)
            if page is None:
                self.skipTest("chromium cannot start here")
            with page:
                page.load(page_path)
                rows = page.evaluate("""(() => {
                  const table = [...document.querySelectorAll('table')].find(t => /^Settings/.test(t.innerText));
                  const section = table.closest('section');
                  return {rows: [...table.querySelectorAll('tr')].map(r => r.innerText),
                          fits: table.getBoundingClientRect().right <= section.getBoundingClientRect().right + 1};
                })()""")
                names = [r.split("\t")[0] for r in rows["rows"]]
                self.assertIn("batch 16 (predicted, an estimate)", names)
                self.assertIn("batch 24 (predicted, an estimate)", names)
                self.assertTrue(rows["fits"], width)
                self.assertEqual(page.errors, [])
                if os.environ.get("BATCH_TEST_SCREENSHOTS"):  # to look at: BATCH_TEST_SCREENSHOTS=dir
                    page.evaluate("[...document.querySelectorAll('table')].find(t => /^Settings/.test(t.innerText))"
                                  ".closest('section').scrollIntoView({block: 'start'})")
                    shot = page.send("Page.captureScreenshot", {"format": "png"})["data"]
                    import base64
                    with open(os.path.join(os.environ["BATCH_TEST_SCREENSHOTS"], f"batch-{width}.png"), "wb") as f:
                        f.write(base64.b64decode(shot))


if __name__ == "__main__":
    unittest.main()
