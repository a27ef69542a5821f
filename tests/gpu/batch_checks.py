#!/usr/bin/env python3
# tests/gpu/batch_checks.py — the batch what-if (issue 28) checked against real PyTorch training on a GPU (tests/gpu/run.sh).
"""GPT-2-style training recorded at three batch sizes under the recorder; gpumem-report predicts other
sizes and the largest batch that fits (docs/what-if.md, "Another batch size"); then those sizes run for
real and PyTorch's own figures are compared. SKIP without PyTorch and a GPU. Traces, reports and logs
under OUT/batch.

The model: transformers' GPT2Config + GPT2LMHeadModel with random weights (nothing is downloaded;
eager attention, no dropout), else (no transformers) a small GPT written here with torch.nn; AdamW, a few
steps at each size. The stand-in torch (tests/python/fake_torch, no torch.nn) runs a workload of plain
torch.empty requests instead, so that this script's plumbing runs on CPU too.

The device is capped with torch.cuda.set_per_process_memory_fraction(CAP / total memory) (CAP: 8 GiB,
BATCH_CHECK_CAP_MIB overrides), so that the largest batch is a few dozen and checks in seconds on any
GPU. How gpumem-report learns the cap: the recorder's PyTorch hook records each
set_per_process_memory_fraction call (an `allocator_settings` record, docs/pytorch.md "Allocator settings"), and
the allocator model caps what it reserves at fraction x the device's memory, as PyTorch does. The `cap`
check says whether the report's capacity is that cap; when it is not, the other checks run again with
`--recorded-settings per_process_memory_fraction:F` (the option that tells the model a cap the trace
does not show), so that their figures still come.

  record       the three runs recorded (batch 4, 8, 12), each with PyTorch's max_memory_reserved()
  cap          the report's device capacity == the cap (fraction x total)
  replay       the model's replay of the template (batch 12) reproduces its recording: its reserved peak
               == max_memory_reserved()
  predict_bN   gpumem-report --at-batch N from the three runs, N two sizes between the largest recorded
               and the largest that fits; then the program at N: the predicted reserved peak within 3%
               of max_memory_reserved(), and out of memory in both or in neither
  max_batch    gpumem-report --max-batch: the program at the batch found fits, at one more it runs out
               of memory
  leave_one_out  each recorded run predicted from the other two (the report's own lines), within 3% of
               what PyTorch reserved
Every failure is a FAIL line with its figures; nothing here raises past a check.
"""
import json
import os
import subprocess
import sys
import time
import traceback

import gpuenv
from gpuenv import have_gpu_torch

R = gpuenv.Results("batch")
RECORDED = (4, 8, 12)
TOLERANCE = 0.03
STEPS = 3

