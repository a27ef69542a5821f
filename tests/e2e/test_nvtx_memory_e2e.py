# tests/e2e/test_nvtx_memory_e2e.py — the NVTX memory extension recorded as block events.
"""End-to-end test of the NVTX memory extension as block events (tests/e2e/programs/nvtx_heap.c: NVTX v3
alone, no gpumemtrace header): under a plain LD_PRELOAD the registered regions are block_alloc /
block_free events in their heap's segment, and gpumem-report classes the live regions as block leaks
and the rest of the pool as cached."""
import json
import os
import subprocess
import unittest

from recorder_testlib import BUILD, Trace, program, run_traced, tempdir, trace_files

REPORT = os.path.join(BUILD, "gpumem-report")
MIB = 1 << 20


class NvtxMemoryUnderPreload(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        out = tempdir()
        saved = os.environ.pop("NVTX_INJECTION64_PATH", None)
        try:
            cls.proc = run_traced([program("nvtx_heap")], out)
        finally:
            if saved is not None:
                os.environ["NVTX_INJECTION64_PATH"] = saved
        files = trace_files(out)
        if cls.proc.returncode != 0 or len(files) != 1:
            raise AssertionError("nvtx_heap: rc %d, traces %s\n%s" % (cls.proc.returncode, files, cls.proc.stderr))
        cls.trace_path = files[0]
        cls.trace = Trace(files[0])
        cls.pool = int(cls.proc.stdout.split("pool ")[1].split()[0], 16)

    def blocks(self):
        return [e for e in self.trace.events if e["kind"] == "block"]

    def test_regions_are_block_events_in_program_order(self):
        p = self.pool
        seen = [(e["api"], e["op"], int(e["addr"], 16) - p, e["size"]) for e in self.blocks()]
        self.assertEqual(seen, [
            ("nvtxMemRegionsRegister", "block_alloc", 0, MIB),
            ("nvtxMemRegionsRegister", "block_alloc", MIB, 2 * MIB),
            ("nvtxMemRegionsRegister", "block_alloc", 4 * MIB, 512 << 10),
            ("nvtxMemRegionsRegister", "block_alloc", 6 * MIB, 256 << 10),
            ("nvtxMemRegionsUnregister", "block_free", 0, MIB),          # by pointer
            ("nvtxMemRegionsUnregister", "block_free", 4 * MIB, 512 << 10),  # by handle
            ("nvtxMemRegionsResize", "block_free", 6 * MIB, 256 << 10),
            ("nvtxMemRegionsResize", "block_alloc", 6 * MIB, MIB),
            ("nvtxMemRegionsRegister", "block_alloc", 7 * MIB + (512 << 10), 4096),
            ("nvtxMemHeapReset", "block_free", 7 * MIB + (512 << 10), 4096),
        ])

    def test_a_heap_with_a_range_is_the_segment_and_its_name_the_pool(self):
        arena = [e for e in self.blocks() if e["size"] != 4096]
        self.assertTrue(all(e["pool"] == "arena" and int(e["segment"], 16) == self.pool for e in arena))
        self.assertTrue(all(e["device"] == 0 for e in self.blocks()))
        unnamed = [e for e in self.blocks() if e["size"] == 4096]
        self.assertTrue(all(e["pool"].startswith("nvtx heap 0x") and "segment" not in e for e in unnamed))

    def test_report_classes_live_regions_as_block_leaks_and_the_rest_of_the_pool_as_cached(self):
        proc = subprocess.run([REPORT, "--format", "json", self.trace_path], capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        report = json.loads(proc.stdout)
        leaks = sorted((l["level"], l["device"], l["bytes"]) for l in report["leaks"])
        self.assertEqual(leaks, [("block", 0, MIB), ("block", 0, 2 * MIB)])  # the pool itself is no leak
        self.assertEqual(report["summary"]["cached_bytes"], 8 * MIB - 3 * MIB)
        self.assertEqual(report["fragmentation"][0]["at_peak"]["reserved"], 8 * MIB)


class NvtxMemoryWithoutPreload(unittest.TestCase):
    def test_the_program_runs_unchanged_and_records_nothing(self):
        out = tempdir()
        proc = run_traced([program("nvtx_heap")], out, preload=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(trace_files(out), [])


if __name__ == "__main__":
    unittest.main()
