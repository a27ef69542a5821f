# tests/python/test_python_control.py — gpumemtrace.start/stop/mark/dump/read from Python.
"""Control from Python (tools/python/gpumemtrace, docs/python-api.md) on the simulated CUDA runtime:
stop() and start() keep every event and drop the stacks in between (pause/resume records, the
report's warning); dump() seals the trace so far into a trace of its own whose report's live memory
is what the program itself held at that moment, while the trace goes on to its normal end; a dump
named against the trace's compression is refused; before the first CUDA call a dump writes nothing
and a pause opens the trace; without the recorder every call does nothing, with one warning. And
read(): the report as typed objects, every key of real reports a declared field.
"""
import dataclasses
import glob
import os
import subprocess
import sys
import tempfile
import unittest

import python_testlib
import tracefile
from python_testlib import BUILD, LIB, PROGS, ROOT, SIM

TOOLS = os.path.join(ROOT, "tools", "python")
PROG = os.path.join(PROGS, "control_prog.py")
REPORT = os.path.join(BUILD, "gpumem-report")
sys.path.insert(0, TOOLS)
import gpumemtrace  # noqa: E402
from gpumemtrace import report as typed  # noqa: E402

MiB = 1 << 20


def run_prog(mode, folder, preload=True):
    """(CompletedProcess, trace path) of control_prog.py MODE, its trace written into `folder`."""
    out = os.path.join(folder, "trace.jsonl.zst")
    env = dict(os.environ, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_QUIET="1", PYTHONPATH=TOOLS)
    python_testlib.set_preload(env, recorder=preload)
    proc = subprocess.run([sys.executable, PROG, SIM, mode, folder], capture_output=True, text=True, env=env,
                          timeout=120)
    return proc, out


def records(path):
    return tracefile.read_records(path)[0]


def allocations(recs):
    """size -> the functions of its stack (innermost first), for each allocation of the trace."""
    frames = {r["id"]: r for r in recs if r["type"] == "frame"}
    stacks = {r["id"]: r["frames"] for r in recs if r["type"] == "stack"}
    return {r["size"]: [frames[f].get("function") for f in stacks.get(r.get("stack", 0), [])]
            for r in recs if r["type"] == "event" and r["op"] == "alloc"}


def printed(proc, key):
    return [line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith(key + " ")]


def extras(obj, path="report"):
    """Every key the typed report kept in an `extra` dict, as "path.key"."""
    if dataclasses.is_dataclass(obj):
        found = [f"{path}.{k}" for k in obj.extra]
        for f in dataclasses.fields(obj):
            found += extras(getattr(obj, f.name), f"{path}.{f.name}")
        return found
    if isinstance(obj, list):
        return [x for item in obj for x in extras(item, path + "[]")]
    return []


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM) and os.path.exists(REPORT),
                     "needs build/libgpumemtrace.so, build/sim/libcudart.so.13 and build/gpumem-report")
class ControlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.proc, cls.trace = run_prog("control", cls.dir.name)
        cls.dumps = printed(cls.proc, "dump")
        cls.live = [int(n) for n in printed(cls.proc, "live")]

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_program_runs_as_it_would(self):
        self.assertEqual((self.proc.returncode, self.proc.stderr), (0, ""))
        self.assertIn("stop True True", self.proc.stdout)
        self.assertIn("start True True", self.proc.stdout)

    def test_stop_keeps_the_events_and_drops_their_stacks(self):
        recs = records(self.trace)
        types = [r["type"] for r in recs]
        self.assertEqual((types.count("pause"), types.count("resume")), (1, 1))  # the second stop() changed nothing
        pause, resume = (next(r for r in recs if r["type"] == t) for t in ("pause", "resume"))
        sizes = [r["size"] for r in recs if r["type"] == "event" and r["op"] == "alloc"]
        self.assertEqual(sizes, [1 * MiB, 2 * MiB, 3 * MiB, 5 * MiB, 7 * MiB])
        between = [r for r in recs if r["type"] == "event" and pause["seq"] < r["seq"] < resume["seq"]]
        self.assertEqual([r["size"] for r in between], [2 * MiB])
        stacks = allocations(recs)
        self.assertEqual(stacks[2 * MiB], [])
        for size in (1, 3, 5, 7):
            self.assertIn("with_stack", stacks[size * MiB], size)

    def test_the_report_says_why_stacks_are_missing(self):
        report = gpumemtrace.read(self.trace)
        self.assertEqual(len(report.processes), 1)
        process = report.processes[0]
        self.assertEqual((process.end, process.cut, process.complete), ("exit", False, True))
        warning = [w for w in process.warnings if "stacks were paused once" in w]
        self.assertEqual(len(warning), 1, process.warnings)
        self.assertIn("gpumemtrace.stop()", warning[0])
        self.assertEqual(report.summary.leaked_bytes, (2 + 3 + 5 + 7) * MiB)  # exact: nothing lost while stopped
        stackless = [leak for leak in report.leaks if not any(f.lang == "python" for f in leak.stack)]
        self.assertEqual([leak.bytes for leak in stackless], [2 * MiB])
        self.assertEqual([m.label for m in process.marks], ["epoch 3"])

    def test_a_dump_is_the_trace_so_far_and_the_trace_goes_on(self):
        self.assertEqual(len(self.dumps), 2, self.proc.stdout)
        default, named = self.dumps
        self.assertEqual(default, os.path.join(self.dir.name, "trace-dump.jsonl.zst"))
        self.assertEqual(named, os.path.join(self.dir.name, "named.jsonl.zst"))
        for path, live, sizes in ((default, self.live[0], [1, 2, 3]), (named, self.live[1], [1, 2, 3, 5])):
            recs = records(path)
            self.assertEqual(recs[-1]["type"], "footer", path)
            self.assertEqual(recs[-1]["end"], "dump")
            self.assertEqual(sorted(allocations(recs)), [s * MiB for s in sizes])
            report = gpumemtrace.read(path)
            process = report.processes[0]
            self.assertEqual((process.end, process.cut, process.complete), ("dump", True, True))
            # What was live at the dump is what the program held then, and is not called a leak.
            self.assertEqual(report.summary.live_when_cut_bytes, live, path)
            self.assertEqual(report.summary.leaked_bytes, 0)
            self.assertTrue(all(leak.live_when_cut for leak in report.leaks))
        self.assertEqual(self.live, [6 * MiB, 10 * MiB, 10 * MiB])
        # The trace itself went on after both: its last allocation came after them.
        self.assertIn(7 * MiB, allocations(records(self.trace)))

    def test_a_dump_named_against_the_trace_compression_is_refused(self):
        errors = printed(self.proc, "error")
        self.assertEqual(len(errors), 1, self.proc.stdout)
        self.assertIn("the trace is compressed (zstd), and so is its dump: name it *.jsonl.zst", errors[0])
        self.assertFalse(os.path.exists(os.path.join(self.dir.name, "plain.jsonl")))

    def test_the_text_report_of_a_dump_says_the_process_was_running(self):
        out = subprocess.run([REPORT, self.dumps[0]], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("still running: a dump of its trace so far", out.stdout)
        self.assertIn("live when the trace was cut (not leaks): 6.0 MiB in 3 allocations", out.stdout)
        # A gate has no verdict on a running process (docs/report.md, "Cut traces").
        gated = subprocess.run([REPORT, "--fail-on-leak", self.dumps[0]], capture_output=True, text=True)
        self.assertEqual(gated.returncode, 3, gated.stdout)

    def test_before_the_first_cuda_call(self):
        with tempfile.TemporaryDirectory() as d:
            proc, trace = run_prog("early", d)
            self.assertEqual((proc.returncode, proc.stderr), (0, ""))
            self.assertIn("early dump None", proc.stdout)
            self.assertIn("nothing is recorded yet", proc.stdout)
            self.assertFalse(os.path.exists(os.path.join(d, "early.jsonl.zst")))
            recs = records(trace)
            kinds = [r["type"] if r["type"] != "event" else r["op"] for r in recs
                     if r["type"] in ("pause", "resume") or r.get("op") == "alloc"]
            self.assertEqual(kinds, ["pause", "alloc", "resume", "alloc"])
            stacks = allocations(recs)
            self.assertEqual(stacks[4 * MiB], [])
            self.assertIn("with_stack", stacks[6 * MiB])

    def test_without_the_recorder_nothing_happens_and_one_warning_says_so(self):
        with tempfile.TemporaryDirectory() as d:
            proc, trace = run_prog("untraced", d, preload=False)
            self.assertEqual((proc.returncode, proc.stderr), (0, ""))
            self.assertEqual(printed(proc, "results"), ["None False False None"] * 2)
            self.assertIn("warnings 1 ['NotTracedWarning']", proc.stdout)
            self.assertIn("runs without the recorder", proc.stdout)
            self.assertIn("files []", proc.stdout)


@unittest.skipUnless(os.path.exists(REPORT), "needs build/gpumem-report")
class ReadTest(unittest.TestCase):
    def test_every_key_of_real_reports_is_a_typed_field(self):
        traces = sorted(glob.glob(os.path.join(ROOT, "tests", "report", "real", "*.zst")) +
                        glob.glob(os.path.join(ROOT, "tests", "report", "golden", "*.jsonl")))
        self.assertGreater(len(traces), 5)
        seen = set()
        for trace in traces:
            report = gpumemtrace.read(trace, what_if="expandable_segments:True")
            self.assertEqual(extras(report), [], trace)
            seen |= {type(o).__name__ for o in _objects(report)}
        # The real traces reach most classes (an OOM with its attempts, a what-if replay, ...).
        for name in ("Oom", "Attempt", "Peak", "Holding", "Frame", "WhatIf", "WhatIfRow", "TopSites", "Growth"):
            self.assertIn(name, seen)
        several = gpumemtrace.read(os.path.join(ROOT, "tests", "report", "real"))
        self.assertIsInstance(several.spread, typed.Spread)
        self.assertEqual(extras(several), [])

    def test_values_are_typed_and_unknown_keys_kept(self):
        report = typed.from_json('{"summary": {"peak_bytes": 12, "newer_key": 1}, "peaks": [{"bytes": 3, '
                                 '"fragmentation": {"ratio": 0}, "culprits": [{"bytes": 3, "count": 1, '
                                 '"stack": [{"function": "f", "line": 7}]}]}], "spread": null}')
        self.assertEqual(report.summary.peak_bytes, 12)
        self.assertEqual(report.summary.extra, {"newer_key": 1})
        self.assertIsInstance(report.peaks[0].fragmentation.ratio, float)
        self.assertEqual(report.peaks[0].culprits[0].stack[0], typed.Frame(function="f", line=7))
        self.assertIsNone(report.spread)
        self.assertEqual(report.leaks, [])

    def test_a_trace_it_cannot_read_raises_with_the_analyzer_message(self):
        with self.assertRaises(typed.ReportError) as raised:
            gpumemtrace.read(os.path.join(ROOT, "tests", "report", "malformed", "not_json.jsonl"))
        self.assertEqual(raised.exception.status, 2)
        self.assertIn("not_json.jsonl", str(raised.exception))
        with self.assertRaises(typed.ReportError):
            gpumemtrace.read()


def _objects(obj):
    if dataclasses.is_dataclass(obj):
        yield obj
        for f in dataclasses.fields(obj):
            yield from _objects(getattr(obj, f.name))
    elif isinstance(obj, list):
        for item in obj:
            yield from _objects(item)


if __name__ == "__main__":
    unittest.main()
