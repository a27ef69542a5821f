#!/usr/bin/env python3
"""Writes the golden traces in tests/report/golden/ (traces shaped like the recorder's) and, with
--update, their expected JSON reports (NAME.expected.json) from the current build/gpumem-report.
Review the diff of the expected files before committing them: they are the contract."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tracegen import KiB, MiB, Trace  # noqa: E402

GOLDEN = os.path.join(HERE, "golden")


def mixed(path):
    """Leak, peak, capacity OOM, growth, marks, inlined and Python frames, two devices."""
    t = Trace(path, devices=((0, "Sim A", 1 << 30), (1, "Sim B", 1 << 30)), compact=False)
    w = t.stack("load_weights", 30, inlined="read_tensor")
    a = t.stack("forward", 40, python="model_forward")
    k = t.stack("accumulate_loss", 50)
    t.mark("init")
    t.alloc(0x10000000, 100 * MiB, w)
    t.alloc(0x80000000, 10 * MiB, w, device=1)
    for i in range(20):
        t.mark("step")
        t.alloc(0x20000000, 50 * MiB, a)
        t.alloc(0x40000000 + i * MiB, 256 * KiB, k)
        t.free(0x20000000)
    t.failed_alloc(2 << 30, a)
    t.meminfo(300 * MiB, 1 << 30)
    t.free(0x80000000, device=1)
    t.close()


def blocks(path):
    """A caching allocator: segments, blocks, a fragmentation OOM, cached memory at exit."""
    t = Trace(path, devices=((0, "Sim", 200 * MiB),))
    seg = t.stack("CachingAllocator::malloc", 3)
    u = t.stack("user_tensor", 4)
    t.alloc(0x100000000, 64 * MiB, seg)
    t.alloc(0x200000000, 32 * MiB, seg)
    for i in range(8):
        t.block_alloc(0x100000000 + i * 8 * MiB, 4 * MiB, u)
    t.block_alloc(0x200000000, 8 * MiB, u, segment=0x200000000)
    for i in range(0, 8, 2):
        t.block_free(0x100000000 + i * 8 * MiB)
    t.block_oom(40 * MiB, u)
    t.meminfo(2 * MiB, 200 * MiB)
    t.close()


def killed_truncated(path):
    t = Trace(path)
    s = t.stack("work", 1)
    t.alloc(0x1000, 3 * MiB, s)
    t.dropped(7)
    t.close(footer=False)
    with open(path, "a") as f:
        f.write('{"type":"event","seq":2,"t":5,"op":"fr')


GENERATORS = {"mixed.jsonl": mixed, "blocks.jsonl": blocks, "killed_truncated.jsonl": killed_truncated}


def normalized_report(report_bin, path):
    proc = subprocess.run([report_bin, "--format", "json", path], capture_output=True, text=True)
    data = json.loads(proc.stdout)
    # Paths differ between checkouts: keep the file name only.
    for section in ("processes", "leaks", "held_at_exit", "scopes", "peaks", "ooms", "failed_calls", "growth",
                    "fragmentation"):
        for entry in data.get(section, []):
            entry["file"] = os.path.basename(entry["file"])
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "build"))
    args = ap.parse_args()
    os.makedirs(GOLDEN, exist_ok=True)
    for name, generate in GENERATORS.items():
        generate(os.path.join(GOLDEN, name))
        if args.update:
            data = normalized_report(os.path.join(args.build, "gpumem-report"), os.path.join(GOLDEN, name))
            with open(os.path.join(GOLDEN, name + ".expected.json"), "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.write("\n")


if __name__ == "__main__":
    main()
