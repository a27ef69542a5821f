# tests/e2e/test_flight_recorder.py — the flight recorder (GPUMEMTRACE_KEEP) end to end.
"""The flight recorder (GPUMEMTRACE_KEEP, docs/long-runs.md) on the simulated runtime: a server that
creeps (tests/e2e/programs/flight_server.cpp), run for a time-scaled 48 hours (2,880 requests of a
simulated minute), keeps its trace segments under the budget at every moment; a dump taken at any
moment, the window sealed after an out-of-memory failure and the one sealed at exit each read alone,
and the report's live memory in each is what the program counted itself at that moment."""
import json
import os
import re
import signal
import subprocess
import threading
import unittest

from recorder_testlib import BUILD, LIB, SIM, Trace, program, recorder_preload, tempdir

SERVER = program("flight_server")
REPORT = os.path.join(BUILD, "gpumem-report")
KEEP = 256 * 1024
HOURS_48 = 2880  # requests: one a simulated minute
DUMPS = [7, 601, 1440, 2222, 2879]
OOM_AT = 1234


def start(args, trace, keep, extra_env=None):
    env = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=recorder_preload(LIB), GPUMEMTRACE_OUTPUT=trace,
               GPUMEMTRACE_KEEP=keep)
    env.update(extra_env or {})
    return subprocess.Popen([SERVER] + [str(a) for a in args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def segments_size(trace):
    """Bytes on disk of the trace's segments: its name and its name with -prev."""
    total = 0
    for path in (trace, trace.replace(".jsonl", "-prev.jsonl")):
        try:
            total += os.path.getsize(path)
        except FileNotFoundError:
            pass
    return total


def report(path):
    proc = subprocess.run([REPORT, "--format", "json", path], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), (proc.returncode, proc.stderr)
    return json.loads(proc.stdout)


def held(rep):
    """(CUDA bytes live, block bytes live) at the end of a report's one process on device 0: the last
    point of its timeline, reserved and allocated."""
    [process] = rep["processes"]
    [device] = [d for d in process["devices"] if d["device"] == 0]
    last = device["timeline"][-1]
    return last["reserved"], last["allocated"]


class FlightRecorderSoak(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = tempdir()
        cls.trace = os.path.join(cls.out, "server.jsonl")
        proc = start([HOURS_48, cls.out, ",".join(map(str, DUMPS)), OOM_AT], cls.trace, "256K")
        cls.largest = 0
        cls.samples = 0
        cls.saw_previous = False
        done = threading.Event()

        def watch():  # the segments' size on disk, as often as the machine allows, until "done"
            while not done.is_set():
                cls.largest = max(cls.largest, segments_size(cls.trace))
                cls.saw_previous |= os.path.exists(cls.trace.replace(".jsonl", "-prev.jsonl"))
                cls.samples += 1
        watcher = threading.Thread(target=watch)
        watcher.start()
        cls.lines = []
        for line in proc.stdout:
            cls.lines.append(line.rstrip("\n"))
            if line.startswith("done"):
                done.set()
        done.set()
        watcher.join()
        cls.stderr = proc.stderr.read()
        cls.returncode = proc.wait(timeout=120)

    def test_runs_to_its_end_unchanged(self):
        self.assertEqual(self.returncode, 0, self.stderr)
        self.assertTrue(self.lines[-1].startswith("done"), self.lines)
        self.assertIn("oom rc=2", self.lines)

    def test_segments_stay_under_the_budget_for_48_hours(self):
        self.assertTrue(self.saw_previous, "the trace never rotated")
        self.assertGreater(self.samples, 10)
        self.assertLessEqual(self.largest, KEEP)
        # Without KEEP the same run writes many times the budget: the bound is the recorder's doing.
        self.assertGreater(self.window_text_bytes_without_keep(), 4 * KEEP)

    def window_text_bytes_without_keep(self):
        out = tempdir()
        trace = os.path.join(out, "whole.jsonl")
        proc = start([HOURS_48, out], trace, "", {"GPUMEMTRACE_KEEP": ""})
        proc.communicate(timeout=120)
        return os.path.getsize(trace)

    def test_each_dump_holds_what_the_program_held(self):
        dumps = [l for l in self.lines if l.startswith("dump ")]
        self.assertEqual(len(dumps), len(DUMPS), self.lines)
        for line in dumps:
            path, cuda, blocks, rc = re.match(r"dump (\S+) cuda=(\d+) blocks=(\d+) rc=(-?\d+)", line).groups()
            self.assertEqual(rc, "0", line)
            with self.subTest(dump=path):
                self.assertEqual(held(report(path)), (int(cuda), int(blocks)))
                dumped = Trace(path)
                self.assertEqual((dumped.footer["end"], dumped.footer["events"]), ("dump", len(dumped.events)))
                self.assertLessEqual(os.path.getsize(path), KEEP + 4096)

    def test_window_sealed_at_exit_replaces_the_segments(self):
        self.assertFalse(os.path.exists(self.trace.replace(".jsonl", "-prev.jsonl")))
        self.assertFalse(os.path.exists(self.trace.replace(".jsonl", "-window.jsonl")))
        cuda, blocks = map(int, re.match(r"done cuda=(\d+) blocks=(\d+)", self.lines[-1]).groups())
        rep = report(self.trace)
        self.assertEqual(held(rep), (cuda, blocks))
        trace = Trace(self.trace)
        self.assertEqual(trace.footer["end"], "exit")
        self.assertEqual(trace.footer["events"], len(trace.events))
        initial = [e for e in trace.events if e.get("initial")]
        # The checkpoint: weights, pool segment, the hours' creep, and the open "serve" scope.
        self.assertIn(("scope_begin", "serve"), [(e["op"], e.get("label")) for e in initial])
        self.assertGreater(len(initial), 3)
        # The window is the run's end, not its start: no event of the first requests.
        self.assertGreater(trace.events[0]["seq"], 1000)

    def test_leaks_are_the_windows_own(self):
        # Leaked within the window: what it allocated and never freed (the creep of its hours), not
        # what the checkpoint held (the weights, the earlier hours' creep).
        rep = report(self.trace)
        trace = Trace(self.trace)
        live = {}
        for e in trace.events:
            if e["op"] in ("alloc", "block_alloc") and e.get("result", 0) == 0:
                live[(e["op"], e["addr"])] = e
            elif e["op"] in ("free", "block_free"):
                live.pop(("alloc" if e["op"] == "free" else "block_alloc", e["addr"]), None)
        own = [e for e in live.values() if not e.get("initial")]
        before = [e for e in live.values() if e.get("initial")]
        self.assertTrue(own and before)
        self.assertEqual(sorted(l["bytes"] for l in rep["leaks"]),
                         sorted([sum(e["size"] for e in own if e["op"] == op) for op in ("alloc", "block_alloc")]))
        held_before = [h for h in rep["held_at_exit"] if h["reason"] == "before_recording"]
        pool = 32 << 20  # the pool's segment: cached, not held
        self.assertEqual(sum(h["bytes"] for h in held_before), sum(e["size"] for e in before) - pool)
        # The "serve" scope, open at the checkpoint and never closed, left what the window left: not
        # what the checkpoint held inside it.
        [serve] = [s for s in rep["scopes"] if s["name"] == "serve"]
        self.assertEqual(serve["leaked_bytes"], sum(l["bytes"] for l in rep["leaks"]))

    def test_out_of_memory_window_is_sealed_beside_the_trace(self):
        path = self.trace.replace(".jsonl", "-oom.jsonl")
        rep = report(path)
        [process] = rep["processes"]
        self.assertEqual(sum(d["ooms"] for d in process["devices"]), 1)
        self.assertLessEqual(os.path.getsize(path), KEEP + 4096)


def signalled_at_a_dump(name, sig):
    """(folder, trace) of a server (KEEP=128K, paced) sent `sig` once it has dumped at request 1500."""
    out = tempdir()
    trace = os.path.join(out, name)
    proc = start([100000, out, "1500", -1, 50], trace, "128K")
    for line in proc.stdout:
        if line.startswith("dump "):
            break
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert proc.returncode == -sig, proc.returncode
    return out, trace


class FlightRecorderSegments(unittest.TestCase):
    def test_a_killed_run_leaves_two_segments_each_readable_alone(self):
        _, trace = signalled_at_a_dump("killed.jsonl", signal.SIGKILL)
        previous = trace.replace(".jsonl", "-prev.jsonl")
        for path in (previous, trace):
            with self.subTest(segment=path):
                t = Trace(path)
                self.assertTrue(any(e.get("initial") for e in t.events))
                rep = report(path)
                cuda, blocks = held(rep)
                self.assertGreaterEqual(cuda, (64 + 32) << 20)  # the weights and the pool, from the checkpoint

    def test_a_run_ended_by_sigterm_is_sealed_into_one_trace(self):
        out, trace = signalled_at_a_dump("stopped.jsonl", signal.SIGTERM)
        self.assertEqual(sorted(os.listdir(out)), ["stopped.jsonl", "window-1500.jsonl"])
        t = Trace(trace)
        self.assertEqual((t.footer["end"], t.footer["signal"]), ("signal", signal.SIGTERM))
        self.assertTrue(any(e.get("initial") for e in t.events))
        self.assertEqual(t.footer["events"], len(t.events))
        self.assertGreaterEqual(held(report(trace))[0], (64 + 32) << 20)

    def test_a_duration_keeps_the_last_half_to_whole_of_it(self):
        out = tempdir()
        trace = os.path.join(out, "timed.jsonl")
        proc = start([1500, out, "", -1, 1000], trace, "400ms")
        stdout, stderr = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, stderr)
        cuda, blocks = map(int, re.search(r"done cuda=(\d+) blocks=(\d+)", stdout).groups())
        self.assertEqual(held(report(trace)), (cuda, blocks))
        events = [e for e in Trace(trace).events if not e.get("initial")]
        span_ms = (events[-1]["t"] - events[0]["t"]) / 1e6
        self.assertGreaterEqual(span_ms, 150)
        self.assertLessEqual(span_ms, 450)

    def test_a_stream_is_kept_whole_with_one_line(self):
        out = tempdir()
        proc = start([50, out], "/dev/stdout", "1h")
        stdout, stderr = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, stderr)
        self.assertIn("GPUMEMTRACE_KEEP needs a trace file of its own", stderr)


class FlightRecorderLauncher(unittest.TestCase):
    LAUNCHER = os.path.join(BUILD, "gpumemtrace")

    def launch(self, args):
        env = dict(os.environ, LD_LIBRARY_PATH=SIM)
        env.pop("LD_PRELOAD", None)
        return subprocess.run([self.LAUNCHER] + args, env=env, capture_output=True, text=True, timeout=120)

    def test_run_keep_reports_the_window_and_names_the_oom_one(self):
        out = tempdir()
        proc = self.launch(["run", "--keep", "128K", "-o", out, "--", SERVER, str(HOURS_48), out, "", str(OOM_AT)])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        names = sorted(n for n in os.listdir(out) if "jsonl" in n)
        self.assertEqual(len(names), 2, names)
        self.assertTrue(names[0].endswith("-oom.jsonl.zst"), names)
        self.assertIn("the window before the last OOM, on its own: " + os.path.join(out, names[0]), proc.stderr)
        self.assertEqual(proc.stdout.count("\n== "), 1, proc.stdout)  # one process: the -oom window left out
        self.assertIn("held since before the recording began", proc.stdout)

    def test_a_bad_keep_is_bad_usage_before_the_program_runs(self):
        out = tempdir()
        proc = self.launch(["run", "--keep", "2x", "-o", out, "--", SERVER, "10", out])
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertIn("--keep 2x", proc.stderr)
        self.assertEqual(os.listdir(out), [])


if __name__ == "__main__":
    unittest.main()
