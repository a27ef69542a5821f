# tests/python/test_bench_harness.py — the PyTorch benchmarks' harness (bench/benchlib.py,
# process_bench.py, torch_step_bench.py, torch_drain_bench.py) and the pytest plugin's gc callback bench
# (pytest_gc_bench.py) run on the CPU: their variants engage what they claim to.
"""The GPU benchmarks cannot be timed here, but their harness can be checked: the medians and ratios of
bench/benchlib.py, the interleaving of variants, bench/torch_drain_bench.py (CPU-only, its trace
checked), and bench/process_bench.py and torch_step_bench.py (its allocation-only model) end to end
against the stand-in torch on the simulated runtime: every variant runs, the traced ones write whole
traces, drains are counted, and a full-level run whose PyTorch hook did not record fails the bench
instead of giving a figure.
The figures these runs print mean nothing (a stand-in torch); only their shape is asserted.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from python_testlib import BUILD, LIB, ROOT, SIM, sanitizer_runtime

BENCH = os.path.join(ROOT, "bench")
FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")
sys.path.insert(0, BENCH)
import benchlib  # noqa: E402


class BenchlibTest(unittest.TestCase):
    def test_spread_median_range_and_ratio(self):
        s = benchlib.Spread([3.0, 1.0, 2.0, 10.0])
        self.assertEqual((s.median, s.low, s.high), (2.5, 1.0, 10.0))
        self.assertEqual(s.text("%.1f"), "2.5 (1.0-10.0)")
        self.assertAlmostEqual(s.ratio_to(benchlib.Spread([5.0])), 0.5)
        with self.assertRaises(ValueError):
            benchlib.Spread([])

    def test_rounds_interleave_variants_and_stop_at_a_failure(self):
        calls = []
        samples = benchlib.interleaved_rounds(("a", "b"), 2, lambda v, r: calls.append((v, r)) or r + 1)
        self.assertEqual(calls, [("a", 0), ("b", 0), ("a", 1), ("b", 1)])
        self.assertEqual(samples, {"a": [1, 2], "b": [1, 2]})
        calls.clear()
        self.assertIsNone(benchlib.interleaved_rounds(
            ("a", "b"), 3, lambda v, r: calls.append((v, r)) or (None if v == "b" else 1)))
        self.assertEqual(calls, [("a", 0), ("b", 0)])

    def test_traced_env_puts_the_hook_first_on_pythonpath(self):
        env = benchlib.traced_env("/b", "/t.jsonl", {"X": "1"}, base={"PYTHONPATH": "/mine"})
        self.assertEqual(env["LD_PRELOAD"], "/b/libgpumemtrace.so")
        self.assertEqual(env["GPUMEMTRACE_OUTPUT"], "/t.jsonl")
        self.assertEqual(env["PYTHONPATH"].split(os.pathsep), [os.path.join(ROOT, "tools", "python"), "/mine"])
        self.assertEqual(env["X"], "1")


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM),
                     "needs build/libgpumemtrace.so and build/sim/libcudart.so.13")
@unittest.skipIf(sanitizer_runtime(), "the benchmarks set LD_PRELOAD to the recorder alone and are never "
                 "run sanitized (make asan / make tsan)")
class GpuBenchOnStandInTest(unittest.TestCase):
    def run_bench(self, script, *args, env_extra=None, fake=True):
        env = dict(os.environ, FAKE_TORCH_CUDART=SIM, PYTHONPATH=FAKE if fake else "")
        env.pop("PYTHONSTARTUP", None)
        env.update(env_extra or {})
        return subprocess.run([sys.executable, os.path.join(BENCH, script), "--build", BUILD, *args],
                              capture_output=True, text=True, env=env, timeout=300)

    def test_every_variant_runs_and_is_checked(self):
        out = os.path.join(tempfile.mkdtemp(), "samples.json")
        p = self.run_bench("process_bench.py", "--runs", "2", "--json", out)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows = [line.split("|")[1].strip() for line in p.stdout.splitlines()
                if line.startswith("| ") and not line.startswith("| variant")]
        self.assertEqual(rows, ["plain", "torch", "driver", "full", "full-nosym"])
        self.assertIn("full adds", p.stdout)
        self.assertRegex(p.stdout, r"Load average [\d.]+ [\d.]+ [\d.]+ at start")
        with open(out) as f:
            samples = json.load(f)["samples"]
        self.assertEqual({v: len(s) for v, s in samples.items()},
                         {v: 2 for v in ("plain", "torch", "driver", "full", "full-nosym")})
        self.assertTrue(all(t > 0 for s in samples.values() for t in s))

    def test_a_full_run_without_tensor_events_fails_the_bench(self):
        # An unsupported PyTorch version: the hook stays off (one warning), the trace has CUDA calls only.
        p = self.run_bench("process_bench.py", "--runs", "1", env_extra={"FAKE_TORCH_VERSION": "2.3.1+cu121"})
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("FAIL: full run 0: the trace has no block_alloc event", p.stdout)
        self.assertNotIn("| variant", p.stdout)

    def test_step_bench_times_every_variant_and_counts_drains(self):
        # The allocation-only model is the one the stand-in can run; a small ring and a fast poll make
        # the hook drain during the timed steps.
        small_ring = {"GPUMEMTRACE_TORCH_ENTRIES": "1024", "GPUMEMTRACE_TORCH_POLL_MS": "10"}
        p = self.run_bench("torch_step_bench.py", "--models", "alloc", "--rounds", "1", "--window-steps", "40",
                           env_extra=small_ring)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows = [line.split("|")[2].strip() for line in p.stdout.splitlines()
                if line.startswith("| allocate")]
        self.assertEqual(rows, ["plain", "torch", "driver", "full"])
        drains = int(re.search(r"(\d+) drains in the last full run", p.stdout).group(1))
        self.assertGreater(drains, 1, p.stdout)
        p = self.run_bench("torch_step_bench.py", "--models", "alloc", "--rounds", "1", "--window-steps", "5",
                           env_extra={"FAKE_TORCH_VERSION": "2.3.1+cu121"})
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("FAIL: alloc full round 0: the trace has no block_alloc event", p.stdout)

    def test_drain_bench_times_each_hook_version_and_checks_the_trace(self):
        tools = os.path.join(ROOT, "tools", "python")
        p = self.run_bench("torch_drain_bench.py", "--runs", "1", "--ring", "1024", "--drains", "2",
                           "--tools", "a=" + tools, "--tools", "b=" + tools, fake=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows = [line.split("|")[1].strip() for line in p.stdout.splitlines()
                if line.startswith("| ") and not line.startswith("| hook")]
        self.assertEqual(rows, ["a", "b"])
        p = self.run_bench("torch_drain_bench.py", "--tools", "a=/nonexistent", fake=False)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("--tools takes NAME=DIR", p.stderr)

    def test_without_torch_both_benches_skip(self):
        for script in ("process_bench.py", "torch_step_bench.py"):
            p = self.run_bench(script, fake=False)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertTrue(p.stdout.startswith("SKIP: needs PyTorch with a CUDA GPU"), p.stdout)


@unittest.skipUnless(os.path.exists(LIB), "needs build/libgpumemtrace.so")
@unittest.skipIf(sanitizer_runtime(), "the benchmarks set LD_PRELOAD to the recorder alone")
class PytestGcBenchTest(unittest.TestCase):
    """bench/pytest_gc_bench.py: every variant runs, and only the plugin's writes gc records, one per
    collection that freed its cycle (none for the empty collections)."""

    def test_variants_and_their_records(self):
        p = subprocess.run([sys.executable, os.path.join(BENCH, "pytest_gc_bench.py"), "--build", BUILD, "--rounds", "2",
                            "--collections", "300"], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows = {line.split("|")[1].strip(): line.split("|")[2:5] for line in p.stdout.splitlines()
                if line.startswith("| ") and not line.startswith("| variant")}
        self.assertEqual(list(rows), ["none", "noop", "plugin", "plugin - none (medians)", "plugin - noop (medians)"])
        records = {v: int(rows[v][2]) for v in ("none", "noop", "plugin")}
        self.assertEqual((records["none"], records["noop"]), (0, 0))
        self.assertIn(records["plugin"], (300, 301))  # the 300 cycles, and the full collect before the loops
        self.assertRegex(p.stdout, r"load average before: [\d.]+ [\d.]+ [\d.]+")


if __name__ == "__main__":
    unittest.main()
