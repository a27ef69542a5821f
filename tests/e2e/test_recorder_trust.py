# tests/e2e/test_recorder_trust.py — what the recorder must never do to the program it is loaded into.
"""End-to-end tests of what the recorder must never do to the program it is loaded into, nor let others
do through it (docs/security.md): write into the program's files, follow what was planted at a trace's
name, block the program, lose what a process recorded before _exit or a fatal signal, or keep memory
it does not use."""
import os
import resource
import signal
import stat
import subprocess
import threading
import time
import unittest

from recorder_testlib import (FORK_UNDER_SANITIZER, LIB, SIM, Trace, fork_deadlocks_under_sanitizer, program,
                              recorder_preload, run_traced, tempdir, trace_files)
from test_recorder_e2e import TraceInvariants, only_trace

TRUST = program("trust")


def warnings(stderr):
    """The recorder's lines on stderr other than the informational 'writing trace to PATH'."""
    return [l for l in stderr.splitlines() if l.startswith("gpumemtrace:") and
            not (l.startswith("gpumemtrace: writing trace to") and "(" not in l)]


def traced_env(out_dir, **extra):
    env = dict(os.environ, LD_PRELOAD=recorder_preload(LIB), LD_LIBRARY_PATH=SIM, GPUMEMTRACE_OUTPUT=out_dir + "/")
    env.update(extra)
    return env


def sizes(trace):
    return [e["size"] for e in trace.allocs()]


