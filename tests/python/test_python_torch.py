# tests/python/test_python_torch.py — the PyTorch startup hook against the stand-in torch.
"""The PyTorch startup hook (tools/python/sitecustomize.py + gpumemtrace_torch) against the stand-in
torch package in tests/python/fake_torch, under LD_PRELOAD=libgpumemtrace.so with the simulated CUDA
runtime: tensor-level events with Python stacks in the same trace as the driver-level cudaMalloc,
drained at exit, at OOM and on SIGTERM; version gate; sitecustomize chaining; the program's output and
exit code unchanged.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

import python_testlib
from python_testlib import BUILD, LIB, ROOT, SIM, read_trace
TOOLS = os.path.join(ROOT, "tools", "python")
FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")
PROG = os.path.join(ROOT, "tests", "python", "progs", "torch_prog.py")
REPORT = os.path.join(BUILD, "gpumem-report")
MiB = 1 << 20
sys.path.insert(0, TOOLS)


def prog_line(marker):
    return python_testlib.prog_line(PROG, marker)


# The releases the stand-in takes the shape of (tests/python/fake_torch/torch/_release.py): every test
# of TorchHookCases runs against each (the classes at the end of this file).
FAKE_VERSIONS = ("2.4.0+cu121", "2.8.0+cu128", "2.11.0+cu130", "2.15.0+cu130")


def fake_env(version, **extra):
    """The environment of a child running the stand-in torch of `version` under the recorder."""
    env = dict(os.environ, LD_PRELOAD=python_testlib.PRELOAD, GPUMEMTRACE_QUIET="1", FAKE_TORCH_CUDART=SIM,
               FAKE_TORCH_LIMIT=str(512 << 20), PYTHONPATH=os.pathsep.join([TOOLS, FAKE]))
    env.pop("PYTHONSTARTUP", None)
    env.pop("FAKE_TORCH_VERSION", None)
    if version:
        env["FAKE_TORCH_VERSION"] = version
    env.update(extra)
    return env


class TorchHookCases:
    """The hook end to end, for one release shape (`version`; a unittest.TestCase subclass per
    release below)."""
    version = None

    def has(self, minor):
        """Whether the release under test is at least `minor` (e.g. (2, 11))."""
        from gpumemtrace_torch.probes import parse_version
        return parse_version(self.version or "2.11") >= minor

    def run_prog(self, mode, env_extra=None, pythonpath=None, expect_rc=7):
        d = tempfile.mkdtemp()
        out = os.path.join(d, "trace.jsonl")
        env = fake_env(self.version, GPUMEMTRACE_OUTPUT=out)
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(pythonpath)
        env.update(env_extra or {})
        proc = subprocess.run([sys.executable, PROG, mode], capture_output=True, text=True, env=env,
                              timeout=120)
        self.assertEqual(proc.returncode, expect_rc, proc.stderr[-3000:])
        events, stack_of = read_trace(out) if os.path.exists(out) else ([], None)
        self.last_trace = out
        return proc, events, stack_of

    def test_train_block_events_with_python_stacks(self):
        proc, events, stack_of = self.run_prog("train")
        self.assertTrue(proc.stdout.startswith("reserved "), proc.stdout)
        self.assertNotIn("gpumemtrace:", proc.stderr)
        blocks = [e for e in events if e["op"] == "block_alloc"]
        self.assertEqual(len(blocks), 40)  # 20 steps x (activation + loss)
        frees = [e for e in events if e["op"] == "block_free"]
        self.assertEqual(len(frees), 20)   # activations freed; the kept losses are not (before exit)
        # The leaking line is named, with the file, on the loss blocks.
        leak_line = prog_line("kept.append(loss)") - 1
        loss_blocks = [e for e in blocks if e["size"] == 512]
        self.assertEqual(len(loss_blocks), 20)
        py = [f for f in stack_of(loss_blocks[0]) if f.get("lang") == "python"]
        self.assertEqual((py[0]["file"], py[0]["function"], py[0]["line"]), (PROG, "train", leak_line))
        act = [e for e in blocks if e["size"] == 300000][0]
        py = [f for f in stack_of(act) if f.get("lang") == "python"]
        self.assertEqual((py[0]["function"], py[0]["line"]), ("make_activation", prog_line("LINE_ACT")))
        self.assertEqual(py[1]["function"], "train")
        # Segments: PyTorch's view, marked, matching the driver-level cudaMalloc by address.
        segs = [e for e in events if e["op"] == "alloc" and e["api"] == "torch.segment_alloc"]
        mallocs = [e for e in events if e["op"] == "alloc" and e["api"] == "cudaMalloc"]
        self.assertTrue(segs)
        self.assertEqual(sorted(e["addr"] for e in segs), sorted(e["addr"] for e in mallocs))
        seg_addrs = {e["addr"] for e in segs}
        for b in blocks:
            self.assertIn(b.get("segment"), seg_addrs, b)
        # Reserved from the events equals PyTorch's own max_memory_reserved.
        reserved = int(proc.stdout.split()[1])
        self.assertEqual(sum(e["size"] for e in segs), reserved)
        # Order: seq strictly increasing; times monotonic-clock values close to the driver events'.
        seqs = [e["seq"] for e in events]
        self.assertEqual(seqs, sorted(seqs))

    def test_torch_stacks_hold_only_pytorchs_frames(self):
        # The stack of a bridged event is the one PyTorch recorded, never the draining thread's:
        # no native frame (ctypes, the eval loop) and no frame of the drain code itself.
        proc, events, stack_of = self.run_prog("train")
        torch_ev = [e for e in events if e["api"].startswith("torch.") and e["op"] != "sync"]
        self.assertTrue(torch_ev)
        for e in torch_ev:
            st = stack_of(e)
            self.assertEqual([f for f in st if f.get("lang") != "python"], [], e)
            self.assertFalse([f for f in st if "gpumemtrace_torch" in f.get("file", "")], e)

    def test_free_stacks_only_when_asked_for(self):
        def python_frames(stack_of, e):
            return [f for f in stack_of(e) if f.get("lang") == "python"]
        act_line = prog_line("LINE_ACT")
        # Default: releases keep no stack, so PyTorch is not asked to gather one at every free
        # (context="alloc"); allocations keep theirs.
        proc, events, stack_of, calls = self.run_logged("train")
        self.assertIn("record_memory_history/context=alloc", [name for name, _ in calls])
        frees = [e for e in events if e["op"] == "block_free"]
        self.assertEqual(len(frees), 20)
        self.assertEqual([e for e in frees if e.get("stack", 0) != 0], [])
        act = [e for e in events if e["op"] == "block_alloc" and e["size"] == 300000]
        self.assertEqual(len(act), 20)
        for e in act:
            self.assertEqual(python_frames(stack_of, e)[0]["line"], act_line)
        # GPUMEMTRACE_FREE_STACKS=1: context="all", and a block_free carries where the block was freed
        # (not the allocation's stack, which PyTorch hands a free entry under context="alloc").
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "calls.log")
            proc, events, stack_of = self.run_prog("train", {"GPUMEMTRACE_FREE_STACKS": "1",
                                                             "FAKE_TORCH_CALL_LOG": log})
            with open(log) as f:
                self.assertIn("record_memory_history/context=all", f.read())
        frees = [e for e in events if e["op"] == "block_free"]
        self.assertEqual(len(frees), 20)
        for e in frees:
            py = python_frames(stack_of, e)
            self.assertTrue(py, e)
            self.assertNotEqual(py[0]["line"], act_line)

    def test_free_completed_not_recorded_where_pytorch_can_skip_it(self):
        # PyTorch is asked to leave free_completed entries (never forwarded) out of its ring where the
        # release takes skip_actions (2.11 on); a release without it, or one whose C++ side refuses the
        # value, gets the history without the argument. The trace is the same either way.
        traces = {}
        for older in (False, True):
            proc, events, _, calls = self.run_logged_with("train", {"FAKE_TORCH_NO_SKIP_ACTIONS": "1"} if older else {})
            names = [name for name, _ in calls]
            self.assertEqual("record_memory_history/skip=free_completed" in names,
                             not older and self.has((2, 11)), names)
            self.assertNotIn("gpumemtrace:", proc.stderr)
            traces[older] = [(e["op"], e["size"]) for e in events if e["op"].startswith("block_")]
        self.assertEqual(len([1 for op, _ in traces[False] if op == "block_alloc"]), 40)
        self.assertEqual(traces[False], traces[True])

    def test_torch_frames_kept_when_python_frames_are_off(self):
        # GPUMEMTRACE_PYTHON=0 stops reading the interpreter's frames (cudaMalloc's stack is native
        # only); the frames PyTorch recorded are its own record and stay (docs/pytorch.md).
        proc, events, stack_of = self.run_prog("train", {"GPUMEMTRACE_PYTHON": "0"})
        mallocs = [e for e in events if e["api"] == "cudaMalloc"]
        self.assertTrue(mallocs)
        for e in mallocs:
            self.assertFalse([f for f in stack_of(e) if f.get("lang") == "python"], e)
        loss = [e for e in events if e["op"] == "block_alloc" and e["size"] == 512]
        self.assertEqual(len(loss), 20)
        py = stack_of(loss[0])
        self.assertEqual((py[0]["function"], py[0]["line"]), ("train", prog_line("kept.append(loss)") - 1))

    def test_delayed_events_and_syncs_in_the_trace(self):
        # docs/trace-format.md: events PyTorch reported after the fact carry "delayed":true, the
        # live ones do not; sync events (kind none, no range) start the recording and end every
        # drain, and keep their promise: no delayed event after a sync is older than it.
        proc, events, _ = self.run_prog("train")
        torch_ev = [e for e in events if e["api"].startswith("torch.") and e["op"] != "sync"]
        self.assertTrue(torch_ev)
        self.assertTrue(all(e.get("delayed") is True for e in torch_ev))
        self.assertFalse([e for e in events if not e["api"].startswith("torch.") and "delayed" in e])
        syncs = [e for e in events if e["op"] == "sync"]
        self.assertGreaterEqual(len(syncs), 2)  # at the start, after the exit drain
        for s in syncs:
            self.assertEqual(s["kind"], "none")
            self.assertNotIn("addr", s)
            self.assertNotIn("size", s)
            self.assertNotIn("delayed", s)
        first = events.index(syncs[0])
        self.assertFalse([e for e in events[:first] if e.get("delayed")])
        synced = 0
        for e in events:
            if e["op"] == "sync":
                self.assertGreater(e["t"], synced)
                synced = e["t"]
            elif e.get("delayed"):
                self.assertGreater(e["t"], synced, e)
        # Each torch segment_alloc happened after the first sync and near its cudaMalloc.
        mallocs = {e["addr"]: e["t"] for e in events if e["api"] == "cudaMalloc"}
        for e in torch_ev:
            if e["api"] == "torch.segment_alloc":
                self.assertLess(abs(e["t"] - mallocs[e["addr"]]), 50 * 10**6)

    def test_segment_freed_before_the_drain_of_its_blocks(self):
        # empty_cache's cudaFree is recorded live, before the exit drain that delivers the segment's
        # block events: the report sees them merged by time, as they happened.
        proc, events, _ = self.run_prog("emptycache")
        frees = [e for e in events if e["api"] == "cudaFree" and e["op"] == "free"]
        self.assertEqual(len(frees), 1)
        block_events = [e for e in events if e["op"] in ("block_alloc", "block_free")]
        self.assertTrue(all(e["seq"] > frees[0]["seq"] for e in block_events))  # the misordering
        reserved, allocated = int(proc.stdout.split()[1]), int(proc.stdout.split()[3])
        self.assertEqual(reserved, 6 * MiB)
        out = subprocess.run([REPORT, "--format", "json", self.last_trace], capture_output=True, text=True)
        self.assertIn(out.returncode, (0, 1), out.stderr)
        r = json.loads(out.stdout)
        p = r["processes"][0]
        self.assertEqual(p["warnings"], [])
        dev = p["devices"][0]
        self.assertEqual(dev["unmatched_frees"], 0)
        self.assertEqual(dev["peak_bytes"], 6 * MiB)
        # Allocated: requested sizes (PyTorch counts 512-byte rounded blocks: the same here). The peak
        # is before the segment's cudaFree, with both segments reserved (the merged order).
        self.assertEqual(dev["peak_allocated_bytes"], (3 << 20) + 1024)
        self.assertEqual(dev["peak_allocated_bytes"], allocated)
        peak = r["peaks"][0]
        self.assertEqual(peak["bytes"], 6 * MiB)
        self.assertLess(peak["allocated"]["time_ns"], frees[0]["t"])
        self.assertEqual(peak["fragmentation"]["reserved"], 6 * MiB)
        self.assertEqual(r["leaks"], [])  # a PyTorch block still referenced at exit: alive, not leaked
        held = [(l["level"], l["bytes"], l["reason"]) for l in r["held_at_exit"]]
        self.assertEqual(held, [("block", 1024, "alive_at_exit")])
        self.assertEqual(r["held_at_exit"][0]["stack"][0]["line"], prog_line("LINE_SMALL"))
        self.assertEqual(dev["cached_bytes"], 2 * MiB - 1024)

    def test_oom_drained_before_exception(self):
        proc, events, stack_of = self.run_prog("oom")
        self.assertEqual(proc.stdout, "caught OOM\n")
        ooms = [e for e in events if e["op"] == "block_oom"]
        self.assertEqual(len(ooms), 1, [e["op"] for e in events])
        py = [f for f in stack_of(ooms[0]) if f.get("lang") == "python"]
        self.assertEqual((py[0]["function"], py[0]["line"]), ("<module>", prog_line("LINE_OOM")))
        self.assertIn("free", ooms[0])

    def test_sigterm_drains_and_still_dies_of_sigterm(self):
        proc, events, _ = self.run_prog("sigterm", expect_rc=-signal.SIGTERM)
        self.assertEqual(proc.stdout, "about to die\n")
        self.assertEqual(len([e for e in events if e["op"] == "block_alloc"]), 6)

    def test_unsupported_version_warns_once(self):
        proc, events, _ = self.run_prog("train", {"FAKE_TORCH_VERSION": "2.3.1+cu121"})
        self.assertEqual(proc.stderr.count("gpumemtrace:"), 1, proc.stderr)
        self.assertIn("PyTorch 2.3.1+cu121 is older than 2.4 (probe: floor)", proc.stderr)
        self.assertFalse([e for e in events if e["op"].startswith("block_")])
        self.assertTrue([e for e in events if e["api"] == "cudaMalloc"])  # driver level still there

    def test_out_of_range_settings_said_and_replaced(self):
        proc, events, _ = self.run_prog("train", {"GPUMEMTRACE_TORCH_ENTRIES": "5", "GPUMEMTRACE_TORCH_POLL_MS": "x"})
        self.assertEqual(proc.stderr.splitlines(), [
            "gpumemtrace: GPUMEMTRACE_TORCH_ENTRIES=5 is not an integer from 1024 to 67108864; using 65536",
            "gpumemtrace: GPUMEMTRACE_TORCH_POLL_MS=x is not an integer from 10 to 60000; using 200"])
        self.assertEqual(len([e for e in events if e["op"] == "block_alloc"]), 40)

    def test_async_backend_falls_back(self):
        proc, events, _ = self.run_prog("train", {"FAKE_TORCH_BACKEND": "cudaMallocAsync"})
        self.assertEqual(proc.stderr.count("gpumemtrace:"), 1, proc.stderr)
        self.assertFalse([e for e in events if e["op"].startswith("block_")])

    def test_disabled_by_env(self):
        proc, events, _ = self.run_prog("train", {"GPUMEMTRACE_TORCH": "0"})
        self.assertFalse([e for e in events if e["op"].startswith("block_")])

    def test_no_torch_no_cuda_untouched(self):
        proc, events, _ = self.run_prog("noimport")
        self.assertEqual((proc.stdout, proc.stderr), ("no torch here\n", ""))
        proc, events, _ = self.run_prog("nocuda")
        self.assertEqual(proc.stdout, "torch imported, CUDA never used\n")
        self.assertEqual(proc.stderr, "")

    def run_logged(self, mode):
        """run_prog with the stand-in's call log: (proc, events, stack_of, [(name, t)])."""
        return self.run_logged_with(mode, {})

    def run_logged_with(self, mode, env_extra):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "calls.log")
            proc, events, stack_of = self.run_prog(mode, dict(env_extra, FAKE_TORCH_CALL_LOG=log))
            calls = []
            if os.path.exists(log):
                with open(log) as f:
                    calls = [(name, int(t)) for name, t in (line.split() for line in f)]
        return proc, events, stack_of, calls

    def test_no_snapshot_at_exit_when_counters_did_not_move(self):
        # The program drained after its last allocation (as the pytest plugin does): PyTorch's
        # counters have not moved since, so the exit drain takes no _snapshot() at all.
        proc, events, _, calls = self.run_logged("drained")
        self.assertEqual(proc.stdout, "done\n")
        names = [n for n, _ in calls]
        self.assertIn("snapshot", names[:names.index("end")])  # the drain by hand
        self.assertEqual(names[names.index("end"):], ["end"])
        self.assertEqual(len([e for e in events if e["op"] == "block_alloc"]), 6)
        # The same with one allocation after that drain: the exit drain snapshots and forwards it.
        proc, events, stack_of, calls = self.run_logged("drained_then_alloc")
        names = [n for n, _ in calls]
        self.assertEqual(names[names.index("end"):], ["end", "snapshot"])
        late = [e for e in events if e["op"] == "block_alloc" and e["size"] == 2048]
        self.assertEqual(len(late), 1)
        self.assertEqual(stack_of(late[0])[0]["line"], prog_line("LINE_LATE"))

    def test_no_snapshot_when_the_allocator_was_never_used(self):
        proc, events, _, calls = self.run_logged("cudaonly")
        self.assertEqual(proc.stdout, "done\n")
        self.assertNotIn("snapshot", [n for n, _ in calls[[n for n, _ in calls].index("end"):]])
        self.assertTrue([e for e in events if e["op"] == "sync"])  # the hook was on

    def test_drains_never_import_inductor(self):
        # The stand-in's _snapshot() asks hasattr(torch, "_inductor") as PyTorch's symbolizer does;
        # the hook's drains must not make that import the (slow) torch._inductor.
        proc, events, stack_of, calls = self.run_logged("train")
        names = [n for n, _ in calls]
        self.assertIn("snapshot", names)
        self.assertNotIn("import_inductor", names)
        loss = [e for e in events if e["op"] == "block_alloc" and e["size"] == 512]
        self.assertEqual(len(loss), 20)
        self.assertEqual(stack_of(loss[0])[0]["function"], "train")
        # The program's own import of it is left alone, and drains still work with it.
        proc, events, _, calls = self.run_logged("inductor")
        self.assertEqual(proc.stdout, "done\n")
        self.assertEqual([n for n, _ in calls].count("import_inductor"), 1)
        self.assertEqual(len([e for e in events if e["op"] == "block_alloc"]), 4)

    def test_frames_named_with_their_class(self):
        # PyTorch records co_name ("__init__"); the trace names PyTorch's frames as the recorder names
        # live Python frames: co_qualname on CPython 3.11+ ("Model.__init__"), co_name before.
        proc, events, stack_of = self.run_prog("model")
        self.assertEqual(proc.stdout, "done\n")
        qualified = sys.version_info >= (3, 11)
        blocks = {e["size"]: e for e in events if e["op"] == "block_alloc"}
        init = stack_of(blocks[3 << 20])[0]
        inner = stack_of(blocks[2048])
        self.assertEqual((init["function"], init["line"]),
                         ("Model.__init__" if qualified else "__init__", prog_line("LINE_INIT")))
        self.assertEqual([f["function"] for f in inner[:2]],
                         ["Model.forward.<locals>.inner", "Model.forward"] if qualified else ["inner", "forward"])
        # The same line in the live cudaMalloc's stack (the recorder's own Python frames) has the same name.
        malloc = [e for e in events if e["api"] == "cudaMalloc" and e["size"] == 4 << 20]
        live = [f for f in stack_of(malloc[0]) if f.get("lang") == "python" and f["line"] == prog_line("LINE_INIT")]
        self.assertEqual([f["function"] for f in live], [init["function"]])

    def test_forked_child_does_not_drain(self):
        # A child forked after CUDA started holds a copy of the parent's allocator, where CUDA cannot be
        # used: the hook neither drains there (not even at its exit), nor breaks the parent's trace.
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "calls.log")
            proc, events, _ = self.run_prog("fork", {"FAKE_TORCH_CALL_LOG": log})
            with open(log) as f:
                names = [line.split()[0] for line in f]
        self.assertEqual(proc.stdout, "child done\nparent done\n")
        self.assertEqual(names.count("child_end@child"), 1)       # the child's calls are told apart
        self.assertNotIn("snapshot@child", names)
        self.assertIn("snapshot", names)                          # the parent's drains
        self.assertEqual(len([e for e in events if e["op"] == "block_alloc" and e["size"] == 300000]), 2)

    def test_small_ring_counts_loss(self):
        proc, events, _ = self.run_prog("train", {"GPUMEMTRACE_TORCH_ENTRIES": "1024"})
        # 20 steps stay far below 1024 entries: nothing lost, no warning.
        self.assertNotIn("wrapped", proc.stderr)