# The training child: argv batch, cap bytes, steps. Prints one JSON line: PyTorch's peaks, whether it
# ran out of memory, the device's total and the fraction set, and which model ran.
CHILD = r'''
import json, math, os, sys, time
import torch
batch, cap, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
dev = "cuda"
t0 = time.time()
total = torch.cuda.mem_get_info()[1] if hasattr(torch.cuda, "mem_get_info") else int(os.environ.get("FAKE_TORCH_LIMIT", 1 << 30))
fraction = min(1.0, cap / total)
torch.cuda.set_per_process_memory_fraction(fraction)  # the cap: recorded by the hook, read by the report
VOCAB, SEQ, EMBD, LAYERS, HEADS = 8192, 256, 512, 4, 8


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=EMBD, n_layer=LAYERS, n_head=HEADS,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu",
                     attn_implementation="eager")
    try:  # releases before the keyword: an attribute (a setter in those that have one)
        cfg._attn_implementation = "eager"
    except Exception:
        pass
    model = GPT2LMHeadModel(cfg)
    return model, (lambda ids: model(ids, labels=ids).loss)


def small_gpt():
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(EMBD), nn.LayerNorm(EMBD)
            self.qkv, self.proj = nn.Linear(EMBD, 3 * EMBD), nn.Linear(EMBD, EMBD)
            self.fc, self.out = nn.Linear(EMBD, 4 * EMBD), nn.Linear(4 * EMBD, EMBD)
            self.register_buffer("mask", torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(C, dim=2))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // HEADS)
            att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, EMBD), nn.Embedding(SEQ, EMBD)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln, self.head = nn.LayerNorm(EMBD), nn.Linear(EMBD, VOCAB, bias=False)

        def forward(self, ids):
            x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))

    model = GPT()
    return model, model


class StandIn:
    """The stand-in torch (no torch.nn): weights and optimizer state made once, per-sample activations
    and a temporary each step, freed at its end."""
    def __init__(self):
        self.weights = [torch.empty(16 << 20, device=dev) for _ in range(3)]

    def step(self):
        x = torch.empty(batch << 20, device=dev)
        h = torch.empty(3 * batch << 20, device=dev)
        tmp = torch.empty((batch << 19) + (1 << 20), device=dev)
        del tmp
        g = torch.empty((2 * batch << 20) + (3 << 20), device=dev)
        del x, h, g


which, oom, err = "stand-in", False, ""
try:
    if hasattr(torch, "nn"):
        torch.manual_seed(0)
        try:
            model, loss_of = gpt2()
            which = "transformers GPT2LMHeadModel"
        except Exception as e:  # not installed, or not importable with this PyTorch
            model, loss_of = small_gpt()
            which = "hand-written GPT (transformers: %s)" % type(e).__name__
        model = model.to(dev)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        for _ in range(steps):
            ids = torch.randint(0, VOCAB, (batch, SEQ), device=dev)
            loss = loss_of(ids)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del loss, ids
        torch.cuda.synchronize()
    else:
        net = StandIn()
        for _ in range(steps):
            net.step()
except torch.cuda.OutOfMemoryError as e:
    oom, err = True, str(e).splitlines()[0][:200]
print(json.dumps({"batch": batch, "reserved": torch.cuda.max_memory_reserved(),
                  "allocated": torch.cuda.max_memory_allocated(), "oom": oom, "error": err,
                  "total": total, "fraction": fraction, "model": which, "seconds": round(time.time() - t0, 1)}))
'''


def one_line(text):
    return " | ".join(text.strip().splitlines())[-400:]


def pct(predicted, actual):
    return 100.0 * (predicted - actual) / actual if actual else float("inf")


def mib(n):
    return "%.1f MiB" % (n / 1048576.0) if isinstance(n, (int, float)) else str(n)


class Check:
    """Runs the children and the report; every step returns None (and says why) instead of raising."""

    def __init__(self, cap):
        self.cap = cap
        self.dir = gpuenv.out_dir("batch")
        self.script = os.path.join(self.dir, "child.py")
        with open(self.script, "w") as f:
            f.write(CHILD)
        self.settings = []   # --recorded-settings, when the trace's cap is not the report's

    def child(self, batch, traced):
        """The program at `batch`: (its JSON line or None, the trace's path or None, a note)."""
        name = "run_b%d" % batch if traced else "plain_b%d" % batch
        trace = os.path.join(self.dir, name + ".jsonl")
        env = gpuenv.traced_env(trace) if traced else dict(os.environ)
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")   # nothing is downloaded
        timeout = max(10, min(90, gpuenv.time_left() - 5))
        try:
            p = subprocess.run([sys.executable, self.script, str(batch), str(self.cap), str(STEPS)],
                               capture_output=True, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, None, "batch %d: no answer within %.0f s" % (batch, timeout)
        with open(os.path.join(self.dir, name + ".log"), "w") as f:
            f.write(p.stdout + p.stderr)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return None, None, "batch %d: exit %d, %s" % (batch, p.returncode, one_line(p.stderr))
        return r, (trace if traced and os.path.exists(trace) else None), "exit %d" % p.returncode

    def report(self, name, traces, args):
        """gpumem-report's JSON `batch` object, or (None, why)."""
        out = os.path.join(self.dir, name + ".json")
        cmd = [gpuenv.REPORT, "--format", "json", "--no-progress", "-o", out] + args
        for s in self.settings:
            cmd += ["--recorded-settings", s]
        for batch, trace in traces:
            cmd += ["--batch-of", "%s=%d" % (trace, batch)]
        cmd += [t for _, t in traces]
        with open(os.path.join(self.dir, name + ".cmd"), "w") as f:
            f.write(" ".join(cmd) + "\n")
        said = "not run"
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(10, min(60, gpuenv.time_left())))
            said = "exit %d: %s" % (p.returncode, one_line(p.stderr))
            with open(out) as f:
                return json.load(f)["batch"], ""
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
            return None, "gpumem-report (%s) gave no batch object (%s: %s); %s" % (name, type(e).__name__, e, said)


