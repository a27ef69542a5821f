#!/usr/bin/env python3
# tests/gpu/snapshot_corpus.py — small real torch.cuda.memory._dump_snapshot() pickles and a shape manifest, made on a GPU (tests/gpu/run.sh).
"""Makes the real-snapshot corpus the CPU tests check the stand-in torch and the importer against
(tests/snapshot/test_snapshot_corpus.py; checked in under tests/snapshot/corpus/real/, see its
README.md). Needs PyTorch and a GPU (SKIP otherwise); no recorder: these are PyTorch's own dumps.

Into OUT/corpus/ (run.sh packs it as OUT/corpus.tar.gz):
  native.pickle         a few blocks, a free, empty_cache (segment_free)
  expandable.pickle     PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: segment_map / segment_unmap
  oom.pickle            an out-of-memory (set_per_process_memory_fraction): an "oom" entry
  record_stream.pickle  a block used on a second stream: free_completed after free_requested
  train*.pickle         a small transformer trained with AdamW, its history started after the first step
                        (state from before it) in a ring that wraps: train (native), train_expandable,
                        train_accum (each step's logits kept), train_oom (a batch that grows until a 2 GiB
                        cap refuses it: an OOM mid-step). tests/snapshot/test_snapshot_oracle.py checks
                        gpumem-report against them here (PYTORCH_SNAPSHOT_CORPUS=the unpacked folder).
  manifest.json         torch version; _record_memory_history's signature; memory_stats() keys before
                        and after CUDA init; per action the keys and value types of its entries (and
                        whether "frames" is there); the same entries' time_us in two _snapshot() calls;
                        per pickle its entry count per action
Each pickle is made in a child process of its own (PyTorch's allocator settings are per process).
Paths are scrubbed before pickling: this checkout becomes "<repo>", site-packages "<site-packages>",
the home directory "~" (only frame file names change; the pickles stay PyTorch's own dicts).
"""
import importlib.util
import json
import os
import subprocess
import sys

import gpuenv
from gpuenv import ROOT, have_gpu_torch

R = gpuenv.Results("corpus")

