# tests/python/test_torch_gpu_run.py — tests/gpu/run.sh and its checks on a machine without a GPU: clean SKIPs, one summary, and the history checks against the stand-in torch.
"""tests/gpu/run.sh runs on a lent GPU machine in one call, from a prebuilt bundle (the contract with
`make gpu-bundle`: bin/, lib/, python/). Here, without a GPU:
- run.sh with a bundle assembled from build/ by hand: every check SKIPs, exit 0, summary.txt /
  summary.json / run.log in OUT and nothing else;
- without the bundle it still SKIPs and exits 0, saying what is missing;
- the PyTorch history checks (tests/gpu/torch_history_checks.py) against the stand-in torch and the
  simulated runtime and driver, for the checks the stand-in can take: all PASS (the check logic —
  counting, parsing, comparing with the driver's cuMemMap — is what runs on the GPU);
- summarize.py keeps every packed file under the device tool's 16 MiB.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from python_testlib import BUILD, LIB, ROOT, SIM
from testenv import under_tsan

RUN = os.path.join(ROOT, "tests", "gpu", "run.sh")
FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")
CHECKS = ("history/history checks", "batch/batch checks", "corpus/corpus", "torch/torch checks", "driver/driver GPU checks",
          "verdict/verdict checks", "cost/cost checks")


def no_gpu_env(**extra):
    """This machine's environment, without nvidia-smi on PATH (there is none here anyway) and without
    a stand-in torch: what a machine without a GPU gives run.sh."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not os.path.exists(os.path.join(p, "nvidia-smi")))
    for k in ("PYTHONPATH", "LD_PRELOAD", "GPUMEMTRACE_HOME", "OUT"):
        env.pop(k, None)
    env.update(extra)
    return env


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(os.path.join(BUILD, "gpumem-report")),
                     "needs build/libgpumemtrace.so and build/gpumem-report")
