#!/usr/bin/env python3
# tests/snapshot/snapshot_samples.py — PyTorch-shaped memory snapshots as plain dicts, for the import tests.
"""PyTorch-shaped memory snapshots, built as plain dicts (the structure `torch.cuda.memory._snapshot()`
returns and `_dump_snapshot()` pickles; see torch/csrc/cuda/memory_snapshot.cpp), for the snapshot
import tests and the fuzz corpus. No torch needed.

Each builder returns a dict; `dump(snapshot, path, protocol)` pickles it the way `_dump_snapshot` does.
`python3 snapshot_samples.py --corpus DIR` writes every sample under every protocol 2..5 into DIR, with
the checked-in fuzzing seeds of tests/snapshot/corpus/ (hostile pickles: billion laughs, wide dicts;
and real PyTorch pickles in corpus/real/ once checked in).
"""
import argparse
import os
import pickle
import shutil

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
# Real torch.cuda.memory._dump_snapshot() pickles made on a GPU (tests/gpu/snapshot_corpus.py).
REAL = os.path.join(CORPUS, "real")


def corpus_files():
    """The checked-in seeds: the hostile pickles in corpus/ and the real ones in corpus/real/."""
    out = [os.path.join(CORPUS, n) for n in sorted(os.listdir(CORPUS)) if os.path.isfile(os.path.join(CORPUS, n))]
    if os.path.isdir(REAL):
        out += [os.path.join(REAL, n) for n in sorted(os.listdir(REAL)) if n.endswith(".pickle")]
    return out
KiB = 1 << 10
MiB = 1 << 20
USER = "/home/user/project/train.py"
TORCH = "/usr/lib/python3/site-packages/torch/nn/modules/module.py"


def frame(name, line, filename=USER):
    return {"name": name, "filename": filename, "line": line}


def py_stack(name, line):
    """Innermost first, as PyTorch records them: the allocating user frame, then its callers."""
    return [frame(name, line), frame("main", 200), frame("<module>", 210)]


def cpp_frame(name):
    return {"name": name, "filename": "??", "line": 0}


class History:
    """Builds one device's trace entries with increasing time_us."""

    def __init__(self, t0=1_763_791_200_000_000, stream=0):
        self.entries = []
        self.t = t0
        self.stream = stream

    def add(self, action, addr, size, frames=None, **extra):
        self.t += 1000
        e = {"action": action, "addr": addr, "size": size, "stream": self.stream, "time_us": self.t}
        if action == "oom":
            e["device_free"] = e.pop("addr")
        e.update(extra)
        if frames is not None:
            e["frames"] = frames
        self.entries.append(e)

    def alloc(self, addr, size, frames):
        self.add("alloc", addr, size, frames)

    def free(self, addr, size, frames=None):
        frames = frames or py_stack("release", 300)
        self.add("free_requested", addr, size, frames)
        self.add("free_completed", addr, size, frames)


def segment(address, total_size, blocks, device=0, expandable=False, frames=None, pool=(0, 0)):
    """blocks: list of (size, requested_size, state, frames); addresses tile the segment."""
    out, addr = [], address
    for size, requested, state, bframes in blocks:
        out.append({"address": addr, "size": size, "requested_size": requested, "state": state,
                    "frames": bframes or []})
        addr += size
    assert addr == address + total_size, "blocks must tile the segment"
    return {"device": device, "address": address, "total_size": total_size, "stream": 0,
            "segment_type": "large" if total_size > MiB else "small", "segment_pool_id": pool,
            "is_expandable": expandable, "allocated_size": sum(b[0] for b in blocks if b[2] != "inactive"),
            "active_size": sum(b[0] for b in blocks if b[2] != "inactive"),
            "requested_size": sum(b[1] for b in blocks if b[2] != "inactive"),
            "frames": frames or [], "blocks": out}


def snapshot(segments, device_traces):
    return {"segments": segments, "device_traces": device_traces,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0, "expandable_segments": False,
                                   "roundup_power2_divisions": {"1": 0, "2": 0}}}


SEG_A = 0x7F3A00000000
SEG_B = 0x7F3A80000000


def planted_leak():
    """A 4 MiB block from `leaky_buffer` (train.py:42) is never freed; a 2 MiB temporary is; a 512 KiB
    block allocated before the history window is still live; a 1 KiB block allocated before the
    window is freed in it. Segment B predates the history."""
    h = History()
    h.add("segment_alloc", SEG_A, 20 * MiB, py_stack("leaky_buffer", 42))
    h.alloc(SEG_A, 4 * MiB, py_stack("leaky_buffer", 42) + [cpp_frame("at::empty")])
    h.alloc(SEG_A + 4 * MiB, 2 * MiB, py_stack("temporary", 50))
    h.free(SEG_A + 4 * MiB, 2 * MiB)
    h.free(SEG_B + 512 * KiB, 1 * KiB)
    h.add("snapshot", 0, 0)
    segs = [
        segment(SEG_A, 20 * MiB, [(4 * MiB, 4 * MiB, "active_allocated", py_stack("leaky_buffer", 42)),
                                  (16 * MiB, 0, "inactive", None)]),
        segment(SEG_B, 2 * MiB, [(512 * KiB, 512 * KiB, "active_allocated", py_stack("setup", 10)),
                                 (1536 * KiB, 0, "inactive", None)]),
    ]
    return snapshot(segs, [h.entries])


