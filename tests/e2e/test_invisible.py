# tests/e2e/test_invisible.py — what a program could notice of the recorder, it does not.
"""The program never notices the library (issue 27, item 3): its signal actions read back as it set
them, a library chaining to "the previous handler" does not kill an exit-0 program, no descriptor of
ours sits in its table, our lines never land in a file that took descriptor 2, and the line saying
where a trace goes is said once per run (by the process a person started, on a terminal), never by
the children a test suite may be comparing the stderr of."""
import os
import pty
import signal
import subprocess
import unittest

from recorder_testlib import (FORK_UNDER_SANITIZER, LIB, SIM, Trace, fork_deadlocks_under_sanitizer, program,
                              recorder_preload, tempdir, trace_files)
from testenv import under_tsan

SIGNAL_VIEW = program("signal_view")
INVISIBLE = program("invisible")


def run(args, traced=True, stderr=subprocess.PIPE, **env):
    out = tempdir()
    e = dict(os.environ, LD_LIBRARY_PATH=SIM, GPUMEMTRACE_OUTPUT=out + "/", **env)
    e.pop("LD_PRELOAD", None)
    if traced:
        e["LD_PRELOAD"] = recorder_preload(LIB)
    proc = subprocess.run(args, env=e, stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=60)
    return out, proc


def recorder_lines(text):
    return [line for line in (text or "").splitlines() if line.startswith("gpumemtrace:")]


@unittest.skipIf(under_tsan(), "ThreadSanitizer's runtime keeps the program's signal actions itself (its own "
                                "sigaction and signal come first)")
class SignalActions(unittest.TestCase):
    """The recorder's handlers for SIGTERM, SIGINT, SIGHUP and SIGABRT are not what the program sees."""

    def check_same_as_untraced(self, mode):
        _, bare = run([SIGNAL_VIEW, mode], traced=False)
        out, traced = run([SIGNAL_VIEW, mode])
        self.assertEqual((traced.returncode, traced.stdout), (bare.returncode, bare.stdout), traced.stderr)
        self.assertEqual(len(trace_files(out)), 1)
        return traced

    def test_actions_read_back_as_the_default(self):
        proc = self.check_same_as_untraced("view")
        self.assertIn("Terminated: default\n", proc.stdout)

    def test_the_programs_own_handler_reads_back(self):
        proc = self.check_same_as_untraced("own")
        self.assertIn("Terminated: own handler\n", proc.stdout)

    def test_library_chaining_to_the_previous_handler_survives(self):
        proc = self.check_same_as_untraced("chain")
        self.assertEqual((proc.returncode, proc.stdout), (0, "library handler\nsurvived\n"))

    def test_ignored_signal_stays_ignored(self):
        self.check_same_as_untraced("ignore")

    def test_a_vfork_child_setting_the_default_leaves_the_parents_handler(self):
        # CPython's subprocess sets every handler back to the default in its vfork child before exec:
        # the parent's next SIGINT (KeyboardInterrupt) must still reach its handler.
        proc = self.check_same_as_untraced("vfork")
        self.assertEqual((proc.returncode, proc.stdout), (0, "handled\nsurvived\n"))

    def test_reset_on_delivery(self):
        proc = self.check_same_as_untraced("resethand")
        self.assertEqual((proc.returncode, proc.stdout), (-signal.SIGTERM, "handled\nonce\n"))


