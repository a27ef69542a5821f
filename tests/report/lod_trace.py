#!/usr/bin/env python3
# tests/report/lod_trace.py — a long training run for the HTML report's level of detail: every kind of
# allocation the page must keep individually among hundreds of thousands it may aggregate.
"""A long training-shaped trace of about EVENTS events, written fast (preformatted lines), for the
HTML report's level of detail (docs/report.md, "Every allocation"): the test on 1M events
(tests/report/test_report_large_trace.py) and the benchmark on 100M (bench/html_bench.py).

A caching allocator's 64 GiB segment holds: parameters (load_weights) kept to the end, a planted
leak (cache_embeddings, never freed), a 64 KiB history block kept every step, or every few steps so
that at most 10,000 are kept however long the run (append_history: growth; what is live stays bounded),
per step 24 activations from 8 call sites freed in reverse order and 8 temporaries freed at once
(add_temporary), a burst of 16 x 256 MiB in one step at 60% of the run (attention_scores: the
peak), and near the end an out-of-memory incident of 56 GiB (a failed cudaMalloc, the device's free
memory, the allocator's OOM: capacity). A mark starts each step.

    python3 tests/report/lod_trace.py OUT.jsonl [--events N]     (OUT may be /dev/stdout)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tracegen import MiB, Trace  # noqa: E402

GiB = 1 << 30
BASE = 0x7e0000000000
ACTIVATIONS_PER_STEP = 24
TEMPORARIES_PER_STEP = 8
EVENTS_PER_STEP = 2 * ACTIVATIONS_PER_STEP + 2 * TEMPORARIES_PER_STEP + 2  # + history block + mark


def write_lod_trace(path, events=1_000_000):
    """Writes the trace; returns a dict of what was planted (sites, sizes, the OOM's request)."""
    t = Trace(path, pid=6161, devices=((0, "Simulated H100", 80 << 30),), app_file="/src/train.py")
    weights = t.stack("load_weights", line=12, python="load_model")
    leak = t.stack("cache_embeddings", line=20, python="warmup")
    history = t.stack("append_history", line=30, python="train_step")
    acts = [t.stack(f"layer_{i}_forward", line=40 + i, python=f"block_{i}") for i in range(8)]
    temporary = t.stack("add_temporary", line=60, python="train_step")
    burst = t.stack("attention_scores", line=70, python="attention")
    boom = t.stack("allocate_logits", line=80, python="forward")
    segment_stack = t.stack("c10::cuda::CUDACachingAllocator::malloc", line=940, python="train")

    t.mark("load")
    t.alloc(BASE, 64 * GiB, segment_stack, api="cudaMalloc")
    for i in range(32):
        t.block_alloc(BASE + i * 64 * MiB, 64 * MiB, weights, segment=BASE)
    t.block_alloc(BASE + 3 * GiB, 16 * MiB, leak, segment=BASE)

    line = ('{"type":"event","seq":%d,"t":%d,"tid":4243,"api":"gpumemtrace_block_%s","op":"block_%s",'
            '"kind":"block","addr":"0x%x","size":%d,"device":0,"stack":%d,"pool":"default","segment":"0x%x"}\n')
    mark = ('{"type":"event","seq":%d,"t":%d,"tid":4243,"api":"gpumemtrace_mark","op":"mark","kind":"none",'
            '"addr":"0x0","size":0,"device":-1,"stack":0,"label":"step %d"}\n')
    out = t.f
    steps = max(10, (events - t.seq) // EVENTS_PER_STEP)
    peak_step, oom_step = int(steps * 0.6), int(steps * 0.9)
    history_at = BASE + 56 * GiB
    work = BASE + 8 * GiB
    seq, now = t.seq, t.t
    history_every = max(1, -(-steps // 10_000))
    kept = 0
    for step in range(steps):
        seq += 1
        now += 1000
        out.write(mark % (seq, now, step))
        live = []
        at = work
        for i in range(ACTIVATIONS_PER_STEP):
            size = ((i % 8) + 1) * MiB
            seq += 1
            now += 1000
            out.write(line % (seq, now, "alloc", "alloc", at, size, acts[i % 8], BASE))
            live.append(at)
            at += size
            if i % 3 == 0:  # a temporary: freed at once
                seq += 1
                now += 1000
                out.write(line % (seq, now, "alloc", "alloc", at, 256 * 1024, temporary, BASE))
                seq += 1
                now += 1000
                out.write(line % (seq, now, "free", "free", at, 0, 0, BASE))
        if step == peak_step:
            for i in range(16):
                seq += 1
                now += 1000
                out.write(line % (seq, now, "alloc", "alloc", BASE + 20 * GiB + i * 256 * MiB, 256 * MiB, burst, BASE))
                live.append(BASE + 20 * GiB + i * 256 * MiB)
        for addr in reversed(live):
            seq += 1
            now += 1000
            out.write(line % (seq, now, "free", "free", addr, 0, 0, BASE))
        if step % history_every == 0:
            seq += 1
            now += 1000
            out.write(line % (seq, now, "alloc", "alloc", history_at + kept * 64 * 1024, 64 * 1024, history, BASE))
            kept += 1
        if step == oom_step:
            t.seq, t.t = seq, now
            t.event("alloc", "device", 0, 56 * GiB, boom, api="cudaMalloc", result=2)
            t.meminfo(2 * GiB, 80 << 30)
            t.block_oom(56 * GiB, boom)
            seq, now = t.seq, t.t
    t.seq, t.t = seq, now
    for i in range(32):
        t.block_free(BASE + i * 64 * MiB)
    t.close()
    return {"steps": steps, "history": kept, "oom_request": 56 * GiB, "peak_step": peak_step}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--events", type=int, default=1_000_000)
    args = ap.parse_args()
    write_lod_trace(args.out, args.events)