def fragmentation_oom():
    """A 20 MiB segment holds ten 2 MiB blocks; every other one is freed (10 MiB free, largest 2 MiB);
    then a 4 MiB request from `big_alloc` (train.py:70) fails with 1 MiB free on the device."""
    h = History()
    h.add("segment_alloc", SEG_A, 20 * MiB, py_stack("make_tensors", 60))
    for i in range(10):
        h.alloc(SEG_A + i * 2 * MiB, 2 * MiB, py_stack("make_tensors", 60))
    for i in range(1, 10, 2):
        h.free(SEG_A + i * 2 * MiB, 2 * MiB)
    h.add("oom", 1 * MiB, 4 * MiB, py_stack("big_alloc", 70))
    blocks = [(2 * MiB, 2 * MiB, "active_allocated" if i % 2 == 0 else "inactive",
               py_stack("make_tensors", 60) if i % 2 == 0 else None) for i in range(10)]
    return snapshot([segment(SEG_A, 20 * MiB, blocks)], [h.entries])


def accumulation(iterations=50):
    """Each iteration keeps 1 MiB from `train_step` (train.py:88, `epoch_loss += loss`) and allocates
    and frees an 8 MiB temporary in `forward` (train.py:80); everything is freed at the end."""
    h = History()
    h.add("segment_alloc", SEG_A, 64 * MiB, py_stack("forward", 80))
    for i in range(iterations):
        h.alloc(SEG_A + 56 * MiB, 8 * MiB, py_stack("forward", 80))
        h.alloc(SEG_A + i * MiB, 1 * MiB, py_stack("train_step", 88))
        h.free(SEG_A + 56 * MiB, 8 * MiB)
    for i in range(iterations):
        h.free(SEG_A + i * MiB, 1 * MiB)
    return snapshot([segment(SEG_A, 64 * MiB, [(64 * MiB, 0, "inactive", None)])], [h.entries])


def clean(iterations=50):
    """Allocates and frees the same 8 MiB every iteration: no leak, no growth."""
    h = History()
    h.add("segment_alloc", SEG_A, 8 * MiB, py_stack("forward", 80))
    for _ in range(iterations):
        h.alloc(SEG_A, 8 * MiB, py_stack("forward", 80))
        h.free(SEG_A, 8 * MiB)
    return snapshot([segment(SEG_A, 8 * MiB, [(8 * MiB, 0, "inactive", None)])], [h.entries])


def two_devices_expandable():
    """Device 0: an expandable segment mapped in two steps, one of them unmapped at the end.
    Device 1: an ordinary segment freed in the history."""
    h0, h1 = History(), History(t0=1_763_791_200_000_500)
    h0.add("segment_map", SEG_A, 2 * MiB, py_stack("grow", 20))
    h0.alloc(SEG_A, 1 * MiB, py_stack("grow", 21))
    h0.add("segment_map", SEG_A + 2 * MiB, 2 * MiB, py_stack("grow", 20))
    h0.alloc(SEG_A + 2 * MiB, 2 * MiB, py_stack("grow", 22))
    h0.free(SEG_A + 2 * MiB, 2 * MiB)
    h0.add("segment_unmap", SEG_A + 2 * MiB, 2 * MiB)
    h1.add("segment_alloc", SEG_B, 2 * MiB, py_stack("other", 30))
    h1.add("segment_free", SEG_B, 2 * MiB, py_stack("other", 31))
    segs = [segment(SEG_A, 2 * MiB, [(1 * MiB, 1 * MiB, "active_allocated", py_stack("grow", 21)),
                                     (1 * MiB, 0, "inactive", None)], expandable=True)]
    return snapshot(segs, [h0.entries, h1.entries])


SAMPLES = {
    "planted_leak": planted_leak,
    "fragmentation_oom": fragmentation_oom,
    "accumulation": accumulation,
    "clean": clean,
    "two_devices_expandable": two_devices_expandable,
}


def dump(snap, path, protocol=pickle.DEFAULT_PROTOCOL):
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=protocol)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True, help="directory to write every sample into")
    args = ap.parse_args()
    os.makedirs(args.corpus, exist_ok=True)
    for name, build in SAMPLES.items():
        for proto in range(2, 6):
            dump(build(), os.path.join(args.corpus, f"{name}.p{proto}.pickle"), proto)
    for path in corpus_files():
        shutil.copy(path, args.corpus)


if __name__ == "__main__":
    main()
