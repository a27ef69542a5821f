# tests/report/test_report_snapshot_at_oom.py — snapshots taken at an OOM in the first forward pass: OOM first, the activations advice, no growth.
"""Most snapshots people hold were dumped at an OOM (an OOM observer or an except handler calling
`_dump_snapshot()`), very often during the first forward pass: activations pile up layer after layer
until the device is full. Such a snapshot must read as the peak does: the activations of one forward
pass do not fit (a smaller batch, activation checkpointing, autocast), never "growth ... kept every
iteration" with the accumulation advice (report/analyses/passes.h, growth.h), and it opens with its
OOM, worded as a snapshot taken there, not as the end of the run (story.h).

- generated snapshots (tests/snapshot/snapshot_samples.py's builders): one forward pass through 40
  identical blocks that runs out of memory; the same with an allocation after the OOM (the program
  caught it and went on: not taken at it); a loop that copies each batch to the device and keeps
  each forward pass's output (growth across passes, the OOM's cause); a training step recorded on
  Windows, whose roles (and so its passes) are read from `D:\...\torch\...` paths and whose
  backward() the snapshot shows no end of (its gradients are settled when the optimizer allocates);
- the real snapshots of ../shared/corpus/pytorch-snapshots (PYTORCH_SNAPSHOT_CORPUS names another
  folder; skipped without one): each opens with its OOM exactly when its history ends in one, and
  each growth it reports is a site the history shows rising in at least two passes, by an oracle
  that reads the pickle (a restricted unpickler) and nothing of gpumem-report; the DiT of
  Nesta-gitU/discrete_diffusion (one forward pass of 28 blocks out of memory) has no growth and the
  activations advice.
"""
import os
import re
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "snapshot"))

import snapshot_oracle as oracle  # noqa: E402
import snapshot_samples as samples  # noqa: E402
from reportlib import ReportTestCase, report_json, run_report  # noqa: E402
from snapshot_samples import History, MiB, frame, segment  # noqa: E402

CORPUS = os.environ.get("PYTORCH_SNAPSHOT_CORPUS") or os.path.join(ROOT, "..", "shared", "corpus", "pytorch-snapshots")
MODEL = "/home/user/project/model.py"
MODULE = "/usr/lib/python3/site-packages/torch/nn/modules/module.py"
SEG = 0x7F0000000000
ACTIVATIONS_ADVICE = ("activations hold {}% of the memory at the OOM: use a smaller batch, activation "
                      "checkpointing (torch.utils.checkpoint), or mixed precision (torch.autocast)")


def in_forward(line):
    """A block allocated at model.py:`line` inside a module's forward(), called from the training loop."""
    return [frame("forward", line, MODEL), frame("_call_impl", 1550, MODULE), frame("train", 30),
            frame("<module>", 40)]


def in_loop(line):
    """A block the training loop allocates itself (outside any forward(): a batch copied to the device)."""
    return [frame("train", line), frame("<module>", 40)]


def one_forward_pass(blocks=40, allocate_after=False):
    """A batch copied to the device, then one forward pass through `blocks` identical blocks, each
    keeping a 6 MiB and a 2 MiB activation (one 8 MiB segment each) and using a 2 MiB temporary; the
    next block's 6 MiB does not fit (1 MiB free on the device). `allocate_after`: the program caught
    the OOM and allocated 1 MiB more."""
    h = History()
    h.add("segment_alloc", SEG, 2 * MiB, in_loop(28))
    h.alloc(SEG, 2 * MiB, in_loop(28))
    scratch = SEG + 2 * MiB
    h.add("segment_alloc", scratch, 2 * MiB, in_forward(22))
    segs = [segment(SEG, 2 * MiB, [(2 * MiB, 2 * MiB, "active_allocated", in_loop(28))])]
    for i in range(blocks):
        seg = SEG + (i + 1) * 8 * MiB + 2 * MiB
        h.add("segment_alloc", seg, 8 * MiB, in_forward(20))
        h.alloc(seg, 6 * MiB, in_forward(20))
        h.alloc(seg + 6 * MiB, 2 * MiB, in_forward(21))
        h.alloc(scratch, 2 * MiB, in_forward(22))
        h.free(scratch, 2 * MiB, in_forward(22))
        segs.append(segment(seg, 8 * MiB, [(6 * MiB, 6 * MiB, "active_allocated", in_forward(20)),
                                           (2 * MiB, 2 * MiB, "active_allocated", in_forward(21))]))
    h.add("oom", 1 * MiB, 6 * MiB, in_forward(20))
    if allocate_after:
        h.alloc(scratch, 1 * MiB, in_loop(50))
        segs.append(segment(scratch, 2 * MiB, [(1 * MiB, 1 * MiB, "active_allocated", in_loop(50)),
                                               (1 * MiB, 0, "inactive", None)]))
    else:
        segs.append(segment(scratch, 2 * MiB, [(2 * MiB, 0, "inactive", None)]))
    return samples.snapshot(segs, [h.entries])


