#!/usr/bin/env python3
# bench/html_bench.py — the HTML report of a huge run (100M events by default): page size, what it
# keeps, gpumem-report's time and memory, and how fast headless Chromium draws it, beside what
# PyTorch's memory_viz would have to load for the same run (make bench-html).
"""The HTML report's level of detail on a huge run, beside memory_viz's limits.

Usage: bench/html_bench.py [--build build] [--events 100000000] [--runs 5] [--keep DIR]
                           [--snapshot-events 1000000]

1. Writes tests/report/lod_trace.py's training run of --events events, through zstd.
2. gpumem-report --format html on it: wall time, max RSS (once: at 100M events it takes minutes).
3. Headless Chromium (tests/report/browser.py, the DevTools protocol over a pipe) opens the page
   --runs times: seconds from navigation to the report drawn (data-rendered), the page's own first
   contentful paint (performance API) and its render time (data-render-ms). Median (min-max).
4. memory_viz: the page `python -m torch.cuda._memory_viz trace_plot` writes embeds the whole
   snapshot pickle in base64 (torch/cuda/_memory_viz.py, _format_viz) and loads MemoryViz.js and d3
   from CDNs, so it cannot run here (no network). Its page size is measured instead: a snapshot of
   the same run's first --snapshot-events events (every trace entry as _record_memory_history writes
   it: action, addr, size, stream, time_us, frames), pickled and base64-encoded as _format_viz does,
   scaled to --events. What it shows is MemoryViz.js's process_alloc_data: every event of the
   snapshot decoded in the browser, the largest `max_entries` (its detail slider) drawn, the rest
   "summarized".

The figures mean something only next to the load average, printed before and after.
"""
import argparse
import base64
import json
import os
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import ROOT, Spread, load_average

sys.path.insert(0, os.path.join(ROOT, "tests", "report"))
from browser import Page  # noqa: E402

LOD_TRACE = os.path.join(ROOT, "tests", "report", "lod_trace.py")

