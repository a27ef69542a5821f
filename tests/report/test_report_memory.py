# tests/report/test_report_memory.py — the analyzer's memory does not grow with the number of events.
"""The analyzer's memory does not grow with the number of events, failed allocations and OOMs
included (docs/report.md, "Limits"): a generated trace of 1M failed allocations (half out of memory,
each followed by a meminfo and a successful allocation, half other errors; 64 call sites) is analyzed
within a fixed max RSS, the same as a tenth of it; so is a trace that opens scopes and never closes
them. Measured on the analyzer process alone."""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from reportlib import REPORT, ReportTestCase, run_measured, skip_bounds_under_sanitizer  # noqa: E402
from tracegen import Trace  # noqa: E402

MiB = 1 << 20
MAX_RSS = 32 * MiB  # the bound documented in docs/report.md; 7.6 MiB by GNU time today

EVENT = ('{"type":"event","seq":%d,"t":%d,"tid":4243,"api":"%s","op":"%s","kind":"device","addr":"0x%x",'
         '"size":%d,"device":0,"stack":%d,"result":%d}\n')
SCOPE_BEGIN = ('{"type":"event","seq":%d,"t":%d,"tid":4243,"api":"pytest","op":"scope_begin","kind":"none",'
               '"device":-1,"label":"tests/test_model.py::test_%0100d","stack":0}\n')
MEMINFO = ('{"type":"event","seq":%d,"t":%d,"tid":4243,"api":"cudaMemGetInfo","op":"meminfo","kind":"none",'
           '"addr":"0x0","size":0,"device":0,"stack":0,"free":1048576,"total":85899345920}\n')


def failures_trace(path, failures):
    """Lines written directly (tracegen's json.dumps per event would take most of the test's time)."""
    t = Trace(path)
    stacks = [t.stack(f"site{i}", 10 + i) for i in range(64)]
    write, seq, now = t.f.write, t.seq, t.t
    for i in range(failures):
        seq, now = seq + 1, now + 1000
        oom = i % 2 == 1
        write(EVENT % (seq, now, "cudaMalloc", "alloc", 0, (i % 4096 + 1) * 4096, stacks[i % 64], 2 if oom else 1))
        if oom:
            write(MEMINFO % (seq + 1, now + 1))
            write(EVENT % (seq + 2, now + 2, "cudaMalloc", "alloc", 0x1000 + i * 4096, 4096, stacks[i % 64], 0))
            write(EVENT % (seq + 3, now + 3, "cudaFree", "free", 0x1000 + i * 4096, 0, 0, 0))
            seq, now = seq + 3, now + 3
    t.seq, t.t = seq, now
    t.close()


@skip_bounds_under_sanitizer
class AnalyzerMemory(ReportTestCase):
    def test_a_million_failed_allocations_in_bounded_memory(self):
        with tempfile.TemporaryDirectory(prefix="gpumem-memory-") as tmp:
            rss = {}
            for failures in (100_000, 1_000_000):
                path = os.path.join(tmp, f"failures-{failures}.jsonl")
                failures_trace(path, failures)
                rc, err, _, rss[failures] = run_measured([REPORT, "--format", "json", "-o", os.devnull, path])
                self.assertEqual(rc, 0, err)
                os.remove(path)
            self.assertLess(rss[1_000_000], MAX_RSS, f"max RSS {rss[1_000_000] / MiB:.1f} MiB for 1M failures")
            # Per-event growth shows as a difference between 100k and 1M failures (0.9 KB each: 800 MB).
            self.assertLess(rss[1_000_000] - rss[100_000], 4 * MiB, rss)

    def test_scopes_never_closed_in_bounded_memory(self):
        with tempfile.TemporaryDirectory(prefix="gpumem-memory-") as tmp:
            t = Trace(os.path.join(tmp, "scopes.jsonl"))
            for i in range(300_000):
                t.f.write(SCOPE_BEGIN % (t.seq + 1 + i, t.t + 1000 * i, i))
            t.seq += 300_000
            t.close()
            rc, err, _, rss = run_measured([REPORT, "--format", "json", "-o", os.devnull, t.f.name])
            self.assertEqual(rc, 0, err)
            self.assertLess(rss, MAX_RSS, f"max RSS {rss / MiB:.1f} MiB for 300k open scopes")
            self.assertIn("scopes opened while 64 were open were not checked", err)
