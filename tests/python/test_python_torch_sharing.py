# tests/python/test_python_torch_sharing.py — the PyTorch hook beside programs that use the history themselves, and under many drains, per release.
"""The PyTorch hook end to end (stand-in torch under LD_PRELOAD=libgpumemtrace.so, the simulated
runtime and driver) for each release shape, with tests/python/progs/torch_sharing_prog.py:
- many drains of a small ring with time_us re-converted at every copy (and a clock step): the
  trace holds exactly the allocations PyTorch counted, no "wrapped" mark;
- reset_accumulated_memory_stats() half-way: the poller keeps draining;
- the program's own _record_memory_history (before CUDA init, after, with enabled=None, legacy
  form, bad values) and _dump_snapshot(): both keep working, one line says what changed;
- record_stream (a late free_completed), expandable segments (map/unmap beside the driver's
  cuMemMap/cuMemUnmap), an OOM inside backward().
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import python_testlib
from python_testlib import ROOT, read_trace
from test_python_torch import fake_env, release_classes

PROG = os.path.join(ROOT, "tests", "python", "progs", "torch_sharing_prog.py")
MiB = 1 << 20


class SharingCases:
    version = None

    def has(self, minor):
        from gpumemtrace_torch.probes import parse_version
        return parse_version(self.version) >= minor

    def run_prog(self, mode, env_extra=None, dump=False):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "trace.jsonl")
            env = fake_env(self.version, GPUMEMTRACE_OUTPUT=out, **(env_extra or {}))
            argv = [sys.executable, PROG, mode] + ([os.path.join(d, "dump.pickle")] if dump else [])
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            events, stack_of = read_trace(out)
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        return result, events, proc.stderr

    def blocks(self, events, op):
        return [e for e in events if e["op"] == op and e["api"].startswith("torch.")]

    def marks(self, events):
        return [e for e in events if e["op"] == "mark" and "history" in e.get("label", "")]

    def assert_every_block_once(self, result, events):
        self.assertEqual(len(self.blocks(events, "block_alloc")), result["allocs"])
        self.assertEqual(len(self.blocks(events, "block_free")), result["frees"])
        self.assertEqual(self.marks(events), [])

    # A ring of 4096 entries: the program appends about 12 entries per ms, so the poller (every 10 ms)
    # has some 170 ms to drain half a ring, even on a loaded machine; the runs wrap it several times.
    SMALL_RING = {"GPUMEMTRACE_TORCH_ENTRIES": "4096", "GPUMEMTRACE_TORCH_POLL_MS": "10"}

    def test_many_drains_small_ring_reconverted_times(self):
        result, events, stderr = self.run_prog("long", dict(self.SMALL_RING, FAKE_TORCH_CLOCK_JITTER_US="6"))
        self.assertEqual(stderr, "")
        self.assertGreater(result["allocs"] + result["frees"], 2 * 4096)   # the ring wrapped
        self.assert_every_block_once(result, events)
        syncs = [e for e in events if e["op"] == "sync"]
        self.assertGreater(len(syncs), 5)                # drained many times on the way

    def test_many_drains_through_a_clock_step(self):
        # The stand-in's wall clock steps back 50 ms (NTP) after the 5th copy: later copies give every
        # entry a time up to 50 ms lower than earlier copies did, beyond the time slack.
        result, events, stderr = self.run_prog("long", dict(self.SMALL_RING, FAKE_TORCH_CLOCK_STEP_US="-50000@5"))
        self.assertEqual(stderr, "")
        self.assert_every_block_once(result, events)
        synced = 0
        for e in events:   # the sync promise holds: no delayed event at or before a sync already written
            if e["op"] == "sync":
                synced = e["t"]
            elif e.get("delayed"):
                self.assertGreater(e["t"], synced)

    def test_reset_accumulated_memory_stats(self):
        result, events, stderr = self.run_prog("reset", self.SMALL_RING)
        self.assertEqual(stderr, "")
        self.assert_every_block_once(result, events)

    def test_programs_history_started_before_cuda_init(self):
        result, events, stderr = self.run_prog("own_before_init", dump=True)
        self.assert_every_block_once(result, events)
        # The program's dump is what it asked for: its context, no action skipped.
        self.assertGreaterEqual(result["dump"].get("alloc", 0), result["allocs"])
        self.assertGreater(result["dump"].get("free_completed", 0), 0)
        self.assertEqual(stderr, "")   # what it asked for is in force: nothing to say

    def test_programs_history_started_later_with_other_settings(self):
        result, events, stderr = self.run_prog("own_after", dump=True)
        self.assert_every_block_once(result, events)
        self.assertGreater(result["dump"].get("free_completed", 0), 0)
        self.assertGreater(result["dump"].get("alloc", 0), 200)
        # One line: the context the hook needs is kept (the program asked for the default, "all": no
        # difference), max_entries 65536 kept where it asked 5000.
        self.assertEqual(stderr.count("gpumemtrace:"), 1, stderr)
        self.assertIn("max_entries=65536 (asked 5000)", stderr)

    def test_program_turns_the_history_off(self):
        result, events, stderr = self.run_prog("own_off", dump=True)
        self.assert_every_block_once(result, events)
        self.assertIn("context='alloc' (asked None)", stderr)
        self.assertIn("turned PyTorch's allocation history off", stderr)
        self.assertLessEqual(result["after_off"], 2)   # cleared as asked (our drain's snapshot entry at most)

    def test_legacy_form(self):
        result, events, stderr = self.run_prog("own_legacy", dump=True)
        self.assert_every_block_once(result, events)
        self.assertGreater(result["dump"].get("alloc", 0), 0)

    def test_bad_values_get_pytorchs_own_error(self):
        result, events, stderr = self.run_prog("bad_args")
        self.assertIn("expected context", result["raised"] or "")
        self.assert_every_block_once(result, events)
        self.assertEqual(stderr, "")

    def test_record_stream_late_free_completed(self):
        result, events, stderr = self.run_prog("record_stream")
        self.assert_every_block_once(result, events)

    def test_expandable_segments_map_and_unmap(self):
        # The variable the release reads without a deprecation warning (2.11 and newer: PYTORCH_ALLOC_CONF).
        variable = "PYTORCH_ALLOC_CONF" if self.has((2, 11)) else "PYTORCH_CUDA_ALLOC_CONF"
        result, events, stderr = self.run_prog("expandable", {variable: "expandable_segments:True"})
        self.assertEqual(stderr, "")
        self.assert_every_block_once(result, events)
        maps = [(e["addr"], e["size"]) for e in events if e["api"] == "torch.segment_map"]
        unmaps = [(e["addr"], e["size"]) for e in events if e["api"] == "torch.segment_unmap"]
        self.assertTrue(maps and unmaps, [e["api"] for e in events])
        # The same ranges the driver-level events saw.
        driver_maps = [(e["addr"], e["size"]) for e in events if e["api"] == "cuMemMap"]
        driver_unmaps = [(e["addr"], e["size"]) for e in events if e["api"] == "cuMemUnmap"]
        self.assertEqual(sorted(maps), sorted(driver_maps))
        self.assertEqual(sorted(unmaps), sorted(driver_unmaps))
        # Reserved from the torch events equals PyTorch's own figure at the end.
        self.assertEqual(sum(s for _, s in maps) - sum(s for _, s in unmaps), result["reserved"])
        # Blocks name the mapped range they lie in.
        seg_starts = {a for a, _ in maps}
        for b in self.blocks(events, "block_alloc"):
            self.assertIn(b.get("segment"), seg_starts, b)

    def test_oom_inside_backward(self):
        result, events, stderr = self.run_prog("oom_backward", {"FAKE_TORCH_LIMIT": str(512 << 20)})
        self.assertTrue(result["caught"])
        ooms = self.blocks(events, "block_oom")
        self.assertEqual(len(ooms), 1)
        scopes = [e for e in events if e["op"] in ("scope_begin", "scope_end") and e.get("label") == "backward"]
        self.assertEqual([e["op"] for e in scopes], ["scope_begin", "scope_end"])
        self.assertTrue(scopes[0]["t"] < ooms[0]["t"] < scopes[1]["t"], (scopes, ooms))


release_classes(SharingCases, "TorchSharing_", globals())

if __name__ == "__main__":
    unittest.main()
