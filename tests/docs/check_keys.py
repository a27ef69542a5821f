# tests/docs/check_keys.py — the keys docs/report.md and docs/trace-format.md list, against real reports and traces.
"""Two checks of tests/docs/check_docs.py, about keys:

  json   every key of docs/report.md's JSON example is in a real report, and every key of real reports
         is in that example or named in docs/report.md (what_if, time_to_oom: docs/what-if.md);
  trace  every field of docs/trace-format.md's example records is in a real trace's records of that
         type (but those the simulated runtime cannot make: NOT_MADE_HERE), and every field of real
         traces is named there.

Real reports and traces are made in the sandbox (docs_sandbox.py) by the recorder, on the simulated
runtime: the demo, a capped trace, a process killed by SIGTERM, the H100 traces of tests/report/real.
"""
import json
import os
import re

def key_paths(value, prefix=""):
    """Every key of a JSON value as a path: `processes[].devices[].peak_bytes`; '...' placeholders skipped."""
    out = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "...":
                continue
            p = f"{prefix}.{k}" if prefix else k
            out.add(p)
            out |= key_paths(v, p)
    elif isinstance(value, list):
        for v in value:
            out |= key_paths(v, prefix + "[]")
    return out


def documented_json(docs):
    text = docs.text["docs/report.md"]
    m = re.search(r"## JSON output.*?```json\n(.*?)```", text, re.S)
    return key_paths(json.loads(m.group(1))), m.start(1)


REPORT_FIXTURES = (
    "set -e; export GPUMEMTRACE_QUIET=1; mkdir k; "
    # a process killed by SIGTERM while it holds memory
    "LD_PRELOAD=build/libgpumemtrace.so GPUMEMTRACE_OUTPUT=k/ build/tests/programs/scenarios killed 3 > k.out & "
    "until grep -q ready k.out; do sleep 0.05; done; kill -TERM $!; wait $! || true; "
    # a trace that reached its size cap
    "LD_PRELOAD=build/libgpumemtrace.so GPUMEMTRACE_OUTPUT=capped.jsonl GPUMEMTRACE_MAX_BYTES=64K "
    "build/examples/train_loop 200 >/dev/null 2>&1; ")


def real_reports(sandbox):
    """Key paths of real reports: the demo's, a capped and a killed trace, the H100 traces (as one run,
    so `spread` too), the golden traces (blocks, a cut trace); each with --what-if; and a batch what-if."""
    script = REPORT_FIXTURES + (
        "for t in 'trace.jsonl.zst capped.jsonl' tests/report/real tests/report/golden/*.jsonl k; do "
        "  gpumem-report --format json --what-if expandable_segments:True $t || [ $? = 1 ]; echo; done; "
        # the batch what-if's object (a run alone: an estimate; batch 400 runs out of memory)
        "R=tests/report/real/roles.jsonl.zst; "
        "gpumem-report --format json --at-batch 400 --max-batch --batch-of $R=8 $R; echo")
    status, out = sandbox.run(script)
    paths = set()
    for chunk in re.split(r"\n(?=\{)", out):
        try:
            paths |= key_paths(json.loads(chunk))
        except json.JSONDecodeError:
            continue
    return paths


def check_json(docs, sandbox):
    documented, offset = documented_json(docs)
    real = real_reports(sandbox)
    if not real:
        return ["no real report could be made for the JSON check"]
    problems = []
    line = docs.line_of("docs/report.md", offset)
    for p in sorted(documented - real):
        if not any(r.startswith(p + ".") or r == p for r in real):
            problems.append(f"docs/report.md:{line}: the JSON example has `{p}`, which no real report has")
    spans = re.findall(r"`([^`]+)`", docs.prose("docs/report.md") + docs.prose("docs/what-if.md"))
    named = {w for span in spans for w in re.findall(r"[a-z_]+", span)}
    named |= {w for p in documented for w in p.replace("[]", "").split(".")}
    for p in sorted(real - documented):
        leaf = p.replace("[]", "").split(".")[-1]
        if leaf not in named:
            problems.append(f"docs/report.md: the reports have `{p}`, which it does not name")
    # Paths the prose writes (`summary.incomplete`, `devices[].after_cap`): the end of a real path.
    for name in ("docs/report.md", "docs/what-if.md"):
        for m in re.finditer(r"`((?:[a-z_]+\[\](?:\.[a-z_]+(?:\[\])?)*)|summary\.[a-z_]+)`", docs.prose(name)):
            p = m.group(1).removesuffix("[]")
            if not any(r == p or r.endswith("." + p) for r in real):
                problems.append(f"{name}:{docs.line_of(name, docs.text[name].find(m.group(0)))}: `{m.group(1)}` is in no real report")
    return problems


# ---------------------------------------------------------------- trace format