# The PyTorch actions the live trace records (docs/pytorch.md, "Mapping"; trace/torch_actions.h).
LIVE_ACTIONS = {"alloc", "free_requested", "segment_alloc", "segment_free", "segment_map", "segment_unmap",
                "oom"}


def frames_of(*triples):
    """PyTorch's frame dicts, innermost first."""
    return [{"filename": f, "name": n, "line": l} for f, n, l in triples]


@unittest.skipUnless(os.path.exists(LIB), "needs build/libgpumemtrace.so")
class BridgeTest(unittest.TestCase):
    """gpumemtrace_record_torch() directly (a child under the preload): PyTorch's action names mapped
    by the library's table, the event's stack exactly the frames passed, bad input refused or skipped
    without a crash."""

    def run_child(self, body):
        code = ("import ctypes, sys; sys.path.insert(0, %r)\n"
                "from gpumemtrace_torch import bridge\n"
                "from gpumemtrace_torch.bridge import Entry, Frame\n"
                "b = bridge.load()\n"
                "def frames(*t):\n"
                "    return [{'filename': f, 'name': n, 'line': l} for f, n, l in t]\n" % TOOLS) + body
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "trace.jsonl")
            env = dict(os.environ, LD_PRELOAD=python_testlib.PRELOAD, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_QUIET="1")
            env.pop("PYTHONPATH", None)
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                  timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            events, stack_of = read_trace(out)
        return proc.stdout.split(), [e for e in events if e["api"].startswith("torch.")], stack_of

    def test_actions_mapped_by_the_library(self):
        out, events, _ = self.run_child(
            "print(sorted(b.live_actions) == %r)\n"
            "print(b.record([(a, 0x1000, 64, 0, 0, 0, 0, 0, []) for a in\n"
            "    ('alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free', 'segment_map',\n"
            "     'segment_unmap', 'oom', 'snapshot', 'annotate', 'not_an_action')]))\n"
            "b.live_actions = frozenset(['free_completed', 'snapshot', 'not_an_action'])  # skipped by C too\n"
            "print(b.record([(a, 0x2000, 64, 0, 0, 0, 0, 0, []) for a in sorted(b.live_actions)]))\n"
            % sorted(LIVE_ACTIONS))
        self.assertEqual(out, ["True", "7", "0"])
        self.assertEqual([(e["api"], e["op"], e["kind"]) for e in events],
                         [("torch.alloc", "block_alloc", "block"), ("torch.free_requested", "block_free", "block"),
                          ("torch.segment_alloc", "alloc", "device"), ("torch.segment_free", "free", "device"),
                          ("torch.segment_map", "map", "physical"), ("torch.segment_unmap", "unmap", "physical"),
                          ("torch.oom", "block_oom", "block")])
        self.assertTrue(all(e.get("delayed") is not True for e in events))  # time 0 = now: not delayed

    def test_frames_given_or_none(self):
        out, events, stack_of = self.run_child(
            "print(b.record([('alloc', 0x1000, 64, 0, 0, 0, 0, 0, []),\n"
            "                ('alloc', 0x2000, 128, 0, 7, 0x2000, 0, 0,\n"
            "                 frames(('model.py', 'forward', 12), ('train.py', 'main', 3)))]))\n")
        self.assertEqual(out, ["2"])
        self.assertEqual(events[0]["stack"], 0)  # no frames recorded: no stack (not the caller's)
        self.assertEqual([(f.get("lang"), f["file"], f["function"], f["line"]) for f in stack_of(events[1])],
                         [("python", "model.py", "forward", 12), ("python", "train.py", "main", 3)])
        self.assertEqual((events[1]["segment"], events[1]["stream"]), ("0x2000", "0x7"))

    def test_entries_sharing_frame_dicts_share_one_range(self):
        # As PyTorch hands them over: a list per entry, one dict per code line shared between lists.
        # Entries whose lists hold the same dicts point at one range of the frame buffer; a list that
        # differs in one frame (or in depth) gets its own, and each event keeps exactly its frames.
        out, events, stack_of = self.run_child(
            "inner, mid, main = frames(('m.py', 'f', 1), ('m.py', 'g', 2), ('t.py', 'main', 3))\n"
            "other = frames(('m.py', 'h', 9))[0]\n"
            "stacks = [[inner, mid, main], [inner, mid, main], [other, mid, main], [inner, main], [inner, mid, main]]\n"
            "print(b.record([('alloc', 0x1000 * (i + 1), 64, 0, 0, 0, 0, 0, s) for i, s in enumerate(stacks)]))\n")
        self.assertEqual(out, ["5"])
        got = [[(f["function"], f["line"]) for f in stack_of(e)] for e in events]
        full = [("f", 1), ("g", 2), ("main", 3)]
        self.assertEqual(got, [full, full, [("h", 9), ("g", 2), ("main", 3)], [("f", 1), ("main", 3)], full])
        self.assertEqual(len({e["stack"] for e in events}), 3)

    def test_bad_input_refused_or_skipped(self):
        out, events, stack_of = self.run_child(
            "rec = b._record\n"
            "E, F = ctypes.sizeof(Entry), ctypes.sizeof(Frame)\n"
            "print(rec(None, 1, E, F), rec(None, 0, E, F))            # null array with a count: refused\n"
            "arr = (Entry * 1)()\n"
            "print(rec(arr, 1, E + 8, F), rec(arr, 1, E, F - 8))      # another layout: refused\n"
            "print(rec(arr, 1 << 40, E, F))                           # count out of range: refused\n"
            "print(rec(arr, 1, E, F))                                 # all zero: null action, skipped\n"
            "arr[0].action = b'alloc'; arr[0].device = 1 << 20\n"
            "print(rec(arr, 1, E, F))                                 # device out of range: skipped\n"
            "fr = (Frame * 40)(*[(b'f%d.py' % i, b'fn', i) for i in range(40)])\n"
            "fr[1].file = None                                        # a frame without a file: left out\n"
            "arr[0].device = 0; arr[0].addr = 0x3000; arr[0].frame_count = 40\n"
            "arr[0].frames = ctypes.addressof(fr)\n"
            "print(rec(arr, 1, E, F))\n"
            "arr[0].frames = None                                     # a count without frames: no stack\n"
            "print(rec(arr, 1, E, F))\n"
            "print(b.layout_mismatch, b.record([]))\n")
        self.assertEqual(out, ["-1", "0", "-1", "-1", "-1", "0", "0", "1", "1", "False", "0"])
        self.assertEqual(len(events), 2)
        files = [f["file"] for f in stack_of(events[0])]
        self.assertEqual(files, ["f0.py"] + ["f%d.py" % i for i in range(2, 32)])  # 32 read, one left out
        self.assertEqual(events[1]["stack"], 0)