CHILD = r'''
import inspect, json, os, pickle, sys, sysconfig, time, torch
kind, out_dir, repo = sys.argv[1], sys.argv[2], sys.argv[3]
before = sorted(torch.cuda.memory_stats().keys())
def work():
    if kind == "native":
        xs = [torch.empty(n, device="cuda") for n in (1024, 300000, 2 << 20)]
        del xs[1]
        torch.cuda.synchronize(); del xs; torch.cuda.empty_cache()
        keep = torch.empty(4096, device="cuda")
        return keep
    if kind == "expandable":
        xs = [torch.empty(5 << 20, device="cuda") for _ in range(3)]
        del xs[1:]
        torch.cuda.synchronize(); torch.cuda.empty_cache()
        return xs
    if kind == "oom":
        torch.cuda.set_per_process_memory_fraction(0.01)
        try:
            torch.empty(1 << 30, device="cuda")
        except torch.cuda.OutOfMemoryError:
            pass
        return None
    if kind == "record_stream":
        s = torch.cuda.Stream()
        x = torch.empty(1 << 20, device="cuda")
        with torch.cuda.stream(s):
            y = x * 2
        x.record_stream(s)
        del x
        z = [torch.empty(1024, device="cuda") for _ in range(4)]
        torch.cuda.synchronize()
        w = torch.empty(1024, device="cuda")   # its malloc processes the completed event: free_completed
        return y, z, w
    if kind.startswith("train"):
        return train()
def train():
    # A small transformer trained with AdamW, as the snapshots users hold come from: the history starts
    # after the first step (weights, gradients and optimizer state exist before it: "initial" state), a
    # ring of max_entries that wraps, and per kind: expandable segments, a loss kept every step (growth),
    # or a batch that grows until the device (capped) refuses it (an OOM in the middle of a step).
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    model = torch.nn.Sequential(torch.nn.Embedding(1000, 256), torch.nn.TransformerEncoder(layer, 4),
                                torch.nn.Linear(256, 1000)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if kind == "train_oom":
        torch.cuda.set_per_process_memory_fraction(2.0 * (1 << 30) / torch.cuda.get_device_properties(0).total_memory)
    kept = []
    def step(batch):
        x = torch.randint(0, 1000, (batch, 128), device="cuda")
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if kind == "train_accum":
            kept.append(logits.detach())   # predictions collected on the GPU: a real accumulation
        return loss.item()
    step(8)
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=int(os.environ.get("CORPUS_MAX_ENTRIES", "3000")))
    for i in range(8):
        batch = 8 << i if kind == "train_oom" else 8 + (i % 3) * 4
        try:
            step(batch)
        except torch.cuda.OutOfMemoryError:
            break
    return model, opt, kept
if not kind.startswith("train"):
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=100000)
keep = work()
first = torch.cuda.memory._snapshot()
time.sleep(0.5)
snap = torch.cuda.memory._snapshot()
site = sysconfig.get_paths()["purelib"]
home = os.path.expanduser("~")
def scrub(name):
    for real, alias in ((repo, "<repo>"), (site, "<site-packages>"), (home, "~")):
        if real and name.startswith(real):
            return alias + name[len(real):]
    return name
seen = set()
def scrub_frames(frames):
    for f in frames or ():
        if id(f) not in seen:
            seen.add(id(f))
            f["filename"] = scrub(f.get("filename", ""))
for seg in snap["segments"]:
    scrub_frames(seg.get("frames"))
    for b in seg.get("blocks", ()):
        scrub_frames(b.get("frames"))
for trace in snap["device_traces"]:
    for e in trace:
        scrub_frames(e.get("frames"))
with open(os.path.join(out_dir, kind + ".pickle"), "wb") as f:
    pickle.dump(snap, f)
sys.path.insert(0, os.path.join(repo, "tests", "snapshot"))
from snapshot_shapes import entry_shapes
shapes = entry_shapes(snap)
pairs = [(a["time_us"], b["time_us"]) for a, b in zip(first["device_traces"][0], snap["device_traces"][0])
         if (a["action"], a.get("addr"), a["size"]) == (b["action"], b.get("addr"), b["size"])]
actions = [e["action"] for e in snap["device_traces"][0]]
print(json.dumps({"kind": kind, "torch": torch.__version__, "cuda": torch.version.cuda,
                  "signature": str(inspect.signature(torch.cuda.memory._record_memory_history)),
                  "memory_stats_before_init": before, "memory_stats": sorted(torch.cuda.memory_stats().keys()),
                  "snapshot_keys": sorted(snap.keys()), "segment_keys": sorted(snap["segments"][0].keys()) if snap["segments"] else [],
                  "entry_shapes": shapes, "time_us_pairs": pairs[:20],
                  "actions": {a: actions.count(a) for a in set(actions)}}))
'''

KINDS = (("native", {}), ("expandable", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
         ("oom", {}), ("record_stream", {}),
         ("train", {"CORPUS_MAX_ENTRIES": "1000"}), ("train_expandable", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
         ("train_accum", {}), ("train_oom", {}))


def main():
    if not have_gpu_torch():
        R.say("corpus", None, "needs PyTorch with a CUDA GPU")
        return 0
    d = gpuenv.out_dir("corpus")
    script = os.path.join(gpuenv.out_dir("corpus-work"), "corpus_child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    manifest = {"made_by": "tests/gpu/snapshot_corpus.py", "pickles": {}}
    # The training kinds need torch.nn, which the stand-in torch (tests/python/test_torch_gpu_run.py)
    # does not have.
    has_nn = importlib.util.find_spec("torch.nn") is not None
    for kind, env in KINDS:
        if kind.startswith("train") and not has_nn:
            R.say(kind, None, "needs torch.nn")
            continue
        if not R.budget(kind, 20):
            continue
        p = subprocess.run([sys.executable, script, kind, d, ROOT], capture_output=True, text=True,
                           env=dict(os.environ, **env), timeout=120)
        try:
            info = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            R.say(kind, False, "exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
            continue
        manifest["pickles"][kind + ".pickle"] = info
        want = {"native": "segment_free", "expandable": "segment_map", "oom": "oom",
                "record_stream": "free_completed", "train": "free_completed",
                "train_expandable": "segment_map", "train_accum": "alloc", "train_oom": "oom"}[kind]
        R.say(kind, info["actions"].get(want, 0) > 0, "%s: %s" % (kind + ".pickle", info["actions"]))
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    return R.exit_code()


if __name__ == "__main__":
    sys.exit(main())
