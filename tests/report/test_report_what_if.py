# tests/report/test_report_what_if.py — the allocator replay (--what-if, automatic candidates) and the time
# to OOM, on real PyTorch traces and on a generated fragmentation OOM.
"""gpumem-report --what-if and time to OOM (docs/what-if.md).

- Faithfulness: every real PyTorch trace (tests/report/real/, recorded on an H100) replayed under its own
  settings gives the same segment operations (kind, size, order) and every block at the same offset in
  its segment, and the same reserved peak; the capped run only once its cap is given.
- A fragmentation OOM (generated: 6 MiB tensors in 20 MiB segments, every other one freed, then 12 MiB)
  gets advice naming expandable_segments:True with the replayed figure; a capacity OOM gets none.
- Time to OOM from growth, and its gate.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from reportlib import BUILD, ROOT, ReportTestCase, report_json, run_report, skip_bounds_under_sanitizer

REAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "real")
MiB = 1 << 20
GiB = 1 << 30


def real(name):
    return os.path.join(REAL, name + ".jsonl.zst")


class TraceWriter:
    """A version 1 trace of PyTorch tensor-level events (docs/trace-format.md), one line per event."""

    def __init__(self, path, free, total=80 * GiB):
        self.f = open(path, "w")
        self.seq = 0
        self.t = 1000
        self.line({"type": "header", "format": "gpumemtrace", "version": 1, "library": "0.1.0", "pid": 7, "ppid": 1,
                   "exe": "/usr/bin/python3", "cmdline": ["python3", "frag.py"], "host": "h", "start_time_ns": 0,
                   "clock": "monotonic", "clock_start_ns": 0, "backend": "interpose", "stack_depth": 64,
                   "on_full": "wait"})
        self.line({"type": "device", "device": 0, "name": "Test GPU", "total": total, "free": free})
        self.event("cudaMemGetInfo", "meminfo", "none", free=free, total=total)

    def line(self, obj):
        self.f.write(json.dumps(obj) + "\n")

    def event(self, api, op, kind, addr=None, size=None, **extra):
        self.seq += 1
        self.t += 1000
        e = {"type": "event", "seq": self.seq, "t": self.t, "tid": 7, "api": api, "op": op, "kind": kind,
             "device": 0, "stack": 0}
        if addr is not None:
            e["addr"] = "0x%x" % addr
        if size is not None:
            e["size"] = size
        for key, value in extra.items():
            e[key] = "0x%x" % value if key in ("segment", "stream") else value
        self.line(e)

    def close(self):
        self.line({"type": "footer", "events": self.seq, "dropped_total": 0, "end_time": self.t + 1000})
        self.f.close()


def fragmentation_oom_trace(path):
    """Default settings, 200 MiB free: 30 tensors of 6 MiB fill ten 20 MiB segments (three each, 2 MiB
    left); the first and last of each are freed; a 12 MiB request then fits in no free block (6 and
    8 MiB), cudaMalloc fails twice (before and after the cache release, which frees nothing: every
    segment is in use) and PyTorch raises. What PyTorch does, step by step, per its source."""
    w = TraceWriter(path, free=200 * MiB)
    blocks = []
    for k in range(10):
        base = 0x7F0000000000 - k * 0x10000000  # cudaMalloc hands out lower addresses as the device fills
        w.event("torch.segment_alloc", "alloc", "device", base, 20 * MiB)
        for i in range(3):
            w.event("torch.alloc", "block_alloc", "block", base + i * 6 * MiB, 6 * MiB, segment=base)
            blocks.append((base + i * 6 * MiB, base))
    for n, (addr, base) in enumerate(blocks):
        if n % 3 != 1:
            w.event("torch.free_requested", "block_free", "block", addr, 6 * MiB, segment=base)
    for _ in range(2):
        w.event("cudaMalloc", "alloc", "device", 0, 12 * MiB, result=2)
        w.event("cudaMemGetInfo", "meminfo", "none", free=0, total=80 * GiB)
    w.event("torch.oom", "block_oom", "block", 0, 12 * MiB, free=0)
    w.close()


def cached_peak_trace(path):
    """No OOM: ten 30 MiB tensors, all freed, then ten 40 MiB ones. None of the cached 30 MiB segments
    fits a 40 MiB request, so PyTorch gets ten new segments: 700 MiB reserved for 400 MiB allocated."""
    w = TraceWriter(path, free=60 * GiB)
    base = 0x7F0000000000
    first = []
    for k in range(10):
        base -= 0x10000000
        w.event("torch.segment_alloc", "alloc", "device", base, 30 * MiB)
        w.event("torch.alloc", "block_alloc", "block", base, 30 * MiB, segment=base)
        first.append(base)
    for addr in first:
        w.event("torch.free_requested", "block_free", "block", addr, 30 * MiB, segment=addr)
    for k in range(10):
        base -= 0x10000000
        w.event("torch.segment_alloc", "alloc", "device", base, 40 * MiB)
        w.event("torch.alloc", "block_alloc", "block", base, 40 * MiB, segment=base)
    w.close()


class Faithful(ReportTestCase):
    def replay(self, name, *args):
        r = report_json(real(name), "--what-if", "expandable_segments:True", *args)
        self.assertEqual(len(r["what_if"]), 1, r["what_if"])
        return r["what_if"][0]

    def test_every_real_pytorch_trace_replays_exactly(self):
        for name, extra in [("clean", ()), ("eval", ()), ("pytest", ()), ("roles", ()), ("capacity", ()),
                            ("expandable", ()), ("capped", ("--recorded-settings", "per_process_memory_fraction:0.02"))]:
            with self.subTest(trace=name):
                w = self.replay(name, *extra)
                self.assertTrue(w["replay"]["faithful"], w["replay"])
                self.assertIsNone(w["replay"]["divergence"])
                self.assertGreater(w["replay"]["segment_ops_compared"], 0)
                self.assertGreater(w["replay"]["blocks_compared"], 0)
                recorded = w["rows"][0]
                self.assertTrue(recorded["recorded"])
                self.assertEqual(w["rows"][1]["settings"], "expandable_segments:True")
                if w["ooms"]:  # the recorded OOMs happen in the replay too
                    self.assertEqual(recorded["ooms_still_happen"], [True] * len(w["ooms"]))
        # The transformer: 68 segments and 1800 blocks, each where PyTorch put it.
        roles = self.replay("roles")["replay"]
        self.assertEqual((roles["segment_ops_compared"], roles["blocks_compared"]), (68, 1800))
        # Expandable segments are inferred from the trace (its maps), and replayed map by map.
        w = self.replay("expandable")
        self.assertEqual(w["recorded_settings"], "expandable_segments:True")
        self.assertEqual(w["replay"]["segment_ops_compared"], 66)

    def test_a_cap_the_trace_does_not_show_is_the_first_divergence(self):
        w = self.replay("capped")
        self.assertFalse(w["replay"]["faithful"])
        d = w["replay"]["divergence"]
        self.assertIn("torch.oom", d["what"])
        self.assertIn("--recorded-settings", d["what"])
        self.assertGreater(d["seq"], 0)
        self.assertIsNone(w["advice"])  # an unfaithful replay names no setting
        text = run_report(real("capped"), "--what-if", "expandable_segments:True", check_rc=0).stdout
        self.assertIn("differs from the recording at event %d" % d["seq"], text)

    def test_jax_has_no_pytorch_events_to_replay(self):
        self.assertEqual(report_json(real("jax"), "--what-if", "expandable_segments:True")["what_if"], [])


class Advice(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "frag.jsonl")
        fragmentation_oom_trace(self.path)

    def tearDown(self):
        self.dir.cleanup()

    def test_fragmentation_oom_gets_a_replayed_setting(self):
        r = report_json(self.path)  # no --what-if: the OOM makes the report try the candidates
        self.assertEqual([o["verdict"] for o in r["ooms"]], ["fragmentation"])
        w = r["what_if"][0]
        self.assertTrue(w["replay"]["faithful"], w["replay"])
        self.assertEqual(w["replay"]["segment_ops_compared"], 10)
        self.assertEqual(w["replay"]["blocks_compared"], 30)
        rows = {row["settings"]: row for row in w["rows"][1:]}
        self.assertTrue(all(row["automatic"] for row in rows.values()))
        self.assertEqual(w["rows"][0]["reserved_peak"], 200 * MiB)
        self.assertEqual(w["rows"][0]["cache_flushes"], 1)
        expandable = rows["expandable_segments:True"]
        self.assertEqual(expandable["ooms_still_happen"], [False])
        self.assertEqual(expandable["new_ooms"], 0)
        self.assertEqual(expandable["reserved_peak"], 180 * MiB)  # nine 20 MiB pages, packed
        self.assertEqual(rows["max_split_size_mb:128"]["ooms_still_happen"], [True])
        self.assertIn("with `expandable_segments:True` this run peaks at 180.0 MiB reserved instead of 200.0 MiB: "
                      "this OOM would not have happened", w["advice"])
        self.assertIn("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", r["ooms"][0]["advice"])
        text = run_report(self.path, check_rc=0).stdout
        self.assertIn("what-if (device 0)", text)
        self.assertIn("expandable_segments:True", text)
        self.assertIn("avoided", text)

    def test_html_has_the_table_and_the_predicted_line(self):
        import browser
        page = os.path.join(self.dir.name, "frag.html")
        run_report("--format", "html", "-o", page, self.path, check_rc=0)
        dom = browser.rendered_dom(page, height=6000)
        if dom is None:
            self.skipTest("headless Chromium cannot run here")
        at = dom.find("What if (GPU 0)")
        self.assertGreater(at, 0)
        block = dom[at:at + 6000]
        self.assertIn("<td>expandable_segments:True</td><td>180 MiB</td>", block)
        self.assertIn("avoided", block)
        self.assertIn("u-wrap", block)  # the uPlot chart: recorded and predicted reserved bytes
        self.assertIn("Time to OOM", dom)

    def test_a_peak_with_much_reserved_unallocated_tries_the_candidates(self):
        path = os.path.join(self.dir.name, "cached.jsonl")
        cached_peak_trace(path)
        r = report_json(path)
        self.assertEqual(r["ooms"], [])
        w = r["what_if"][0]
        self.assertTrue(w["replay"]["faithful"], w["replay"])
        self.assertEqual(w["rows"][0]["reserved_peak"], 700 * MiB)
        rows = {row["settings"]: row for row in w["rows"][1:]}
        self.assertEqual(rows["expandable_segments:True"]["reserved_peak"], 400 * MiB)  # the freed range reused
        self.assertEqual(rows["max_split_size_mb:128"]["reserved_peak"], 700 * MiB)
        self.assertIn("with `expandable_segments:True` this run peaks at 400.0 MiB reserved instead of 700.0 MiB",
                      r["peaks"][0]["advice"])

    def test_what_if_rows_are_the_settings_given(self):
        w = report_json(self.path, "--what-if", "roundup_power2_divisions:[1:2,>:4]", "--what-if",
                        "expandable_segments:True,max_split_size_mb:64")["what_if"][0]
        self.assertEqual([row["settings"] for row in w["rows"][1:]],
                         ["roundup_power2_divisions:[1:2,>:4]", "expandable_segments:True,max_split_size_mb:64"])
        self.assertFalse(any(row["automatic"] for row in w["rows"]))
        self.assertEqual(w["rows"][2]["ooms_still_happen"], [False])

    def test_capacity_oom_gets_no_allocator_advice(self):
        r = report_json(real("capacity"))
        self.assertEqual(r["ooms"][0]["verdict"], "capacity")
        self.assertNotIn("PYTORCH_CUDA_ALLOC_CONF", r["ooms"][0]["advice"] or "")
        w = r["what_if"][0]
        self.assertTrue(all(row["ooms_still_happen"] == [True] for row in w["rows"]))
        self.assertTrue(w["advice"].startswith("no allocator setting replayed"), w["advice"])

    def test_no_replay_without_a_reason(self):
        self.assertEqual(report_json(real("clean"))["what_if"], [])  # no OOM, no fragmented peak

    def test_streams_are_read_and_checked(self):
        # Two streams: a block freed on stream 1 is not reused on stream 2 (one segment each), as PyTorch does.
        path = os.path.join(self.dir.name, "streams.jsonl")
        w = TraceWriter(path, free=80 * GiB)
        for stream, base in ((0x11, 0x7F0000000000), (0x22, 0x7E0000000000)):
            w.event("torch.segment_alloc", "alloc", "device", base, 30 * MiB, stream=stream)
            w.event("torch.alloc", "block_alloc", "block", base, 30 * MiB, segment=base, stream=stream)
            w.event("torch.free_requested", "block_free", "block", base, 30 * MiB, segment=base, stream=stream)
        w.close()
        replay = report_json(path, "--what-if", "expandable_segments:True")["what_if"][0]["replay"]
        self.assertTrue(replay["faithful"], replay)
        self.assertEqual(replay["segment_ops_compared"], 2)
        bad = os.path.join(self.dir.name, "bad.jsonl")
        with open(path) as f, open(bad, "w") as out:
            out.write(f.read().replace('"stream": "0x22"', '"stream": "s2"'))
        proc = run_report(bad, check_rc=2)
        self.assertIn('field "stream": expected a "0x..." hex string', proc.stderr)

    def test_bad_settings_are_usage_errors(self):
        for args, message in [(("--what-if", "max_split_size_mb:10"), "must be > 20"),
                              (("--what-if", "expandable:True"), "unknown option `expandable`"),
                              (("--recorded-settings", "garbage_collection_threshold:2"), "--recorded-settings")]:
            proc = run_report(self.path, *args, check_rc=2)
            self.assertIn(message, proc.stderr)


class TimeToOom(ReportTestCase):
    def test_growth_comes_with_a_time_to_oom(self):
        r = report_json(real("eval"))
        t = [t for t in r["time_to_oom"] if t["level"] == "block"]
        self.assertTrue(t)
        top = max(t, key=lambda x: x["bytes_per_step"])
        self.assertEqual(top["bytes_per_step"], 4 * MiB)  # the 512 x 2048 activations kept per step
        self.assertEqual(top["steps"], 59)
        self.assertTrue(top["estimate"])
        self.assertTrue(top["free_known"])
        self.assertGreater(top["free_bytes"], 70 * GiB)
        self.assertAlmostEqual(top["steps_left"], top["free_bytes"] / top["bytes_per_step"], delta=1)
        self.assertAlmostEqual(top["seconds_left"], top["steps_left"] * top["seconds_per_step"], delta=0.01)
        text = run_report(real("eval"), check_rc=0).stdout
        self.assertIn("time to OOM (device 0, blocks, an estimate): grows 4.0 MiB per step", text)
        self.assertIn("eval_without_no_grad.py:10", text)

    def test_gate(self):
        proc = run_report(real("eval"), "--fail-on-oom-within", "1h", check_rc=1)
        self.assertIn("would be full in", proc.stderr)
        run_report(real("eval"), "--fail-on-oom-within", "1s", check_rc=0)
        run_report(real("clean"), "--fail-on-oom-within", "1d", check_rc=0)  # no growth: nothing to fill
        proc = run_report(real("eval"), "--fail-on-oom-within", "soon", check_rc=2)
        self.assertIn("--fail-on-oom-within", proc.stderr)
        proc = run_report("diff", "--fail-on-oom-within", "1h", real("eval"), real("eval"), check_rc=2)
        self.assertIn("does not apply to diff", proc.stderr)


@skip_bounds_under_sanitizer
class BenchHarness(ReportTestCase):
    """bench/what_if_bench.py runs and prints its tables (figures from a short run mean nothing)."""

    def test_bench_runs(self):
        if not os.path.exists(os.path.join(BUILD, "bench", "what_if_replay_bench")):
            self.skipTest("build/bench/what_if_replay_bench not built")
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "what_if_bench.py"), "--build", BUILD,
                               "--events", "20000", "--runs", "1"], capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for text in ("load average before:", "| report |", "| what-if x5 |", "| recorded |",
                     "| expandable_segments:True |", "slowest setting:", "peak RSS of what-if x5"):
            self.assertIn(text, proc.stdout)


if __name__ == "__main__":
    unittest.main()