def kept_outputs(steps=40):
    """Each step copies its batch to the device (2 MiB, freed at the end of the step) and keeps the 4 MiB
    output of a forward pass (no torch.no_grad(): `outputs.append(model(x))`); then a 4 MiB output
    does not fit."""
    h = History()
    h.add("segment_alloc", SEG, 2 * MiB, in_loop(28))
    segs = [segment(SEG, 2 * MiB, [(2 * MiB, 0, "inactive", None)])]
    for i in range(steps):
        h.alloc(SEG, 2 * MiB, in_loop(28))
        seg = SEG + (i + 1) * 4 * MiB
        h.add("segment_alloc", seg, 4 * MiB, in_forward(20))
        h.alloc(seg, 4 * MiB, in_forward(20))
        h.free(SEG, 2 * MiB, in_loop(28))
        segs.append(segment(seg, 4 * MiB, [(4 * MiB, 4 * MiB, "active_allocated", in_forward(20))]))
    h.alloc(SEG, 2 * MiB, in_loop(28))
    h.add("oom", 1 * MiB, 4 * MiB, in_forward(20))
    segs[0] = segment(SEG, 2 * MiB, [(2 * MiB, 2 * MiB, "active_allocated", in_loop(28))])
    return samples.snapshot(segs, [h.entries])


def windows_training_step():
    """A forward pass keeps a 4 MiB activation, backward() a 2 MiB gradient and frees a 1 MiB temporary
    (Python frames of torch\\_tensor.py, then the autograd engine's thread: native frames only), then
    AdamW takes 8 MiB of state: Windows paths throughout, one 16 MiB segment."""
    venv = "D:\\work\\.venv\\Lib\\site-packages\\torch\\"
    user = "D:\\work\\train.py"
    forward = [frame("forward", 20, "D:\\work\\model.py"), frame("_call_impl", 1750, venv + "nn\\modules\\module.py"),
               frame("train", 30, user)]
    backward = [frame("_make_grads", 220, venv + "autograd\\__init__.py"), frame("backward", 626, venv + "_tensor.py"),
                frame("train", 31, user)]
    engine = [frame("torch::autograd::Engine::evaluate_function(...)", 0, "??"),
              frame("torch::autograd::Engine::thread_main(...)", 0, "??")]
    step = [frame("_init_group", 170, venv + "optim\\adamw.py"), frame("train", 32, user)]
    h = History()
    h.add("segment_alloc", SEG, 16 * MiB, forward)
    h.alloc(SEG, 4 * MiB, forward)
    h.alloc(SEG + 4 * MiB, 1 * MiB, backward)
    h.alloc(SEG + 5 * MiB, 2 * MiB, engine)
    h.free(SEG + 4 * MiB, 1 * MiB, engine)
    h.alloc(SEG + 8 * MiB, 8 * MiB, step)
    blocks = [(4 * MiB, 4 * MiB, "active_allocated", forward), (1 * MiB, 0, "inactive", None),
              (2 * MiB, 2 * MiB, "active_allocated", engine), (1 * MiB, 0, "inactive", None),
              (8 * MiB, 8 * MiB, "active_allocated", step)]
    return samples.snapshot([segment(SEG, 16 * MiB, blocks)], [h.entries])


def oom_lines(text):
    return [l for l in text.splitlines() if l.startswith("OOM (")]


