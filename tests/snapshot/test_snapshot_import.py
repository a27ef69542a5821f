# tests/snapshot/test_snapshot_import.py — PyTorch snapshot import: conversion and analysis of real pickles.
"""PyTorch snapshot import: pickles written at test time by Python's own pickle module (plain dicts
shaped like torch.cuda.memory._dump_snapshot output), converted by build/gpumem-snapshot2trace and,
where build/gpumem-report exists, analyzed by it (`--format json`, the report's keys)."""
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import snapshot_samples as samples  # noqa: E402

BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(os.path.dirname(os.path.dirname(HERE)), "build"))
CONVERT = os.path.join(BUILD, "gpumem-snapshot2trace")
REPORT = os.path.join(BUILD, "gpumem-report")
MiB = samples.MiB


def read_trace(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class SnapshotTestCase(unittest.TestCase):
    def setUp(self):
        if not os.access(CONVERT, os.X_OK):
            self.skipTest(f"{CONVERT} not built")
        self.tmp = tempfile.TemporaryDirectory(prefix="gpumem-snapshot-test-")
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, snap, protocol=pickle.DEFAULT_PROTOCOL):
        path = os.path.join(self.tmp.name, name + ".pickle")
        samples.dump(snap, path, protocol)
        return path

    def convert(self, pickle_path, expect_rc=0):
        out = pickle_path + ".jsonl"
        proc = subprocess.run([CONVERT, pickle_path, out], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, expect_rc, proc.stderr)
        return out, proc

    def events(self, records):
        return [r for r in records if r["type"] == "event"]

    def stack_functions(self, records, stack_id):
        frames = {r["id"]: r for r in records if r["type"] == "frame"}
        stacks = {r["id"]: r for r in records if r["type"] == "stack"}
        return [frames[f]["function"] for f in stacks[stack_id]["frames"]] if stack_id else []

    def report(self, trace, *options):
        if not os.access(REPORT, os.X_OK):
            self.skipTest(f"{REPORT} not built")
        proc = subprocess.run([REPORT, "--format", "json", *options, trace], capture_output=True, text=True,
                              timeout=60)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        return json.loads(proc.stdout), proc.returncode


