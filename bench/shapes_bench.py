#!/usr/bin/env python3
# bench/shapes_bench.py — gpumem-report on the shapes of trace users have, each recorded by the recorder
# itself (format version 2, .zst as written), side by side with heaptrack_print on the alloc loop
# (make bench-report-shapes). Prints a Markdown table for docs/performance.md.
"""gpumem-report's events/s and peak memory on recorded traces of the shapes users produce.

Usage: bench/shapes_bench.py [--build build] [--runs 5] [--shapes torch,live,page]
                             [--torch-events 20000000] [--live-events 10000000] [--live 5000]
                             [--page-events 100000000] [--cache DIR] [--regenerate]
                             [--report NAME=PATH ...] [--one-cpu] [--no-small]

Shapes, each written once by the recorder (LD_PRELOAD=libgpumemtrace.so, the simulated runtime) and
cached in DIR (default BUILD/bench/shapes; the file names carry the size, a hash of the workload's
sources is checked, --regenerate writes them again):
  torch  bench/shapes_torch_train.py on the stand-in torch (tests/python/fake_torch) with the PyTorch
         hook: tensor-level events drained from the allocator's history (delayed, merged at each sync),
         Python stacks 6-9 frames deep, about 130 events per step (--torch-events; minutes to record);
  live   bench/shapes_program live: a C++ program holding --live allocations, freeing one at random
         and allocating another from 64 call sites (--live-events);
  page   bench/shapes_program page: the 100M-event training run of the HTML report (the plan of
         tests/report/lod_trace.py) reported through include/gpumemtrace.h (--page-events), read
         with --format html.
The peer: heaptrack_print on heaptrack's trace of bench/alloc_loop (2M malloc/free events), and
gpumem-report on the recorder's trace of the same loop (the easy case), in the same rounds.
Each round runs every (report, trace) once, interleaved; the table gives per row the median and
min-max of the wall time over --runs rounds, events/s of the median, the CPU time (user + system,
every thread) and events per CPU second (the rate per core), and the highest peak RSS (GNU time).
Memory must not grow with the events: each shape is also read at a tenth of its size (--no-small
skips that), and the bench fails when the peak RSS grows by more than 25% + 2 MiB.
--report NAME=PATH adds another gpumem-report (a build before a change) to every round.
--one-cpu adds, per shape, gpumem-report run on one CPU (`taskset -c 0`: no read-ahead thread), so that
the table shows what the second core gives one trace (report/reader/line_reader.h).
The `uptime` load average is printed before and after: the figures mean something only beside it.
"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import ROOT, load_average
from report_bench import GNU_TIME, footer_events, record_alloc_loop

RSS_GROWTH_ALLOWED = 1.25
RSS_SLACK_MIB = 2.0
TORCH_EVENTS_PER_STEP = 130  # bench/shapes_torch_train.py, measured

SOURCES = {
    "torch": ["bench/shapes_torch_train.py", "tests/python/fake_torch"],
    "live": ["bench/shapes_program.cpp"],
    "page": ["bench/shapes_program.cpp"],
}


def sources_hash(shape):
    """A hash of the workload's sources: a cached trace of another workload is written again."""
    h = hashlib.sha256()
    for rel in SOURCES[shape]:
        path = os.path.join(ROOT, rel)
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".py"))
        for f in files:
            with open(f, "rb") as src:
                h.update(os.path.relpath(f, ROOT).encode() + b"\0" + src.read())
    return h.hexdigest()[:16]


def recorder_env(build, output, extra=None):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "sim"),
               LD_PRELOAD=os.path.join(build, "libgpumemtrace.so"), GPUMEMTRACE_OUTPUT=output,
               GPUMEMTRACE_QUIET="1", GPUMEMTRACE_MAX_BYTES="0")  # the whole run: no size cap
    env.update(extra or {})
    return env


