# tests/e2e/test_process_end.py — the footer says how the process ended, and no ending loses it.
"""The trace's footer records how the process ended (docs/trace-format.md, "footer"): exit() with its
status, _exit, a fatal SIGTERM/SIGINT/SIGHUP (test_recorder_trust.py, Endings), exec. A signal that arrives while the process is already
ending (multiprocessing's Pool.terminate() against workers in os._exit) waits for the footer before it
kills the process, and a program's handler that re-raises its signal gets the footer too."""
import os
import signal
import subprocess
import time
import unittest

from recorder_testlib import (FORK_UNDER_SANITIZER, SIM, Trace, fork_deadlocks_under_sanitizer, program, run_traced,
                              tempdir, trace_files)
from test_recorder_e2e import TraceInvariants, only_trace
from test_recorder_trust import traced_env

TRUST = program("trust")
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def default_signals():
    """The default disposition, whatever the test runner's (a background job ignores SIGINT)."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_DFL)


class FooterSaysHowTheProcessEnded(unittest.TestCase, TraceInvariants):
    def test_exit_with_its_status(self):
        out = tempdir()
        proc = run_traced([TRUST, "exit", "3"], out)
        self.assertEqual(proc.returncode, 3, proc.stderr)
        t = only_trace(self, out)
        self.check_invariants(t)
        self.assertEqual((t.footer["end"], t.footer["exit_status"]), ("exit", 3))

    def test_fork_child_ending_with_exit(self):
        if fork_deadlocks_under_sanitizer():
            self.skipTest(FORK_UNDER_SANITIZER)
        out = tempdir()
        proc = run_traced([TRUST, "exit_child", "0"], out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        child_pid = int(proc.stdout.split("child=")[1])
        ends = {Trace(p).header["pid"]: Trace(p).footer for p in trace_files(out)}
        self.assertEqual((ends[child_pid]["end"], ends[child_pid]["exit_status"]), ("_exit", 0))
        (parent,) = [f for pid, f in ends.items() if pid != child_pid]
        self.assertEqual((parent["end"], parent["exit_status"]), ("exit", 0))

    def test_exec(self):
        out = tempdir()
        proc = run_traced([program("scenarios"), "exec", program("scenarios"), "depth"], out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        ends = sorted(Trace(p).footer["end"] for p in trace_files(out))
        self.assertEqual(ends, ["exec", "exit"])

    def test_program_handler_that_raises_the_signal_again(self):
        # Clean up, restore the default action, raise again: the process dies of the signal as soon as
        # the recorder's handler (which called the program's) returns; the trace is finished first.
        out = tempdir()
        p = subprocess.Popen([TRUST, "reraise"], env=traced_env(out, GPUMEMTRACE_QUIET="1"), stdout=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline(), "ready\n")
        p.send_signal(signal.SIGTERM)
        stdout, _ = p.communicate(timeout=30)
        self.assertEqual(p.returncode, -signal.SIGTERM)
        self.assertEqual(stdout, "handled\n")
        t = only_trace(self, out)
        self.check_invariants(t)
        self.assertEqual([e["size"] for e in t.allocs()], [4141])
        self.assertEqual((t.footer["end"], t.footer["signal"]), ("signal", signal.SIGTERM))


class SignalDuringExit(unittest.TestCase, TraceInvariants):
    def test_signal_while_exit_waits_for_the_writer(self):
        # The trace goes to a pipe nobody reads yet, so the writer cannot finish and _exit waits for it.
        # The signal that comes meanwhile must wait for the footer too, then still kill the process.
        for sig in SIGNALS:
            with self.subTest(signal=sig.name):
                # ThreadSanitizer's _exit sleeps 1 s before the program's own _exit while threads run
                # (atexit_sleep_ms): the signal would come before the exit began.
                env = traced_env(tempdir(), GPUMEMTRACE_OUTPUT="/dev/stdout", GPUMEMTRACE_QUIET="1",
                                 TSAN_OPTIONS=os.environ.get("TSAN_OPTIONS", "") + ":atexit_sleep_ms=0")
                p = subprocess.Popen([TRUST, "exit_blocked", "4000"], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, preexec_fn=default_signals)
                self.assertEqual(p.stderr.readline(), b"exiting\n")
                time.sleep(0.3)  # the program is in _exit, waiting for its writer
                p.send_signal(sig)
                time.sleep(0.2)  # and the signal is being handled
                text = p.stdout.read().decode()
                p.stderr.read()
                self.assertEqual(p.wait(timeout=30), -sig)  # its default action, after the footer
                t = Trace("/dev/stdout", text=text)
                self.check_invariants(t)
                self.assertEqual(len(t.allocs()), 4000)
                self.assertIsNotNone(t.footer, "the signal must not cut the footer off")
                self.assertEqual((t.footer["end"], t.footer["exit_status"]), ("_exit", 0))


POOL_SCRIPT = """
import ctypes, multiprocessing, sys
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
rt = ctypes.CDLL(None)
def work(i):
    p = ctypes.c_void_p()
    rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(7000 + i))
    return i
if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    for _ in range(int(sys.argv[2])):
        with ctx.Pool(4) as pool:  # __exit__ calls terminate(): SIGTERM to workers that may be ending
            assert pool.map(work, range(8)) == list(range(8))
"""


@unittest.skipIf(fork_deadlocks_under_sanitizer(), FORK_UNDER_SANITIZER)
class PoolTerminate(unittest.TestCase, TraceInvariants):
    ROUNDS = 20

    def test_every_worker_trace_is_complete(self):
        out = tempdir()
        proc = run_traced(["python3", "-c", POOL_SCRIPT, os.path.join(SIM, "libcudart.so.13"), str(self.ROUNDS)], out,
                          env={"GPUMEMTRACE_PYTHON": "0", "GPUMEMTRACE_QUIET": "1"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        traces = [Trace(p) for p in trace_files(out)]
        cut = [os.path.basename(t.path) for t in traces if t.footer is None]
        self.assertEqual(cut, [], "%d of %d worker traces have no footer" % (len(cut), len(traces)))
        for t in traces:
            self.check_invariants(t)
            self.assertIn((t.footer["end"], t.footer.get("exit_status"), t.footer.get("signal")),
                          [("_exit", 0, None), ("signal", None, signal.SIGTERM)])
        # Every task's allocation is in some worker's trace.
        got = sorted(e["size"] for t in traces for e in t.allocs())
        self.assertEqual(got, sorted(list(range(7000, 7008)) * self.ROUNDS))


if __name__ == "__main__":
    unittest.main()
