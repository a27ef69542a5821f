# tests/snapshot/test_snapshot_corpus.py — the importer, the PyTorch hook's drain and the stand-in torch against real _dump_snapshot() pickles.
"""Real torch.cuda.memory._dump_snapshot() pickles, made on a GPU by tests/gpu/snapshot_corpus.py and
checked in under tests/snapshot/corpus/real/ with their manifest.json (corpus/real/README.md says
how). They pin down what no stand-in can: the real shapes. For each pickle:
- gpumem-snapshot2trace converts it, with one torch.alloc event per "alloc" entry, one block_free
  per "free_completed", one block_oom per "oom", a map per "segment_map";
- the PyTorch hook's drain (gpumemtrace_torch.history) forwards every entry it records, once;
- the same entry's time_us in the manifest's two snapshots moved by less than the slack the hook
  allows (anchor.TIME_SLACK_US);
and against the manifest, the stand-in torch (tests/python/fake_torch) of the same release: the same
_record_memory_history signature, memory_stats() empty before CUDA init, the keys the hook reads
among the real memory_stats keys, and per action the same entry keys and value types.
While the folder holds no real pickle, every test skips, saying so.
"""
import collections
import json
import os
import pickle
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import snapshot_samples as samples  # noqa: E402

BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
CONVERT = os.path.join(BUILD, "gpumem-snapshot2trace")
# SNAPSHOT_CORPUS: another folder of the same layout (the self-test,
# tests/python/test_torch_gpu_run.py, points it at pickles the stand-in made: never checked in).
REAL = os.environ.get("SNAPSHOT_CORPUS") or samples.REAL
MANIFEST = os.path.join(REAL, "manifest.json")
FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")
NO_CORPUS = ("no real PyTorch pickles in tests/snapshot/corpus/real/ yet: they are made on a GPU by "
             "tests/gpu/run.sh (OUT/corpus.tar.gz) and checked in as tests/snapshot/corpus/real/README.md says")


def real_pickles():
    if not os.path.exists(MANIFEST):
        return {}
    with open(MANIFEST) as f:
        manifest = json.load(f)
    return {name: info for name, info in manifest.get("pickles", {}).items()
            if os.path.exists(os.path.join(REAL, name))}


class RealCorpusCase(unittest.TestCase):
    def setUp(self):
        self.pickles = real_pickles()
        if not self.pickles:
            self.skipTest(NO_CORPUS)

    def load(self, name):
        with open(os.path.join(REAL, name), "rb") as f:
            return pickle.load(f)


class ImporterOnRealPickles(RealCorpusCase):
    def test_converted_entry_for_entry(self):
        if not os.access(CONVERT, os.X_OK):
            self.skipTest(CONVERT + " not built")
        import tempfile
        for name in self.pickles:
            with self.subTest(pickle=name):
                actions = collections.Counter(e["action"] for t in self.load(name)["device_traces"] for e in t)
                with tempfile.TemporaryDirectory() as d:
                    out = os.path.join(d, "trace.jsonl")
                    p = subprocess.run([CONVERT, os.path.join(REAL, name), out], capture_output=True,
                                       text=True, timeout=60)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    with open(out) as f:
                        events = [r for r in map(json.loads, f) if r["type"] == "event"]
                ops = collections.Counter((e["api"], e["op"]) for e in events)
                self.assertEqual(ops["torch.alloc", "block_alloc"], actions["alloc"])
                self.assertEqual(ops["torch.free_completed", "block_free"], actions["free_completed"])
                self.assertEqual(ops["torch.oom", "block_oom"], actions["oom"])
                self.assertEqual(ops["torch.segment_map", "map"], actions["segment_map"])


class HookOnRealPickles(RealCorpusCase):
    def test_drain_forwards_every_entry_once(self):
        from gpumemtrace_torch.history import HistoryDrain
        from torch_ring_sim import Recorder
        for name in self.pickles:
            with self.subTest(pickle=name):
                snap = self.load(name)
                rec = Recorder()
                d = HistoryDrain(rec, offset=lambda: 0)
                d.seed_segments(snap)
                d.drain(snap)
                d.drain(snap)   # the same copy again: nothing new
                want = sum(1 for t in snap["device_traces"] for e in t if e["action"] in rec.live_actions)
                self.assertEqual(len(rec.events), want)
                self.assertEqual(rec.marks, [])

    def test_time_us_moves_within_the_slack(self):
        from gpumemtrace_torch.anchor import TIME_SLACK_US
        for name, info in self.pickles.items():
            pairs = info.get("time_us_pairs") or []
            with self.subTest(pickle=name):
                self.assertTrue(pairs)
                self.assertLessEqual(max(abs(b - a) for a, b in pairs), TIME_SLACK_US)


STAND_IN = r'''
import inspect, json, sys, torch
sys.path.insert(0, sys.argv[1])
from snapshot_shapes import entry_shapes
before = sorted(torch.cuda.memory_stats().keys())
torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=100000)
xs = [torch.empty(n, device="cuda") for n in (1024, 300000, 2 << 20)]
del xs[1]
torch.cuda.empty_cache()
try:
    torch.empty(1 << 40, device="cuda")
except torch.cuda.OutOfMemoryError:
    pass
shapes = entry_shapes(torch.cuda.memory._snapshot())
print(json.dumps({"signature": str(inspect.signature(torch.cuda.memory._record_memory_history)),
                  "memory_stats_before_init": before, "memory_stats": sorted(torch.cuda.memory_stats().keys()),
                  "entry_shapes": shapes}))
'''


class StandInAgainstManifest(RealCorpusCase):
    def stand_in(self, version):
        env = dict(os.environ, PYTHONPATH=FAKE, FAKE_TORCH_VERSION=version, FAKE_TORCH_LIMIT=str(1 << 30))
        env.pop("LD_PRELOAD", None)
        p = subprocess.run([sys.executable, "-c", STAND_IN, HERE], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_same_shapes_as_the_real_release(self):
        from gpumemtrace_torch import counters
        real = next(iter(self.pickles.values()))
        fake = self.stand_in(real["torch"])
        self.assertEqual(fake["signature"], real["signature"])
        self.assertEqual(fake["memory_stats_before_init"], real["memory_stats_before_init"])
        read = {f + ".all." + k for f in counters._FAMILIES for k in ("allocated", "freed", "current")}
        read |= {k for k in counters._SCALARS if k in fake["memory_stats"]}
        self.assertEqual(sorted(read - set(real["memory_stats"])), [])
        real_shapes = {}
        for info in self.pickles.values():
            for action, shape in info["entry_shapes"].items():
                real_shapes.setdefault(action, shape)
        for action in set(real_shapes) & set(fake["entry_shapes"]):
            with self.subTest(action=action):
                keys = dict(real_shapes[action]["keys"])
                fake_keys = dict(fake["entry_shapes"][action]["keys"])
                if not real_shapes[action]["frames_seen"] or not fake["entry_shapes"][action]["frames_seen"]:
                    keys.pop("frames", None)
                    fake_keys.pop("frames", None)
                self.assertEqual(fake_keys, keys)


if __name__ == "__main__":
    unittest.main()
