# tests/report/test_report_snapshot_input.py — gpumem-report reading PyTorch snapshot pickles directly.
"""gpumem-report reading PyTorch snapshot pickles directly (report/import/ wired into the reader):
a pickle is analyzed like the trace it converts to; diff and directories take pickles too; a bad
or hostile pickle is one error line naming the file, exit 2."""
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "snapshot"))

import snapshot_samples as samples  # noqa: E402
from reportlib import BUILD, ReportTestCase, report_json, run_report  # noqa: E402

MiB = 1 << 20
CONVERT = os.path.join(BUILD, "gpumem-snapshot2trace")


class Hostile:
    def __reduce__(self):
        return (os.system, ("true",))


class SnapshotInput(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="gpumem-report-snapshot-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def write(self, name, snap, protocol=4):
        path = os.path.join(self.dir, name)
        samples.dump(snap, path, protocol)
        return path

    def test_pickle_equals_converted_trace(self):
        path = self.write("leak.pickle", samples.planted_leak())
        direct = report_json(path)
        if os.access(CONVERT, os.X_OK):  # the same analysis as the converter's trace file
            trace = os.path.join(self.dir, "leak.jsonl")
            subprocess.run([CONVERT, path, trace], check=True, capture_output=True)
            via_file = report_json(trace)
            for key in ("summary", "leaks", "held_at_exit", "peaks", "ooms", "growth"):
                self.assertEqual(direct[key] if key == "summary" else
                                 [{k: v for k, v in e.items() if k != "file"} for e in direct[key]],
                                 via_file[key] if key == "summary" else
                                 [{k: v for k, v in e.items() if k != "file"} for e in via_file[key]], key)
        # A snapshot's live PyTorch blocks are alive (at the snapshot), not leaks of the process: the
        # gate counts them only when asked to.
        self.assertEqual(direct["leaks"], [])
        self.assertEqual(direct["held_at_exit"][0]["bytes"], 4 * MiB)
        self.assertEqual(direct["held_at_exit"][0]["reason"], "alive_at_exit")
        self.assertEqual(direct["held_at_exit"][0]["stack"][0]["function"], "leaky_buffer")
        self.assertEqual(direct["processes"][0]["file"], path)
        run_report("--fail-on-leak", path, check_rc=0)
        run_report("--fail-on-leak", "--count-alive-at-exit", path, check_rc=1)
        run_report("--fail-on-leak=8MiB", "--count-alive-at-exit", path, check_rc=0)

    def test_any_file_name(self):
        # Recognized by content (a binary pickle), not by its name.
        path = self.write("snapshot.bin", samples.fragmentation_oom(), protocol=2)
        r = report_json(path)
        self.assertEqual([o["verdict"] for o in r["ooms"]], ["fragmentation"])

    def test_diff_of_two_pickles(self):
        base = self.write("base.pickle", samples.clean())
        new = self.write("new.pickle", samples.planted_leak())
        d = report_json("diff", base, new)
        self.assertEqual(d["summary"]["base_leaked_bytes"], 0)
        self.assertEqual(d["summary"]["new_leaked_bytes"], 0)  # PyTorch blocks: alive, not leaked
        self.assertEqual(len(d["peaks"]), 1)  # one device, compared
        run_report("diff", "--fail-on-peak-increase=0", new, new, check_rc=0)

    def test_directory_with_pickles(self):
        sub = os.path.join(self.dir, "runs")
        os.makedirs(sub)
        self.write("runs/rank0.pickle", samples.clean())
        self.write("runs/rank1.pkl", samples.planted_leak())
        r = report_json(sub)
        self.assertEqual(r["summary"]["processes"], 2)
        self.assertEqual([os.path.basename(p["file"]) for p in r["processes"]], ["rank0.pickle", "rank1.pkl"])

    def check_error(self, path, needle):
        proc = run_report(path, check_rc=2)
        lines = proc.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn(path, lines[0])
        self.assertIn(needle, lines[0])
        self.assertEqual(proc.stdout, "")

    def test_hostile_pickle(self):
        path = os.path.join(self.dir, "evil.pickle")
        with open(path, "wb") as f:
            f.write(pickle.dumps(Hostile(), protocol=4))
        self.check_error(path, "forbidden pickle opcode")

    def test_truncated_pickle(self):
        data = pickle.dumps(samples.planted_leak(), protocol=4)
        path = os.path.join(self.dir, "cut.pickle")
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])
        self.check_error(path, "PyTorch snapshot")

    def test_not_a_snapshot(self):
        path = os.path.join(self.dir, "list.pickle")
        with open(path, "wb") as f:
            f.write(pickle.dumps(42, protocol=4))
        self.check_error(path, "PyTorch snapshot")


if __name__ == "__main__":
    unittest.main()


class SnapshotWarnings(ReportTestCase):
    def test_converter_warnings_reach_the_report(self):
        # The history frees a block that the final state still holds: the converter warns, and the
        # warning is the report's (JSON: on stderr and in processes[].warnings; text: in the report).
        work = tempfile.mkdtemp(prefix="gpumem-report-snapshot-")
        self.addCleanup(shutil.rmtree, work, True)
        h = samples.History()
        h.add("segment_alloc", samples.SEG_A, 2 * MiB, samples.py_stack("setup", 1))
        h.free(samples.SEG_A, MiB)
        segs = [samples.segment(samples.SEG_A, 2 * MiB, [(MiB, 0, "active_allocated", samples.py_stack("keep", 2)),
                                                          (MiB, 0, "inactive", None)])]
        path = os.path.join(work, "inconsistent.pickle")
        samples.dump(samples.snapshot(segs, [h.entries]), path)
        proc = run_report("--format", "json", path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        import json
        warnings = json.loads(proc.stdout)["processes"][0].get("warnings", [])
        # One line names what is inconsistent (the first contradiction among them).
        inconsistent = [w for w in warnings if w.startswith("PyTorch snapshot: inconsistent snapshot: ")]
        self.assertEqual(len(inconsistent), 1, warnings)
        self.assertIn("free of a block live after it", inconsistent[0])
        self.assertIn("free of a block live after it", proc.stderr)
        text = run_report(path)
        self.assertIn("free of a block live after it", text.stdout)


class SnapshotOddNumbers(ReportTestCase):
    def test_float_nan_and_negative_sizes_are_warned_about(self):
        # Sizes that are not whole numbers of bytes used to become 0 without a word (issue 20).
        work = tempfile.mkdtemp(prefix="gpumem-report-snapshot-")
        self.addCleanup(shutil.rmtree, work, True)
        for odd in (1.5e6, float("nan"), -4096):
            with self.subTest(value=odd):
                snap = samples.planted_leak()
                snap["device_traces"][0][1]["size"] = odd  # the 4 MiB block's alloc entry
                path = os.path.join(work, "odd.pickle")
                samples.dump(snap, path)
                proc = run_report("--format", "json", path)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                import json
                warnings = json.loads(proc.stdout)["processes"][0]["warnings"]
                self.assertTrue(any("held something else" in w and "the first: size = " in w for w in warnings),
                                warnings)
