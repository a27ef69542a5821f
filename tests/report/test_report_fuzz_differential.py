# tests/report/test_report_fuzz_differential.py — a brief run of the differential fuzzer.
"""A brief run of the differential fuzzer (build/report/fuzz_report_differential,
report/fuzz/differential.h): real traces and the simulator's, mutated, must give the report their
canonical re-encoding gives, or be rejected; each input within -timeout seconds and the memory
limits. `make fuzz` runs it at length (docs/security.md has the executions of the last long run)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from reportlib import BUILD, ReportTestCase

HERE = os.path.dirname(os.path.abspath(__file__))
FUZZER = os.path.join(BUILD, "report", "fuzz_report_differential")
SECONDS = int(os.environ.get("REPORT_FUZZ_SECONDS", "20"))


class DifferentialFuzz(ReportTestCase):
    def test_brief_differential_run(self):
        if not os.path.exists(FUZZER):
            self.skipTest("fuzzer not built (needs clang with libFuzzer)")
        work = tempfile.mkdtemp(prefix="report-differential-")
        self.addCleanup(shutil.rmtree, work, True)
        seeds = os.path.join(work, "seeds")
        subprocess.run([sys.executable, os.path.join(HERE, "fuzz_seeds.py"), "--build", BUILD, "--out", seeds],
                       check=True, capture_output=True, timeout=300)
        self.assertGreater(len(os.listdir(seeds)), 20)
        corpus = os.path.join(work, "corpus")
        os.mkdir(corpus)
        proc = subprocess.run([FUZZER, f"-max_total_time={SECONDS}", "-max_len=65536", "-timeout=10",
                               "-rss_limit_mb=2048", "-malloc_limit_mb=1024", "-print_final_stats=1", corpus, seeds],
                              capture_output=True, text=True, timeout=SECONDS + 300, cwd=work)
        self.assertEqual(proc.returncode, 0, proc.stderr[-6000:])
        runs = re.search(r"stat::number_of_executed_units:\s+(\d+)", proc.stderr)
        self.assertIsNotNone(runs, proc.stderr[-2000:])
        self.assertGreater(int(runs.group(1)), 50)  # it did run inputs, not only load the seeds
