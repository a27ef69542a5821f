#!/usr/bin/env python3
# bench/what_if_bench.py — the cost of gpumem-report's allocator replays (--what-if), side by side with the
# plain report on the same trace (make bench-what-if). Prints a Markdown table for docs/performance.md.
"""gpumem-report --what-if against the plain report, on one generated PyTorch trace.

Usage: bench/what_if_bench.py [--build build] [--events 2000000] [--runs 5] [--keep DIR]

The trace: a training-like loop of PyTorch tensor-level events (torch.alloc / torch.free_requested, with
the segment events the recorded allocator made), EVENTS tensor events in all, sizes from 512 B to 48 MiB,
no OOM and no fragmented peak (so the plain report replays nothing). Variants, in interleaved rounds:
  - report:  gpumem-report --format json TRACE (the baseline: the report's own pass);
  - what-if x1: --what-if expandable_segments:True (a second pass replaying 2 settings: the recorded
    run, checked against the recording, and the one given);
  - what-if x5: five --what-if settings (6 replays).
Then the replay alone (build/bench/what_if_replay_bench: the trace parsed once, then replayed REPS times
per setting, in process): tensor events/s per setting, median and range (the target: 5M/s). Peak RSS of x5 at EVENTS/10 and EVENTS must not differ by
more than allocator noise (the bench fails if it grows with the events). The `uptime` load average is
printed before and after: the figures only mean something next to it.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from benchlib import Spread, interleaved_rounds, load_average

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "report"))
from reportlib import run_measured  # noqa: E402

MiB = 1 << 20
SETTINGS_X5 = ["expandable_segments:True", "max_split_size_mb:128", "max_split_size_mb:512",
               "roundup_power2_divisions:4", "expandable_segments:True,roundup_power2_divisions:8"]
RSS_GROWTH_ALLOWED = 1.25
RSS_SLACK_MIB = 2.0


def time_variants(variants, runs):
    """{name: [(seconds, peak RSS)] * runs} of each command of `variants` ({name: argv}), in interleaved
    rounds; exits when one fails."""
    def run(name, _round):
        rc, err, seconds, rss = run_measured(variants[name], limit_s=600)
        if rc != 0:
            print(f"{name}: exit {rc}: {err}", file=sys.stderr)
            return None
        return (seconds, rss)

    samples = interleaved_rounds(tuple(variants), runs, run)
    if samples is None:
        sys.exit(1)
    return samples


def generate(path, events, large=None):
    """A steady loop on top of 6 persistent 48 MiB weights: each step allocates 5 large tensors (each in a
    segment of its own size), 3 medium ones (1-10 MiB: packed into one 20 MiB segment) and 5 small ones
    (packed into one 2 MiB segment), and frees them in reverse. The segment events and every block's
    address are what the default allocator does with this sequence (large first, so that no medium
    request is served by a cached large segment): the replay of the recorded settings must match it.
    `large`: other large sizes (multiples of 2 MiB, from 10 MiB: a segment of their own size each)."""
    large = large or [12 * MiB, 16 * MiB, 22 * MiB, 24 * MiB, 48 * MiB]
    medium = [6 * MiB, 3 * MiB, 2 * MiB + 512]
    small = [1 * MiB, 4096, 65536, 300 * 1024, 100]
    head = ('{"type":"header","format":"gpumemtrace","version":1,"library":"0.1.0","pid":1,"ppid":0,'
            '"exe":"/bench","cmdline":["bench"],"host":"h","start_time_ns":0,"clock":"monotonic",'
            '"clock_start_ns":0,"backend":"interpose","stack_depth":64,"on_full":"wait"}\n'
            '{"type":"device","device":0,"name":"bench","total":85899345920,"free":85899345920}\n')
    ev = ('{"type":"event","seq":%d,"t":%d,"tid":7,"api":"%s","op":"%s","kind":"%s","addr":"0x%x","size":%d,'
          '"device":0,"stack":0%s}\n')
    seq = [0]
    next_segment = [0x7F0000000000]

    def rounded(size):
        return max(512, (size + 511) // 512 * 512)

    with open(path, "w", buffering=1 << 22) as f:
        def line(api, op, kind, addr, size, segment=None):
            seq[0] += 1
            f.write(ev % (seq[0], seq[0] * 100, api, op, kind, addr, size,
                          ',"segment":"0x%x"' % segment if segment is not None else ""))

        def segment(size):
            next_segment[0] -= 0x10000000  # cudaMalloc hands out lower addresses as the device fills
            line("torch.segment_alloc", "alloc", "device", next_segment[0], size)
            return next_segment[0]

        f.write(head)
        tensor_events = 0
        for _ in range(6):
            base = segment(48 * MiB)
            line("torch.alloc", "block_alloc", "block", base, 48 * MiB, base)
            tensor_events += 1
        placed = None  # (size, address, segment) in allocation order, fixed from the first step on
        while tensor_events < events:
            step = []
            for group, segment_size in ((large, None), (medium, 20 * MiB), (small, 2 * MiB)):
                base = None
                offset = 0
                for size in group:
                    if placed is None and (segment_size is None or base is None):
                        base = segment(segment_size or rounded(size))
                        offset = 0
                    elif placed is not None:
                        base, offset = placed[len(step)][2], placed[len(step)][1] - placed[len(step)][2]
                    line("torch.alloc", "block_alloc", "block", base + offset, size, base)
                    step.append((size, base + offset, base))
                    offset += rounded(size)
            placed = step
            for size, addr, base in reversed(step):
                line("torch.free_requested", "block_free", "block", addr, size, base)
            tensor_events += 2 * len(step)
        f.write('{"type":"footer","events":%d,"dropped_total":0,"end_time":%d}\n' % (seq[0], seq[0] * 100 + 1))
    return tensor_events


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--events", type=int, default=2000000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", help="keep the traces in DIR")
    args = parser.parse_args()
    report = os.path.join(args.build, "gpumem-report")
    if not os.path.exists(report):
        sys.exit(f"{report} not built (make)")
    print("load average before:", load_average())
    tmp = tempfile.mkdtemp(prefix="what-if-bench.")
    try:
        big, small = os.path.join(tmp, "big.jsonl"), os.path.join(tmp, "small.jsonl")
        events = generate(big, args.events)
        small_events = generate(small, max(1000, args.events // 10))
        # The replay must reproduce the generated recording, or its cost is not the steady one.
        check = subprocess.run([report, "--format", "json", "--what-if", SETTINGS_X5[0], big], capture_output=True,
                               text=True, check=True)
        if '"faithful": true' not in check.stdout:
            sys.exit("the generated trace does not replay faithfully: the bench would time a divergent replay")
        variants = {
            "report": [report, "--format", "json", big],
            "what-if x1": [report, "--format", "json", "--what-if", SETTINGS_X5[0], big],
            "what-if x5": [report, "--format", "json"] + [a for s in SETTINGS_X5 for a in ("--what-if", s)] + [big],
        }

        samples = time_variants(variants, args.runs)
        print(f"\n{events} tensor events ({os.path.getsize(big) >> 20} MiB of trace), {args.runs} runs each\n")
        print("| variant | median s | min-max s | events/s | peak RSS MiB |")
        print("|---|---|---|---|---|")
        spreads = {}
        for name in variants:
            s = Spread([x[0] for x in samples[name]])
            spreads[name] = s
            rss = max(x[1] for x in samples[name]) / MiB
            print(f"| {name} | {s.median:.3f} | {s.low:.3f}-{s.high:.3f} | {events / s.median / 1e6:.2f}M | {rss:.1f} |")
        print(f"\nwhat-if x1 / report: {spreads['what-if x1'].median / spreads['report'].median:.2f}x the wall time, "
              f"what-if x5 / report: {spreads['what-if x5'].median / spreads['report'].median:.2f}x")
        replay = subprocess.run([os.path.join(args.build, "bench", "what_if_replay_bench"), big, str(args.runs)] +
                                SETTINGS_X5, capture_output=True, text=True, check=True).stdout
        print("\nthe replay alone (trace parsed once), per setting:\n")
        print("| setting | median s | min-max s | tensor events/s |")
        print("|---|---|---|---|")
        slowest = None
        for line in replay.splitlines():
            name, figures = line.rsplit(": ", 1)
            median, low, high, count, rate = figures.split()[:5]
            if "(diverged)" in figures:
                sys.exit(f"the recorded run's replay diverged: {line}")
            slowest = min(slowest or float(rate), float(rate))
            print(f"| {name} | {float(median):.3f} | {float(low):.3f}-{float(high):.3f} | {float(rate) / 1e6:.1f}M |")
        print(f"\nslowest setting: {slowest / 1e6:.1f}M tensor events/s (target 5M/s)")
        # Memory: the same replays on a tenth of the events.
        rc, err, _, rss_small = run_measured(variants["what-if x5"][:-1] + [small], limit_s=600)
        rss_big = max(x[1] for x in samples["what-if x5"])
        print(f"peak RSS of what-if x5: {rss_small / MiB:.1f} MiB at {small_events} events, "
              f"{rss_big / MiB:.1f} MiB at {events}")
        print("load average after:", load_average())
        if rc != 0 or rss_big > rss_small * RSS_GROWTH_ALLOWED + RSS_SLACK_MIB * MiB:
            sys.exit("peak memory grows with the number of events")
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            shutil.copy(big, args.keep)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
