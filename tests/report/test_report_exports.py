# tests/report/test_report_exports.py — the Perfetto and folded exports: golden files and format rules.
"""`--format perfetto` and `--format folded`: golden files, and the Trace Event Format and folded
line rules checked on their own. Regenerate the goldens with
`python3 tests/report/test_report_exports.py --update` (and read the diff)."""
import json
import os
import re
import shutil
import sys
import tempfile
import unittest

from demo_trace import write_training_trace
from reportlib import REPORT, ReportTestCase, report_json, run_report

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden_exports")
TRACES = {name: os.path.join(HERE, "golden", name + ".jsonl") for name in ("blocks", "mixed")}
TRACES["train"] = os.path.join(GOLDEN, "train.jsonl")  # demo_trace.py, 3 steps
CASES = [(name, fmt) for name in TRACES for fmt in ("perfetto.json", "peak.folded", "leaks.folded")]
FORMAT_ARGS = {"perfetto.json": ["--format", "perfetto"], "peak.folded": ["--format", "folded"],
               "leaks.folded": ["--folded=leaks"]}
REQUIRED = {"M": {"name", "ph", "pid", "tid", "args"}, "C": {"name", "ph", "ts", "pid", "args"},
            "i": {"name", "ph", "ts", "pid", "tid", "s"}, "X": {"name", "ph", "ts", "dur", "pid", "tid"}}
FOLDED_LINE = re.compile(r"^[^;\n]+(;[^;\n]+)* \d+$")


def output(name, fmt):
    return run_report(*FORMAT_ARGS[fmt], TRACES[name], check_rc=0).stdout


class Exports(ReportTestCase):
    def test_golden_outputs(self):
        for name, fmt in CASES:
            with self.subTest(trace=name, format=fmt):
                with open(os.path.join(GOLDEN, f"{name}.{fmt}")) as f:
                    expected = f.read()
                self.maxDiff = None
                self.assertEqual(output(name, fmt), expected)

    def test_perfetto_follows_the_trace_event_format(self):
        for name in TRACES:
            with self.subTest(trace=name):
                doc = json.loads(output(name, "perfetto.json"))
                events = doc["traceEvents"]
                self.assertTrue(events)
                last_ts, seen_non_meta, per_track = -1.0, False, {}
                for e in events:
                    self.assertIn(e["ph"], REQUIRED)
                    self.assertLessEqual(REQUIRED[e["ph"]], set(e), e)
                    if e["ph"] == "M":
                        self.assertFalse(seen_non_meta, "metadata after timed events")
                        self.assertIn(e["name"], ("process_name", "thread_name"))
                        continue
                    seen_non_meta = True
                    self.assertGreaterEqual(e["ts"], last_ts, "events out of order")
                    last_ts = e["ts"]
                    track = (e["pid"], e.get("tid"), e["name"] if e["ph"] == "C" else e["ph"])
                    self.assertGreaterEqual(e["ts"], per_track.get(track, -1.0))
                    per_track[track] = e["ts"]
                    if e["ph"] == "C":
                        self.assertTrue(all(isinstance(v, int) and v >= 0 for v in e["args"].values()), e)
                    if e["ph"] == "i":
                        self.assertIn(e["s"], ("g", "p", "t"))
                    if e["ph"] == "X":
                        self.assertGreaterEqual(e["dur"], 0)

    def test_perfetto_counters_are_the_reports_timeline_in_microseconds(self):
        doc = json.loads(output("train", "perfetto.json"))
        counters = [e for e in doc["traceEvents"] if e["ph"] == "C" and not e["name"].endswith(" by role")]
        timeline = report_json(TRACES["train"])["processes"][0]["devices"][0]["timeline"]
        self.assertEqual([(c["ts"], c["args"]["reserved"], c["args"]["allocated"]) for c in counters],
                         [(s["time_ns"] / 1000, s["reserved"], s["allocated"]) for s in timeline])
        # The role track: each sample's split adds up to its reserved bytes.
        by_role = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"].endswith(" by role")]
        with_roles = [s for s in timeline if "roles" in s]
        self.assertEqual(len(by_role), len(with_roles))
        for c, s in zip(by_role, with_roles):
            self.assertEqual(c["args"], s["roles"])
            self.assertEqual(sum(c["args"].values()), s["reserved"])
        names = [e["name"] for e in doc["traceEvents"] if e["ph"] == "i"]
        self.assertIn("OOM: capacity (gpumemtrace_block_oom)", names)
        self.assertIn("step 2 backward", names)

    def test_folded_lines_add_up_to_the_peak_and_the_leaks(self):
        for name in TRACES:
            with self.subTest(trace=name):
                report = report_json(TRACES[name])
                peak = sum(p["allocated"]["bytes"] if "allocated" in p else p["bytes"] for p in report["peaks"])
                for fmt, total in (("peak.folded", peak),
                                   ("leaks.folded", report["summary"]["leaked_bytes"])):
                    lines = output(name, fmt).splitlines()
                    for line in lines:
                        self.assertRegex(line, FOLDED_LINE)
                    self.assertEqual(sum(int(line.rsplit(" ", 1)[1]) for line in lines), total)

    def test_folded_starts_with_a_pid_frame_for_several_processes(self):
        with tempfile.TemporaryDirectory() as d:
            write_training_trace(os.path.join(d, "a.jsonl"), steps=1, pid=11)
            write_training_trace(os.path.join(d, "b.jsonl"), steps=1, pid=12)
            roots = {line.split(";", 1)[0] for line in run_report("--format", "folded", d, check_rc=0).stdout.splitlines()}
        self.assertEqual(roots, {"pid 11", "pid 12"})

    def test_bad_format_options_exit_2(self):
        for args, message in ((["--format", "svg"], "--format: expected text, json, html, perfetto or folded"),
                              (["--format", "json", "--folded=leaks"], "--folded only applies to --format folded"),
                              (["--folded=stacks"], "--folded: expected peak or leaks"),
                              (["diff", "--format", "html", TRACES["blocks"]], "diff writes text or json only")):
            with self.subTest(args=args):
                proc = run_report(*args, TRACES["blocks"], check_rc=2)
                self.assertIn(message, proc.stderr)


def update():
    write_training_trace(TRACES["train"], steps=3)
    for name, fmt in CASES:
        with open(os.path.join(GOLDEN, f"{name}.{fmt}"), "w") as f:
            f.write(output(name, fmt))


if __name__ == "__main__":
    if "--update" in sys.argv:
        update()
    else:
        unittest.main()