class DescriptorCases(TraceInvariants):
    """The program closes or reuses descriptor numbers: the trace never lands in its files, and the
    recorder never closes one of the program's."""

    prefix = []  # trust's arguments before the mode

    def run_trust(self, *args, **kwargs):
        out = tempdir()
        return out, run_traced([TRUST, *self.prefix, *args], out, **kwargs)

    def run_own_file(self, how, n=60, **kwargs):
        out = tempdir()
        own = os.path.join(out, "own.txt")
        proc = run_traced([TRUST, *self.prefix, how, own, str(n)], out, **kwargs)
        return out, proc

    def check_kept_tracing(self, out, proc, n=60, reopened=False):
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("own=ok", proc.stdout)
        t = only_trace(self, out)
        self.check_invariants(t)
        self.assertEqual(sizes(t), [10000] + [10001 + i for i in range(n)])
        lines = warnings(proc.stderr)
        self.assertEqual(len(lines), 1 if reopened else 0, proc.stderr)
        if reopened:
            self.assertIn("reopened", lines[0])

    def test_program_closing_its_stdout_pipe_reaches_eof(self):
        # The writer's table started as a copy of the program's: no copy of the pipe's write end is
        # left in it to keep the reader waiting.
        out = tempdir()
        p = subprocess.Popen([TRUST, *self.prefix, "close_stdout"], env=traced_env(out), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        got = []
        reader = threading.Thread(target=lambda: got.append(p.stdout.read()))
        reader.start()
        reader.join(60)
        still_running = p.poll() is None
        p.stdin.close()
        reader.join(60)
        p.wait(60)
        self.assertEqual(got, [b"closing\n"], "no EOF on the program's stdout")
        self.assertTrue(still_running, "EOF came only when the program ended")
        self.assertEqual(p.returncode, 0, p.stderr.read())
        self.assertEqual(sizes(only_trace(self, out)), [1001, 1002])


class FileDescriptors(unittest.TestCase, DescriptorCases):
    """The writer thread has a descriptor table of its own (interpose/writer/private_fds.h): the
    program never sees the trace's descriptor, and the writer's files never share a number with
    the program's."""

    def test_program_never_sees_the_trace_descriptor(self):
        out, proc = self.run_trust("where")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("fd=-1\n", proc.stdout)  # not in the program's table
        self.assertGreaterEqual(int(proc.stdout.split("writer_fd=")[1].split()[0]), 0)  # in the writer's
        self.assertEqual(warnings(proc.stderr), [])

    def check_writer_range(self, proc, first, end):
        """Every file of the writer's table (the trace, the ELF files libdwfl keeps open) is in
        [first, end): below the numbers the recorder takes in the program's table (1000 and up, or
        the top 16 under a low limit, where the trace goes in a shared table), so that no number is in use in
        both tables, which ThreadSanitizer would take for one file (interpose/writer/private_fds.h)."""
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        files = [int(f) for f in proc.stdout.split("writer_files=")[1].split()[0].split(",")]
        self.assertIn(int(proc.stdout.split("writer_fd=")[1].split()[0]), files)
        self.assertGreaterEqual(len(files), 2, "the trace and at least one ELF file being symbolized")
        for fd in files:
            self.assertTrue(first <= fd < end, f"descriptor {fd} of the writer's is outside [{first}, {end})")

    def test_writer_files_stay_below_the_program_tables_high_numbers(self):
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if limit != resource.RLIM_INFINITY and limit < 1016:
            self.skipTest(f"RLIMIT_NOFILE is {limit}: the ranges are the low limit's (the next test)")
        self.check_writer_range(self.run_trust("where")[1], 500, 1000)

    def test_writer_files_stay_below_the_program_tables_high_numbers_under_a_low_limit(self):
        def low_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        self.check_writer_range(self.run_trust("where", preexec_fn=low_limit)[1], 24, 64 - 16)

    def test_program_closing_every_descriptor_at_once(self):
        # No waiting for the writer's start-up first: nothing of the writer's is in the program's table.
        out, proc = self.run_own_file("closefrom")
        self.check_kept_tracing(out, proc)

    def test_closefrom_loop_racing_the_start_up(self):
        out = tempdir()
        proc = run_traced([TRUST, *self.prefix, "closefrom_race", os.path.join(out, "own.txt")], out)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("lost=0\n", proc.stdout)  # no descriptor of the program's closed or replaced
        self.assertIn("own=ok", proc.stdout)
        self.assertEqual(warnings(proc.stderr), [])
        t = only_trace(self, out)
        self.check_invariants(t)
        self.assertEqual(sizes(t), [7000 + i for i in range(40)])  # 7000, then 7001..7039
        # The writer's own files (/proc/self/maps, the ELF files) were never closed under it.
        functions = t.functions(t.allocs()[0])
        self.assertTrue(any("run_closefrom_race" in f for f in functions), functions)


class FileDescriptorsInASharedTable(unittest.TestCase, DescriptorCases):
    """The same where the kernel refuses the writer a table of its own (a seccomp filter, as a
    container's profile may have): the trace's descriptor is in the program's table, high and
    close-on-exec, checked before each write, and reopened when the program closed or reused it."""

    prefix = ["shared-table"]

    def test_program_never_sees_the_trace_descriptor(self):
        out, proc = self.run_trust("where")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        fd = int(proc.stdout.split("fd=")[1].split()[0])
        self.assertGreaterEqual(fd, 1000)
        self.assertIn(f"writer_fd={fd}\n", proc.stdout)  # the same table

    def test_low_descriptor_limit_puts_it_near_the_top(self):
        def low_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        out, proc = self.run_own_file("dup2", preexec_fn=low_limit)
        self.assertGreaterEqual(int(proc.stdout.split("fd=")[1].split()[0]), 64 - 16)
        self.check_kept_tracing(out, proc, reopened=True)

    def test_program_closing_every_descriptor_at_once(self):
        # trust waits for the writer's start-up first here (gpumemtrace_flush): see docs/security.md.
        out, proc = self.run_own_file("closefrom")
        self.check_kept_tracing(out, proc, reopened=True)

    def test_dup2_over_the_trace_descriptor(self):
        out, proc = self.run_own_file("dup2")
        self.check_kept_tracing(out, proc, reopened=True)

    def test_trace_file_gone_stops_tracing_with_one_warning(self):
        out, proc = self.run_own_file("dup2_unlinked")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("own=ok", proc.stdout)
        lines = warnings(proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("no longer the trace file; tracing stopped", lines[0])
        self.assertEqual(trace_files(out), [])  # unlinked by the program; nothing recreated it


class WriterWarnings(unittest.TestCase, TraceInvariants):
    """The writer thread's warnings wait for a program thread to print them (its own stderr is
    /dev/null); at most 16 wait, and the ones beyond are counted, never lost without a word."""

    def run_writer_lines(self, n):
        out = tempdir()
        proc = run_traced([TRUST, "writer_lines", str(n)], out)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        t = only_trace(self, out)
        self.check_invariants(t)
        self.assertEqual(sizes(t), [1001, 1002])
        # Printed by the recording of 1002, before the program's own next line.
        self.assertIn("allocated 1002", proc.stderr)
        return warnings(proc.stderr.split("allocated 1002")[0]), warnings(proc.stderr)

    def test_flood_is_counted_in_one_line(self):
        before, lines = self.run_writer_lines(40)
        self.assertEqual(before, lines, "nothing printed after the first event that followed the flood")
        self.assertEqual(lines[:16], [f"gpumemtrace: writer line {i}" for i in range(16)])
        self.assertEqual(lines[16:], ["gpumemtrace: 24 more warnings were dropped "
                                      "(the writer thread's queue of lines for stderr was full)"])

    def test_full_queue_drops_nothing(self):
        before, lines = self.run_writer_lines(16)
        self.assertEqual(before, [f"gpumemtrace: writer line {i}" for i in range(16)])
        self.assertEqual(lines, before)


class SafeCreation(unittest.TestCase, TraceInvariants):
    """Nothing planted at a generated trace name is followed or opened; the program never blocks."""

    def run_with_planted(self, plant):
        """Runs `scenarios depth` with plant(path) called on its default trace name before it starts."""
        out = tempdir()

        def plant_in_child():
            plant(os.path.join(out, "gpumemtrace.scenarios.%d.jsonl.zst" % os.getpid()))
        start = time.time()
        p = subprocess.Popen([program("scenarios"), "depth"], env=traced_env(out), preexec_fn=plant_in_child,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = p.communicate(timeout=60)
        elapsed = time.time() - start
        self.assertEqual(p.returncode, 0, stderr)
        self.assertLess(elapsed, 5, "the program must not wait on a planted object")
        planted = os.path.join(out, "gpumemtrace.scenarios.%d.jsonl.zst" % p.pid)
        traced = os.path.join(out, "gpumemtrace.scenarios.%d-1.jsonl.zst" % p.pid)
        st = os.lstat(traced)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode) & 0o077, 0, "a trace is readable by its owner only")
        t = Trace(traced)
        self.check_invariants(t)
        self.assertEqual(sizes(t), [5005])
        lines = warnings(stderr)
        self.assertEqual(len(lines), 1, stderr)
        self.assertIn("writing trace to " + traced, lines[0])
        self.assertIn("not used", lines[0])
        return out, planted

    def test_planted_fifo(self):
        out, planted = self.run_with_planted(os.mkfifo)
        self.assertTrue(stat.S_ISFIFO(os.lstat(planted).st_mode))

    def test_symlink_to_a_fifo(self):
        elsewhere = os.path.join(tempdir(), "attacker.fifo")
        os.mkfifo(elsewhere)
        out, planted = self.run_with_planted(lambda p: os.symlink(elsewhere, p))
        self.assertEqual(os.readlink(planted), elsewhere)
        self.assertTrue(stat.S_ISFIFO(os.lstat(elsewhere).st_mode))

    def test_symlink_to_dev_null(self):
        out, planted = self.run_with_planted(lambda p: os.symlink("/dev/null", p))
        self.assertEqual(os.readlink(planted), "/dev/null")

    def test_dangling_symlink(self):
        target = os.path.join(tempdir(), "not-there.jsonl")
        out, planted = self.run_with_planted(lambda p: os.symlink(target, p))
        self.assertEqual(os.readlink(planted), target)
        self.assertFalse(os.path.lexists(target), "a dangling symlink must not create its target")

    def test_new_trace_is_private(self):
        out = tempdir()
        run_traced([program("scenarios"), "depth"], out)
        self.assertEqual(stat.S_IMODE(os.stat(only_trace(self, out).path).st_mode) & 0o077, 0)

    def test_named_fifo_with_a_reader(self):
        out = tempdir()
        fifo = os.path.join(out, "trace.fifo")
        os.mkfifo(fifo)
        got = []

        def read_all():
            with open(fifo, "rb") as f:
                got.append(f.read())
        reader = threading.Thread(target=read_all)
        reader.start()
        proc = run_traced([program("scenarios"), "depth"], out, env={"GPUMEMTRACE_OUTPUT": fifo})
        reader.join(30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        t = Trace(fifo, text=got[0].decode())
        self.check_invariants(t)
        self.assertEqual(sizes(t), [5005])

    def test_named_fifo_without_a_reader_does_not_block(self):
        out = tempdir()
        fifo = os.path.join(out, "trace.fifo")
        os.mkfifo(fifo)
        start = time.time()
        proc = run_traced([program("runtime_apis")], out, env={"GPUMEMTRACE_OUTPUT": fifo})
        self.assertLess(time.time() - start, 10)
        self.assertEqual(proc.stdout, "done rc=2\n")
        lines = warnings(proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("no reader on the FIFO", lines[0])
        self.assertIn("running untraced", lines[0])

    def test_named_dev_stdout(self):
        out = tempdir()
        proc = run_traced([program("scenarios"), "depth"], out,
                          env={"GPUMEMTRACE_OUTPUT": "/dev/stdout", "GPUMEMTRACE_QUIET": "1"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        t = Trace("/dev/stdout", text=proc.stdout)
        self.check_invariants(t)
        self.assertEqual(sizes(t), [5005])
        self.assertEqual(trace_files(out), [])

    def test_template_name_is_never_followed(self):
        # A %-template is a generated name too: a symlink planted at it is not followed.
        out = tempdir()
        target = os.path.join(tempdir(), "victim.txt")
        with open(target, "w") as f:
            f.write("victim\n")
        p = subprocess.Popen([program("scenarios"), "depth"],
                             env=traced_env(out, GPUMEMTRACE_OUTPUT=out + "/t.%p.jsonl"),
                             preexec_fn=lambda: os.symlink(target, os.path.join(out, "t.%d.jsonl" % os.getpid())),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, stderr = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, stderr)
        with open(target) as f:
            self.assertEqual(f.read(), "victim\n")
        self.assertEqual(sizes(Trace(os.path.join(out, "t.%d-1.jsonl" % p.pid))), [5005])


class Endings(unittest.TestCase, TraceInvariants):
    """Processes that end without exit handlers still leave everything they recorded."""

    @unittest.skipIf(fork_deadlocks_under_sanitizer(), FORK_UNDER_SANITIZER)
    def test_fork_child_ending_with_exit_keeps_its_events(self):
        for delay_ms in ("0", "50"):
            for how in ("_exit", "_Exit"):
                with self.subTest(delay_ms=delay_ms, how=how):
                    out = tempdir()
                    proc = run_traced([TRUST, "exit_child", delay_ms, how], out)
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    child_pid = int(proc.stdout.split("child=")[1])
                    traces = {Trace(p).header["pid"]: Trace(p) for p in trace_files(out)}
                    self.assertEqual(len(traces), 2)
                    child = traces.pop(child_pid)
                    parent = list(traces.values())[0]
                    for t in (child, parent):
                        self.check_invariants(t)
                    self.assertEqual(sizes(child), [2002, 2003])
                    self.assertEqual(sizes(parent), [1001, 3003])

    @unittest.skipIf(fork_deadlocks_under_sanitizer(), FORK_UNDER_SANITIZER)
    def test_python_multiprocessing_fork_workers_keep_their_events(self):
        # multiprocessing's fork start method ends each worker with os._exit.
        script = "\n".join([
            "import ctypes, multiprocessing, sys",
            "ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)",
            "rt = ctypes.CDLL(None)",
            "def work(i):",
            "    p = ctypes.c_void_p()",
            "    rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(7000 + i))",
            "if __name__ == '__main__':",
            "    ctx = multiprocessing.get_context('fork')",
            "    for i in range(3):",
            "        w = ctx.Process(target=work, args=(i,))",
            "        w.start()",
            "        w.join()",
            "        assert w.exitcode == 0, w.exitcode",
        ])
        out = tempdir()
        proc = run_traced(["python3", "-c", script, os.path.join(SIM, "libcudart.so.13")], out,
                          env={"GPUMEMTRACE_PYTHON": "0"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        traces = [Trace(p) for p in trace_files(out)]
        for t in traces:
            self.check_invariants(t)
        self.assertEqual(sorted(s for t in traces for s in sizes(t)), [7000, 7001, 7002])

    def test_vfork_child_ending_with_exit_leaves_the_parent_trace_alone(self):
        out = tempdir()
        proc = run_traced([TRUST, "vfork"], out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        t = only_trace(self, out)
        self.check_invariants(t)
        self.assertEqual(sizes(t), [1001, 3003])

    def test_fatal_signal_flushes_and_the_process_still_dies_of_it(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            with self.subTest(signal=sig.name):
                out = tempdir()
                # The default disposition, whatever the test runner's own is (a background job ignores SIGINT).
                p = subprocess.Popen([TRUST, "loop"], env=traced_env(out, GPUMEMTRACE_QUIET="1"), stdout=subprocess.PIPE,
                                     text=True,
                                     preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL)
                                                         for s in (signal.SIGINT, signal.SIGHUP)])
                printed = -1
                while printed < 150:
                    printed = int(p.stdout.readline())
                p.send_signal(sig)
                for line in p.stdout:
                    printed = int(line)
                p.stdout.close()
                self.assertEqual(p.wait(timeout=30), -sig)
                t = only_trace(self, out)
                self.check_invariants(t)
                got = sizes(t)
                # Every iteration the program reported is in the trace, in order, with none missing.
                self.assertEqual(got, [100000 + i for i in range(len(got))])
                self.assertGreaterEqual(len(got), printed + 1)
                self.assertEqual((t.footer["end"], t.footer["signal"]), ("signal", sig))  # test_process_end.py

    def test_program_signal_handler_still_runs(self):
        for when in ("before", "after"):  # installed before the recorder starts (chained) or after it
            with self.subTest(installed=when):
                out = tempdir()
                p = subprocess.Popen([TRUST, "handler", when], env=traced_env(out), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
                self.assertEqual(p.stdout.readline(), "ready\n")
                p.send_signal(signal.SIGTERM)
                stdout, stderr = p.communicate(timeout=30)
                self.assertEqual(p.returncode, 0, stderr)
                self.assertEqual(stdout, "handled\nafter\n")
                t = only_trace(self, out)
                self.check_invariants(t)
                self.assertEqual(sizes(t), [4141, 4242])


class Memory(unittest.TestCase):
    # docs/configuration.md (GPUMEMTRACE_RING_EVENTS): the ring costs memory for the slots used only.
    RING_RSS_BOUND_KB = 8 * 1024

    def rss_kb(self, ring_events):
        out = tempdir()
        proc = run_traced([TRUST, "rss"], out, env={"GPUMEMTRACE_RING_EVENTS": str(ring_events)})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return int(proc.stdout.split("rss_kb=")[1])

    def test_largest_ring_is_mapped_lazily(self):
        small = self.rss_kb(256)
        largest = self.rss_kb(4194304)  # about 5 GiB of slots if every one were touched
        self.assertLess(largest - small, self.RING_RSS_BOUND_KB, (small, largest))


if __name__ == "__main__":
    unittest.main()