class Descriptors(unittest.TestCase):
    def test_no_descriptor_of_ours_in_the_programs_table(self):
        # libunwind's memory-checking pipe used to sit at 1000 and 1001 (CPython's
        # test_subprocess.test_pass_fds_redirected saw them).
        if under_tsan():
            self.skipTest("the program allocates in a signal handler, which ThreadSanitizer reports as unsafe")
        out, proc = run([INVISIBLE, "fds"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "fds=0,1,2\n")
        (path,) = trace_files(out)
        t = Trace(path)
        # The stacks libunwind walked, through a signal frame too, are whole.
        (from_handler,) = [e for e in t.allocs() if e["size"] == 1002]
        functions = t.functions(from_handler)
        self.assertIn("(anonymous namespace)::allocate_in_handler(int)", functions)
        self.assertIn("main", functions)
        (nested,) = [e for e in t.allocs() if e["size"] == 1001]
        self.assertEqual([f for f in t.functions(nested) if "nest" in f][-1], "(anonymous namespace)::nest1()")

    def test_no_line_into_a_file_that_took_descriptor_2(self):
        out = tempdir()
        own = os.path.join(out, "own.txt")
        _, proc = run([INVISIBLE, "stderr", own], GPUMEMTRACE_STACK_DEPTH="lots", GPUMEMTRACE_VERBOSE="1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "own line\n")


class WhereTracesGo(unittest.TestCase):
    """"writing trace to PATH": said by the process a person started on a terminal, not by its
    children, nor where stderr is a pipe (a test comparing it), unless GPUMEMTRACE_VERBOSE=1."""

    def run_on_terminal(self, args, **env):
        leader, follower = pty.openpty()
        try:
            out, proc = run(args, stderr=follower, **env)
            os.close(follower)
            follower = -1
            said = b""
            while True:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # EIO: the terminal's other end is closed
                    break
                if not chunk:
                    break
                said += chunk
            return out, proc, said.decode().replace("\r\n", "\n")
        finally:
            os.close(leader)
            if follower >= 0:
                os.close(follower)

    def test_the_started_process_says_it_on_a_terminal(self):
        out, proc, said = self.run_on_terminal([program("scenarios"), "depth"])
        self.assertEqual(proc.returncode, 0)
        (path,) = trace_files(out)
        self.assertEqual(recorder_lines(said), ["gpumemtrace: writing trace to " + path])

    @unittest.skipIf(fork_deadlocks_under_sanitizer(), FORK_UNDER_SANITIZER)
    def test_a_traced_parents_child_says_nothing(self):
        out, proc, said = self.run_on_terminal([program("scenarios"), "fork"])
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(len(trace_files(out)), 2)
        child = int(proc.stdout.split("child=")[1])
        self.assertEqual(len(recorder_lines(said)), 1, said)
        self.assertNotIn(str(child), said)

    @unittest.skipIf(fork_deadlocks_under_sanitizer(), FORK_UNDER_SANITIZER)
    def test_nothing_on_a_pipe(self):
        out, proc = run([program("scenarios"), "fork"])
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(len(trace_files(out)), 2)
        self.assertEqual(recorder_lines(proc.stderr), [])

    @unittest.skipIf(fork_deadlocks_under_sanitizer(), FORK_UNDER_SANITIZER)
    def test_verbose_says_it_in_every_process(self):
        out, proc = run([program("scenarios"), "fork"], GPUMEMTRACE_VERBOSE="1")
        self.assertEqual(sorted(recorder_lines(proc.stderr)),
                         sorted("gpumemtrace: writing trace to " + p for p in trace_files(out)))

    def test_quiet_wins(self):
        _, proc, said = self.run_on_terminal([program("scenarios"), "depth"], GPUMEMTRACE_QUIET="1",
                                             GPUMEMTRACE_VERBOSE="1")
        self.assertEqual(recorder_lines(said), [])

    def test_something_wrong_is_said_by_every_process(self):
        # Each program image reads its settings once: the one exec replaced, and the new one.
        _, proc = run([program("scenarios"), "exec", program("scenarios"), "depth"], GPUMEMTRACE_FLUSH_MS="fast")
        lines = recorder_lines(proc.stderr)
        self.assertEqual(lines, ["gpumemtrace: ignoring GPUMEMTRACE_FLUSH_MS=fast (expected 1..100); using the default"] * 2)


if __name__ == "__main__":
    unittest.main()
