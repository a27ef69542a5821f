#!/usr/bin/env python3
# tests/gpu/summarize.py — tests/gpu/run.sh's last step: one summary of every check, and everything else packed into a few files.
"""Usage: summarize.py SCRATCH OUT SECONDS [NOTE ...]

Reads SCRATCH/results/*.jsonl (gpuenv.Results, in the order the checks ran) and writes into OUT, which
the device tool brings back (at most 8 files of 16 MiB, 2 folders down):
  summary.txt      one line per check: PASS / FAIL / SKIP, its name, its figure; then the totals
  summary.json     the same, with the machine (nvidia-smi), PyTorch's version, the seconds taken
  traces.tar.gz    traces, reports, logs and benchmark tables of every check (SCRATCH but the corpus);
                   trace files are left out, largest first, while it would pass 15 MiB (said in the
                   summary)
  corpus.tar.gz    the real-snapshot corpus (snapshot_corpus.py), when one was made
NOTE lines (run.sh's: a script that timed out or failed to start) are added as FAIL lines.
Exit status: 1 if any check failed, else 0.
"""
import glob
import json
import os
import subprocess
import sys
import tarfile

LIMIT = 15 << 20


def machine():
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        return p.stdout.strip() or "no GPU"
    except (OSError, subprocess.SubprocessError):
        return "no GPU (no nvidia-smi)"


def torch_version():
    p = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
                       capture_output=True, text=True)
    return p.stdout.strip() or "not installed"


def pack(out, name, root, members, notes):
    """tar.gz of `members` (paths under root); trace files dropped, largest first, past LIMIT."""
    path = os.path.join(out, name)
    members = sorted(members)
    dropped = []
    while True:
        with tarfile.open(path, "w:gz") as tar:
            for m in members:
                tar.add(os.path.join(root, m), arcname=m)
        if os.path.getsize(path) <= LIMIT:
            break
        traces = [m for m in members if ".jsonl" in os.path.basename(m)]
        if not traces:
            notes.append("%s is %d bytes, over the device tool's limit" % (name, os.path.getsize(path)))
            break
        biggest = max(traces, key=lambda m: os.path.getsize(os.path.join(root, m)))
        members.remove(biggest)
        dropped.append(biggest)
    if dropped:
        notes.append("%s: %d trace files left out to stay under 15 MiB: %s" % (name, len(dropped), ", ".join(dropped[:5])))


def main():
    scratch, out, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    rows = []
    for path in sorted(glob.glob(os.path.join(scratch, "results", "*.jsonl")), key=os.path.getmtime):
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    rows += [{"check": "run.sh", "status": "FAIL", "figure": note} for note in sys.argv[4:]]
    notes = []
    files = []
    for dirpath, _, names in os.walk(scratch):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), scratch)
            if not rel.startswith(("corpus" + os.sep, "results" + os.sep)):
                files.append(rel)
    if files:
        pack(out, "traces.tar.gz", scratch, files, notes)
    corpus = os.path.join(scratch, "corpus")
    if os.path.isdir(corpus) and os.listdir(corpus):
        pack(out, "corpus.tar.gz", corpus, os.listdir(corpus), notes)
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in ("PASS", "FAIL", "SKIP")}
    summary = {"machine": machine(), "torch": torch_version(), "seconds": round(seconds, 1), "checks": rows,
               "passed": counts["PASS"], "failed": counts["FAIL"], "skipped": counts["SKIP"], "notes": notes}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("# %s; PyTorch %s; %.0f s\n" % (summary["machine"], summary["torch"], seconds))
        for r in rows:
            f.write("%s %s: %s\n" % (r["status"], r["check"], r["figure"]))
        for n in notes:
            f.write("# %s\n" % n)
        f.write("%d passed, %d failed, %d skipped\n" % (counts["PASS"], counts["FAIL"], counts["SKIP"]))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
