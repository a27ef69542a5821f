# tests/e2e/test_oom_endings.py — the OOM that kills the program is in its trace, however it dies.
"""A failed allocation is written through to the trace before the call returns (issue 27, item 1):
CUDA programs end on it (CUDA_CHECK(cudaMalloc(...)) -> abort()), so every ending right after it —
abort, SIGKILL to the process or to its whole group, _exit, a segfault in the error path — keeps the
allocations before it, the OOM and the free-memory reading after it. And a trace is never left
empty, nor cut in the middle of a zstd block, whatever stops it early."""
import os
import resource
import signal
import subprocess
import unittest

from recorder_testlib import BUILD, LIB, SIM, Trace, program, recorder_preload, tempdir, trace_files
from testenv import sanitizer_runtime, under_tsan

OOM_ENDINGS = program("oom_endings")
N = 751


def traced_env(out, **extra):
    return dict(os.environ, LD_PRELOAD=recorder_preload(LIB), LD_LIBRARY_PATH=SIM, GPUMEMTRACE_OUTPUT=out + "/",
                **extra)


class OomThenDeath(unittest.TestCase):
    def check_oom_kept(self, out):
        (path,) = trace_files(out)
        t = Trace(path)
        self.assertEqual([e["size"] for e in t.allocs() if e.get("result", 0) == 0], [1000 + i for i in range(N)])
        (oom,) = [e for e in t.events if e["op"] == "alloc" and e.get("result") == 2]
        self.assertEqual(oom["size"], 1 << 40)
        self.assertTrue(any(e["op"] == "meminfo" and e["seq"] > oom["seq"] for e in t.events),
                        "the free-memory reading after the OOM is kept too")
        return t

    def run_ending(self, ending, new_session=False):
        out = tempdir()
        proc = subprocess.run([OOM_ENDINGS, str(N), ending], env=traced_env(out), capture_output=True, text=True,
                              timeout=60, start_new_session=new_session)
        self.assertIn("CUDA error: out of memory", proc.stderr)
        return out, proc

    def test_abort(self):
        out, proc = self.run_ending("abort")
        self.assertEqual(proc.returncode, -signal.SIGABRT, proc.stderr)
        # SIGABRT at its default action finishes the trace, as SIGTERM does: the footer says so.
        t = self.check_oom_kept(out)
        self.assertEqual((t.footer["end"], t.footer["signal"]), ("signal", signal.SIGABRT))

    def test_sigkill_to_itself(self):
        out, proc = self.run_ending("kill")
        self.assertEqual(proc.returncode, -signal.SIGKILL, proc.stderr)
        self.assertEqual(self.check_oom_kept(out).footer["signal"], signal.SIGKILL)

    def test_sigkill_to_its_process_group(self):
        # killpg(getpgrp(), SIGKILL), in a group of its own: it finishes its trace first, as kill() does.
        out, proc = self.run_ending("killpg", new_session=True)
        self.assertEqual(proc.returncode, -signal.SIGKILL, proc.stderr)
        self.assertEqual(self.check_oom_kept(out).footer["signal"], signal.SIGKILL)

    def test_sigkill_from_outside_right_after(self):
        out = tempdir()
        p = subprocess.Popen([OOM_ENDINGS, str(N), "external"], env=traced_env(out), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        self.assertEqual(p.stdout.readline(), "oom\n")
        p.kill()
        p.wait(timeout=60)
        p.stdout.close()
        self.check_oom_kept(out)

    def test_quick_exit(self):
        out, proc = self.run_ending("_exit")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.check_oom_kept(out)

    def test_segfault_in_the_error_path(self):
        if sanitizer_runtime():
            self.skipTest("the sanitizer catches the program's own fault and reports it")
        out, proc = self.run_ending("segv")
        self.assertEqual(proc.returncode, -signal.SIGSEGV, proc.stderr)
        self.check_oom_kept(out)


class NeverEmpty(unittest.TestCase):
    def test_killed_right_after_the_first_call_leaves_a_header(self):
        # The header is written through before the first CUDA call returns; before, a SIGKILL in the
        # writer's first milliseconds left a 0-byte file about every other time.
        for _ in range(10):
            out = tempdir()
            p = subprocess.Popen([OOM_ENDINGS, "first"], env=traced_env(out), stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
            self.assertEqual(p.stdout.readline(), "ready\n")
            p.kill()
            p.wait(timeout=60)
            p.stdout.close()
            (path,) = trace_files(out)
            self.assertGreater(os.path.getsize(path), 0)
            self.assertEqual(Trace(path).header["type"], "header")

    def test_tiny_file_size_limit_leaves_a_readable_trace_or_none(self):
        # A limit that stops the writer in the middle of a zstd block: what is left is cut back to its
        # last whole block, or removed when nothing whole is in it; gpumem-report reads whatever is left.
        if under_tsan():
            self.skipTest("ThreadSanitizer's runtime itself dies of SIGXFSZ under a file size limit")
        for limit in (200, 400, 700, 1000, 1300):
            with self.subTest(limit=limit):
                out = tempdir()

                def limit_file_size(limit=limit):
                    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

                proc = subprocess.run([program("scenarios"), "depth"], env=traced_env(out), capture_output=True,
                                      text=True, timeout=60, preexec_fn=limit_file_size)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertIn("cannot write the trace: File too large; tracing stopped", proc.stderr)
                for path in trace_files(out):
                    report = subprocess.run([os.path.join(BUILD, "gpumem-report"), path], capture_output=True,
                                            text=True, timeout=60)
                    self.assertEqual(report.returncode, 0, report.stderr)


if __name__ == "__main__":
    unittest.main()