class GpuRunTest(unittest.TestCase):
    def bundle(self):
        """A release bundle's layout, assembled from build/ (until make gpu-bundle exists)."""
        d = tempfile.mkdtemp(prefix="gpumemtrace-bundle-")
        self.addCleanup(shutil.rmtree, d)
        for sub in ("bin", "lib"):
            os.makedirs(os.path.join(d, sub))
        for name in ("gpumemtrace", "gpumem-report"):
            shutil.copy2(os.path.join(BUILD, name), os.path.join(d, "bin"))
        shutil.copy2(LIB, os.path.join(d, "lib"))
        shutil.copytree(os.path.join(ROOT, "tools", "python"), os.path.join(d, "python"))
        return d

    def run_sh(self, **env):
        out = tempfile.mkdtemp(prefix="gpumemtrace-gpu-out-")
        self.addCleanup(shutil.rmtree, out)
        p = subprocess.run([RUN], capture_output=True, text=True, env=no_gpu_env(OUT=out, **env), timeout=300,
                           cwd=tempfile.gettempdir())
        return p, out

    def test_no_gpu_every_check_skips(self):
        p, out = self.run_sh(GPUMEMTRACE_HOME=self.bundle())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["run.log", "summary.json", "summary.txt"])
        lines = open(os.path.join(out, "summary.txt")).read().splitlines()
        self.assertTrue(lines[0].startswith("# no GPU"), lines[0])
        self.assertEqual([l.split(":")[0] for l in lines[1:-1]], ["SKIP " + c for c in CHECKS])
        self.assertEqual(lines[-1], "0 passed, 0 failed, 7 skipped")
        summary = json.load(open(os.path.join(out, "summary.json")))
        self.assertEqual((summary["passed"], summary["failed"], summary["skipped"]), (0, 0, 7))
        self.assertIn("no NVIDIA GPU", open(os.path.join(out, "run.log")).read())

    def test_missing_bundle_said_and_still_skips(self):
        p, out = self.run_sh(GPUMEMTRACE_HOME="/nonexistent/gpumemtrace")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("missing: /nonexistent/gpumemtrace/lib/libgpumemtrace.so", open(os.path.join(out, "run.log")).read())

    @unittest.skipUnless(os.path.exists(SIM), "needs build/sim/libcudart.so.13")
    @unittest.skipIf(under_tsan(), "the GPU checks preload the bundle's recorder alone, as on the device; "
                     "ThreadSanitizer's build cannot load without its runtime first")
    def test_history_checks_against_the_stand_in(self):
        only = ("reconvert,long,reset,record_stream,own_before_init,own_after,own_off,own_legacy,expandable,"
                "no_inductor,gc_cycle")
        out = tempfile.mkdtemp(prefix="gpumemtrace-gpu-out-")
        self.addCleanup(shutil.rmtree, out)
        env = no_gpu_env(OUT=out, GPU_BUNDLE=self.bundle(), GPU_CHECKS_ONLY=only, PYTHONPATH=FAKE,
                         FAKE_TORCH_CUDART=SIM, FAKE_TORCH_LIMIT=str(512 << 20))
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "torch_history_checks.py")],
                           capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-2000:])
        with open(os.path.join(out, "results", "history.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        names = {r["check"].split("/", 2)[1] for r in rows}
        self.assertEqual(names, set(only.split(",")))
        self.assertEqual([r for r in rows if r["status"] != "PASS"], [])

    @unittest.skipUnless(os.path.exists(SIM), "needs build/sim/libcudart.so.13")
    @unittest.skipIf(under_tsan(), "the GPU checks preload the bundle's recorder alone")
    def test_batch_checks_plumbing_against_the_stand_in(self):
        # The stand-in has no torch.nn: the script's own workload of plain requests runs instead, capped
        # with set_per_process_memory_fraction. The stand-in's allocator is not PyTorch's, so what the
        # model's replay of its recording says is not checked here (replay, leave one out): what is, is
        # the plumbing the GPU run depends on (recording, the report's batch object, the children's
        # figures) and that the predictions and the largest batch agree with the stand-in's own runs.
        out = tempfile.mkdtemp(prefix="gpumemtrace-gpu-out-")
        self.addCleanup(shutil.rmtree, out)
        env = no_gpu_env(OUT=out, GPU_BUNDLE=self.bundle(), PYTHONPATH=FAKE, FAKE_TORCH_CUDART=SIM,
                         FAKE_TORCH_LIMIT=str(1 << 30), GPUMEMTRACE_SIM_CAPACITY="1G", FAKE_TORCH_RETRY="1")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "batch_checks.py")],
                           capture_output=True, text=True, env=env, timeout=300)
        self.assertNotIn("Traceback", p.stdout + p.stderr)
        with open(os.path.join(out, "results", "batch.jsonl")) as f:
            rows = {r["check"].split("/", 1)[1]: r for r in (json.loads(line) for line in f)}
        predicted = sorted(n for n in rows if n.startswith("predict_b"))
        self.assertEqual(len(predicted), 2, rows)
        for name in ["record", "cap", "max_batch"] + predicted:
            self.assertEqual(rows[name]["status"], "PASS", rows[name])
        # The cap the program set is the report's capacity.
        self.assertIn("the report's capacity 536870912 vs the cap 536870912", rows["cap"]["figure"])
        self.assertIn("leave_one_out", rows)
        self.assertNotIn("unexpected", rows)

    def test_corpus_made_and_checked_with_the_stand_in(self):
        # The corpus script and the corpus tests fit together: the stand-in torch makes pickles of the
        # same layout (in a temporary folder: they are the stand-in's, never checked in as real ones),
        # and tests/snapshot/test_snapshot_corpus.py runs on them instead of skipping.
        out = tempfile.mkdtemp(prefix="gpumemtrace-gpu-out-")
        self.addCleanup(shutil.rmtree, out)
        env = no_gpu_env(OUT=out, PYTHONPATH=FAKE)
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "snapshot_corpus.py")],
                           capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        corpus = os.path.join(out, "corpus")
        self.assertEqual(sorted(os.listdir(corpus)), ["expandable.pickle", "manifest.json", "native.pickle",
                                                      "oom.pickle", "record_stream.pickle"])
        p = subprocess.run([sys.executable, "-m", "unittest", "-v", "test_snapshot_corpus"], capture_output=True,
                           text=True, cwd=os.path.join(ROOT, "tests", "snapshot"), timeout=120,
                           env=no_gpu_env(SNAPSHOT_CORPUS=corpus, GPUMEMTRACE_BUILD=BUILD))
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertNotIn("skipped", p.stderr)
        self.assertIn("Ran 4 tests", p.stderr)

    def test_packed_files_stay_under_the_limit(self):
        scratch = tempfile.mkdtemp(prefix="gpumemtrace-gpu-scratch-")
        out = tempfile.mkdtemp(prefix="gpumemtrace-gpu-out-")
        self.addCleanup(shutil.rmtree, scratch)
        self.addCleanup(shutil.rmtree, out)
        os.makedirs(os.path.join(scratch, "history", "long"))
        with open(os.path.join(scratch, "history", "long", "trace.jsonl"), "wb") as f:
            f.write(os.urandom(16 << 20))   # does not compress: over the limit alone
        with open(os.path.join(scratch, "history", "long", "run.log"), "w") as f:
            f.write("kept\n")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "summarize.py"), scratch, out, "1"],
                           capture_output=True, text=True, env=no_gpu_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLessEqual(os.path.getsize(os.path.join(out, "traces.tar.gz")), 16 << 20)
        import tarfile
        with tarfile.open(os.path.join(out, "traces.tar.gz")) as tar:
            self.assertEqual(tar.getnames(), ["history/long/run.log"])
        self.assertIn("1 trace files left out", open(os.path.join(out, "summary.txt")).read())


if __name__ == "__main__":
    unittest.main()
