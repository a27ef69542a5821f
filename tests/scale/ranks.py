# tests/scale/ranks.py — a generated run of many ranks (recorder-format traces, tests/report/tracegen.py).
"""A training job of `ranks` ranks on 8-rank hosts, each a trace shaped like the recorder's: PyTorch's
caching allocator takes segments (cudaMalloc under CUDACachingAllocator), hands out blocks under
Python frames (parameters, activations in forward(), optimizer state in torch/optim/), and:
  - every rank leaks 24 MiB at `cache_embeddings` (a leak on every rank);
  - even ranks also leak 8 MiB at `keep_rank_buffer` (not on every rank);
  - rank PEAK_RANK takes 512 MiB more at `gather_logits` for a moment (the highest peak, and where
    that rank differs from the others);
  - ranks in OOM_RANKS fail one allocation (a device's OOM), at times in that order.
Activation sizes vary with the rank, so each rank's peak and role split is its own.
Also what the tests read reports with: site_of (a JSON stack as one line), leak_sites."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
from tracegen import Trace  # noqa: E402

MiB = 1 << 20
PEAK_RANK = 37
OOM_RANKS = (41, 5)  # the first to fail first
RANKS_PER_HOST = 8


def write_rank(path, rank, ranks, steps=3):
    host = f"node{rank // RANKS_PER_HOST}"
    t = Trace(path, pid=20000 + rank, rank=rank, local_rank=rank % RANKS_PER_HOST, world_size=ranks,
              rank_from="RANK", host=host, cmdline=("python3", "train.py"), exe="/usr/bin/python3.11")
    main = t.main
    segment_frame = t.native(1, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
                             "/src/CUDACachingAllocator.cpp", 1200)
    segment_stack = t.raw_stack([t.cudart, segment_frame, main])

    def py_stack(function, file, line):
        return t.raw_stack([t.python(function, file, line), t.python("<module>", "train.py", 99), main])

    params = py_stack("_apply", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 900)
    activation = py_stack("forward", "model.py", 31)
    optimizer = py_stack("_init_group", "/usr/lib/python3/dist-packages/torch/optim/adamw.py", 150)
    leak = t.stack("cache_embeddings", 43)
    rank_leak = t.stack("keep_rank_buffer", 61)
    gather = t.stack("gather_logits", 77)
    failing = t.stack("allocate_workspace", 88)

    seg = [0x7f0000000000 + i * (1 << 32) for i in range(3)]
    t.mark("setup")
    t.alloc(seg[0], 512 * MiB, segment_stack, api="cudaMalloc")
    t.block_alloc(seg[0], 200 * MiB, params, segment=seg[0])
    t.alloc(0x10000000, 24 * MiB, leak)
    if rank % 2 == 0:
        t.alloc(0x12000000, 8 * MiB, rank_leak)
    for step in range(steps):
        t.mark(f"step {step}")
        t.alloc(seg[1], 1024 * MiB, segment_stack, api="cudaMalloc")
        acts = [seg[1] + i * 128 * MiB for i in range(4)]
        for a in acts:
            t.block_alloc(a, (64 + rank % 7) * MiB, activation, segment=seg[1])
        if rank == PEAK_RANK and step == 1:
            t.alloc(0x40000000, 512 * MiB, gather)
            t.free(0x40000000)
        if step == 0:
            t.block_alloc(seg[0] + 256 * MiB, 100 * MiB, optimizer, segment=seg[0])
        for a in acts:
            t.block_free(a)
        t.free(seg[1])
    if rank in OOM_RANKS:
        t.t += 1_000_000 * (1 + OOM_RANKS.index(rank))  # the first in OOM_RANKS fails first
        t.failed_alloc(96 << 30, failing)
    t.close()


def write_run(directory, ranks=64, steps=3):
    """The run's traces in `directory` (created), one per rank: gpumemtrace.node*.PID.jsonl; `steps`
    training steps each (13 events a step)."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for rank in range(ranks):
        path = os.path.join(directory, f"gpumemtrace.node{rank // RANKS_PER_HOST}.{20000 + rank}.jsonl")
        write_rank(path, rank, ranks, steps)
        paths.append(path)
    return paths


def site_of(stack):
    """A report's JSON stack as one line, as --export's stacks table and merge write it
    (report/outputs/site_line.cpp)."""
    parts = []
    for f in stack:
        text = f.get("function") or f.get("module") or "?"
        if f.get("file"):
            text += f" ({f['file']}" + (f":{f['line']}" if f.get("line") else "") + ")"
        parts.append(text)
    return " < ".join(parts)



def leak_sites(report):
    """site -> leaked bytes of a one-process JSON report (suppressed leaks aside)."""
    sites = {}
    for leak in report["leaks"]:
        if not leak["suppressed"]:
            sites[site_of(leak["stack"])] = sites.get(site_of(leak["stack"]), 0) + leak["bytes"]
    return sites


if __name__ == "__main__":
    write_run(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 64)
