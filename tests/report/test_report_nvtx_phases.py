# tests/report/test_report_nvtx_phases.py — NVTX ranges as per-thread phases in gpumem-report.
"""NVTX ranges (scope events of api "nvtx") as per-thread phases in gpumem-report: peaks and OOMs name
the ranges open on their own thread, threads without one fall back to the last mark, start/end ranges
end from any thread, and the Perfetto export draws every range as a slice of its thread."""
import json
import os
import tempfile

from reportlib import ReportTestCase, report_json, run_report
from tracegen import MiB, Trace

TRAINER, LOADER = 101, 102


def nvtx(t, op, label, tid, **extra):
    t.event(op, "none", device=-1, api="nvtx", label=label, tid=tid, **extra)


class NvtxPhases(ReportTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gpumemtrace-nvtx-")
        cls.path = os.path.join(cls.dir, "nvtx.jsonl")
        t = Trace(cls.path)
        s = t.stack("step", line=5)
        t.mark("warmup")
        nvtx(t, "scope_begin", "train", TRAINER)
        nvtx(t, "scope_begin", "forward", TRAINER)
        t.alloc(0x1000000, 1 * MiB, s, tid=LOADER)        # no range on its thread: the mark's phase
        t.failed_alloc(64 * MiB, s, tid=LOADER)
        t.alloc(0x2000000, 4 * MiB, s, tid=TRAINER)       # the peak, 5 MiB, inside train/forward
        t.free(0x2000000, tid=TRAINER)
        nvtx(t, "scope_end", "forward", TRAINER)
        nvtx(t, "scope_begin", "prefetch", TRAINER, range=7)
        t.failed_alloc(32 * MiB, s, tid=TRAINER)          # train/prefetch
        nvtx(t, "scope_end", "prefetch", LOADER, range=7)  # ended by another thread
        t.failed_alloc(16 * MiB, s, tid=TRAINER, dt=3_000_000_000)  # train again (a new incident)
        t.event("scope_begin", "none", device=-1, api="gpumemtrace_scope", label="check", tid=TRAINER)
        t.event("scope_end", "none", device=-1, api="gpumemtrace_scope", label="check", tid=TRAINER)
        t.free(0x1000000, tid=LOADER)
        t.close()                                          # "train" is still open at the end

    def test_peaks_and_ooms_name_the_ranges_of_their_own_thread(self):
        report = report_json(self.path)
        self.assertEqual([(p["bytes"], p["phase"]) for p in report["peaks"]], [(5 * MiB, "train/forward")])
        self.assertEqual([(o["requested"], o["phase"]) for o in report["ooms"]],
                         [(64 * MiB, "warmup"), (32 * MiB, "train/prefetch"), (16 * MiB, "train")])

    def test_only_the_other_scopes_are_leak_checks(self):
        self.assertEqual([s["name"] for s in report_json(self.path)["scopes"]], ["check"])

    def test_perfetto_slices_per_thread(self):
        doc = json.loads(run_report("--format", "perfetto", self.path, check_rc=0).stdout)
        slices = sorted((e["name"], e["tid"], e["args"]["closed"], e["args"].get("range"))
                        for e in doc["traceEvents"] if e.get("cat") == "nvtx")
        pushpop = slices[0][1]
        self.assertEqual(slices, [("forward", pushpop, True, None), ("prefetch", pushpop + 1, True, 7),
                                  ("train", pushpop, False, None)])
        names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
        self.assertEqual(names[pushpop], "NVTX ranges, thread %d" % TRAINER)
        self.assertEqual(names[pushpop + 1], "NVTX start/end ranges, thread %d" % TRAINER)
