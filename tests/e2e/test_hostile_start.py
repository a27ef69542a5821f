# tests/e2e/test_hostile_start.py — the recorder starting where the process is not its own to arrange.
"""The recorder starts on the program's first CUDA call, under whatever the program set up before:
a seccomp filter that refuses (or kills on) rseq, futex or fstat, a file size limit of zero. The
program must run as it does without the recorder — same output, same exit status — and the recorder
must say in one line why it does not trace, leaving no empty trace behind (issue 20)."""
import os
import resource
import subprocess
import unittest

from recorder_testlib import LIB, SIM, Trace, program, recorder_preload, tempdir
from testenv import PROBE_UNDER_TSAN, sanitizer_runtime, under_tsan

SECCOMP = program("seccomp_filter")


def run(args, out, limit_file_size=False, **env):
    e = dict(os.environ, LD_PRELOAD=recorder_preload(LIB), LD_LIBRARY_PATH=SIM, GPUMEMTRACE_OUTPUT=out + "/")
    e.update(env)
    if "ASAN_OPTIONS" in e:
        # make asan: LeakSanitizer's exit check stops the threads with a ptrace-ing tracer, which the
        # program's own filter (it refuses futex, rseq, fstat) breaks; its reports here would be its own
        # failures ("Running thread was not suspended", "Tracer caught signal 11"), not leaks.
        e["ASAN_OPTIONS"] += ":detect_leaks=0"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))

    return subprocess.run(args, env=e, capture_output=True, text=True, timeout=120,
                          preexec_fn=limit if limit_file_size else None)


def recorder_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("gpumemtrace:")]


