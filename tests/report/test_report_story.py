# tests/report/test_report_story.py — crashed runs read as a person reads them: OOM -> cause -> fix.
"""The story of a run (report/analyses/story.h, docs/report.md "The story of a run"), on programs
written from the patterns of real OOM reports and run as a user runs them: under the recorder, on the
simulated runtime, the PyTorch ones on the stand-in torch.

- tests/python/progs/story_prog.py accumulate: `epoch_loss.append(loss)` keeps every step's graph;
- tests/python/progs/story_prog.py batch: one batch too big, beside a small per-step growth;
- tests/python/progs/story_prog.py deep: one forward pass through identical blocks fills the device
  before any backward(): the activations of one forward pass, not growth;
- tests/python/progs/story_prog.py eval / decode: validation without torch.no_grad() keeping its outputs,
  an LLM's decode loop whose key/value cache grows per token: growth across passes;
- tests/e2e/programs/report_story.cpp holes: 16 MiB holes of plain cudaMalloc, then 128 MiB;
- tests/e2e/programs/report_story.cpp pool: a custom pool's 48 MiB block and the 64 MiB chunk it asked for;
- tests/e2e/programs/report_story.cpp helper: a helper whose buffer is never freed;
and generated traces (tracegen.py) for a stale reading of the device's free memory and for runs that
recovered from an OOM. Each run ends in its OOM (exit status 1): the text report must say what
happened, why and what to do in its first 10 lines, call nothing live then a leak, and never print a
forecast of the OOM that already happened or advice that contradicts the cause.
"""
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
from recorder_testlib import LIB, program, run_traced, tempdir, trace_files  # noqa: E402
from reportlib import REPORT, report_json, run_report  # noqa: E402
from tracegen import MiB, Trace  # noqa: E402

STORY_PROG = os.path.join(python_testlib.PROGS, "story_prog.py")
FAKE_TORCH = os.path.join(python_testlib.ROOT, "tests", "python", "fake_torch")
TOOLS = os.path.join(python_testlib.ROOT, "tools", "python")
GiB = 1 << 30


def first_lines(text, n=10):
    return text.splitlines()[:n]


