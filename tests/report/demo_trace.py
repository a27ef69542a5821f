# tests/report/demo_trace.py — a training-loop-shaped trace for the output-format tests and the README.
"""A training-loop-shaped trace for the output-format tests and the README's screenshot.

A caching allocator (segments from cudaMalloc, blocks inside them) under a Python training loop:
phases marked per step (forward, backward, optimizer), activations freed every step, a history list
that keeps growing (growth), a cache that is never freed (a leak), and a final step that runs out of
memory. Every planted site has a Python frame of its own (train.py) under a native one.

    python3 tests/report/demo_trace.py OUT.jsonl [--steps N] [--evil-name]
"""
import argparse

from tracegen import MiB, Trace

SEGMENT = 2048 * MiB


def write_training_trace(path, steps=12, evil_name=False, pid=4242, scale=1):
    """`scale` multiplies the activations per step (more events); `evil_name` names the leak's
    function `<script>alert(1)</script>` to check that outputs escape it."""
    t = Trace(path, pid=pid, devices=((0, "Simulated GPU", 11 << 30),), app_file="/src/train.cu")
    dt = 4_000_000 // scale  # ns per event: a step takes about 0.2 s
    weights = t.stack("at::empty_cuda", line=31, python="load_model")
    segments = t.stack("c10::cuda::CUDACachingAllocator::malloc", line=940, python="train")
    acts = t.stack("at::native::conv2d", line=88, python="forward")
    grads = t.stack("at::native::conv2d_backward", line=120, python="backward")
    optim = t.stack("at::native::_fused_adam", line=64, python="optimizer_step")
    history = t.stack("at::native::clone", line=12, python="train")
    leak = t.stack("<script>alert(1)</script>" if evil_name else "cache_embeddings", line=77, python="warmup")
    boom = t.stack("at::native::matmul", line=210, python="forward")
    next_addr = [0x7f0000000000]

    class Arena:
        """A segment from cudaMalloc with blocks carved from its start; reset() when all are freed."""
        def __init__(self, size):
            self.base, self.size, self.used, self.live = next_addr[0], size, 0, []
            next_addr[0] += size
            t.alloc(self.base, size, segments, api="cudaMalloc", dt=dt)

        def block(self, size, stack):
            where = self.base + self.used
            self.used += size
            t.block_alloc(where, size, stack, segment=self.base, dt=dt)
            self.live.append(where)
            return where

        def reset(self):
            for where in self.live:
                t.block_free(where, dt=dt)
            self.used, self.live = 0, []

    t.mark("load model")
    params = Arena(2560 * MiB)
    for _ in range(4):
        params.block(600 * MiB, weights)
    params.block(256 * MiB, leak)
    work = Arena(4096 * MiB)
    kept = Arena(1024 * MiB)
    for step in range(steps):
        t.mark(f"step {step} forward")
        for _ in range(12 * scale):
            work.block(96 * MiB // scale, acts)
        t.mark(f"step {step} backward")
        for _ in range(12 * scale):
            work.block(64 * MiB // scale, grads)
        t.mark(f"step {step} optimizer")
        work.block(600 * MiB, optim)
        kept.block(48 * MiB, history)  # appended to a list that is never cleared
        work.reset()
    t.mark("final step forward")
    Arena(3 << 30).block(3 << 30, acts)  # the allocator asks CUDA for more, then runs out
    # As on a real device: the allocator's cudaMalloc fails, the recorder reads the device's free
    # memory, then the allocator reports its own OOM (one incident, verdict capacity).
    t.event("alloc", "device", 0, 8 << 30, boom, api="cudaMalloc", result=2, dt=dt)
    t.meminfo(512 * MiB, 11 << 30)
    t.block_oom(8 << 30, boom, dt=dt)
    t.close()
    return t


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--evil-name", action="store_true")
    args = ap.parse_args()
    write_training_trace(args.out, args.steps, args.evil_name)


def write_large_trace(path, events=1_000_000):
    """About `events` events, written quickly (preformatted lines, not one json.dumps each): blocks of
    eight sizes from eight call sites allocated and freed inside one segment, a mark every 20,000."""
    t = Trace(path, pid=5151, devices=((0, "Simulated H100", 80 << 30),), app_file="/src/big.cu")
    sites = [t.stack(f"layer_{i}_forward", line=10 + i, python=f"block_{i}") for i in range(8)]
    base = 0x7f0000000000
    t.alloc(base, 8 << 30, sites[0], api="cudaMalloc")
    line = ('{"type":"event","seq":%d,"t":%d,"tid":4243,"api":"gpumemtrace_block_%s","op":"block_%s",'
            '"kind":"block","addr":"0x%x","size":%d,"device":0,"stack":%d,"pool":"default","segment":"0x%x"}\n')
    out = t.f
    live = []
    while t.seq < events:
        if t.seq % 20_000 == 0:
            t.mark(f"window {t.seq // 20_000}")
        t.seq += 1
        t.t += 1000
        if len(live) < 64 and (t.seq * 7919) % 5 < 3:
            i = (t.seq * 31) % 8
            addr = base + (t.seq % 4096) * (1 << 20)
            live.append(addr)
            out.write(line % (t.seq, t.t, "alloc", "alloc", addr, (i + 1) << 16, sites[i], base))
        elif live:
            out.write(line % (t.seq, t.t, "free", "free", live.pop(0), 0, 0, base))
        else:
            t.seq -= 1
            t.t -= 1000
            t.mark("idle")
    t.close()
    return t
