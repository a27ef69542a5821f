# tests/report/test_report_allocator_cases.py — caching-allocator cases: what counts as cached, held or leaked.
"""Caching-allocator cases of gpumem-report (docs/report.md, "What is counted"):
PyTorch physical chunks (snapshot segment_map, live cuMemCreate mapped where PyTorch said it mapped)
are cached memory, not leaks, when block data exists; live PyTorch segment events are counted once
with the runtime's cudaMalloc/cudaFree; a segment freed with live blocks warns instead of reporting
the blocks as leaks."""
import os
import tempfile

from reportlib import ReportTestCase, functions, report_json
from tracegen import MiB, Trace

SEG = 0x7F0000000000


class AllocatorCases(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def trace(self, name):
        t = Trace(os.path.join(self.tmp.name, name))
        t.path = os.path.join(self.tmp.name, name)
        return t

    def torch_block(self, t, op, addr, size, stack, segment):
        api = "torch.alloc" if op == "block_alloc" else "torch.free_requested"
        t.event(op, "block", addr, size, stack, api=api, segment="0x%x" % segment)

    def test_snapshot_physical_chunks_are_cached(self):
        # As the snapshot importer writes an expandable segment: chunk = physical alloc (handle = its
        # address) + map; one 1 MiB block live in the first 2 MiB chunk at the end.
        t = self.trace("snap.jsonl")
        grow, use = t.stack("grow", 20), t.stack("use", 21)
        for i in range(2):
            t.event("alloc", "physical", SEG + i * 2 * MiB, 2 * MiB, grow, api="torch.segment_map")
            t.event("map", "physical", SEG + i * 2 * MiB, 2 * MiB, grow, api="torch.segment_map",
                    handle="0x%x" % (SEG + i * 2 * MiB))
        self.torch_block(t, "block_alloc", SEG, MiB, use, SEG)
        self.torch_block(t, "block_alloc", SEG + 2 * MiB, 2 * MiB, use, SEG)
        self.torch_block(t, "block_free", SEG + 2 * MiB, 2 * MiB, use, SEG)
        t.close()
        r = report_json(t.path)
        self.assertEqual(r["leaks"], [])  # PyTorch blocks live at the end: alive, not leaked
        self.assertEqual([(l["level"], l["bytes"]) for l in r["held_at_exit"]], [("block", MiB)])
        self.assertEqual(functions(r["held_at_exit"][0]["stack"])[1], "use")
        self.assertEqual(r["processes"][0]["devices"][0]["cached_bytes"], 3 * MiB)

    def test_physical_chunks_without_block_data_still_leak(self):
        t = self.trace("vmm.jsonl")
        create = t.stack("create_chunk", 30)
        t.event("alloc", "physical", 0x1234, 2 * MiB, create, api="cuMemCreate", result=0)
        t.event("map", "physical", SEG, 2 * MiB, create, api="cuMemMap", handle="0x1234", result=0)
        t.close()
        r = report_json(t.path)
        self.assertEqual([(l["level"], l["bytes"]) for l in r["leaks"]], [("physical", 2 * MiB)])

    def test_live_torch_chunks_mapped_where_pytorch_mapped(self):
        # Live process: cuMemCreate/cuMemMap from the driver hooks (native stack), then the drained
        # torch.segment_map (no handle) naming the range; blocks carry the segment.
        t = self.trace("live_vmm.jsonl")
        native, use = t.stack("c10::cuda::ExpandableSegment::map", 40), t.stack("use", 41)
        t.event("alloc", "physical", 0x99, 2 * MiB, native, api="cuMemCreate", result=0)
        t.event("map", "physical", SEG, 2 * MiB, native, api="cuMemMap", handle="0x99", result=0)
        t.event("alloc", "physical", 0x9a, 2 * MiB, native, api="cuMemCreate", result=0)
        t.event("map", "physical", SEG + 2 * MiB, 2 * MiB, native, api="cuMemMap", handle="0x9a", result=0)
        t.event("map", "physical", SEG, 4 * MiB, use, api="torch.segment_map")
        self.torch_block(t, "block_alloc", SEG + MiB, 2 * MiB, use, SEG)  # spans both chunks
        t.close()
        r = report_json(t.path)
        self.assertEqual(r["leaks"], [])
        self.assertEqual([(l["level"], l["bytes"]) for l in r["held_at_exit"]], [("block", 2 * MiB)])
        self.assertEqual(r["processes"][0]["devices"][0]["cached_bytes"], 2 * MiB)

    def test_live_torch_segments_counted_once(self):
        # cudaMalloc/cudaFree from the runtime hooks; the drained torch.segment_alloc/segment_free
        # arrive later (higher seq) and describe the same memory.
        t = self.trace("live_seg.jsonl")
        native, py = t.stack("c10::cuda::CUDACachingAllocator::malloc", 50), t.stack("forward", 51)
        t.alloc(SEG, 20 * MiB, native)
        t.event("alloc", "device", SEG, 20 * MiB, py, api="torch.segment_alloc")
        self.torch_block(t, "block_alloc", SEG, 4 * MiB, py, SEG)
        self.torch_block(t, "block_free", SEG, 4 * MiB, py, SEG)
        t.free(SEG)
        t.alloc(SEG, 6 * MiB, native)  # the address is reused before the drain
        t.event("free", "device", SEG, 0, py, api="torch.segment_free")
        t.free(SEG)
        t.close()
        r = report_json(t.path)
        self.assertEqual(r["leaks"], [])
        dev = r["processes"][0]["devices"][0]
        self.assertEqual((dev["peak_bytes"], dev["unmatched_frees"]), (20 * MiB, 0))
        self.assertEqual(r["processes"][0]["warnings"], [])

    def test_segment_freed_with_live_blocks_warns(self):
        t = self.trace("orphans.jsonl")
        seg, blk = t.stack("grow_pool", 60), t.stack("make_block", 61)
        t.alloc(SEG, 8 * MiB, seg)
        t.block_alloc(SEG, MiB, blk, segment=SEG)
        t.block_alloc(SEG + MiB, MiB, blk, segment=SEG)
        t.block_alloc(SEG + 2 * MiB, MiB, blk, segment=SEG)
        t.block_free(SEG + 2 * MiB)
        t.free(SEG)  # two blocks still live inside
        t.close()
        r = report_json(t.path)
        self.assertEqual(r["leaks"], [])
        warnings = r["processes"][0]["warnings"]
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("2 blocks (2097152 bytes) were still live when their segment was freed", warnings[0])
        self.assertEqual(r["fragmentation"][0]["timeline"][-1]["allocated"], 0)

    def test_delayed_block_free_merged_before_segment_free(self):
        # Live PyTorch: the drained block events (delayed, with their own times) come after the
        # cudaFree of their segment in the file; the reader merges them back by time up to the sync.
        t = self.trace("late.jsonl")
        seg, blk = t.stack("grow_pool", 70), t.stack("make_block", 71)
        t.sync()
        t.alloc(SEG, 8 * MiB, seg)
        t0 = t.t
        t.free(SEG, dt=10000)
        t.alloc(SEG + 8 * MiB, 2 * MiB, seg)  # still live at the end: a leak the order does not change
        t.delayed("block_alloc", "block", SEG, MiB, blk, t0 + 1000, "torch.alloc", segment="0x%x" % SEG)
        t.delayed("block_free", "block", SEG, MiB, blk, t0 + 2000, "torch.free_requested",
                  segment="0x%x" % SEG)
        t.sync(t0 + 5000)
        t.close()
        r = report_json(t.path)
        self.assertEqual([(l["level"], l["bytes"]) for l in r["leaks"]], [("allocation", 2 * MiB)])
        self.assertEqual(r["processes"][0]["warnings"], [])
        dev = r["processes"][0]["devices"][0]
        self.assertEqual((dev["unmatched_frees"], dev["peak_allocated_bytes"]), (0, MiB))
        self.assertEqual(r["peaks"][0]["allocated"]["time_ns"], t0 + 1000)
        self.assertEqual(r["processes"][0]["events"], 5)  # syncs are not memory events

    def test_torch_segment_just_before_its_cudamalloc_counted_once(self):
        # PyTorch's microsecond times and the recorder's can be a microsecond apart either way: the
        # merged torch.segment_alloc (and a block in it) may precede the cudaMalloc it describes.
        t = self.trace("jitter.jsonl")
        native, py = t.stack("c10::cuda::CUDACachingAllocator::malloc", 80), t.stack("forward", 81)
        t.sync()
        t.alloc(SEG, 20 * MiB, native)
        t1 = t.t
        t.free(SEG, dt=10000)
        t.delayed("alloc", "device", SEG, 20 * MiB, py, t1 - 400, "torch.segment_alloc")
        t.delayed("block_alloc", "block", SEG, 4 * MiB, py, t1 - 300, "torch.alloc", segment="0x%x" % SEG)
        t.delayed("block_free", "block", SEG, 4 * MiB, py, t1 + 100, "torch.free_requested")
        t.delayed("free", "device", SEG, 20 * MiB, py, t.t + 200, "torch.segment_free")
        t.sync()
        t.close()
        r = report_json(t.path)
        self.assertEqual(r["leaks"], [])
        self.assertEqual(r["processes"][0]["warnings"], [])
        dev = r["processes"][0]["devices"][0]
        self.assertEqual((dev["peak_bytes"], dev["peak_allocated_bytes"], dev["unmatched_frees"]),
                         (20 * MiB, 4 * MiB, 0))