class CrashedRuns(unittest.TestCase):
    """Each program runs once under the recorder; the tests share the traces."""

    @classmethod
    def setUpClass(cls):
        native = program("report_story")
        missing = [p for p in (REPORT, LIB, native, python_testlib.SIM) if not os.path.exists(p)]
        if missing:
            raise unittest.SkipTest(f"not built: {', '.join(missing)}")
        cls.root = tempdir()
        cls.traces = {}

        def trace(key, args, capacity, env=None):
            out = os.path.join(cls.root, key)
            os.makedirs(out)
            proc = run_traced(args, out, env=dict(env or {}, GPUMEMTRACE_SIM_CAPACITY=capacity))
            files = trace_files(out)
            # Each dies of its OOM: exit status 1, as an uncaught out-of-memory error ends a run.
            if proc.returncode != 1 or len(files) != 1:
                raise AssertionError(f"{args}: exit {proc.returncode}, traces {files}\n{proc.stdout}{proc.stderr}")
            cls.traces[key] = files[0]

        for mode in ("holes", "pool"):
            trace(mode, [native, mode], "1G")
        trace("helper", [native, "helper"], "256M")
        torch_env = {"FAKE_TORCH_CUDART": python_testlib.SIM, "FAKE_TORCH_LIMIT": str(GiB),
                     "PYTHONPATH": os.pathsep.join([TOOLS, FAKE_TORCH]), "GPUMEMTRACE_QUIET": "1"}
        for mode in ("accumulate", "batch", "deep", "eval", "decode"):
            trace(mode, [sys.executable, STORY_PROG, mode], "1G", torch_env)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def text(self, key, *options, rc=0):
        return run_report(*options, "--width", "160", self.traces[key], check_rc=rc).stdout

    def json(self, key, *options):
        return report_json(*options, self.traces[key])

    def assert_story(self, key, cause, advice):
        """The first 10 lines: the OOM that ended the run, then (maybe) its cause, then the advice."""
        lines = first_lines(self.text(key))
        oom = next((i for i, l in enumerate(lines) if l.startswith("OOM (device 0)")), None)
        self.assertIsNotNone(oom, "\n".join(lines))
        self.assertIn("the run ended here", lines[oom])
        said = re.sub(r"\n {9,}", " ", "\n".join(lines[oom:]))  # wrapped lines joined
        if cause:
            self.assertRegex(said, r"\n  cause: " + cause, "\n".join(lines))
        else:
            self.assertNotIn("\n  cause: ", said)
        self.assertIn("\n  advice: " + advice, said, "\n".join(lines))
        if cause:
            self.assertLess(said.index("cause: "), said.index("advice: "))
        return lines

    # --- OOM -> cause -> fix, in the first 10 lines --------------------------------------------------

    def test_accumulation_reads_oom_then_the_growing_site_then_its_fix(self):
        lines = self.assert_story(
            "accumulate", r"Net\.forward \(.*story_prog\.py:\d+\) grew by 944\.0 MiB over 118 steps and held 952\.0 MiB "
                          r"\(93% of the device\) at the crash",
            "a tensor that requires grad is accumulated across iterations")
        text = self.text("accumulate")
        # The fix is the accumulation's, never the batch's: not in the OOM, not at the peak, no headroom.
        self.assertNotIn("smaller batch", text)
        self.assertNotIn("headroom", text)
        # One advice: the crash's. The peak of its device (the crash itself) repeats none.
        self.assertEqual(text.count("\n  advice: "), 1 + text.count("\ngrowth ("), text)
        self.assertIsNone(self.json("accumulate")["peaks"][0]["advice"])
        self.assertNotIn("time to OOM", text)  # the OOM it would forecast has happened
        self.assertFalse(any(l.startswith("leaks:") for l in text.splitlines()), text)
        self.assertTrue(lines[2].startswith("OOM (device 0): 8.0 MiB requested"), lines)

    def test_a_batch_too_big_keeps_its_advice(self):
        # A small per-step growth is no cause: it gained 10 KiB, the request lacked hundreds of MiB.
        self.assert_story("batch", None, "activations hold 91% of the memory at the OOM: use a smaller batch")
        r = self.json("batch")
        self.assertIsNone(r["ooms"][0]["cause"])
        self.assertEqual([g["peak_bytes"] for g in r["growth"] if g["level"] == "block"], [10 * 1024])

    # --- one forward pass is not growth; a loop that keeps memory per pass is -------------------------

    def test_one_deep_forward_pass_is_its_activations_not_growth(self):
        # 200 identical blocks keep their activations for a backward() that never comes: every block's
        # site rises, in every window of the run, but all inside one forward pass.
        self.assert_story("deep", None, "activations hold 93% of the memory at the OOM: use a smaller batch, "
                                        "activation checkpointing (torch.utils.checkpoint), or mixed precision")
        r = self.json("deep")
        self.assertEqual(r["growth"], [])
        self.assertIsNone(r["ooms"][0]["cause"])
        self.assertEqual(r["time_to_oom"], [])
        text = self.text("deep")
        self.assertNotIn("accumulated across iterations", text)
        self.assertNotIn("kept every iteration", text)
        self.assertIn("\ngrowth: none\n", text)

    def growth_at(self, key, marker):
        """The block-level growth entries whose site's Python frames include story_prog.py at `marker`."""
        line = python_testlib.prog_line(STORY_PROG, marker)
        return [g for g in self.json(key)["growth"] if g["level"] == "block" and any(
            f.get("file", "").endswith("story_prog.py") and f.get("line") == line for f in g["stack"])]

    def test_an_eval_loop_that_keeps_its_outputs_grows(self):
        # Each batch is copied to the device outside the model: a new forward pass, whose four layers'
        # activations the kept output holds.
        self.assert_story("eval", r"Net\.forward \(.*story_prog\.py:\d+\) grew by 950\.0 MiB over 475 steps",
                          "a tensor that requires grad is accumulated across iterations")
        grown = self.growth_at("eval", "LINE_EVAL_KEEP")
        self.assertTrue(grown, self.json("eval")["growth"])
        self.assertEqual(self.json("eval")["ooms"][0]["cause"]["stack"], grown[0]["stack"])

    def test_a_kv_cache_that_grows_per_decode_step_is_growth(self):
        # Sampling the next token outside the model ends each step's forward pass.
        self.assert_story("decode", r"Decoder\.forward \(.*story_prog\.py:\d+\) grew by 958\.0 MiB over 958 steps",
                          "a tensor that requires grad is accumulated across iterations")
        grown = self.growth_at("decode", "LINE_KV")
        self.assertEqual(len(grown), 1, self.json("decode")["growth"])
        self.assertEqual(self.json("decode")["ooms"][0]["cause"]["stack"], grown[0]["stack"])

    def test_a_caching_allocators_segments_are_no_growth_of_their_own(self):
        # The stand-in's allocator takes a segment for each kept block: its cudaMalloc call site keeps
        # memory every step, as a consequence of its blocks, reported at the block level only.
        for key in ("accumulate", "eval", "decode"):
            with self.subTest(key):
                self.assertEqual([g["level"] for g in self.json(key)["growth"]], ["block"] * len(self.json(key)["growth"]))

    def test_a_leaking_helper_is_the_cause(self):
        self.assert_story("helper", r"normalize \(.*report_story\.cpp:\d+\) grew by 240\.0 MiB over 120 steps and held "
                                    r"242\.0 MiB \(95% of the device\) at the crash",
                          "memory allocated here is kept every iteration")

    def test_holes_of_plain_cudamalloc_are_fragmentation(self):
        lines = self.assert_story("holes", None, "the device's free memory lies in holes")
        self.assertIn("(cudaMalloc): fragmentation; the run ended here", lines[2])
        self.assertIn("the largest 16.0 MiB", "\n".join(lines))
        oom = self.json("holes")["ooms"][0]
        self.assertEqual(oom["verdict"], "fragmentation")
        # 32 tiles of 16 MiB live, every other one freed: 31 holes inside their span, the first tile's
        # 16 MiB before it.
        self.assertEqual(oom["address_gaps"], {"span": 63 * 16 * MiB, "inside": 31 * 16 * MiB, "largest": 16 * MiB})

    def test_a_pools_block_and_its_chunk_are_one_incident(self):
        r = self.json("pool")
        self.assertEqual(len(r["ooms"]), 1, r["ooms"])
        oom = r["ooms"][0]
        self.assertEqual([(a["api"], a["size"]) for a in oom["attempts"]],
                         [("cudaMalloc", 64 * MiB), ("gpumemtrace_block_oom", 48 * MiB)])
        self.assertEqual((oom["api"], oom["requested"], oom["verdict"]), ("gpumemtrace_block_oom", 48 * MiB, "fragmentation"))
        self.assertEqual(r["summary"]["ooms"], 1)
        lines = self.assert_story("pool", None, "free memory is split into blocks too small for the request")
        self.assertIn("one request, 2 attempts", "\n".join(lines))

    # --- live when it crashed, not leaks --------------------------------------------------------------

    def test_live_memory_at_the_crash_is_no_leak(self):
        for key, live in (("holes", 512 * MiB), ("helper", 242 * MiB), ("pool", 768 * MiB)):
            with self.subTest(key):
                r = self.json(key)
                self.assertTrue(r["processes"][0]["ended_in_oom"])
                self.assertEqual(r["processes"][0]["story"][:2], ["ooms", "leaks"])
                self.assertEqual((r["summary"]["leaked_bytes"], r["summary"]["live_when_crashed_bytes"]), (0, live))
                self.assertEqual([d["leaked_bytes"] for d in r["processes"][0]["devices"]], [0])
                self.assertTrue(all(l["live_when_crashed"] for l in r["leaks"]), r["leaks"])
                self.assertEqual([o["crash"] for o in r["ooms"]], [True])
                self.assertIn("\nlive when it crashed (out of memory; not leaks): ", self.text(key))
                # Not gated as a leak (exit 0), and no verdict withheld either (not 3): the trace is complete.
                run_report("--fail-on-leak=0", self.traces[key], check_rc=0)

    def test_json_names_the_cause_and_its_growth(self):
        r = self.json("accumulate")
        oom = r["ooms"][0]
        cause = oom["cause"]
        self.assertEqual(r["growth"][cause["growth"]]["stack"], cause["stack"])
        self.assertEqual((cause["grew_bytes"], cause["steps"], cause["held_bytes"], cause["share_of"]),
                         (944 * MiB, 118, 952 * MiB, "device"))
        self.assertAlmostEqual(cause["share"], 952 / 1024)
        self.assertEqual(oom["advice"], r["growth"][cause["growth"]]["advice"])
        self.assertEqual(r["time_to_oom"], [])
        self.assertTrue(all(w["headroom"] is None for w in r["what_if"]), r["what_if"])


