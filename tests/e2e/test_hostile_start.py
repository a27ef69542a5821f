# tests/e2e/test_hostile_start.py — the recorder starting where the process is not its own to arrange.
"""The recorder starts on the program's first CUDA call, under whatever the program set up before:
a seccomp filter that refuses (or kills on) rseq, futex or fstat, a file size limit of zero. The
program must run as it does without the recorder — same output, same exit status — and the recorder
must say in one line why it does not trace, leaving no empty trace behind (issue 20)."""
import os
import resource
import subprocess
import unittest

from recorder_testlib import LIB, SIM, program, recorder_preload, tempdir

SECCOMP = program("seccomp_filter")


def run(args, out, limit_file_size=False, **env):
    e = dict(os.environ, LD_PRELOAD=recorder_preload(LIB), LD_LIBRARY_PATH=SIM, GPUMEMTRACE_OUTPUT=out + "/", **env)
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


class FullDiskAtStart(unittest.TestCase):
    def test_no_empty_trace_is_left_behind(self):
        # RLIMIT_FSIZE 0: the first write of the trace fails as on a full disk (EFBIG, and SIGXFSZ,
        # which the writer thread blocks). The program runs on; the empty file is removed.
        out = tempdir()
        proc = run([SECCOMP, "none"], out, limit_file_size=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("done", proc.stdout)
        self.assertEqual(os.listdir(out), [])
        self.assertTrue(any("cannot write the trace" in line for line in recorder_lines(proc.stderr)), proc.stderr)
        self.assertTrue(any("removed the empty trace" in line for line in recorder_lines(proc.stderr)), proc.stderr)


if __name__ == "__main__":
    unittest.main()