class TraceShape(SnapshotTestCase):
    def check_invariants(self, records):
        self.assertEqual(records[0]["type"], "header")
        self.assertEqual(records[0]["format"], "gpumemtrace")
        self.assertEqual(records[0]["version"], 1)
        self.assertEqual(records[-1]["type"], "footer")
        defined_frames, defined_stacks, last_seq = set(), {0}, 0
        for r in records[1:-1]:
            if r["type"] == "frame":
                self.assertNotIn(r["id"], defined_frames)
                self.assertIn(r["lang"], ("python", "native"))
                defined_frames.add(r["id"])
            elif r["type"] == "stack":
                self.assertTrue(set(r["frames"]) <= defined_frames, r)
                defined_stacks.add(r["id"])
            elif r["type"] == "event":
                self.assertGreater(r["seq"], last_seq)
                last_seq = r["seq"]
                self.assertIn(r["stack"], defined_stacks)
                self.assertTrue(r["addr"].startswith("0x"))
        self.assertEqual(records[-1]["events"], len(self.events(records)))

    def test_every_sample_every_protocol(self):
        for name, build in samples.SAMPLES.items():
            for proto in range(2, 6):
                with self.subTest(sample=name, protocol=proto):
                    out, _ = self.convert(self.write(f"{name}-{proto}", build(), proto))
                    self.check_invariants(read_trace(out))

    def test_planted_leak_events(self):
        out, proc = self.convert(self.write("leak", samples.planted_leak()))
        records = read_trace(out)
        ev = self.events(records)
        # Initial state (t = 0): segment B, the 512 KiB "setup" block, the 1 KiB block freed later.
        self.assertEqual([(e["op"], e["size"]) for e in ev[:3]],
                         [("alloc", 2 * MiB), ("block_alloc", 512 * 1024), ("block_alloc", 1024)])
        self.assertEqual(self.stack_functions(records, ev[1]["stack"])[0], "setup")
        self.assertEqual(ev[2]["stack"], 0)  # allocated before the history window: stack unknown
        leak = [e for e in ev if e["op"] == "block_alloc" and e["size"] == 4 * MiB]
        self.assertEqual(len(leak), 1)
        self.assertEqual(leak[0]["api"], "torch.alloc")
        self.assertEqual(leak[0]["segment"], hex(samples.SEG_A))
        functions = self.stack_functions(records, leak[0]["stack"])
        self.assertEqual(functions[0], "leaky_buffer")
        lang = {r["function"]: r["lang"] for r in records if r["type"] == "frame"}
        self.assertEqual(lang["at::empty"], "native")
        self.assertEqual(lang["leaky_buffer"], "python")
        frees = [e for e in ev if e["op"] == "block_free"]
        self.assertEqual([e["api"] for e in frees], ["torch.free_completed"] * 2)  # free_requested not doubled
        self.assertIn("1 initial segments, 2 initial blocks", proc.stderr)

    def test_fragmentation_oom_events(self):
        out, _ = self.convert(self.write("oom", samples.fragmentation_oom()))
        ev = self.events(read_trace(out))
        oom = [e for e in ev if e["op"] == "block_oom"]
        self.assertEqual(len(oom), 1)
        self.assertEqual(oom[0]["size"], 4 * MiB)
        self.assertEqual(oom[0]["free"], 1 * MiB)  # on the OOM itself, as the live hook writes it

    def test_two_devices_and_expandable_segments(self):
        out, _ = self.convert(self.write("dev", samples.two_devices_expandable()))
        ev = self.events(read_trace(out))
        self.assertEqual(sorted({e["device"] for e in ev}), [0, 1])
        ts = [e["t"] for e in ev]
        self.assertEqual(ts, sorted(ts))  # devices merged by time
        maps = [e for e in ev if e["op"] == "map"]
        self.assertEqual(len(maps), 2)
        self.assertTrue(all(m["handle"] == m["addr"] for m in maps))
        phys = [(e["op"], e["size"]) for e in ev if e["kind"] == "physical" and e["op"] in ("alloc", "free")]
        self.assertEqual(phys, [("alloc", 2 * MiB), ("alloc", 2 * MiB), ("free", 2 * MiB)])


