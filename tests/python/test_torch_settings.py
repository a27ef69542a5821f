# tests/python/test_torch_settings.py — the allocator settings the PyTorch hook records, and the report's use of them, per release.
"""The PyTorch hook records the caching allocator's settings ("allocator_settings" records,
docs/trace-format.md) under every release shape of the stand-in torch (FAKE_TORCH_VERSION 2.4, 2.8,
2.11, 2.15; tests/python/fake_torch/torch/_release.py):

- in force when the history starts: the variable the release reads (PYTORCH_CUDA_ALLOC_CONF, and
  PYTORCH_ALLOC_CONF first from 2.11), as PyTorch's snapshot reports it, only the allocator's options;
- every later torch.cuda.memory._set_allocator_settings and set_per_process_memory_fraction (both
  names), once each, in their place in the timeline; a call PyTorch refuses is not recorded;
- the header keeps the variables of the environment the process started with, its options only.
Then the report: a capped run re-recorded on the stand-in replays faithfully under the settings the
trace carries, without --recorded-settings, and its OOM verdict names the cap.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import python_testlib
from python_testlib import BUILD, LIB, SIM, tracefile
from test_python_torch import FAKE_VERSIONS, PROG, fake_env

REPORT = os.path.join(BUILD, "gpumem-report")
MiB = 1 << 20
GiB = 1 << 30


class SettingsAcrossFlightRecorderCuts(unittest.TestCase):
    """With the flight recorder (GPUMEMTRACE_KEEP), the window sealed at exit begins after the changes,
    which its checkpoint carries: the settings in force then, one record per device (the last), so the
    window is replayed under the settings its run had."""

    def test_the_window_carries_the_settings_in_force(self):
        out = os.path.join(tempfile.mkdtemp(), "trace.jsonl")
        env = fake_env(None, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_KEEP="128K",
                       PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:128")
        env.pop("PYTORCH_ALLOC_CONF", None)
        proc = subprocess.run([sys.executable, PROG, "settings_churn"], capture_output=True, text=True, env=env,
                              timeout=120)
        self.assertEqual(proc.returncode, 7, proc.stderr[-3000:])
        records = tracefile.read_records(out)[0]
        events = [r for r in records if r.get("type") is None or r["type"] == "event"]
        self.assertLess(len(events), 8000)  # a window: the run made more than 16,000 events
        got = [(r["source"], r["device"], r.get("conf"), r.get("fraction"))
               for r in records if r["type"] == "allocator_settings"]
        self.assertEqual(got, [
            ("_set_allocator_settings", -1, "max_split_size_mb:256,garbage_collection_threshold:0.5", None),
            ("set_per_process_memory_fraction", 0, None, 0.25)])
        doc = json.loads(subprocess.run([REPORT, "--format", "json", "--what-if", "expandable_segments:True", out],
                                        capture_output=True, text=True, timeout=120).stdout)
        w = doc["what_if"][0]
        self.assertEqual(w["settings_from"], "trace")
        self.assertEqual(w["recorded_settings"],
                         "max_split_size_mb:256,garbage_collection_threshold:0.5,per_process_memory_fraction:0.25")


class SettingsCases:
    version = None

    def has(self, minor):
        from gpumemtrace_torch.probes import parse_version
        return parse_version(self.version) >= minor

    def record(self, mode, **env_extra):
        """Runs the test program in `mode`; (records in file order, the program's stderr)."""
        out = os.path.join(tempfile.mkdtemp(), "trace.jsonl")
        env = fake_env(self.version, GPUMEMTRACE_OUTPUT=out, **env_extra)
        for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"):
            if name not in env_extra:
                env.pop(name, None)
        proc = subprocess.run([sys.executable, PROG, mode], capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(proc.returncode, 7, proc.stderr[-3000:])
        self.trace = out
        return tracefile.read_records(out)[0], proc.stderr

    @staticmethod
    def settings(records):
        return [r for r in records if r["type"] == "allocator_settings"]

    def test_settings_at_start_and_each_change(self):
        records, stderr = self.record("settings",
                                      PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:128, pinned_num_register_threads:4")
        self.assertNotIn("gpumemtrace:", stderr)
        got = self.settings(records)
        self.assertEqual([(r["source"], r["device"], r.get("conf"), r.get("fraction")) for r in got], [
            ("in_force", -1, "pinned_num_register_threads:4,max_split_size_mb:128", None),
            ("_set_allocator_settings", -1, "max_split_size_mb:256,garbage_collection_threshold:0.5", None),
            ("set_per_process_memory_fraction", 0, None, 0.5),
            ("set_per_process_memory_fraction", 0, None, 0.25)])
        # Ordered with the events: each change after the allocation before it, and before the next.
        seqs = [r["seq"] for r in got]
        self.assertEqual(seqs, sorted(seqs))
        header = records[0]
        self.assertEqual(header["pytorch_cuda_alloc_conf"], "max_split_size_mb:128,pinned_num_register_threads:4")
        self.assertNotIn("pytorch_alloc_conf", header)
        # The report reads them: the replay changes settings twice on device 0 (the text, then the cap;
        # the second cap too).
        r = self.report("--what-if", "expandable_segments:True")
        w = r["what_if"][0]
        self.assertEqual((w["settings_from"], w["recorded_settings"], w["settings_changes"]),
                         ("trace", "max_split_size_mb:128", 3))
        self.assertIsNone(w["settings_option"])

    def test_the_variable_the_release_reads(self):
        # 2.4 and 2.8 read PYTORCH_CUDA_ALLOC_CONF only; 2.11 and newer PYTORCH_ALLOC_CONF first.
        records, stderr = self.record("settings", PYTORCH_ALLOC_CONF="max_split_size_mb:64",
                                      PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:512")
        first = self.settings(records)[0]
        self.assertEqual(first["source"], "in_force")
        self.assertEqual(first["conf"], "max_split_size_mb:64" if self.has((2, 11)) else "max_split_size_mb:512")
        self.assertEqual((records[0]["pytorch_alloc_conf"], records[0]["pytorch_cuda_alloc_conf"]),
                         ("max_split_size_mb:64", "max_split_size_mb:512"))

    def test_only_allocator_options_reach_the_trace(self):
        # A variable may hold anything; the header keeps the allocator's options only (PyTorch would
        # refuse the text at CUDA's start, so the program does not use CUDA here).
        out = os.path.join(tempfile.mkdtemp(), "trace.jsonl")
        env = fake_env(self.version, GPUMEMTRACE_OUTPUT=out,
                       PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True,token:hunter2,backend:native,"
                                               "max_split_size_mb:1e9 rm -rf,roundup_power2_divisions:[64:8,>:4]")
        code = ("import ctypes; ctypes.CDLL(%r, mode=ctypes.RTLD_GLOBAL); p = ctypes.c_void_p(); "
                "ctypes.CDLL(None).cudaMalloc(ctypes.byref(p), 4096)" % SIM)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out) as f:
            header = json.loads(f.readline())
        self.assertEqual(header["pytorch_cuda_alloc_conf"],
                         "expandable_segments:True,backend:native,roundup_power2_divisions:[64:8,>:4]")
        with open(out) as f:
            self.assertNotIn("hunter2", f.read())

    def test_in_force_is_what_pytorch_reports(self):
        # The options PyTorch's snapshot reports are written from its values (in its order), the others
        # as the text had them; the defaults are recorded too (as "").
        records, _ = self.record("train", PYTORCH_CUDA_ALLOC_CONF="garbage_collection_threshold:0.7,expandable_segments:True")
        first = self.settings(records)[0]
        self.assertEqual(first["conf"], "expandable_segments:True,garbage_collection_threshold:0.7")
        records, _ = self.record("train")
        self.assertEqual(self.settings(records)[0]["conf"], "")

    def test_capped_run_replays_without_recorded_settings(self):
        records, stderr = self.record("capped", FAKE_TORCH_LIMIT=str(GiB), GPUMEMTRACE_SIM_CAPACITY="1G")
        self.assertIn(("set_per_process_memory_fraction", 0, 0.25),
                      [(r["source"], r["device"], r.get("fraction")) for r in self.settings(records)])
        r = self.report("--what-if", "expandable_segments:True")
        w = r["what_if"][0]
        self.assertEqual(w["settings_from"], "trace")
        self.assertTrue(w["replay"]["faithful"], w["replay"])
        self.assertEqual((w["replay"]["segment_ops_compared"], w["replay"]["blocks_compared"]), (1, 1))
        self.assertEqual(w["rows"][0]["ooms_still_happen"], [True])
        self.assertIn("per_process_memory_fraction:0.25", w["recorded_settings"])
        oom, = r["ooms"]
        self.assertEqual(oom["verdict"], "allocator limit")
        self.assertEqual(oom["cap"], {"fraction": 0.25, "bytes": 256 * MiB, "source": "set_per_process_memory_fraction"})
        self.assertIn("set_per_process_memory_fraction(0.25), 256.0 MiB of this device", oom["explanation"])
        self.assertIn("set_per_process_memory_fraction(0.25)", oom["advice"])
        # The same trace without its records (as a trace recorded before them): the replay differs at
        # the OOM, as on the real capped trace, and says how to give the cap.
        stripped = self.trace + ".old.jsonl"
        with open(self.trace) as src, open(stripped, "w") as dst:
            dst.writelines(l for l in src if '"allocator_settings"' not in l)
        w = self.report("--what-if", "expandable_segments:True", trace=stripped)["what_if"][0]
        self.assertEqual(w["settings_from"], "inferred")
        self.assertFalse(w["replay"]["faithful"])
        self.assertIn("give it with --recorded-settings", w["replay"]["divergence"]["what"])

    def report(self, *args, trace=None):
        proc = subprocess.run([REPORT, "--format", "json", *args, trace or self.trace], capture_output=True,
                              text=True, timeout=120)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        return json.loads(proc.stdout)


skip = unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM) and os.path.exists(REPORT),
                           "needs build/libgpumemtrace.so, build/sim/libcudart.so.13 and build/gpumem-report")
for _version in FAKE_VERSIONS:
    _name = "Settings_" + "_".join(_version.split("+")[0].split(".")[:2])
    globals()[_name] = skip(type(_name, (SettingsCases, unittest.TestCase), {"version": _version}))


if __name__ == "__main__":
    unittest.main()