class GeneratedSnapshots(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="gpumem-report-at-oom-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def write(self, name, snap):
        path = os.path.join(self.dir, name)
        samples.dump(snap, path)
        return path

    def test_one_forward_pass_out_of_memory_reads_oom_then_the_activations_advice(self):
        path = self.write("deep.pickle", one_forward_pass())
        r = report_json(path)
        self.assertEqual(r["growth"], [])
        self.assertEqual(r["time_to_oom"], [])
        process = r["processes"][0]
        self.assertTrue(process["snapshot"]["taken_at_oom"])
        self.assertFalse(process["ended_in_oom"])  # a snapshot does not say how the run ended
        self.assertEqual(process["story"][0], "ooms")
        oom = r["ooms"][0]
        self.assertEqual((oom["verdict"], oom["cause"], oom["crash"]), ("capacity", None, False))
        # 40 blocks x 8 MiB of activations beside the 2 MiB batch and the 2 MiB cached segment: 99%.
        self.assertEqual(oom["advice"], ACTIVATIONS_ADVICE.format(99))
        self.assertIsNone(r["peaks"][0]["advice"])  # the OOM's advice is the device's one advice
        text = run_report("--width", "0", path, check_rc=0).stdout
        lines = text.splitlines()
        self.assertTrue(lines[2].startswith("OOM (device 0): 6.0 MiB requested"), lines[:4])
        self.assertTrue(lines[2].endswith("capacity; the snapshot was taken at this OOM"), lines[2])
        self.assertIn("  advice: " + ACTIVATIONS_ADVICE.format(99), lines[3:6])
        self.assertNotIn("the run ended here", text)
        self.assertNotIn("accumulated across iterations", text)
        self.assertIn("\ngrowth: none\n", text)

    def test_an_oom_the_program_went_on_from_is_not_where_the_snapshot_was_taken(self):
        r = report_json(self.write("caught.pickle", one_forward_pass(allocate_after=True)))
        process = r["processes"][0]
        self.assertFalse(process["snapshot"]["taken_at_oom"])
        self.assertNotEqual(process["story"][0], "ooms")
        self.assertEqual(r["growth"], [])

    def test_outputs_kept_across_forward_passes_are_growth_and_the_cause(self):
        # Each batch copied to the device outside the model starts a new forward pass.
        path = self.write("kept.pickle", kept_outputs())
        r = report_json(path)
        growth = [g for g in r["growth"] if g["level"] == "block"]
        self.assertEqual(len(growth), 1, r["growth"])
        self.assertEqual((growth[0]["stack"][0]["function"], growth[0]["stack"][0]["line"]), ("forward", 20))
        self.assertTrue(r["processes"][0]["snapshot"]["taken_at_oom"])
        oom = r["ooms"][0]
        self.assertEqual(oom["cause"]["stack"], growth[0]["stack"])
        self.assertIn("accumulated across iterations", oom["advice"])
        text = run_report("--width", "0", path, check_rc=0).stdout
        self.assertRegex(text, r"\n  cause: forward \(/home/user/project/model\.py:20\) grew by 156\.0 MiB over 39 steps "
                               r"and held 160\.0 MiB \(\d+% of the live memory\) at the OOM\n")

    def test_a_windows_snapshots_roles_and_its_backward_without_an_end(self):
        r = report_json(self.write("windows.pickle", windows_training_step()))
        roles = {k: v for k, v in r["peaks"][0]["roles"].items() if v}
        self.assertEqual(roles, {"activations": 4 * MiB, "gradients": 2 * MiB, "optimizer state": 8 * MiB,
                                 "allocator cache": 2 * MiB})


# --- the corpus: an oracle of passes and of where each history ends ----------------------------------

def corpus_files():
    if not os.path.isdir(CORPUS):
        return []
    return sorted(os.path.join(CORPUS, n) for n in os.listdir(CORPUS)
                  if not n.endswith(".md") and os.path.isfile(os.path.join(CORPUS, n)))


PARAMETER_FUNCTIONS = ("_apply", "to", "cuda", "to_empty", "load_state_dict", "_load_from_state_dict", "__init__",
                       "reset_parameters")


def phase(frames):
    """The phase of a block from its frames (innermost first), as docs/report.md states the roles:
    the innermost telling Python frame decides; without one, the autograd engine's native frames tell a
    backward. None: no phase (parameters, other)."""
    engine = python = False
    for f in frames:
        name, path = f.get("name", ""), f.get("filename", "").replace("\\", "/")
        if not path.endswith(".py"):
            engine = engine or "torch::autograd::Engine::" in name
            continue
        python = True
        short = name.rsplit(".", 1)[-1]
        if "torch/nn/parameter.py" in path or "torch/serialization.py" in path or \
                ("torch/nn/modules/" in path and short in PARAMETER_FUNCTIONS):
            return None
        if "torch/optim/" in path:
            return "optimizer"
        if (short == "backward" and "torch/_tensor.py" in path) or \
                ("torch/autograd/" in path and short in ("backward", "grad")):
            return "backward"
        if short in ("forward", "_call_impl"):
            return "forward"
    return "backward" if engine and not python else None


def python_signature(frames):
    """A site by its Python frames: (function, file name, line), innermost first."""
    return tuple((f["name"].rsplit(".", 1)[-1], f["filename"].replace("\\", "/").rsplit("/", 1)[-1], f["line"])
                 for f in frames if f.get("filename", "").endswith(".py"))


def passes_by_site(entries):
    """For each Python-framed site of the history's allocations: the passes it allocated in. A pass is a
    run of allocations of one phase; one of another phase (or none) ends it."""
    out, current, last = {}, 0, object()
    for e in entries:
        if e["action"] != "alloc":
            continue
        frames = e.get("frames", [])
        p = phase(frames)
        if p != last:
            current += 1
            last = p
        if p is not None:
            out.setdefault(python_signature(frames), set()).add(current)
    return out


def json_signature(stack):
    return tuple((f["function"].rsplit(".", 1)[-1], f["file"].replace("\\", "/").rsplit("/", 1)[-1], f["line"])
                 for f in stack if f.get("lang") == "python")


class Corpus(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = corpus_files()
        if not cls.files:
            raise unittest.SkipTest(f"no real PyTorch snapshots at {CORPUS} (set PYTORCH_SNAPSHOT_CORPUS to a folder of them)")
        cls.reports = {}

    def analysed(self, path):
        if path not in self.reports:
            self.reports[path] = (oracle.load(path), report_json(path),
                                  run_report("--width", "0", "--top", "1", path, check_rc=0).stdout)
        return self.reports[path]

    def test_a_snapshot_opens_with_its_oom_exactly_when_its_history_ends_in_one(self):
        for path in self.files:
            raw, r, text = self.analysed(path)
            if not isinstance(raw, dict) or not r["processes"] or not r["processes"][0]["snapshot"]:
                continue
            with self.subTest(snapshot=os.path.basename(path)):
                # The history's last OOM (by time), with no alloc on any device after it.
                entries = [e for trace in raw.get("device_traces") or [] for e in trace]
                ooms = [e for e in entries if e["action"] == "oom"]
                last = max((e.get("time_us", 0) for e in ooms), default=None)
                at_oom = last is not None and not any(
                    e["action"] in ("alloc", "segment_alloc", "segment_map") and e.get("time_us", 0) > last for e in entries)
                process = r["processes"][0]
                self.assertEqual(process["snapshot"]["taken_at_oom"], at_oom)
                self.assertEqual(process["story"][0] == "ooms", at_oom)
                self.assertFalse(process["ended_in_oom"])
                self.assertNotIn("the run ended here", text)
                if at_oom:
                    self.assertTrue(oom_lines(text)[0].endswith("; the snapshot was taken at this OOM"), oom_lines(text))

    def test_growth_only_where_the_history_rises_in_more_than_one_pass(self):
        for path in self.files:
            raw, r, _ = self.analysed(path)
            for g in r["growth"]:
                signature = json_signature(g["stack"])
                if g["level"] != "block" or not signature:
                    continue
                with self.subTest(snapshot=os.path.basename(path), site=signature[0]):
                    passes = passes_by_site(raw["device_traces"][g["device"]])
                    if signature in passes:  # a site with a phase: its memory rose across passes
                        self.assertGreaterEqual(len(passes[signature]), 2, "growth inside one pass")

    def test_a_dit_out_of_memory_in_its_first_forward_pass(self):
        # Nesta-gitU/discrete_diffusion: a Lightning training step whose forward pass through 28 DiT
        # blocks runs out of memory before any backward(); 21.5 GiB of 21.7 GiB are activations.
        path = next((p for p in self.files if os.path.basename(p).startswith("Nesta_discrete_diffusion")), None)
        if path is None:
            self.skipTest("the corpus has no Nesta_discrete_diffusion snapshot")
        _, r, text = self.analysed(path)
        self.assertEqual(r["growth"], [])
        self.assertEqual(r["time_to_oom"], [])
        self.assertEqual(r["processes"][0]["story"][0], "ooms")
        oom = r["ooms"][0]
        self.assertIsNone(oom["cause"])
        self.assertRegex(oom["advice"], r"^activations hold 9\d% of the memory at the OOM: use a smaller batch, "
                                        r"activation checkpointing")
        self.assertNotIn("accumulated across iterations", text)
        self.assertNotIn("grows every iteration", text)
        self.assertIn("\ngrowth: none\n", text)
        self.assertTrue(all(w["headroom"] is None for w in r["what_if"]))  # its batch did not fit
        # OOM, then its advice, in the first lines.
        lines = text.splitlines()
        self.assertTrue(lines[2].startswith("OOM (device 0): 384.0 MiB requested"), lines[:3])
        self.assertTrue(any(re.match(r"  advice: activations hold", l) for l in lines[3:6]), lines[:6])


if __name__ == "__main__":
    unittest.main()
