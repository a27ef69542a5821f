#!/usr/bin/env python3
# bench/merge_bench.py — `gpumem-report merge` of per-process reports, side by side with reading the traces
# with -j (make bench-merge). Prints a Markdown table for docs/scale.md.
"""gpumem-report merge REPORTS/ against gpumem-report -j N TRACES/, on one generated job.

Usage: bench/merge_bench.py [--build build] [--ranks 1000] [--steps 300] [--runs 5] [--jobs 2]

The job: tests/scale/ranks.py's ranks (PyTorch-shaped traces: segments, blocks under Python frames,
leaks on every rank, one rank's higher peak, two OOMs), RANKS ranks of STEPS training steps each
(13 events a step). Each rank's JSON report is made once, as `gpumemtrace run --report-per-process`
makes it where the rank ran (that time is printed: it is paid on the ranks' own machines, one
report each). Then, in interleaved rounds of RUNS:
  - merge: gpumem-report merge --format json REPORTS/ (the cross-rank view from the summaries);
  - -j: gpumem-report --format json -j JOBS TRACES/ (the whole run read again, on this machine).
Medians and ranges of wall time, and the `uptime` load average before and after.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchlib import ROOT, Spread, interleaved_rounds, load_average

sys.path.insert(0, os.path.join(ROOT, "tests", "scale"))
from ranks import write_run  # noqa: E402


def timed(cmd):
    start = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}", file=sys.stderr)
        return None
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--ranks", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    report = os.path.join(args.build, "gpumem-report")
    if not os.path.exists(report):
        sys.exit(f"{report} not built (make)")
    tmp = tempfile.mkdtemp(prefix="gpumem-merge-bench-")
    try:
        traces = os.path.join(tmp, "traces")
        paths = write_run(traces, args.ranks, args.steps)
        trace_bytes = sum(os.path.getsize(p) for p in paths)
        reports = os.path.join(tmp, "reports")
        os.makedirs(reports)
        start = time.monotonic()
        for p in paths:
            name = os.path.basename(p)[:-len(".jsonl")] + ".report.json"
            if timed([report, "--format", "json", "--no-progress", "-o", os.path.join(reports, name), p]) is None:
                sys.exit(1)
        per_rank_s = (time.monotonic() - start) / len(paths)
        report_bytes = sum(os.path.getsize(os.path.join(reports, n)) for n in os.listdir(reports))
        before = load_average()
        commands = {"merge": [report, "merge", "--format", "json", reports],
                    "-j": [report, "--format", "json", "--no-progress", "-j", str(args.jobs), traces]}
        samples = interleaved_rounds(list(commands), args.runs, lambda v, r: timed(commands[v]))
        if samples is None:
            sys.exit(1)
        after = load_average()
        events = args.ranks * (14 + 13 * args.steps)
        print(f"{args.ranks} ranks, {args.steps} steps each: about {events:,} events, traces {trace_bytes / 2**20:.0f} MiB, "
              f"per-rank reports {report_bytes / 2**20:.0f} MiB; one rank's report {per_rank_s * 1000:.0f} ms "
              f"(made where it ran); load average before {before}, after {after}")
        print()
        print("| variant | wall s, median (range) of %d |" % args.runs)
        print("|---|---|")
        spreads = {v: Spread(s) for v, s in samples.items()}
        for v, s in spreads.items():
            print(f"| `{' '.join(os.path.basename(c) if c.startswith(tmp) or c == report else c for c in commands[v])}` "
                  f"| {s.text('%.2f')} |")
        print()
        print(f"merge / -j {args.jobs}: {spreads['merge'].ratio_to(spreads['-j']):.3f}")
    finally:
        shutil.rmtree(tmp, True)


if __name__ == "__main__":
    main()