class GeneratedStories(unittest.TestCase):
    def setUp(self):
        if not os.path.exists(REPORT):
            self.skipTest(f"{REPORT} not built")
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "t.jsonl")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_stale_free_reading_is_not_used(self):
        # A reading of 928 MiB free while the process held 96 MiB; it then filled the 1 GiB device and a
        # pool refused 8 MiB: not "the device had 928 MiB free" (allocator limit) but capacity.
        t = Trace(self.path, devices=((0, "Simulated GPU", GiB),))
        s = t.stack("load", line=5)
        t.alloc(0x100000000, 96 * MiB, s)
        t.meminfo(928 * MiB, GiB)
        grow = t.stack("grow", line=9)
        for i in range(926):
            t.alloc(0x200000000 + i * MiB, MiB, grow)
        t.block_oom(8 * MiB, grow)
        t.close(end="exit", exit_status=1)
        oom = report_json(self.path)["ooms"][0]
        self.assertEqual(oom["verdict"], "capacity", oom["explanation"])
        self.assertEqual(oom["device_free"], 2 * MiB)
        self.assertEqual(oom["stale_reading"], {"free": 928 * MiB, "reserved": 96 * MiB})
        self.assertIn("(the device's last reading, 928.0 MiB free, was taken while this process held 96.0 MiB)",
                      oom["explanation"])
        text = run_report(self.path, check_rc=0).stdout
        self.assertIn("device free about 2.0 MiB of 1.0 GiB (its last reading, 928.0 MiB free, is stale)", text)
        self.assertNotIn("allocator limit", text)

    def test_a_peak_made_of_growth_points_to_it_not_to_the_batch(self):
        # No OOM yet: 50 steps each keep an 8 MiB activation (under forward()) and use a 1 MiB temporary,
        # in one 512 MiB segment. Activations hold most of the peak, but a smaller batch is not the fix:
        # the growth is.
        t = Trace(self.path, devices=((0, "Simulated GPU", 2 * GiB),))
        seg, seg_stack = 0x100000000, t.stack("reserve", line=3)
        kept = t.stack("make_hidden", line=7, python="Net.forward")
        scratch = t.stack("scratch", line=9)
        t.alloc(seg, 512 * MiB, seg_stack)
        for step in range(50):
            t.block_alloc(seg + step * 8 * MiB, 8 * MiB, kept, segment=seg)
            t.block_alloc(seg + 500 * MiB, MiB, scratch, segment=seg)
            t.block_free(seg + 500 * MiB)
        t.close(end="exit", exit_status=0)
        r = report_json(self.path)
        peak = r["peaks"][0]
        self.assertGreater(peak["roles"]["activations"], peak["allocated"]["bytes"] // 2)
        self.assertEqual(peak["advice"], "100% of this peak is memory that grows every iteration (see growth): fix that first")
        self.assertIn("accumulated across iterations", r["growth"][0]["advice"])
        self.assertNotIn("smaller batch", run_report(self.path, check_rc=0).stdout)

    def test_a_run_that_recovered_from_its_oom_keeps_its_leaks(self):
        # The OOM was caught and the program allocated again: it did not end in it, whatever its status.
        for status, more in ((1, True), (0, False)):
            with self.subTest(status=status, allocated_after=more):
                t = Trace(self.path, devices=((0, "Simulated GPU", GiB),))
                s = t.stack("work", line=5)
                t.alloc(0x100000000, 4 * MiB, s)
                t.failed_alloc(2 * GiB, s)
                t.meminfo(GiB - 4 * MiB, GiB)
                if more:
                    t.alloc(0x200000000, 8 * MiB, s)
                t.close(end="exit", exit_status=status)
                r = report_json(self.path)
                self.assertFalse(r["processes"][0]["ended_in_oom"])
                self.assertEqual(r["processes"][0]["story"][0], "leaks")
                self.assertGreater(r["summary"]["leaked_bytes"], 0)
                text = run_report(self.path, check_rc=0).stdout
                self.assertEqual(text.splitlines()[2].split(":")[0], "leaks")
                self.assertNotIn("the run ended here", text)


if __name__ == "__main__":
    unittest.main()
