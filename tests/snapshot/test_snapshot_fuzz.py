# tests/snapshot/test_snapshot_fuzz.py — a brief libFuzzer run of the pickle reader and snapshot converter.
"""Brief libFuzzer run of the restricted pickle reader + snapshot converter (make test); `make fuzz`
runs it at length (fuzz-snapshot-pickle in tools/module.mk). Seeds: every sample snapshot in every
protocol, plus the malicious and truncated forms, and the checked-in corpus (tests/snapshot/corpus/:
hostile pickles that cost seconds and gigabytes without bounds; -timeout and -rss_limit_mb hold them)."""
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import snapshot_samples as samples  # noqa: E402

BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(os.path.dirname(os.path.dirname(HERE)), "build"))
FUZZER = os.path.join(BUILD, "fuzz", "snapshot_pickle_fuzzer")
SECONDS = int(os.environ.get("GPUMEMTRACE_FUZZ_BRIEF_SECONDS", "10"))


class SnapshotFuzzBrief(unittest.TestCase):
    def test_brief_fuzz(self):
        if not os.access(FUZZER, os.X_OK):
            self.skipTest(f"{FUZZER} not built (needs clang with libFuzzer)")
        with tempfile.TemporaryDirectory(prefix="gpumem-snapshot-fuzz-") as tmp:
            corpus = os.path.join(tmp, "corpus")
            os.makedirs(corpus)
            for name, build in samples.SAMPLES.items():
                for proto in range(2, 6):
                    data = pickle.dumps(build(), protocol=proto)
                    for tag, blob in (("full", data), ("half", data[: len(data) // 2])):
                        with open(os.path.join(corpus, f"{name}.p{proto}.{tag}"), "wb") as f:
                            f.write(blob)
            with open(os.path.join(corpus, "reduce"), "wb") as f:
                f.write(b"\x80\x02N)R.")
            for path in samples.corpus_files():
                shutil.copy(path, corpus)
            proc = subprocess.run([FUZZER, f"-max_total_time={SECONDS}", "-max_len=16384", "-timeout=10",
                                   "-rss_limit_mb=2048", f"-artifact_prefix={tmp}/", corpus],
                                  capture_output=True, text=True, timeout=SECONDS + 120)
            self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
            self.assertIn("Done", proc.stderr)


if __name__ == "__main__":
    unittest.main()
