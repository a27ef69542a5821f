#!/usr/bin/env python3
# bench/report_bench.py — gpumem-report's events/s and peak memory, side by side with heaptrack_print on
# the same loop (make bench-report). Prints a Markdown table for docs/performance.md.
"""gpumem-report against heaptrack_print, on the same 2M-event allocate/free loop.

Usage: bench/report_bench.py [--build build] [--events 2000000] [--runs 5] [--depth 20]
                             [--climb-events N] [--keep DIR]

The loop is bench/alloc_loop: EVENTS/2 allocate/free pairs issued DEPTH frames deep.
  - heaptrack_print reads heaptrack's trace of `alloc_loop malloc` (EVENTS malloc/free events);
  - gpumem-report (--format json, every analysis) reads
      * the recorder's trace of `alloc_loop cuda` on the simulated runtime (the same loop, EVENTS
        cudaMalloc/cudaFree events, trace format version 2), plain and zstd-compressed;
      * a generated trace in format version 1 (64 live slots, alloc/free from 16 stacks, one 166-byte
        self-describing line per event), at EVENTS/10 and at EVENTS: "generated (v1)". Peak memory must
        not grow with the number of events: the two sizes are compared (the bench fails if it does);
      * two copies of the recorded trace as the ranks of one run, with -j 1 and -j 2 (events/s of
        both traces together);
      * "climbing" (generate_climbing): a caching allocator whose live blocks grow slowly, so the
        fragmentation at the block-level peak is measured nearly every iteration, at --climb-events and
        10x that: its time must grow linearly (it was quadratic while a measurement walked every block).
Each is run --runs times; the table gives the median and the min-max of the wall time, events/s of
the median, and the highest peak RSS. The `uptime` load average is printed before and after: the
figures only mean something next to it.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import load_average

HERE = os.path.dirname(os.path.abspath(__file__))

# Peak RSS may differ by allocator noise between sizes, never grow with them.
RSS_GROWTH_ALLOWED = 1.25
RSS_SLACK_MIB = 2.0


def generate(path, events):
    """Writes `events` events fast (preformatted lines, not json.dumps per event)."""
    with open(path, "w", buffering=1 << 22) as f:
        f.write('{"type":"header","format":"gpumemtrace","version":1,"library":"0.1.0","pid":1,"ppid":0,'
                '"exe":"/bench","cmdline":["bench"],"host":"h","start_time_ns":0,"clock":"monotonic",'
                '"clock_start_ns":0,"backend":"interpose","stack_depth":64,"on_full":"wait"}\n')
        f.write('{"type":"module","id":1,"path":"/bench","base":"0x400000","size":4096,"build_id":""}\n')
        for i in range(1, 33):
            f.write('{"type":"frame","id":%d,"ip":"0x%x","module":1,"offset":"0x%x","function":"site_%d",'
                    '"file":"/src/bench.cu","line":%d}\n' % (i, 0x400000 + i, i, i, i))
        for s in range(1, 17):
            f.write('{"type":"stack","id":%d,"frames":[%d,%d,%d,%d]}\n' % (s, s, s + 16, (s % 16) + 1, 32))
        f.write('{"type":"device","device":0,"name":"bench","total":85899345920,"free":85899345920}\n')
        alloc = ('{"type":"event","seq":%d,"t":%d,"tid":7,"api":"cudaMalloc","op":"alloc","kind":"device",'
                 '"addr":"0x%x","size":%d,"device":0,"stream":"0x0","stack":%d,"result":0}\n')
        free = ('{"type":"event","seq":%d,"t":%d,"tid":7,"api":"cudaFree","op":"free","kind":"device",'
                '"addr":"0x%x","size":0,"device":0,"stack":%d,"result":0}\n')
        live = [False] * 64
        buf = []
        for seq in range(1, events + 1):
            slot = seq % 64
            addr = 0x700000000000 + slot * 0x10000000
            if live[slot]:
                buf.append(free % (seq, seq * 100, addr, 0))
            else:
                buf.append(alloc % (seq, seq * 100, addr, 4096 + (seq % 977) * 512, 1 + seq % 16))
            live[slot] = not live[slot]
            if len(buf) >= 10000:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))
        f.write('{"type":"footer","events":%d,"dropped_total":0,"end_time":%d}\n' % (events, events * 100 + 1))


def generate_climbing(path, events):
    """A slowly climbing caching allocator: per iteration one kept block, one temporary block and
    its free (3 events), a new 64 MiB segment whenever the current one is full."""
    segment_size, block = 64 << 20, 4096
    with open(path, "w", buffering=1 << 22) as f:
        f.write('{"type":"header","format":"gpumemtrace","version":1,"pid":1}\n')
        f.write('{"type":"module","id":1,"path":"/bench","base":"0x400000","size":4096,"build_id":""}\n')
        f.write('{"type":"frame","id":1,"ip":"0x400001","module":1,"offset":"0x1","function":"step"}\n')
        f.write('{"type":"stack","id":1,"frames":[1]}\n')
        ev = '{"type":"event","seq":%d,"t":%d,"op":"%s","kind":"%s","addr":"0x%x","size":%d,"device":0,"stack":1}\n'
        seq, seg, used, buf = 0, 0x10000000, segment_size, []
        while seq < events:
            if used + 2 * block > segment_size:
                seg += segment_size
                used = 0
                seq += 1
                buf.append(ev % (seq, seq, "alloc", "device", seg, segment_size))
            kept, temp = seg + used, seg + used + block
            used += block
            for op, addr, size in (("block_alloc", kept, block), ("block_alloc", temp, block), ("block_free", temp, 0)):
                seq += 1
                buf.append(ev % (seq, seq, op, "block", addr, size))
            if len(buf) >= 10000:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))
        f.write('{"type":"footer","events":%d,"dropped_total":0,"end_time":%d}\n' % (seq, seq + 1))


GNU_TIME = "/usr/bin/time"


def measure_once(cmd):
    """Wall seconds and peak RSS (KiB) of cmd. The RSS comes from GNU time, a small C program: a
    child's ru_maxrss starts from the high-water mark of the process it was forked from (Linux keeps
    it across exec), so measured from Python it could not read below Python's own size."""
    start = time.perf_counter()
    out = subprocess.run([GNU_TIME, "-f", "%M", *cmd], check=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    return seconds, int(out.stderr.strip().splitlines()[-1])


class Row:
    """`runs` timings of one command on one input."""

    def __init__(self, tool, trace, events, input_bytes, cmd, runs):
        self.tool, self.trace, self.events, self.mib = tool, trace, events, input_bytes / (1 << 20)
        results = [measure_once(cmd) for _ in range(runs)]
        self.seconds = sorted(s for s, _ in results)
        self.rss_mib = max(r for _, r in results) / 1024
        self.median = statistics.median(self.seconds)
        self.rate = events / self.median
        print(f"{tool} on {trace} ({events:,} events): median {self.median:.3f} s "
              f"({self.seconds[0]:.3f}-{self.seconds[-1]:.3f}, {runs} runs) = {self.rate / 1e6:.2f}M events/s, "
              f"peak RSS {self.rss_mib:.1f} MiB", flush=True)

    def markdown(self):
        return (f"| {self.tool} | {self.trace} | {self.events:,} | {self.mib:.0f} | {self.median:.2f} | "
                f"{self.seconds[0]:.2f}-{self.seconds[-1]:.2f} | {self.rate / 1e6:.2f}M | {self.rss_mib:.1f} |")


def footer_events(path):
    """The event count of a trace's footer (the recorder counts its own start-up events too)."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 4096))
        for line in reversed(f.read().splitlines()):
            if b'"footer"' in line:
                return json.loads(line)["events"]
    sys.exit(f"{path}: no footer")


def record_alloc_loop(build, work, pairs, depth, name):
    """The recorder's trace of alloc_loop cuda (simulated runtime), written to work/NAME (.zst: compressed)."""
    path = os.path.join(work, name)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "sim"),
               LD_PRELOAD=os.path.join(build, "libgpumemtrace.so"), GPUMEMTRACE_OUTPUT=path,
               GPUMEMTRACE_QUIET="1")
    subprocess.run([os.path.join(build, "bench", "alloc_loop"), "cuda", str(pairs), str(depth)], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    if not os.path.exists(path):
        sys.exit(f"the recorder wrote no {path}")
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--climb-events", type=int, default=200_000)
    ap.add_argument("--keep")
    args = ap.parse_args()
    if args.runs < 3:
        sys.exit("--runs: at least 3 (a median and a spread)")
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit(f"{GNU_TIME} (GNU time) is needed for the peak RSS: make deps installs it")
    report = os.path.join(args.build, "gpumem-report")
    work = args.keep or tempfile.mkdtemp(prefix="report-bench-")
    os.makedirs(work, exist_ok=True)
    load_before = load_average()
    print(f"load average before: {load_before} (uptime)", flush=True)
    rows, failures = [], []
    pairs = args.events // 2
    try:
        # heaptrack_print on heaptrack's trace of the same loop.
        heaptrack, heaptrack_print = shutil.which("heaptrack"), shutil.which("heaptrack_print")
        heaptrack_row = None
        if heaptrack and heaptrack_print:
            prefix = os.path.join(work, "heaptrack.alloc_loop")
            subprocess.run([heaptrack, "-o", prefix, os.path.join(args.build, "bench", "alloc_loop"), "malloc",
                            str(pairs), str(args.depth)], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            data = [os.path.join(work, p) for p in os.listdir(work) if p.startswith("heaptrack.alloc_loop")][0]
            heaptrack_row = Row("heaptrack_print", "alloc loop (heaptrack)", pairs * 2, os.path.getsize(data),
                                [heaptrack_print, data], args.runs)
            rows.append(heaptrack_row)
        else:
            print("heaptrack or heaptrack_print missing: no comparison")

        recorded = record_alloc_loop(args.build, work, pairs, args.depth, "alloc_loop.jsonl")
        recorded_events = footer_events(recorded)
        recorded_row = Row("gpumem-report", "alloc loop (recorder, v2)", recorded_events, os.path.getsize(recorded),
                           [report, "--format", "json", recorded], args.runs)
        rows.append(recorded_row)
        compressed = record_alloc_loop(args.build, work, pairs, args.depth, "alloc_loop.jsonl.zst")
        rows.append(Row("gpumem-report", "alloc loop (recorder, v2 .zst)", recorded_events, os.path.getsize(compressed),
                        [report, "--format", "json", compressed], args.runs))
        os.unlink(compressed)

        generated_rows = []
        for n in (max(args.events // 10, 1000), args.events):
            trace = os.path.join(work, "generated-%d.jsonl" % n)
            generate(trace, n)
            generated_rows.append(Row("gpumem-report", "generated (v1)", n, os.path.getsize(trace),
                                      [report, "--format", "json", trace], args.runs))
            os.unlink(trace)
        rows.extend(generated_rows)

        # Two ranks of one run: -j 1 (one after another) and -j 2 (at once).
        ranks = os.path.join(work, "ranks")
        os.makedirs(ranks, exist_ok=True)
        for rank in (0, 1):
            os.link(recorded, os.path.join(ranks, "rank%d.jsonl" % rank))
        jobs_rows = [Row("gpumem-report -j %d" % jobs, "2 x alloc loop (recorder, v2)", 2 * recorded_events,
                         2 * os.path.getsize(recorded), [report, "-j", str(jobs), "--format", "json", ranks], args.runs)
                     for jobs in (1, 2)]
        rows.extend(jobs_rows)
        shutil.rmtree(ranks)

        climbing_rows = []
        for n in (args.climb_events, args.climb_events * 10):
            trace = os.path.join(work, "climbing-%d.jsonl" % n)
            generate_climbing(trace, n)
            climbing_rows.append(Row("gpumem-report", "climbing", n, os.path.getsize(trace),
                                     [report, "--format", "json", trace], args.runs))
            os.unlink(trace)
        rows.extend(climbing_rows)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    load_after = load_average()

    print(f"\nload average: {load_before} before, {load_after} after (uptime)")
    print("\n| tool | trace | events | input MiB | median s | min-max s | events/s | peak RSS MiB |\n"
          "|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row.markdown())
    print()
    if heaptrack_row:
        for row in (recorded_row, generated_rows[-1]):
            print(f"gpumem-report / heaptrack_print, events/s ({row.trace}): {row.rate / heaptrack_row.rate:.2f}x "
                  f"(target >= 0.5x); peak RSS {row.rss_mib:.1f} vs {heaptrack_row.rss_mib:.1f} MiB")
    print(f"-j 2 / -j 1 on two ranks: {jobs_rows[1].rate / jobs_rows[0].rate:.2f}x events/s")
    small, big = generated_rows
    growth = big.rss_mib / small.rss_mib
    verdict = "ok" if big.rss_mib <= small.rss_mib * RSS_GROWTH_ALLOWED + RSS_SLACK_MIB else "FAILED"
    print(f"peak RSS independent of events: {small.rss_mib:.1f} MiB at {small.events:,}, {big.rss_mib:.1f} MiB at "
          f"{big.events:,} ({growth:.2f}x): {verdict}")
    if verdict != "ok":
        failures.append("peak RSS grows with the number of events")
    small, big = climbing_rows
    print(f"climbing: 10x the events took {big.median / small.median:.1f}x the time (linear: about 10x)")
    if failures:
        sys.exit("FAILED: " + "; ".join(failures))


if __name__ == "__main__":
    main()
