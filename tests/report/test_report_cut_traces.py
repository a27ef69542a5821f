# tests/report/test_report_cut_traces.py — cut and corrupt traces are reported as incomplete.
"""Cut traces (no footer, or cut mid-line as when the disk fills) are marked incomplete: the report
says where the analysis stops, what was live then is not called a leak, and a gate on such a trace
is its own outcome (exit status 3) unless --allow-incomplete. A corrupt .zst is detected by its
frame checksum instead of silently changing the totals."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from reportlib import ReportTestCase, report_json, run_report  # noqa: E402
from tracegen import MiB, Trace  # noqa: E402

EXIT_GATE, EXIT_BAD_INPUT, EXIT_INCOMPLETE = 1, 2, 3


class CutTraces(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory(prefix="gpumem-cut-")

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def model_trace(self, name, footer):
        """load_model() allocates 252 MiB that a clean run frees before exit; `work()` leaks 4 MiB."""
        t = Trace(self.path(name))
        model = t.stack("load_model", 12)
        work = t.stack("work", 30)
        t.alloc(0x10000000, 252 * MiB, model)
        t.alloc(0x20000000, 4 * MiB, work)
        if footer:
            t.free(0x10000000)
        t.close(footer)
        return t.f.name

    def disk_full_trace(self):
        """The complete trace cut at an arbitrary byte, mid-line: what a full disk leaves."""
        complete = self.model_trace("complete.jsonl", footer=True)
        with open(complete, "rb") as f:
            data = f.read()
        cut = data[: data.rindex(b'"op":"free"') + 5]
        path = self.path("disk_full.jsonl")
        with open(path, "wb") as f:
            f.write(cut)
        return path

    def test_zst_cut_before_its_first_line_is_cut_not_empty(self):
        # A process killed before the first block of its trace was written leaves a frame without a
        # block: a cut trace (an error alone, skipped with a warning among several), not an empty file.
        with open(os.path.join(HERE, "real", "capped.jsonl.zst"), "rb") as f:
            data = f.read()
        said = "compressed stream cut short before its first line: the process was killed before its trace's first block was written"
        for size in (4, 12, 100):
            cut = self.path("cut%d.jsonl.zst" % size)
            with open(cut, "wb") as f:
                f.write(data[:size])
            proc = run_report(cut)
            self.assertEqual((proc.returncode, proc.stderr), (EXIT_BAD_INPUT, f"gpumem-report: error: {cut}:1: {said}\n"))
        folder = self.path("run")
        os.mkdir(folder)
        os.rename(self.path("cut12.jsonl.zst"), os.path.join(folder, "cut12.jsonl.zst"))
        with open(os.path.join(folder, "whole.jsonl.zst"), "wb") as f:
            f.write(data)
        proc = run_report(folder, check_rc=0)
        self.assertIn(f"gpumem-report: warning: {folder}/cut12.jsonl.zst:1: {said}; skipped", proc.stderr)
        self.assertIn("OOM (device 0)", proc.stdout)

    def test_cut_trace_says_where_the_analysis_stops(self):
        proc = run_report(self.disk_full_trace(), check_rc=0)
        self.assertRegex(proc.stdout, r"INCOMPLETE: cut at [0-9.]+ .s: the analysis covers up to [0-9.]+ .s")
        self.assertIn("live when the trace was cut (not leaks): 256.0 MiB", proc.stdout)
        self.assertNotIn("leaks: 256", proc.stdout)

    def test_cut_trace_asserts_no_leak(self):
        report = report_json(self.disk_full_trace())
        process = report["processes"][0]
        self.assertTrue(process["cut"])
        self.assertTrue(process["truncated"])
        self.assertEqual(process["leaked_bytes"], 0)
        self.assertEqual(report["summary"]["leaked_bytes"], 0)
        self.assertEqual(report["summary"]["live_when_cut_bytes"], 256 * MiB)
        self.assertTrue(all(leak["live_when_cut"] for leak in report["leaks"]))
        self.assertEqual(process["devices"][0]["leaked_bytes"], 0)

    def test_gate_on_cut_trace_is_exit_3(self):
        for path in (self.disk_full_trace(), self.model_trace("killed.jsonl", footer=False)):
            for gate in ("--fail-on-leak", "--fail-on-growth"):
                proc = run_report(gate, path)
                self.assertEqual(proc.returncode, EXIT_INCOMPLETE, proc.stderr)
                lines = proc.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertIn(f"INCOMPLETE: {path}: cut at", lines[0])
                self.assertNotIn("FAILED", proc.stderr)
            # No gate asked for: a report, exit 0.
            self.assertEqual(run_report(path).returncode, 0)

    def test_allow_incomplete_gates_on_what_was_recorded(self):
        path = self.disk_full_trace()
        proc = run_report("--fail-on-leak", "--allow-incomplete", path)
        self.assertEqual(proc.returncode, 0, proc.stderr)  # live when cut is not a leak
        self.assertEqual(proc.stderr, "")

    def test_complete_trace_still_fails_the_gate(self):
        complete = self.model_trace("complete.jsonl", footer=True)
        proc = run_report("--fail-on-leak", complete)
        self.assertEqual(proc.returncode, EXIT_GATE, proc.stderr)
        self.assertIn("leaked 4.0 MiB", proc.stderr)
        # A real failure wins over a cut trace beside it.
        proc = run_report("--fail-on-leak", complete, self.disk_full_trace())
        self.assertEqual(proc.returncode, EXIT_GATE, proc.stderr)
        self.assertIn("INCOMPLETE", proc.stderr)

    def capped_trace(self):
        """30 MiB live at most before the cap (at 4 us); 500 MiB allocated long after it, live at the end."""
        t = Trace(self.path("capped.jsonl"))
        early, late = t.stack("early", 5), t.stack("late_alloc", 9)
        t.alloc(0x1000, 10 * MiB, early)
        t.alloc(0x2000000, 20 * MiB, early)
        t.free(0x1000)
        t.capped()
        t.live(0x9000000, 500 * MiB, late, seq=t.seq + 500, t=t.t + 50_000_000)
        t.live(0x2000000, 20 * MiB, early, seq=2, t=t.t - 1000)
        t.close(end_time=t.t + 60_000_000, not_written=800)
        return t.f.name

    def test_capped_trace_peak_is_the_recorded_parts(self):
        # Issue 19: memory allocated long after the cap was placed in the peak, at the cap's time.
        path = self.capped_trace()
        r = report_json(path)
        (peak,) = r["peaks"]
        self.assertEqual(peak["bytes"], 30 * MiB)
        self.assertLess(peak["time_ns"] - 1_000_000_000, 4000)  # before the cap
        self.assertNotIn("late_alloc", json.dumps(peak["culprits"]))
        (device,) = r["processes"][0]["devices"]
        self.assertEqual((device["allocations"], device["frees"], device["peak_bytes"]), (2, 1, 30 * MiB))
        self.assertEqual(device["after_cap"], {"live_bytes": 520 * MiB, "allocated_bytes": 0})
        self.assertTrue(all(s["reserved"] <= 30 * MiB for s in device["timeline"]), device["timeline"])
        self.assertEqual(r["summary"]["peak_bytes"], 30 * MiB)
        # The leaks are still what was live at the end, made after the cap or before.
        self.assertEqual(sorted(leak["bytes"] for leak in r["leaks"]), [20 * MiB, 500 * MiB])
        text = run_report(path).stdout
        self.assertIn("peak 30.0 MiB up to the cap; 520.0 MiB live at the end (after the cap, time unknown)", text)
        self.assertIn("after the cap, time unknown: 520.0 MiB live at the end", text)
        # Without the cap the same trace has no after_cap figures.
        self.assertIsNone(report_json(self.model_trace("plain.jsonl", True))["processes"][0]["devices"][0]["after_cap"])

    def test_corrupt_zst_is_detected_by_its_checksum(self):
        t = Trace(self.path("run.jsonl"))
        s = t.stack("work", 30)
        for i in range(200):
            t.alloc(0x10000000 + i * MiB, MiB, s)
        t.close()
        # Raw literals: a flipped bit changes the text, not the decoding, which is what only a
        # checksum can catch.
        subprocess.run(["zstd", "-q", "-1", "--no-compress-literals", "--check", t.f.name, "-o", self.path("run.jsonl.zst")], check=True)
        with open(self.path("run.jsonl.zst"), "rb") as f:
            data = bytearray(f.read())
        self.assertTrue(data[4] & 0x04, "the frame has no content checksum")
        host = data.index(b"node1")  # the header's host: a change the reader cannot see by itself
        data[host + 4] ^= 0x01  # '1' -> '0'
        with open(self.path("flipped.jsonl.zst"), "wb") as f:
            f.write(data)
        proc = run_report(self.path("flipped.jsonl.zst"))
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT, proc.stdout)
        self.assertIn("checksum", proc.stderr)


class EmptyTracesAmongOthers(ReportTestCase):
    """A child that ends (os._exit) before its recorder writes leaves a 0-byte or header-only trace
    beside the others: a warning for that file, never a failure of the run, whether the traces come
    as a directory or as files given together (as `gpumemtrace ci` gives them)."""

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory(prefix="gpumem-empty-")
        self.dir = self.tmp.name
        t = Trace(os.path.join(self.dir, "parent.jsonl"), pid=100)
        s = t.stack("work", 30)
        t.alloc(0x1000, MiB, s)
        t.free(0x1000)
        t.close()
        open(os.path.join(self.dir, "child-0ms.jsonl"), "w").close()
        Trace(os.path.join(self.dir, "child-header.jsonl"), pid=102).close(footer=False)

    def tearDown(self):
        self.tmp.cleanup()

    def test_empty_traces_are_warnings(self):
        proc = run_report("--fail-on-leak", "--format", "json", self.dir)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        warnings = proc.stderr.strip().splitlines()
        self.assertEqual(len(warnings), 2, proc.stderr)
        self.assertIn("child-0ms.jsonl: empty (0 bytes)", warnings[0])
        self.assertIn("child-header.jsonl: a header only", warnings[1])
        report = json.loads(proc.stdout)
        self.assertEqual([p["pid"] for p in report["processes"]], [100])

    def test_empty_files_given_together_are_warnings(self):
        files = [os.path.join(self.dir, name) for name in ("child-0ms.jsonl", "parent.jsonl", "child-header.jsonl")]
        proc = run_report("--fail-on-leak", *files)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr.count("warning:"), 2, proc.stderr)
        self.assertIn("pid 100", proc.stdout)

    def test_an_empty_file_named_alone_is_still_an_error(self):
        proc = run_report(os.path.join(self.dir, "child-0ms.jsonl"))
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        self.assertIn("empty file", proc.stderr)

    def test_a_directory_of_empty_traces_is_an_error(self):
        os.remove(os.path.join(self.dir, "parent.jsonl"))
        proc = run_report(self.dir)
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        self.assertIn("every trace given is empty", proc.stderr.strip().splitlines()[-1])
