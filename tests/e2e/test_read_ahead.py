# tests/e2e/test_read_ahead.py — the report of a recorder's trace is the same whether its event lines
# are scanned on the read-ahead thread or on the parsing thread (report/reader/line_reader.h).
"""gpumem-report reads a trace of more than one 256 KiB block on two threads: the read-ahead thread
decompresses it, splits its lines and scans the common event lines (site, time, address, size,
segment, pool), the parsing thread the rest. On one CPU (its affinity mask) no thread is started and
every line is scanned where it is parsed. A server's trace of scopes, labels, pool blocks, CUDA
allocations and an OOM, written by the recorder (format version 2, .zst), must give byte-identical
reports both ways, in every format."""
import os
import shutil
import subprocess
import unittest

from recorder_testlib import BUILD, program, run_traced, tempdir, trace_files

REPORT = os.path.join(BUILD, "gpumem-report")


def on_one_cpu():
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})


class ReadAhead(unittest.TestCase):
    def test_same_report_with_and_without_the_read_ahead_thread(self):
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("one CPU: the read-ahead thread is never started")
        out = tempdir()
        self.addCleanup(shutil.rmtree, out, True)
        # 6000 requests: about 60k events, several MiB of trace text, the OOM at the end.
        proc = run_traced([program("flight_server"), "6000", out, "", "5999"], out + "/")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        [trace] = [p for p in trace_files(out) if p.endswith(".jsonl.zst")]
        text = subprocess.run(["zstd", "-dcq", trace], capture_output=True, check=True).stdout
        self.assertGreater(len(text), 4 * (256 << 10))  # blocks after the first one
        self.assertIn(b'"pool":', text)
        self.assertIn(b'"segment":', text)
        for fmt in ("json", "text", "html"):
            with self.subTest(format=fmt):
                args = [REPORT, "--no-progress", "--format", fmt, trace]
                two = subprocess.run(args, capture_output=True, timeout=300)
                one = subprocess.run(args, capture_output=True, timeout=300, preexec_fn=on_one_cpu)
                self.assertIn(two.returncode, (0, 1), two.stderr)
                self.assertEqual(two.returncode, one.returncode)
                self.assertEqual(two.stderr, one.stderr)
                self.assertTrue(two.stdout == one.stdout, f"{fmt}: the reports differ")


if __name__ == "__main__":
    unittest.main()