def record(build, shape, events, live, path):
    """Runs the shape's workload under the recorder into `path` (.jsonl.zst)."""
    tmp = path + ".part.jsonl.zst"
    if os.path.exists(tmp):
        os.unlink(tmp)
    if shape == "torch":
        steps = max(1, events // TORCH_EVENTS_PER_STEP)
        # A 10 ms poll: the stand-in runs faster than a real model, and with the default 200 ms its
        # 65536-entry history would wrap between two drains (events lost; checked below).
        env = recorder_env(build, tmp, {
            "FAKE_TORCH_CUDART": os.path.join(build, "sim", "libcudart.so.13"),
            "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "tools", "python"),
                                           os.path.join(ROOT, "tests", "python", "fake_torch")]),
            "GPUMEMTRACE_TORCH_POLL_MS": "10"})
        cmd = [sys.executable, os.path.join(ROOT, "bench", "shapes_torch_train.py"), str(steps)]
    elif shape == "live":
        env = recorder_env(build, tmp)
        cmd = [os.path.join(build, "bench", "shapes_program"), "live", str(events), str(live)]
    else:
        env = recorder_env(build, tmp, {"GPUMEMTRACE_SIM_CAPACITY": "80G"})
        cmd = [os.path.join(build, "bench", "shapes_program"), "page", str(events)]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    if shape == "torch":
        lost = subprocess.run(f"zstd -dcq '{tmp}' | grep -c -F 'history wrapped'", shell=True,
                              capture_output=True, text=True).stdout.strip()
        if lost != "0":
            sys.exit(f"{shape}: the stand-in's history wrapped between drains ({lost} marks): events lost")
    os.replace(tmp, path)


def cached_trace(args, shape, events):
    """The cached trace of `shape` at `events` events, recorded first when missing or stale."""
    os.makedirs(args.cache, exist_ok=True)
    suffix = f"-{args.live}" if shape == "live" else ""
    path = os.path.join(args.cache, f"{shape}-{events}{suffix}.jsonl.zst")
    meta = path + ".json"
    key = sources_hash(shape)
    fresh = os.path.exists(path) and os.path.exists(meta) and not args.regenerate
    if fresh:
        with open(meta) as f:
            fresh = json.load(f).get("sources") == key
    if not fresh:
        print(f"recording the {shape} shape ({events:,} events) into {path} ...", flush=True)
        record(args.build, shape, events, args.live, path)
        with open(meta, "w") as f:
            json.dump({"sources": key, "events": footer_events_zst(path)}, f)
    with open(meta) as f:
        return path, json.load(f)["events"]


def footer_events_zst(path):
    """The footer's event count of a compressed trace (its last line)."""
    tail = subprocess.run(f"zstd -dcq '{path}' | tail -n 1", shell=True, capture_output=True, text=True).stdout
    record = json.loads(tail)
    if record.get("type") != "footer":
        sys.exit(f"{path}: no footer")
    if record.get("not_written"):
        sys.exit(f"{path}: capped, {record['not_written']:,} events not written")
    return record["events"]


def measure(cmd):
    """(wall s, CPU s, peak RSS KiB) of cmd, from GNU time (see report_bench.measure_once)."""
    out = subprocess.run([GNU_TIME, "-f", "%e %U %S %M", *cmd], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr}")
    wall, user, system, rss = out.stderr.strip().splitlines()[-1].split()
    return float(wall), float(user) + float(system), int(rss)