TRACE_FIXTURES = REPORT_FIXTURES + (
    "mkdir tf; mv k/* capped.jsonl tf/; cp trace.jsonl tf/; cd tf; P=../build/libgpumemtrace.so; "
    "RANK=3 LOCAL_RANK=1 WORLD_SIZE=8 LD_PRELOAD=$P GPUMEMTRACE_OUTPUT=rank.jsonl ../build/examples/train_loop 2 >/dev/null; "
    "for p in runtime_apis inlined/chain_O2 nvtx_phases; do "
    "  LD_PRELOAD=$P GPUMEMTRACE_OUTPUT=$(basename $p).jsonl ../build/tests/programs/$p >/dev/null 2>&1 || true; done; "
    "LD_PRELOAD=$P GPUMEMTRACE_OUTPUT=extreme.jsonl ../build/tests/programs/extreme_args runtime >/dev/null 2>&1 || true; "
    "LD_PRELOAD=$P PYTHONPATH=../tools/python GPUMEMTRACE_OUTPUT=python.jsonl python ../train.py >/dev/null; "
    "GPUMEMTRACE_SIM_CAPACITY=1G LD_PRELOAD=$P GPUMEMTRACE_OUTPUT=oom.jsonl ../build/tests/programs/report_oom >/dev/null || true; "
    # the PyTorch hook on the stand-in torch: allocator_settings records (and the header's variable)
    "FAKE_TORCH_CUDART=../build/sim/libcudart.so.13 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 LD_PRELOAD=$P "
    "PYTHONPATH=../tools/python:../tests/python/fake_torch GPUMEMTRACE_OUTPUT=torch.jsonl "
    "python ../tests/python/progs/torch_prog.py settings >/dev/null 2>&1 || true; "
    # a garbage collection as the pytest plugin's gc callback reports it: a gc record
    "LD_PRELOAD=$P PYTHONPATH=../tools/python GPUMEMTRACE_OUTPUT=gc.jsonl "
    "python -c 'import gc, gpumemtrace; gc.callbacks.append(gpumemtrace.gc_callback()); a = []; a.append(a); del a; gc.collect()' >/dev/null; "
    # gpumemtrace.stop(), start() and dump(): pause and resume records, a dump's footer
    "LD_PRELOAD=$P PYTHONPATH=../tools/python GPUMEMTRACE_OUTPUT=control.jsonl.zst "
    "python ../tests/python/progs/control_prog.py ../build/sim/libcudart.so.13 control . >/dev/null")

# Fields the docs' examples show that the recorder writes only with a GPU, PyTorch or a full ring:
# (record type, field); "event" is the expanded form of an event (docs/trace-format.md).
NOT_MADE_HERE = {("site", "driver_api"), ("site", "delayed"), ("<event>", "q"), ("<event>", "handle"),
                 ("event", "driver_api"), ("event", "delayed"), ("event", "handle"), ("dropped", "*"),
                 ("header", "source")}


def record_type(r):
    return r.get("type") or ("<event>" if "e" in r else "?")


def documented_records(docs):
    """{type: {field: line}} of the JSON records in docs/trace-format.md's blocks."""
    name = "docs/trace-format.md"
    text, out, decoder = docs.text[name], {}, json.JSONDecoder()
    for m in re.finditer(r"^```json\n(.*?)^```", text, re.S | re.M):
        block, pos = m.group(1), 0
        while pos < len(block):
            while pos < len(block) and block[pos].isspace():
                pos += 1
            if pos == len(block):
                break
            r, pos = decoder.raw_decode(block, pos)
            for k in r:
                out.setdefault(record_type(r), {}).setdefault(k, docs.line_of(name, m.start(1)))
    return out


def real_records(folder):
    """{type: set of fields} of every trace in `folder`; events also in their expanded form ("event")."""
    out = {}
    for n in sorted(os.listdir(folder)):
        if not n.endswith((".jsonl", ".zst")) or n.endswith(".zst") and not n.endswith(".jsonl.zst"):
            continue
        path = os.path.join(folder, n)
        if n.endswith(".zst"):
            import subprocess
            lines = subprocess.run(["zstd", "-dcq", path], capture_output=True, text=True).stdout.split("\n")
        else:
            with open(path) as f:
                lines = f.read().split("\n")
        sites = {}
        for line in lines:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a cut last line
            t = record_type(r)
            out.setdefault(t, set()).update(r)
            if t == "site":
                sites[r["id"]] = r
            elif t == "<event>":
                site = {k: v for k, v in sites.get(r["e"], {}).items() if k not in ("id", "type")}
                names = {"a": "addr", "s": "size", "r": "result"}
                out.setdefault("event", set()).update(site, {"type", "seq", "t", "size", "result"},
                                                      (names.get(k, k) for k in r if k not in ("e", "t", "q")))
    return out


def check_trace_format(docs, sandbox):
    folder = sandbox.fresh()
    status, log = sandbox.run(TRACE_FIXTURES, sandbox=folder)
    if status != 0:
        return [f"check_keys.py TRACE_FIXTURES failed:\n{log[-1500:]}"]
    real = real_records(os.path.join(folder, "tf"))
    documented = documented_records(docs)
    named = set(re.findall(r"`\"?([a-z_]+)\"?[`:]", docs.prose("docs/trace-format.md")))
    problems = []
    for t, fields in sorted(documented.items()):
        for f, line in sorted(fields.items()):
            if f not in real.get(t, ()) and (t, f) not in NOT_MADE_HERE and (t, "*") not in NOT_MADE_HERE:
                problems.append(f"docs/trace-format.md:{line}: a `{t}` record with `{f}`: no real trace has one")
    for t, fields in sorted(real.items()):
        for f in sorted(fields - set(documented.get(t, {})) - named):
            problems.append(f"docs/trace-format.md: real `{t}` records have `{f}`, which it does not name")
    return problems
