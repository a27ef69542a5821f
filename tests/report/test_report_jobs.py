# tests/report/test_report_jobs.py — `-j N`: the traces of a run analysed at once give exactly the report
# of `-j 1` (stdout, stderr, exit status) in every format, with empty traces skipped in input order and,
# when traces are malformed, the error of the first one in input order.
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from reportlib import REPORT  # noqa: E402
from tracegen import MiB, Trace  # noqa: E402

GOLDEN = os.path.join(HERE, "golden")
MALFORMED = os.path.join(HERE, "malformed")


def run(*args):
    proc = subprocess.run([REPORT, "--no-progress", *map(str, args)], capture_output=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


class Jobs(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gpumem-jobs-")
        self.run_dir = os.path.join(self.tmp.name, "run")
        os.mkdir(self.run_dir)
        # The golden traces (leaks, blocks, a killed writer, PyTorch stacks, ...) as the ranks of one run,
        # an empty one, and two larger ranks whose reading spans many read-ahead blocks.
        for name in sorted(os.listdir(GOLDEN)):
            if name.endswith(".jsonl"):
                shutil.copy(os.path.join(GOLDEN, name), self.run_dir)
        open(os.path.join(self.run_dir, "rank9_empty.jsonl"), "w").close()
        for rank in (0, 1):
            self.rank_trace(os.path.join(self.run_dir, "rank%d.jsonl" % rank), rank, 8000 + 3000 * rank)

    def tearDown(self):
        self.tmp.cleanup()

    @staticmethod
    def rank_trace(path, rank, iterations):
        t = Trace(path, pid=100 + rank)
        step, keep = t.stack("train_step", 20), t.stack("cache_batch", 40)
        for i in range(iterations):
            t.alloc(0x10000000 + (i % 64) * MiB, MiB + i % 977, step)
            if i % 97 == 0:
                t.alloc(0x90000000 + i * 4096, 4096, keep)  # kept: grows, leaks
            t.free(0x10000000 + (i % 64) * MiB)
            if i % 1000 == 0:
                t.mark("epoch %d" % (i // 1000))
        t.close()
        return path

    def assert_same_as_one_job(self, *args):
        one = run("-j", 1, *args)
        for jobs in (2, 4, 16):
            self.assertEqual(run("-j", jobs, *args), one, "-j %d differs from -j 1 for %s" % (jobs, args))
        return one

    def test_every_format_is_the_same_with_several_jobs(self):
        for fmt in ("text", "json", "perfetto", "folded"):
            rc, out, err = self.assert_same_as_one_job("--format", fmt, self.run_dir)
            self.assertEqual(rc, 0, err)
            self.assertTrue(out)
        rc, out, err = self.assert_same_as_one_job("--format", "json", self.run_dir)
        self.assertIn(b"rank9_empty.jsonl: empty (0 bytes)", err)
        self.assertIn(b'"pid": 101', out)

    def test_gates_and_diff_are_the_same_with_several_jobs(self):
        rc, _, err = self.assert_same_as_one_job("--fail-on-leak", "--fail-on-growth", self.run_dir)
        self.assertEqual(rc, 1)
        self.assertIn(b"FAILED", err)
        base = os.path.join(self.tmp.name, "base")
        shutil.copytree(self.run_dir, base)
        self.rank_trace(os.path.join(base, "rank1.jsonl"), 1, 2000)
        rc, out, _ = self.assert_same_as_one_job("diff", "--format", "json", base, self.run_dir)
        self.assertEqual(rc, 0)
        self.assertTrue(out)

    def test_the_first_malformed_trace_in_input_order_is_the_error(self):
        shutil.copy(os.path.join(MALFORMED, "addr_not_hex.jsonl"), os.path.join(self.run_dir, "c_bad.jsonl"))
        shutil.copy(os.path.join(MALFORMED, "bad_version.jsonl"), os.path.join(self.run_dir, "rank5_bad.jsonl"))
        rc, out, err = self.assert_same_as_one_job("--format", "json", self.run_dir)
        self.assertEqual(rc, 2)
        self.assertEqual(out, b"")
        self.assertIn(b"c_bad.jsonl:", err)
        self.assertNotIn(b"rank5_bad", err)

    def test_a_job_count_below_one_is_a_usage_error(self):
        for value in ("0", "x", "-3"):
            rc, _, err = run("-j", value, self.run_dir)
            self.assertEqual(rc, 2, value)
            self.assertIn(b"--jobs", err)


if __name__ == "__main__":
    unittest.main()
