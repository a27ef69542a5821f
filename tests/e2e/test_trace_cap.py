# tests/e2e/test_trace_cap.py — the trace size cap (GPUMEMTRACE_MAX_BYTES) end to end.
"""End-to-end test of the trace size cap (GPUMEMTRACE_MAX_BYTES, docs/configuration.md): a program
making 100k allocations under a 64 KiB cap keeps its output and exit status, its trace stays under
the cap until the bounded live summary, and gpumem-report says where detail stopped and still finds
the leak planted after the cap."""
import json
import os
import subprocess
import unittest

from recorder_testlib import BUILD, Trace, program, run_traced, tempdir, trace_files, tracefile

TRACE_CAP = program("trace_cap")
REPORT = os.path.join(BUILD, "gpumem-report")
CAP = 64 * 1024


class TraceCap(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plain = subprocess.run([TRACE_CAP, "100000"], capture_output=True, text=True, timeout=120,
                                   env=dict(os.environ, LD_LIBRARY_PATH=os.path.join(BUILD, "sim")))
        cls.out = tempdir()
        cls.proc = run_traced([TRACE_CAP, "100000"], cls.out, env={"GPUMEMTRACE_MAX_BYTES": "64K"})
        files = trace_files(cls.out)
        assert len(files) == 1, files
        cls.path = files[0]
        cls.trace = Trace(cls.path)

    def test_program_output_and_status_unchanged(self):
        self.assertEqual(self.plain.returncode, 7, self.plain.stderr)
        self.assertEqual(self.proc.returncode, self.plain.returncode, self.proc.stderr)
        self.assertEqual(self.proc.stdout, self.plain.stdout)
        self.assertIn("GPUMEMTRACE_MAX_BYTES=65536", self.proc.stderr)

    def test_trace_stays_under_the_cap_until_the_live_summary(self):
        lines = tracefile.read_bytes(self.path).split(b"\n")  # the cap counts the text, before zstd
        types = [json.loads(l).get("type", "event") for l in lines if l]  # v2 event lines have no type
        self.assertEqual(types.count("capped"), 1)
        first_live = types.index("live")
        self.assertLessEqual(sum(len(l) + 1 for l in lines[:first_live]), CAP)
        # The summary is bounded by the live set: the planted leak alone (the weights were freed).
        self.assertEqual(types[first_live:], ["live", "footer"])
        capped = next(r for r in self.trace.records if r["type"] == "capped")
        self.assertEqual(capped["max_bytes"], CAP)
        self.assertLessEqual(capped["size"], CAP)
        self.assertGreater(capped["seq"], self.trace.events[-1]["seq"])
        footer = self.trace.footer
        self.assertEqual(footer["events"], len(self.trace.events))
        # Every allocation and free was consumed: written, or counted as not written.
        # Every event before the cap was written; every allocation and free was consumed.
        self.assertEqual(footer["events"], capped["seq"] - 1)
        self.assertGreaterEqual(footer["events"] + footer["not_written"], 2 * 100000 + 3)

    def test_live_record_is_the_leak_with_its_stack(self):
        live = [r for r in self.trace.records if r["type"] == "live"]
        self.assertEqual([(r["op"], r["kind"], r["size"]) for r in live], [("alloc", "device", 5 << 20)])
        self.assertIn("plant_leak_after_cap", " ".join(self.trace.functions(live[0])))

    def test_report_says_where_detail_stopped_and_finds_the_leak(self):
        proc = subprocess.run([REPORT, "--format", "json", self.path], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        report = json.loads(proc.stdout)
        warnings = report["processes"][0]["warnings"]
        self.assertTrue(any("detail stopped at" in w and "GPUMEMTRACE_MAX_BYTES=65536" in w and
                            "leaks are what was live at the end" in w for w in warnings), warnings)
        leaks = report["leaks"]
        self.assertEqual([leak["bytes"] for leak in leaks], [5 << 20], leaks)
        self.assertIn("plant_leak_after_cap", json.dumps(leaks[0]))
        text = subprocess.run([REPORT, self.path], capture_output=True, text=True, timeout=60).stdout
        self.assertIn("detail stopped at", text)

    def test_memory_freed_after_the_cap_is_not_a_leak(self):
        out = tempdir()
        proc = run_traced([TRACE_CAP, "20000", "clean"], out, env={"GPUMEMTRACE_MAX_BYTES": "64K"})
        self.assertEqual(proc.returncode, 7, proc.stderr)
        [path] = trace_files(out)
        trace = Trace(path)
        self.assertEqual([r["type"] for r in trace.records if r["type"] in ("capped", "live")], ["capped"])
        # The weights were live at the cap and freed after it: the end of the trace says nothing is live.
        report = json.loads(subprocess.run([REPORT, "--format", "json", "--fail-on-leak", path], capture_output=True,
                                           text=True, timeout=60, check=True).stdout)
        self.assertEqual(report["leaks"], [])


if __name__ == "__main__":
    unittest.main()