def device_of(batch_doc):
    return (batch_doc.get("devices") or [{}])[0]


def row_at(batch_doc, batch):
    return next((r for r in device_of(batch_doc).get("rows", [])
                 if r["batch"] == batch and not r["settings"] and not r["recorded_sizes"]), None)


def search_of(batch_doc):
    return next((m for m in batch_doc.get("max_batch", []) if not m["settings"]), None)


def main():
    if not have_gpu_torch():
        R.say("batch checks", None, "needs PyTorch with a CUDA GPU")
        return 0
    import torch
    stand_in = not hasattr(torch, "nn")
    try:  # without importing it here (seconds): the children do
        from importlib.metadata import version
        tv = version("transformers")
    except Exception:
        tv = "not installed"
    print("PyTorch %s, transformers %s" % (torch.__version__, tv), flush=True)
    cap = int(os.environ.get("BATCH_CHECK_CAP_MIB", 512 if stand_in else 8192)) << 20
    try:
        checks(Check(cap))
    except Exception:
        # Never a traceback that hides the figures already said: the rest is one FAIL line.
        R.say("unexpected", False, traceback.format_exc().strip().replace("\n", " | ")[-600:])
    return R.exit_code()


def checks(c):
    if not R.budget("record", 40):
        return
    runs, notes = {}, []
    for batch in RECORDED:
        r, trace, note = c.child(batch, traced=True)
        if r and trace and not r["oom"]:
            runs[batch] = (r, trace)
        notes.append("b%d: %s" % (batch, ("reserved %s in %.1f s (%s)" % (mib(r["reserved"]), r["seconds"], r["model"]))
                                  if r else note) + (" OUT OF MEMORY" if r and r["oom"] else ""))
    R.say("record", len(runs) == len(RECORDED), "; ".join(notes))
    if len(runs) < 2:
        R.say("predict", False, "fewer than two runs recorded: nothing to predict from")
        return
    traces = [(b, runs[b][1]) for b in sorted(runs)]
    first = next(iter(runs.values()))[0]
    cap_bytes = int(first["fraction"] * first["total"])

    doc, why = c.report("max_batch", traces, ["--max-batch"])
    if doc is None:
        R.say("cap", False, why)
        return
    dev = device_of(doc)
    template = max(runs)
    # The fraction goes through the trace as text: the report's cap may differ from ours in its last bytes.
    ok_cap = abs((dev.get("capacity") or 0) - cap_bytes) <= cap_bytes // 1000
    faithful = (dev.get("replay") or {}).get("faithful")
    own = next((r for r in dev.get("rows", []) if r["recorded_sizes"] and not r["settings"]), {})
    recorded = runs[template][0]["reserved"]
    R.say("cap", ok_cap, "the report's capacity %s vs the cap %d (fraction %r of %d)%s"
          % (dev.get("capacity"), cap_bytes, first["fraction"], first["total"], "" if ok_cap else
             "; the next reports are told --recorded-settings per_process_memory_fraction:%r" % first["fraction"]))
    R.say("replay", faithful and own.get("reserved_peak") == recorded,
          "the model's replay of b%d %s: its reserved peak %s vs max_memory_reserved() %d (the trace's %s)"
          % (template, "reproduces the recording" if faithful
             else "parts from it: %s" % (dev.get("replay") or {}).get("divergence"),
             own.get("reserved_peak"), recorded, dev.get("recorded_reserved_peak")))
    if not ok_cap:
        c.settings = ["per_process_memory_fraction:%r" % first["fraction"]]
        doc, why = c.report("max_batch_told", traces, ["--max-batch"])
        if doc is None:
            R.say("max_batch", False, why)
            return
    search = search_of(doc) or {}
    largest, failing = search.get("largest"), search.get("failing")
    if not largest or not failing:
        R.say("max_batch", False, "no largest batch: %s" % json.dumps(search)[:400])
        largest = None
    elif R.budget("max_batch", 30):
        fits, _, n1 = c.child(largest, traced=False)
        over, _, n2 = c.child(failing, traced=False)
        R.say("max_batch", bool(fits and over and not fits["oom"] and over["oom"]),
              "largest batch found %d (%d replays): at %d %s; at %d %s" % (
                  largest, search.get("replays", 0), largest,
                  ("fits, reserved %s" % mib(fits["reserved"]) if not fits["oom"] else "OUT OF MEMORY: " + fits["error"])
                  if fits else n1, failing,
                  ("out of memory (%s)" % over["error"] if over["oom"] else "FITS, reserved %s" % mib(over["reserved"]))
                  if over else n2))

    # Two sizes the report has not seen: between the largest recorded and the largest that fits (or
    # beyond the recorded ones when there is no largest).
    top = max(runs)
    if largest and largest > top + 2:
        sizes = sorted({top + (largest - top) // 3, top + 2 * (largest - top) // 3} - set(runs))
    else:
        sizes = [top + 4, 2 * top]
    doc2, why = c.report("at_batch", traces, [a for n in sizes for a in ("--at-batch", str(n))])
    for n in sizes:
        name = "predict_b%d" % n
        if doc2 is None:
            R.say(name, False, why)
            continue
        row = row_at(doc2, n)
        if row is None or not R.budget(name, 20):
            if row is None:
                R.say(name, False, "no row for batch %d in the report" % n)
            continue
        real, _, note = c.child(n, traced=False)
        if real is None:
            R.say(name, False, note)
            continue
        refused = row.get("refused") is not None
        lo, hi = row.get("reserved_range") or (row["reserved_peak"], row["reserved_peak"])
        err = pct(row["reserved_peak"], real["reserved"])
        same = refused == real["oom"]
        R.say(name, same and (refused or abs(err) <= 100 * TOLERANCE),
              "predicted reserved peak %d (%s; range %s..%s), out of memory: %s; the program: max_memory_reserved() "
              "%d (%s), out of memory: %s; error %+.2f%% (target within %.0f%%)%s"
              % (row["reserved_peak"], mib(row["reserved_peak"]), mib(lo), mib(hi), refused, real["reserved"],
                 mib(real["reserved"]), real["oom"], err, 100 * TOLERANCE,
                 "" if same else " — the prediction and the program disagree on running out of memory"))

    loo = doc.get("leave_one_out") or []
    if len(runs) >= 3:
        lines, ok = [], bool(loo)
        for x in loo:
            actual = runs.get(x["batch"], ({"reserved": 0},))[0]["reserved"]
            e = pct(x["predicted"], actual)
            ok = ok and abs(e) <= 100 * TOLERANCE
            lines.append("b%d from the others %s vs max_memory_reserved() %s (%+.2f%%), the model's replay of "
                         "its own requests %s" % (x["batch"], mib(x["predicted"]), mib(actual), e, mib(x["replayed"])))
        R.say("leave_one_out", ok, "; ".join(lines) or "no leave-one-out lines in the report")


if __name__ == "__main__":
    sys.exit(main())
