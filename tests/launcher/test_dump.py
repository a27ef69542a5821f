# tests/launcher/test_dump.py — `gpumemtrace dump PID`: the trace so far of a running process, sealed
# into a trace of its own while the process goes on.
"""`gpumemtrace dump PID` on a program that holds 5 MiB and waits (launcher_prog.py hold) under the real
recorder and the simulated runtime, through `gpumemtrace run`'s pid (the program is its descendant):
the dump reads alone and holds what the program holds, with and without the flight recorder; the
process goes on and its own trace ends whole; and the one-line errors."""
import glob
import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launcher_testlib import (CUDART, LAUNCHER, LIB, PROG, PYTHON, REPORT, LauncherTestCase, is_elf,  # noqa: E402
                              sanitizer_runtime)

MiB = 1 << 20


class Dump(LauncherTestCase):
    def setUp(self):
        super().setUp()
        for path in (LIB, CUDART):
            if not is_elf(path):
                self.skipTest(f"{path} not built")

    def start_holding(self, *run_args):
        """`gpumemtrace run` on a program that holds 5 MiB and waits; the launcher's process, once the
        program holds it."""
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if sanitizer_runtime():  # the launcher adds the recorder in front of it (launcher_testlib.launch)
            env["LD_PRELOAD"] = sanitizer_runtime()
        proc = subprocess.Popen([LAUNCHER, "run", "-q", "-o", "t", *run_args, "--", PYTHON, PROG, "hold", CUDART],
                                cwd=self.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)

        def stop():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            proc.stdout.close()
        self.addCleanup(stop)
        self.assertEqual(proc.stdout.readline().strip(), "ready")
        return proc

    def dump(self, *args):
        return self.launch(["dump", *args], timeout=60, stdout=subprocess.PIPE)

    def live_bytes(self, path, events=None):
        """Live CUDA bytes at the dump's end (the report's one process); its events into `events`."""
        proc = subprocess.run([REPORT, "--format", "json", path], capture_output=True, text=True, timeout=120)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        doc = json.loads(proc.stdout)
        [process] = doc["processes"]
        self.assertEqual(process["end"], "dump")
        if events is not None:
            events.append(process["events"])
        [device] = [d for d in process["devices"] if d["device"] == 0]
        return device["timeline"][-1]["reserved"]

    def test_dump_of_a_running_program_holds_what_it_holds(self):
        proc = self.start_holding()
        done = self.dump(str(proc.pid))
        self.assertEqual(done.returncode, 0, done.stderr)
        [path] = done.stdout.split()
        self.assertTrue(path.endswith("-dump.jsonl.zst"), path)
        self.assertEqual(self.live_bytes(path), 5 * MiB)
        self.assertIsNone(proc.poll())  # the program goes on
        # A second dump, named here (relative to this command's folder), gets its own file.
        again = self.dump("-o", "mine.jsonl.zst", str(proc.pid))
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stdout.strip(), os.path.join(self.tmp, "mine.jsonl.zst"))
        self.assertEqual(self.live_bytes(again.stdout.strip()), 5 * MiB)
        # No request or answer is left beside the trace.
        self.assertEqual(glob.glob(os.path.join(self.tmp, "t", "*.dump-*")), [])

    def test_dump_of_a_flight_recorded_program_is_its_window(self):
        proc = self.start_holding("--keep", "128K")
        # The writer holds the previous segment too (NAME-prev), opened before the current one: the
        # dump is still asked of the trace's own name.
        # At a cut the current segment is renamed NAME-prev before NAME is opened again: the trace's
        # own name may be missing for a moment.
        deadline = time.monotonic() + 30  # the writer drains what the program recorded on its own time
        current = []
        while len(current) != 1 and time.monotonic() < deadline:
            current = [p for p in glob.glob(os.path.join(self.tmp, "t", "*.jsonl.zst")) if "-prev." not in p]
            time.sleep(0.05)
        [trace] = current
        while not os.path.exists(trace.replace(".jsonl", "-prev.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(trace.replace(".jsonl", "-prev.jsonl")), os.listdir(os.path.dirname(trace)))
        done = self.dump(str(proc.pid))
        self.assertEqual(done.returncode, 0, done.stderr)
        events = []
        self.assertEqual(self.live_bytes(done.stdout.strip(), events), 5 * MiB)
        self.assertLess(events[0], 4000)  # a window: not the 4000 events of the churn

    def test_what_it_refuses_in_one_line(self):
        proc = self.start_holding()
        untraced = subprocess.Popen(["sleep", "30"])
        self.addCleanup(untraced.kill)
        for args, status, message in [
            (["dump", "-o", "plain.jsonl", str(proc.pid)], 1, "the trace is compressed (zstd), and so is its dump"),
            (["dump", str(untraced.pid)], 2, f"process {untraced.pid} is not traced"),
            (["dump", "999999999"], 2, "no process 999999999"),
            (["dump"], 2, "pid is required"),
            (["dump", "--timeout", "0", str(proc.pid)], 2, "--timeout"),
        ]:
            result = self.launch(args, timeout=60, stdout=subprocess.PIPE)
            self.assertEqual(result.returncode, status, (args, result.stderr))
            self.assertIn(message, result.stderr, args)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertEqual(result.stdout, "", args)


if __name__ == "__main__":
    unittest.main()
