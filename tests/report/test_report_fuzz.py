# tests/report/test_report_fuzz.py — a brief libFuzzer run of the reader and analyses.
"""A brief libFuzzer run of the reader and analyses (build/report/fuzz_report_reader) on the golden
and malformed corpora: any crash, hang or sanitizer report fails. `make fuzz` runs it at length."""
import os
import shutil
import subprocess
import tempfile

from reportlib import BUILD, ReportTestCase

HERE = os.path.dirname(os.path.abspath(__file__))
FUZZER = os.path.join(BUILD, "report", "fuzz_report_reader")
SECONDS = int(os.environ.get("REPORT_FUZZ_SECONDS", "20"))


class Fuzz(ReportTestCase):
    def test_brief_fuzz_run(self):
        if not os.path.exists(FUZZER):
            self.skipTest("fuzzer not built (needs clang with libFuzzer)")
        corpus = tempfile.mkdtemp(prefix="report-fuzz-")
        self.addCleanup(shutil.rmtree, corpus, True)
        for d in ("golden", "malformed"):
            for name in os.listdir(os.path.join(HERE, d)):
                if not name.endswith(".json"):
                    shutil.copy(os.path.join(HERE, d, name), os.path.join(corpus, d + "_" + name))
        proc = subprocess.run([FUZZER, f"-max_total_time={SECONDS}", "-max_len=4096", "-timeout=10",
                               "-rss_limit_mb=1024", corpus],
                              capture_output=True, text=True, timeout=SECONDS + 120, cwd=corpus)
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
