#!/usr/bin/env python3
# tests/report/fuzz_seeds.py — seeds for the differential fuzzer (report/fuzz/fuzz_differential.cpp).
"""Writes small valid traces for the differential fuzzer: windows of the real traces in
tests/report/real and of traces the simulated CUDA runtime records now (the test programs of
tests/e2e/programs under the recorder), each a header, the definitions its events use and a run of
consecutive events, under --max-bytes (the fuzzer's -max_len leaves room to grow).

A window is a valid trace because the definitions it needs are kept in their order, version 2 sites
are renumbered 1, 2, 3... (the event lines that name them follow), and an event line's time and seq
are relative to the line before it: the first event of a window just moves in time.

Usage: fuzz_seeds.py --build BUILD --out DIR [--max-bytes N] [--no-simulator]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REAL = os.path.join(HERE, "real")
GOLDEN = os.path.join(HERE, "golden")
# Test programs of tests/e2e/programs (their arguments), recorded under the simulated runtime.
SIMULATED = [("report_oom", []), ("report_leak", []), ("report_growth", []), ("scopes", []),
             ("runtime_apis", []), ("extreme_args", ["runtime"])]
DEFINITIONS = {"module", "frame", "stack", "site", "device"}


def read_lines(path):
    if path.endswith(".zst"):
        data = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    else:
        with open(path, "rb") as f:
            data = f.read()
    return [line for line in data.decode("utf-8", "replace").split("\n") if line.strip()]


def compact(record):
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def windows(lines, max_bytes, count):
    """Up to `count` valid sub-traces of `lines` (a trace), each under max_bytes."""
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:  # a cut-short last line (a killed writer's trace)
            break
    if not records or records[0].get("type") != "header":
        return []
    header = records[0]
    version = header.get("version", 1)
    # The timeline's lines: events, and the records placed among them ("gc": absolute seq and t, above
    # the event lines' before it, so a window keeps it valid).
    events = [i for i, r in enumerate(records) if "type" not in r or r.get("type") in ("event", "gc")]
    if not events:
        return [("\n".join(lines[: max(1, min(len(lines), 40))]) + "\n")]
    by_id = {}  # (type, id) -> index
    sites = []  # version 2: site id - 1 -> index
    for i, r in enumerate(records):
        t = r.get("type")
        if t in ("module", "frame", "stack"):
            by_id[(t, r.get("id"))] = i
        elif t == "site":
            sites.append(i)
    out = []
    step = max(1, len(events) // count)
    for start in range(0, len(events), step):
        chosen = events[start:start + 60]
        needed = set()

        def need_stack(sid):
            s = by_id.get(("stack", sid))
            if s is None or s in needed:
                return
            needed.add(s)
            for fid in records[s].get("frames", []):
                f = by_id.get(("frame", fid))
                if f is not None and f not in needed:
                    needed.add(f)
                    m = by_id.get(("module", records[f].get("module")))
                    if m is not None:
                        needed.add(m)

        used_sites = []
        for i in chosen:
            r = records[i]
            if version >= 2 and "e" in r:
                site = sites[r["e"] - 1]
                if site not in used_sites:
                    used_sites.append(site)
                need_stack(records[site].get("stack", 0))
            else:
                need_stack(r.get("stack", 0))
        needed.update(used_sites)
        needed.update(i for i, r in enumerate(records) if r.get("type") == "device")
        renumber = {records[s]["id"]: n + 1 for n, s in enumerate(sorted(used_sites))}
        text = [compact(header)]
        for i in sorted(needed | set(chosen)):
            r = dict(records[i])
            if r.get("type") == "site":
                r["id"] = renumber[r["id"]]
            elif version >= 2 and "e" in r:
                r = {"e": renumber[records[sites[r["e"] - 1]]["id"]], **{k: v for k, v in r.items() if k != "e"}}
            text.append(compact(r))
        footer = [r for r in records if r.get("type") == "footer"]
        if footer and start + 60 >= len(events):
            text.append(compact(footer[-1]))
        body = "\n".join(text) + "\n"
        while len(body.encode()) > max_bytes and len(text) > 2:
            text.pop()
            body = "\n".join(text) + "\n"
        out.append(body)
        if len(out) >= count:
            break
    return out


def simulator_traces(build, tmp):
    env = dict(os.environ, LD_PRELOAD=os.path.join(build, "libgpumemtrace.so"), GPUMEMTRACE_QUIET="1")
    paths = []
    for program, args in SIMULATED:
        exe = os.path.join(build, "tests", "programs", program)
        if not os.path.exists(exe):
            continue
        out = os.path.join(tmp, program + ".jsonl")
        env["GPUMEMTRACE_OUTPUT"] = out
        subprocess.run([exe, *args], env=env, capture_output=True, timeout=60)
        if os.path.exists(out):
            paths.append(out)
    return paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-bytes", type=int, default=24576)
    ap.add_argument("--per-trace", type=int, default=6)
    ap.add_argument("--no-simulator", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sources = [os.path.join(REAL, n) for n in sorted(os.listdir(REAL)) if n.endswith(".zst")]
    sources += [os.path.join(GOLDEN, n) for n in sorted(os.listdir(GOLDEN)) if n.endswith(".jsonl")]
    with tempfile.TemporaryDirectory(prefix="fuzz-seeds-") as tmp:
        if not args.no_simulator:
            sources += simulator_traces(os.path.abspath(args.build), tmp)
        written = 0
        for path in sources:
            name = os.path.basename(path).split(".")[0]
            for n, text in enumerate(windows(read_lines(path), args.max_bytes, args.per_trace)):
                with open(os.path.join(args.out, f"{name}-{n}.jsonl"), "w", encoding="utf-8") as f:
                    f.write(text)
                written += 1
    print(f"fuzz_seeds.py: {written} seeds in {args.out} from {len(sources)} traces")
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