class TakeSnapshotTest(unittest.TestCase):
    """history.take_snapshot on a made-up torch module: the snapshot's own thread sees no
    torch._inductor to import, every other thread and every other name sees torch's __getattr__."""

    def make_torch(self, seen):
        import types
        torch = types.ModuleType("torch")
        imported = []

        def lazy(name):  # torch/__init__.py's module __getattr__: imports the lazy submodules
            if name in ("_inductor", "_dynamo"):
                imported.append(name)
                return types.ModuleType("torch." + name)
            raise AttributeError(name)

        def snapshot():
            import threading
            seen["own_thread"] = hasattr(torch, "_inductor")
            seen["other_name"] = hasattr(torch, "_dynamo")
            t = threading.Thread(target=lambda: seen.__setitem__("other_thread", hasattr(torch, "_inductor")))
            t.start()
            t.join()
            return {"segments": [], "device_traces": []}

        torch.__getattr__ = lazy
        torch.cuda = types.SimpleNamespace(memory=types.SimpleNamespace(_snapshot=snapshot))
        return torch, lazy, imported

    def test_only_the_snapshot_thread_is_kept_from_importing(self):
        from gpumemtrace_torch.history import take_snapshot
        seen = {}
        torch, lazy, imported = self.make_torch(seen)
        self.assertEqual(take_snapshot(torch), {"segments": [], "device_traces": []})
        self.assertEqual(seen, {"own_thread": False, "other_name": True, "other_thread": True})
        self.assertEqual(imported, ["_dynamo", "_inductor"])
        self.assertIs(vars(torch)["__getattr__"], lazy)  # put back

    def test_left_alone_once_inductor_is_imported(self):
        from gpumemtrace_torch.history import take_snapshot
        seen = {}
        torch, lazy, imported = self.make_torch(seen)
        sys.modules["torch._inductor"] = torch  # any module: only its presence matters
        try:
            take_snapshot(torch)
        finally:
            del sys.modules["torch._inductor"]
        self.assertTrue(seen["own_thread"])


