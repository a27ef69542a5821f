#!/usr/bin/env python3
# bench/batch_bench.py — the cost of gpumem-report's batch what-if (--max-batch, --at-batch), side by side with the
# plain report on the same events (make bench-batch). Prints a Markdown table for docs/performance.md.
"""gpumem-report --max-batch against the plain report, on generated PyTorch traces.

Usage: bench/batch_bench.py [--build build] [--events 2000000] [--runs 5]

The traces: what_if_bench.py's training loop (PyTorch tensor events with the segment events the default
allocator makes, so that the replay of each run matches its recording), its five large tensors scaling
with the batch (12, 14, 18, 22 and 26 MiB per 8 of batch), on an 80 GiB device: runs at batch 8 and 16 of
EVENTS tensor events each, and of EVENTS / 2 each. Variants, in interleaved rounds:
  - report: gpumem-report --format json RUN16 (the baseline: the report's own pass over EVENTS);
  - two runs of EVENTS / 2: --max-batch --at-batch 48 RUN8 RUN16 (EVENTS events in all);
  - two runs of EVENTS: the same on the longer runs (2 * EVENTS events: each run read twice, the
    template's events replayed once per candidate batch).
The search's replays (JSON max_batch[].replays: one replay of the whole run per candidate batch) are
printed with the figures (the target: a search over 20 candidate sizes of a 2M-event run under 10 s).
Medians and ranges of wall time, and peak RSS. The `uptime` load average before and after: the figures
only mean something next to it.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from benchlib import Spread, load_average
from what_if_bench import MiB, generate, time_variants


TARGET_S = 10.0


def large_at(batch):
    # Never 20 MiB: a large tensor that size would take the cached 20 MiB segment of the medium ones,
    # which the generator does not foresee.
    return [m * MiB * batch // 8 for m in (12, 14, 18, 22, 26)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--events", type=int, default=2000000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    report = os.path.join(args.build, "gpumem-report")
    if not os.path.exists(report):
        sys.exit(f"{report} not built (make)")
    print("load average before:", load_average())
    tmp = tempfile.mkdtemp(prefix="batch-bench.")
    try:
        run8, run16 = os.path.join(tmp, "run_b8.jsonl"), os.path.join(tmp, "run_b16.jsonl")
        half8, half16 = os.path.join(tmp, "half_b8.jsonl"), os.path.join(tmp, "half_b16.jsonl")
        events = generate(run16, args.events, large_at(16))
        generate(run8, args.events, large_at(8))
        generate(half8, args.events // 2, large_at(8))
        generate(half16, args.events // 2, large_at(16))
        variants = {
            "report": [report, "--format", "json", run16],
            "two runs of EVENTS / 2": [report, "--format", "json", "--max-batch", "--at-batch", "48", half8, half16],
            "two runs of EVENTS": [report, "--format", "json", "--max-batch", "--at-batch", "48", run8, run16],
        }
        # Each run must replay as recorded (else the search would time a divergent model), and the search
        # must have found an answer.
        replays = {}
        for name in list(variants)[1:]:
            doc = json.loads(subprocess.run(variants[name], capture_output=True, text=True, check=True).stdout)
            batch = doc["batch"]
            if not all(d["replay"]["faithful"] for d in batch["devices"]):
                sys.exit(f"{name}: the generated run does not replay faithfully")
            found = batch["max_batch"][0]
            replays[name] = (found["replays"], found["largest"])

        samples = time_variants(variants, args.runs)
        print(f"\n{events} tensor events in the run at batch 16 ({os.path.getsize(run16) >> 20} MiB of trace); "
              f"{args.runs} runs each\n")
        print("| variant | median s | min-max s | peak RSS MiB | replays in the search | largest batch |")
        print("|---|---|---|---|---|---|")
        for name in variants:
            s = Spread([x[0] for x in samples[name]])
            rss = max(x[1] for x in samples[name]) / MiB
            count, largest = replays.get(name, ("–", "–"))
            print(f"| {name} | {s.median:.2f} | {s.low:.2f}-{s.high:.2f} | {rss:.1f} | {count} | {largest} |")
        slowest = Spread([x[0] for x in samples["two runs of EVENTS / 2"]]).median
        print(f"\nthe search on {events} events in all: {slowest:.2f} s (target: under {TARGET_S:.0f} s)")
        print("load average after:", load_average())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