class ReportOnSnapshots(SnapshotTestCase):
    def test_leak(self):
        out, _ = self.convert(self.write("leak", samples.planted_leak()))
        report, _ = self.report(out)
        for key in ("summary", "leaks", "peaks", "ooms", "growth", "fragmentation"):
            self.assertIn(key, report)
        # PyTorch blocks live in a snapshot are alive, not leaks of the process.
        self.assertEqual(report["leaks"], [])
        leaks = sorted(report["held_at_exit"], key=lambda l: -l["bytes"])
        self.assertEqual({l["reason"] for l in leaks}, {"alive_at_exit"})
        self.assertEqual(leaks[0]["bytes"], 4 * MiB)
        self.assertEqual(leaks[0]["count"], 1)
        self.assertEqual(leaks[0]["stack"][0]["function"], "leaky_buffer")
        self.assertEqual(leaks[0]["stack"][0]["line"], 42)
        self.assertIn(512 * 1024, [l["bytes"] for l in leaks])
        _, rc = self.report(out, "--fail-on-leak")
        self.assertEqual(rc, 0)
        _, rc = self.report(out, "--fail-on-leak", "--count-alive-at-exit")
        self.assertEqual(rc, 1)
        _, rc = self.report(out, "--fail-on-leak=8MiB", "--count-alive-at-exit")
        self.assertEqual(rc, 0)

    def test_fragmentation_oom(self):
        out, _ = self.convert(self.write("oom", samples.fragmentation_oom()))
        report, _ = self.report(out)
        self.assertEqual(len(report["ooms"]), 1)
        oom = report["ooms"][0]
        self.assertEqual(oom["requested"], 4 * MiB)
        self.assertEqual(oom["verdict"], "fragmentation")
        self.assertEqual(oom["stack"][0]["function"], "big_alloc")
        self.assertEqual(oom["live_bytes"], 20 * MiB)

    def test_accumulation(self):
        out, _ = self.convert(self.write("acc", samples.accumulation()))
        report, _ = self.report(out)
        self.assertEqual(report["leaks"], [])
        sites = [g["stack"][0] for g in report["growth"]]
        self.assertIn(("train_step", 88), [(s["function"], s.get("line")) for s in sites])
        self.assertNotIn("forward", [s["function"] for s in sites])
        _, rc = self.report(out, "--fail-on-growth")
        self.assertEqual(rc, 1)

    def test_clean(self):
        out, _ = self.convert(self.write("clean", samples.clean()))
        report, _ = self.report(out)
        self.assertEqual(report["leaks"], [])
        self.assertEqual(report["growth"], [])
        _, rc = self.report(out, "--fail-on-leak", "--fail-on-growth")
        self.assertEqual(rc, 0)

    def test_report_reads_the_pickle_directly(self):
        """gpumem-report takes the pickle itself, through the converter."""
        path = self.write("direct", samples.planted_leak())
        if not os.access(REPORT, os.X_OK):
            self.skipTest(f"{REPORT} not built")
        proc = subprocess.run([REPORT, "--format", "json", path], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        report = json.loads(proc.stdout)
        self.assertEqual(max(l["bytes"] for l in report["held_at_exit"]), 4 * MiB)


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch " + self.marker,))


class Plain:
    def __init__(self):
        self.x = 1


class MaliciousPickles(SnapshotTestCase):
    def check_rejected(self, data, opcode):
        path = os.path.join(self.tmp.name, "evil.pickle")
        with open(path, "wb") as f:
            f.write(data)
        out, proc = self.convert(path, expect_rc=2)
        self.assertIn(opcode, proc.stderr)
        self.assertIn("forbidden pickle opcode", proc.stderr)
        self.assertIn("offset", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertFalse(os.path.exists(out), "no partial output is left behind")
        return path

    def test_global_reduce_protocol2(self):
        marker = os.path.join(self.tmp.name, "pwned")
        self.check_rejected(pickle.dumps(Evil(marker), protocol=2), "GLOBAL")
        self.assertFalse(os.path.exists(marker))

    def test_stack_global_protocol4(self):
        marker = os.path.join(self.tmp.name, "pwned")
        self.check_rejected(pickle.dumps(Evil(marker), protocol=4), "STACK_GLOBAL")
        self.assertFalse(os.path.exists(marker))

    def test_reduce_alone(self):
        self.check_rejected(b"\x80\x02N)R.", "REDUCE")

    def test_object_hidden_inside_a_snapshot(self):
        snap = samples.planted_leak()
        snap["allocator_settings"]["extra"] = Plain()
        self.check_rejected(pickle.dumps(snap, protocol=5), "STACK_GLOBAL")

    def test_report_rejects_too(self):
        if not os.access(REPORT, os.X_OK):
            self.skipTest(f"{REPORT} not built")
        path = os.path.join(self.tmp.name, "evil.pickle")
        with open(path, "wb") as f:
            f.write(pickle.dumps(Evil(os.path.join(self.tmp.name, "pwned")), protocol=4))
        proc = subprocess.run([REPORT, path], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "pwned")))


class BadInput(SnapshotTestCase):
    def run_bad(self, data, needle):
        path = os.path.join(self.tmp.name, "bad.pickle")
        with open(path, "wb") as f:
            f.write(data)
        _, proc = self.convert(path, expect_rc=2)
        self.assertIn(needle, proc.stderr)

    def test_truncated(self):
        data = pickle.dumps(samples.planted_leak(), protocol=4)
        for cut in (1, 2, 10, len(data) // 2, len(data) - 1):
            with self.subTest(cut=cut):
                self.run_bad(data[:cut], "truncated")

    def test_not_a_snapshot(self):
        self.run_bad(pickle.dumps([1, 2, 3], protocol=4), "not a dict")
        self.run_bad(pickle.dumps({"a": 1}, protocol=4), "not a PyTorch memory snapshot")
        self.run_bad(pickle.dumps(42, protocol=4), "not a PyTorch memory snapshot")

    def test_text_protocol(self):
        self.run_bad(pickle.dumps({"segments": []}, protocol=0), "protocols 2 to 5")

    def test_missing_file_and_usage(self):
        proc = subprocess.run([CONVERT, os.path.join(self.tmp.name, "nope.pickle"), "-"], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("cannot open", proc.stderr)
        proc = subprocess.run([CONVERT], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)


if __name__ == "__main__":
    unittest.main()