class Row:
    def __init__(self, tool, trace, events, cmd):
        self.tool, self.trace, self.events, self.cmd = tool, trace, events, cmd
        self.samples = []

    def run(self):
        self.samples.append(measure(self.cmd))

    @property
    def wall(self):
        return statistics.median(s[0] for s in self.samples)

    @property
    def cpu(self):
        return statistics.median(s[1] for s in self.samples)

    @property
    def rss_mib(self):
        return max(s[2] for s in self.samples) / 1024

    @property
    def rate(self):
        return self.events / self.wall

    def markdown(self, peer_rate):
        walls = [s[0] for s in self.samples]
        ratio = f" ({self.rate / peer_rate:.2f}x)" if peer_rate else ""
        return (f"| {self.tool} | {self.trace} | {self.events:,} | {self.wall:.2f} | {min(walls):.2f}-{max(walls):.2f} | "
                f"{self.rate / 1e6:.2f}M{ratio} | {self.cpu:.2f} | {self.events / self.cpu / 1e6:.2f}M | "
                f"{self.rss_mib:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--shapes", default="torch,live,page")
    ap.add_argument("--torch-events", type=int, default=20_000_000)
    ap.add_argument("--live-events", type=int, default=10_000_000)
    ap.add_argument("--live", type=int, default=5000)
    ap.add_argument("--page-events", type=int, default=100_000_000)
    ap.add_argument("--loop-events", type=int, default=2_000_000)
    ap.add_argument("--cache")
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--report", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--one-cpu", action="store_true")
    ap.add_argument("--no-small", action="store_true")
    args = ap.parse_args()
    if args.runs < 3:
        sys.exit("--runs: at least 3 (a median and a spread)")
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit(f"{GNU_TIME} (GNU time) is needed for the peak RSS: make deps installs it")
    args.build = os.path.abspath(args.build)
    args.cache = args.cache or os.path.join(args.build, "bench", "shapes")
    shapes = [s for s in args.shapes.split(",") if s]
    if any(s not in SOURCES for s in shapes):
        sys.exit(f"--shapes: of {', '.join(SOURCES)}")
    reports = [("gpumem-report", os.path.join(args.build, "gpumem-report"))]
    for spec in args.report:
        name, sep, path = spec.partition("=")
        if not sep or not os.access(path, os.X_OK):
            sys.exit(f"--report takes NAME=PATH to a gpumem-report: {spec}")
        reports.append((f"gpumem-report ({name})", path))

    sizes = {"torch": args.torch_events, "live": args.live_events, "page": args.page_events}
    traces = []  # (shape, label, path, events, small)
    for shape in shapes:
        for events, small in ((sizes[shape], False),) + (() if args.no_small else ((sizes[shape] // 10, True),)):
            path, counted = cached_trace(args, shape, events)
            traces.append((shape, path, counted, small))

    work = tempfile.mkdtemp(prefix="shapes-bench-")
    print(f"load average before: {load_average()} (uptime)", flush=True)
    rows = []
    try:
        pairs = args.loop_events // 2
        heaptrack, heaptrack_print = shutil.which("heaptrack"), shutil.which("heaptrack_print")
        peer = None
        if heaptrack and heaptrack_print:
            prefix = os.path.join(work, "heaptrack.alloc_loop")
            subprocess.run([heaptrack, "-o", prefix, os.path.join(args.build, "bench", "alloc_loop"), "malloc",
                            str(pairs), "20"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            data = [os.path.join(work, p) for p in os.listdir(work) if p.startswith("heaptrack.alloc_loop")][0]
            peer = Row("heaptrack_print", "alloc loop (heaptrack)", pairs * 2, [heaptrack_print, data])
            rows.append(peer)
        else:
            print("heaptrack or heaptrack_print missing: no peer")
        loop = record_alloc_loop(args.build, work, pairs, 20, "alloc_loop.jsonl.zst")
        loop_events = footer_events(loop) if not loop.endswith(".zst") else footer_events_zst(loop)
        for name, report in reports:
            rows.append(Row(name, "alloc loop (recorder)", loop_events, [report, "--no-progress", "--format", "json",
                                                                         "-o", os.devnull, loop]))
        for shape, path, events, small in traces:
            fmt = "html" if shape == "page" else "json"
            label = f"{shape}{' (a tenth)' if small else ''}, --format {fmt}"
            for name, report in reports:
                rows.append(Row(name, label, events, [report, "--no-progress", "--format", fmt, "-o", os.devnull, path]))
                if args.one_cpu and not small:
                    rows.append(Row(f"{name}, one CPU", label, events,
                                    ["taskset", "-c", "0", report, "--no-progress", "--format", fmt, "-o", os.devnull,
                                     path]))
        for r in range(args.runs):
            for row in rows:
                row.run()
            print(f"round {r + 1}/{args.runs} done, load average {load_average()}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nload average after: {load_average()} (uptime)\n")
    print("| tool | trace | events | median s | min-max s | events/s (vs heaptrack_print) | CPU s | events per CPU s | "
          "peak RSS MiB |\n|---|---|---|---|---|---|---|---|---|")
    peer_rate = peer.rate if peer else 0
    for row in rows:
        print(row.markdown(peer_rate if row is not peer else 0))
    failures = []
    by_key = {(row.tool, row.trace): row for row in rows}
    for row in rows:
        if "(a tenth)" in row.trace:
            continue
        small = by_key.get((row.tool, row.trace.replace(",", " (a tenth),", 1)))
        if small and row.rss_mib > small.rss_mib * RSS_GROWTH_ALLOWED + RSS_SLACK_MIB:
            failures.append(f"{row.tool} on {row.trace}: peak RSS {small.rss_mib:.1f} MiB at {small.events:,} events, "
                            f"{row.rss_mib:.1f} MiB at {row.events:,}")
    if failures:
        sys.exit("FAILED: peak RSS grows with the number of events: " + "; ".join(failures))


if __name__ == "__main__":
    main()