class SitecustomizeChainTest(unittest.TestCase):
    """Without the library: the hook stays off, and an existing sitecustomize still runs."""

    def test_chains_existing_sitecustomize(self):
        with tempfile.TemporaryDirectory() as d:
            marker = os.path.join(d, "ran")
            with open(os.path.join(d, "sitecustomize.py"), "w") as f:
                f.write("import os\nopen(%r, 'w').write('yes')\nCHAINED = True\n" % marker)
            code = "import sys; print(sys.modules['sitecustomize'].__file__)"
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([TOOLS, d]))
            env.pop("LD_PRELOAD", None)
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(proc.stderr, "")
            self.assertTrue(os.path.exists(marker), "the existing sitecustomize did not run")
            self.assertEqual(proc.stdout.strip(), os.path.join(TOOLS, "sitecustomize.py"))

    def test_chained_sitecustomize_keeps_its_sys_path_changes(self):
        # A venv's or conda's sitecustomize adds to sys.path; chaining must not undo that.
        with tempfile.TemporaryDirectory() as d:
            extra = os.path.join(d, "added-by-chained")
            with open(os.path.join(d, "sitecustomize.py"), "w") as f:
                f.write("import sys\nsys.path.append(%r)\nsys.path.insert(0, %r)\n" % (extra, extra + "0"))
            code = "import sys; print(%r in sys.path, %r in sys.path)" % (extra, extra + "0")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([TOOLS, d]))
            env.pop("LD_PRELOAD", None)
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
            self.assertEqual((proc.returncode, proc.stderr), (0, ""))
            self.assertEqual(proc.stdout, "True True\n")

    def test_failing_sitecustomize_does_not_break_program(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "sitecustomize.py"), "w") as f:
                f.write("raise RuntimeError('boom')\n")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([TOOLS, d]))
            proc = subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True, text=True,
                                  env=env)
            self.assertEqual((proc.returncode, proc.stdout), (0, "ok\n"))
            self.assertIn("boom", proc.stderr)

    def test_version_floor_and_no_ceiling(self):
        # Releases are judged by probes (probes.py), with a floor only: newer ones than any known pass,
        # and a version that cannot be read is left to the probes.
        from gpumemtrace_torch.probes import parse_version, MIN_VERSION
        for text, parsed in [("2.4.0", (2, 4)), ("2.11.0a0+git12", (2, 11)), ("2.3.1+cu121", (2, 3)),
                             ("2.15.0", (2, 15)), ("3.0.0", (3, 0)), ("1.13.1", (1, 13)), ("garbage", None)]:
            self.assertEqual(parse_version(text), parsed, text)
        self.assertEqual(MIN_VERSION, (2, 4))


def release_classes(cases, prefix, namespace):
    """One TestCase per release shape from the mixin `cases` (e.g. TorchHook_2_4, TorchHook_2_8,
    TorchHook_2_11, TorchHook_2_15), put into `namespace` (a test module's globals)."""
    skip = unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM),
                               "needs build/libgpumemtrace.so and build/sim/libcudart.so.13")
    for version in FAKE_VERSIONS:
        name = prefix + "_".join(version.split("+")[0].split(".")[:2])
        namespace[name] = skip(type(name, (cases, unittest.TestCase), {"version": version}))


release_classes(TorchHookCases, "TorchHook_", globals())


if __name__ == "__main__":
    unittest.main()
