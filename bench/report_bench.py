#!/usr/bin/env python3
# bench/report_bench.py — gpumem-report's events/s and peak memory, beside heaptrack_print.
"""gpumem-report benchmark: events/s and peak memory of the full analysis of a generated trace,
and heaptrack_print on a heaptrack trace of the same number of events, in the same run.

Usage: bench/report_bench.py [--build build] [--events 10000000] [--climb-events N] [--keep DIR]
Prints a Markdown table (the figures for docs/performance.md).

The trace is shaped like the recorder's: 64 live slots, each event an alloc or a free from one of
16 stacks, plus a caching-allocator block stream (block_alloc/block_free inside segments) and a
mark every 10k events. Memory of the analysis must not depend on --events (run it with two sizes).

A second trace, "climbing" (generate_climbing), is a caching allocator whose live blocks grow
slowly: every iteration sets a new block-level peak and then frees a temporary block, so the
fragmentation at the peak is measured nearly every iteration. It is analyzed at --climb-events and
10x that: the time must grow linearly (it was quadratic while a measurement walked every block).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


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


def measure(cmd):
    """Wall seconds and peak RSS (KiB) of cmd, measured in a fresh Python process so that
    ru_maxrss (the maximum over all children ever) belongs to this command alone."""
    probe = ("import resource,subprocess,sys,time;s=time.perf_counter();"
             "subprocess.run(sys.argv[1:],check=True,stdout=subprocess.DEVNULL);"
             "print(time.perf_counter()-s, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *cmd], check=True, capture_output=True, text=True)
    seconds, rss = out.stdout.split()
    return float(seconds), int(rss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--climb-events", type=int, default=200_000)
    ap.add_argument("--keep")
    args = ap.parse_args()
    report = os.path.join(args.build, "gpumem-report")
    work = args.keep or tempfile.mkdtemp(prefix="report-bench-")
    os.makedirs(work, exist_ok=True)
    rows = []
    try:
        small, big = max(args.events // 10, 1000), args.events
        for n in (small, big):
            trace = os.path.join(work, "trace-%d.jsonl" % n)
            t0 = time.perf_counter()
            generate(trace, n)
            gen = time.perf_counter() - t0
            mib = os.path.getsize(trace) / (1 << 20)
            seconds, rss = measure([report, "--format", "json", trace])
            rows.append(("gpumem-report", n, mib, seconds, n / seconds, rss / 1024))
            print(f"generated {n} events ({mib:.0f} MiB) in {gen:.1f}s; analysis {seconds:.2f}s = "
                  f"{n / seconds / 1e6:.2f}M events/s, peak RSS {rss / 1024:.1f} MiB", flush=True)
            os.unlink(trace)
        for n in (args.climb_events, args.climb_events * 10):
            trace = os.path.join(work, "climbing-%d.jsonl" % n)
            generate_climbing(trace, n)
            mib = os.path.getsize(trace) / (1 << 20)
            seconds, rss = measure([report, "--format", "json", trace])
            rows.append(("gpumem-report (climbing)", n, mib, seconds, n / seconds, rss / 1024))
            print(f"climbing {n} events: analysis {seconds:.2f}s = {n / seconds / 1e6:.2f}M events/s, "
                  f"peak RSS {rss / 1024:.1f} MiB", flush=True)
            os.unlink(trace)
        heaptrack, heaptrack_print = shutil.which("heaptrack"), shutil.which("heaptrack_print")
        workload = os.path.join(args.build, "bench", "report_malloc_pairs")
        if heaptrack and heaptrack_print and os.path.exists(workload):
            pairs = big // 2
            subprocess.run([heaptrack, "-o", os.path.join(work, "ht"), workload, str(pairs)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            data = [p for p in os.listdir(work) if p.startswith("ht")][0]
            seconds, rss = measure([heaptrack_print, os.path.join(work, data)])
            mib = os.path.getsize(os.path.join(work, data)) / (1 << 20)
            rows.append(("heaptrack_print", pairs * 2, mib, seconds, pairs * 2 / seconds, rss / 1024))
            print(f"heaptrack_print: {pairs * 2} events in {seconds:.2f}s = {pairs * 2 / seconds / 1e6:.2f}M events/s, "
                  f"peak RSS {rss / 1024:.1f} MiB", flush=True)
        else:
            print("heaptrack, heaptrack_print or the workload missing: no comparison")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\n| tool | events | input MiB | seconds | events/s | peak RSS MiB |\n|---|---|---|---|---|---|")
    for tool, n, mib, s, rate, rss in rows:
        print(f"| {tool} | {n:,} | {mib:.0f} | {s:.2f} | {rate / 1e6:.2f}M | {rss:.1f} |")
    if len(rows) == 5:
        print(f"\ngpumem-report / heaptrack_print speed ratio (events/s): {rows[1][4] / rows[4][4]:.1f}x")


if __name__ == "__main__":
    main()