_MEASURE = """
import resource, subprocess, sys, time
start = time.monotonic()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(rc, time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def write_trace(path, events):
    """The lod_trace run, compressed on the fly (100M events are ~20 GB of text)."""
    with open(path, "wb") as out:
        zstd = subprocess.Popen(["zstd", "-q", "-1", "-T2", "-c"], stdin=subprocess.PIPE, stdout=out)
        gen = subprocess.run([sys.executable, LOD_TRACE, "/dev/stdout", "--events", str(events)], stdout=zstd.stdin)
        zstd.stdin.close()
        if gen.returncode or zstd.wait():
            raise SystemExit("html_bench: could not write the trace")


def run_report(report, trace, page):
    """(seconds, max RSS bytes) of gpumem-report --format html, measured from a fresh small Python."""
    proc = subprocess.run([sys.executable, "-c", _MEASURE, report, "--no-progress", "--format", "html", "-o", page, trace],
                          capture_output=True, text=True)
    rc, seconds, rss = proc.stdout.split()
    if rc != "0":
        raise SystemExit(f"html_bench: gpumem-report failed: {proc.stderr}")
    return float(seconds), int(rss)


def open_page(page, runs):
    """Per run: (seconds to drawn, first contentful paint ms, the page's render ms, console errors)."""
    samples = []
    for _ in range(runs):
        browser = Page.open(width=1280, height=1000, timeout=300)
        if browser is None:
            raise SystemExit("html_bench: chromium cannot start here")
        with browser:
            seconds = browser.load(page, timeout=300)
            paint = 0
            for _ in range(40):  # the paint entry is queued after the frame that painted
                paint = browser.evaluate("(performance.getEntriesByType('paint').find(e => e.name === "
                                         "'first-contentful-paint') || {}).startTime || 0")
                if paint:
                    break
                time.sleep(0.05)
            render = int(browser.evaluate("document.body.getAttribute('data-render-ms')") or 0)
            samples.append((seconds, paint, render, list(browser.errors)))
    return samples


def kept(page):
    """What the page holds of the allocation timeline: allocations, bands, and the peak's and OOMs' share."""
    with open(page, encoding="utf-8") as f:
        data = json.loads(re.search(r'id="gpumem-data">(.*?)</script>', f.read(), re.S).group(1))
    blocks = data["allocation_timelines"][0]["devices"][0]["blocks"]
    moments = [blocks["peak"]] + blocks["ooms"]
    exact = all(m["shown_bytes"] == m["bytes"] for m in moments)
    return blocks["allocations"], blocks["shown"], exact


def snapshot_bytes(events):
    """Bytes of memory_viz's page for a snapshot of `events` trace entries of the same run: pickled
    as torch.cuda.memory._snapshot() returns it, base64 as _format_viz embeds it."""
    frames = [[{"filename": "/src/train.py", "line": 40 + i, "name": f"layer_{i}_forward"},
               {"filename": "train.py", "line": 42, "name": f"block_{i}"}] for i in range(8)]
    trace, live, t = [], [], 0
    addr = 0x7e0200000000
    while len(trace) < events:
        for i in range(24):
            t += 1
            trace.append({"action": "alloc", "addr": addr + i * (1 << 23), "size": ((i % 8) + 1) << 20, "stream": 0,
                          "time_us": t, "frames": frames[i % 8]})
            live.append(trace[-1])
        while live:
            e = live.pop()
            for action in ("free_requested", "free_completed"):
                t += 1
                trace.append({"action": action, "addr": e["addr"], "size": e["size"], "stream": 0, "time_us": t,
                              "frames": e["frames"]})
    snapshot = {"segments": [], "device_traces": [trace[:events]]}
    return len(base64.b64encode(pickle.dumps(snapshot)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--events", type=int, default=100_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--snapshot-events", type=int, default=1_000_000)
    ap.add_argument("--keep", help="keep the trace and the page in DIR")
    args = ap.parse_args()
    report = os.path.join(args.build, "gpumem-report")
    work = args.keep or tempfile.mkdtemp(prefix="gpumem-html-bench-")
    os.makedirs(work, exist_ok=True)
    trace, page = os.path.join(work, "run.jsonl.zst"), os.path.join(work, "run.html")
    print(f"load average before: {load_average()}", flush=True)
    try:
        start = time.monotonic()
        write_trace(trace, args.events)
        print(f"trace: {args.events} events written in {time.monotonic() - start:.1f} s, "
              f"{os.path.getsize(trace) / 2**20:.0f} MiB compressed", flush=True)
        report_s, report_rss = run_report(report, trace, page)
        allocations, bands, exact = kept(page)
        opened = open_page(page, args.runs)
        errors = sorted({e for *_, errs in opened for e in errs})
        drawn = Spread([s for s, _, _, _ in opened])
        paint = Spread([p / 1000 for _, p, _, _ in opened])
        viz = snapshot_bytes(min(args.snapshot_events, args.events)) * args.events / min(args.snapshot_events, args.events)
        size = os.path.getsize(page)
        print()
        print(f"| | gpumemtrace HTML ({args.events:,} events) | memory_viz (same run) |")
        print("|---|---|---|")
        print(f"| page size | {size / 2**20:.2f} MiB | {viz / 2**20:,.0f} MiB (snapshot pickle in base64; measured on "
              f"{min(args.snapshot_events, args.events):,} events, scaled) |")
        print(f"| events in the page | none: {bands:,} of {allocations:,} allocations as bands, the rest aggregated "
              f"(everything live at the peak and the OOM: {'all' if exact else 'NOT all'}) | every event, decoded "
              "in the browser; largest max_entries drawn, the rest summarized |")
        print(f"| drawn (navigation to report drawn) | {drawn.text('%.2f')} s | not run: needs MemoryViz.js and d3 "
              "from CDNs |")
        print(f"| first contentful paint | {paint.text('%.2f')} s | – |")
        print(f"| analyzer | gpumem-report {report_s:.1f} s, max RSS {report_rss / 2**20:.0f} MiB | – |")
        print(f"\nconsole errors: {errors or 'none'}; runs: {args.runs}")
        print(f"load average after: {load_average()}")
        if errors or size >= 10 << 20 or not exact:
            return 1
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