class SeccompAfterStart(unittest.TestCase):
    def check_untraced(self, call, kill=False, why="rseq"):
        if under_tsan():
            self.skipTest(PROBE_UNDER_TSAN)
        out = tempdir()
        args = [SECCOMP, call] + (["kill"] if kill else [])
        proc = run(args, out)
        self.assertEqual(proc.returncode, 0, proc.stderr)  # not "Fatal glibc error: rseq registration failed"
        self.assertIn("done", proc.stdout)
        lines = recorder_lines(proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("seccomp filter", lines[0])
        self.assertIn(why, lines[0])
        self.assertTrue(lines[0].endswith("running untraced"), lines[0])
        self.assertEqual(os.listdir(out), [])

    def test_rseq_refused(self):
        self.check_untraced("rseq")

    def test_rseq_kills(self):
        self.check_untraced("rseq", kill=True)

    def test_futex_refused(self):
        self.check_untraced("futex", why="futex")

    def test_futex_kills(self):
        self.check_untraced("futex", kill=True, why="futex")

    def test_a_filter_that_allows_threads_is_traced(self):
        out = tempdir()
        proc = run([SECCOMP, "none"], out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("thread ok", proc.stdout)
        self.assertEqual(len(os.listdir(out)), 1)

    def test_fstat_refused_leaves_no_file(self):
        out = tempdir()
        proc = run([SECCOMP, "fstat"], out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("done", proc.stdout)
        lines = recorder_lines(proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("running untraced", lines[0])
        self.assertEqual(os.listdir(out), [])  # was: a 0-byte trace


class SeccompKillsACallOfOurs(unittest.TestCase):
    """A filter that kills on a system call the program itself never makes, but the recorder does (issue
    27, item 3): the probe meets it in a child; the program never dies of it."""

    def run_filtered(self, call):
        if under_tsan():
            self.skipTest(PROBE_UNDER_TSAN)
        out = tempdir()
        proc = run([SECCOMP, call, "kill"], out)
        self.assertEqual(proc.returncode, 0, proc.stderr)  # not -SIGSYS
        self.assertIn("done", proc.stdout)
        return out, proc, recorder_lines(proc.stderr)

    def check_traced(self, call, line=None):
        out, proc, lines = self.run_filtered(call)
        self.assertIn("thread ok", proc.stdout)
        self.assertEqual(lines, [line] if line else [])
        (name,) = os.listdir(out)
        return os.path.join(out, name)

    def test_clone3_kills(self):
        # glibc makes threads with clone3: without it, no writer thread.
        out, proc, lines = self.run_filtered("clone3")
        self.assertEqual(lines, ["gpumemtrace: a seccomp filter kills a process that makes the clone3 system call, "
                                 "which the recorder needs; running untraced"])
        self.assertEqual(os.listdir(out), [])

    def test_clone_kills(self):
        # The probe's own child is not made with clone, and the writer thread is made with clone3.
        self.check_traced("clone")

    def test_process_vm_readv_kills(self):
        # The page checks (a mark's label, the memory libunwind reads) do with mincore.
        path = self.check_traced("process_vm_readv")
        t = Trace(path)
        self.assertEqual([e.get("label") for e in t.events if e["op"] == "mark"], ["after the filter"])
        self.assertTrue(t.functions(t.allocs()[0]))

    def test_mincore_kills(self):
        # libunwind calls it when it starts: events go without native stacks, said once.
        path = self.check_traced("mincore", "gpumemtrace: a seccomp filter kills a process that makes the mincore "
                                           "system call, which the unwinder needs; events are recorded without "
                                           "native stacks")
        self.assertEqual(Trace(path).allocs()[0]["stack"], 0)

    def test_pipe2_kills(self):
        # libunwind's pipe is never made (interpose/hooks/unwinder_pipe.cpp).
        if sanitizer_runtime():
            self.skipTest("the sanitizer's runtime makes pipes of its own (LeakSanitizer at exit)")
        self.check_traced("pipe2")


class OutOfMemoryInTheWriter(unittest.TestCase):
    def test_libdw_out_of_memory_turns_symbolization_off(self):
        # libdw's own handler calls error(EXIT_FAILURE): the program exited with status 1 (an address
        # space limit, RLIMIT_AS, made libdw's allocations fail in the writer thread). Now symbolization
        # stops, with one line; the frames keep their module and offset, which gpumem-report names.
        if sanitizer_runtime():
            self.skipTest("the sanitizer's malloc comes before the failing one")
        out = tempdir()
        failing = os.path.join(os.path.dirname(SECCOMP), "libdw_out_of_memory.so")
        proc = run([program("scenarios"), "depth"], out, LD_PRELOAD=recorder_preload(LIB, failing))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(recorder_lines(proc.stderr), [
            "gpumemtrace: out of memory while naming frames; symbolization turned off (gpumem-report names them "
            "from the module files)"])
        (name,) = os.listdir(out)
        t = Trace(os.path.join(out, name))
        self.assertEqual(t.footer["end"], "exit")
        (event,) = t.allocs()
        self.assertTrue(all("module" in t.frames[f] and "function" not in t.frames[f]
                            for f in t.stacks[event["stack"]]["frames"]))


class FullDiskAtStart(unittest.TestCase):
    def test_no_empty_trace_is_left_behind(self):
        # RLIMIT_FSIZE 0: the first write of the trace fails as on a full disk (EFBIG, and SIGXFSZ,
        # which the writer thread blocks). The program runs on; the empty file is removed.
        if under_tsan():
            # Checked: the program alone, with ThreadSanitizer's runtime preloaded and no recorder, dies
            # of SIGXFSZ under this limit.
            self.skipTest("ThreadSanitizer's runtime itself dies of SIGXFSZ under RLIMIT_FSIZE 0")
        out = tempdir()
        proc = run([SECCOMP, "none"], out, limit_file_size=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("done", proc.stdout)
        self.assertEqual(os.listdir(out), [])
        self.assertTrue(any("cannot write the trace" in line for line in recorder_lines(proc.stderr)), proc.stderr)
        self.assertTrue(any("removed the empty trace" in line for line in recorder_lines(proc.stderr)), proc.stderr)


if __name__ == "__main__":
    unittest.main()
