# tests/e2e/test_children.py — no child hangs or loses its events, however it was made.
"""A child made without the atfork handler (glibc's _Fork(), clone() without CLONE_VM, a raw fork
system call) inherits a recorder that looks active, whose writer thread is not in it. Before, its
events were lost and, a ring's worth later (16384), it waited forever for room. Now its first hook
notices (interpose/recorder/fork_marker.h): its hooks pass through and it says so in one line; the
parent's trace is untouched (issue 27, item 2). fork() children, CLONE_VM children, posix_spawn and
vfork + exec keep working as before."""
import os
import signal
import subprocess
import unittest

from recorder_testlib import (FORK_UNDER_SANITIZER, LIB, SIM, Trace, fork_deadlocks_under_sanitizer, program,
                              recorder_preload, tempdir, trace_files)

CHILDREN = program("children")
N = 20000  # more than a ring's worth (GPUMEMTRACE_RING_EVENTS: 16384)


def run_children(*args, timeout=60):
    """Runs `children ARGS` traced in a session of its own (so that a hung child goes with it)."""
    out = tempdir()
    env = dict(os.environ, LD_PRELOAD=recorder_preload(LIB), LD_LIBRARY_PATH=SIM, GPUMEMTRACE_OUTPUT=out + "/")
    p = subprocess.Popen([CHILDREN, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError(f"children {' '.join(args)} hung")
    return out, p.returncode, stdout, stderr


def traces_by_pid(out):
    return {t.header["pid"]: t for t in (Trace(p) for p in trace_files(out))}


def sizes(trace):
    return [e["size"] for e in trace.allocs()]


@unittest.skipIf(fork_deadlocks_under_sanitizer(), FORK_UNDER_SANITIZER)
class ChildrenWithoutForkHandlers(unittest.TestCase):
    def check_untraced_child(self, how):
        out, rc, stdout, stderr = run_children(how, str(N))
        self.assertEqual(rc, 0, stderr)
        child = int(stdout.split("child=")[1].split()[0])
        self.assertIn("status=0", stdout)
        lines = [l for l in stderr.splitlines() if l.startswith("gpumemtrace:")]
        self.assertEqual(lines, [f"gpumemtrace: process {child} was made without fork handlers (_Fork, clone or a raw "
                                 "fork system call) after tracing began; its CUDA calls are not traced"])
        traces = traces_by_pid(out)
        self.assertNotIn(child, traces)
        (parent,) = traces.values()
        self.assertEqual(sizes(parent), [1001, 3003])
        self.assertEqual(parent.footer["end"], "exit")

    def test_glibc_fork_without_handlers(self):
        self.check_untraced_child("_Fork")

    def test_clone_of_the_address_space(self):
        self.check_untraced_child("clone")

    def test_raw_fork_system_call(self):
        self.check_untraced_child("raw_fork")


@unittest.skipIf(fork_deadlocks_under_sanitizer(), FORK_UNDER_SANITIZER)
class ChildrenThatWorkedBefore(unittest.TestCase):
    def test_fork_child_has_its_own_trace(self):
        out, rc, stdout, stderr = run_children("fork", "100")
        self.assertEqual(rc, 0, stderr)
        child = int(stdout.split("child=")[1].split()[0])
        traces = traces_by_pid(out)
        self.assertEqual(sizes(traces.pop(child)), [2000 + i % 7 for i in range(100)])
        self.assertEqual(sizes(list(traces.values())[0]), [1001, 3003])

    def test_clone_vm_child_records_into_the_parents_trace(self):
        # It shares the parent's memory, its ring and its writer, like a thread: its events are the
        # parent's trace's, and it never waits on a ring nobody drains.
        out, rc, stdout, stderr = run_children("clone_vm", str(N))
        self.assertEqual(rc, 0, stderr)
        (parent,) = traces_by_pid(out).values()
        got = sizes(parent)
        self.assertEqual((got[0], got[-1], len(got)), (1001, 3003, N + 2))

    def check_exec_child(self, how):
        # The child execs at once and traces as the new image; the parent's trace is whole.
        out, rc, stdout, stderr = run_children(how, program("scenarios"), "depth")
        self.assertEqual(rc, 0, stderr)
        child = int(stdout.split("child=")[1].split()[0])
        traces = traces_by_pid(out)
        self.assertEqual(sizes(traces.pop(child)), [5005])
        (parent,) = traces.values()
        self.assertEqual((sizes(parent), parent.footer["end"]), ([1001, 3003], "exit"))

    def test_posix_spawn_child_has_its_own_trace(self):
        self.check_exec_child("spawn")

    def test_vfork_exec_child_has_its_own_trace(self):
        self.check_exec_child("vfork_exec")

if __name__ == "__main__":
    unittest.main()
