# tests/python/test_torch_drains.py — the PyTorch hook's drains: every history entry forwarded exactly once, across many copies whose times PyTorch re-converts.
"""The drain logic of tools/python/gpumemtrace_torch (history.py, anchor.py, counters.py,
segments.py) on PyTorch-shaped rings (torch_ring_sim.py), no library and no torch needed:
- many drains of a training loop whose keys repeat every iteration, each copy's time_us converted
  again (shifts of several microseconds both ways, a wall-clock step as NTP makes): every entry is
  forwarded exactly once and nothing is marked lost, with and without PyTorch's counters;
- a real wrap is still detected and marked, and the entries after it are forwarded once;
- a drain reads the new entries and a bounded margin, not the ring;
- the sync promise (docs/trace-format.md) holds through the re-conversion;
- counters: entries appended between two reads, reset_accumulated_memory_stats() detected;
- the segment table follows expandable segments' map and unmap.
"""
import collections
import os
import random
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "python"))
sys.path.insert(0, HERE)
import torch_ring_sim as sim  # noqa: E402
from torch_ring_sim import Recorder, Ring  # noqa: E402


def frames_of(*triples):
    """PyTorch's frame dicts, innermost first."""
    return [{"filename": f, "name": n, "line": l} for f, n, l in triples]


class UidRing(Ring):
    """A ring whose every entry carries its uid as its one frame's line: what the drain forwards says
    which entries went (the drain hands the frames over untouched)."""

    def append(self, action, addr, size, stream=0, frames=None):
        return Ring.append(self, action, addr, size, stream, [{"filename": "u.py", "name": "u", "line": self.uid + 1}])


class Loop:
    """A training loop under the hook's drains: iterations of identical keys, a drain at a random
    moment (each appending its "snapshot" entry), another thread appending a few entries around
    each copy, and the Hints the hook would give (counters read before the copy)."""

    def __init__(self, seed, capacity=512, counters=True, snapshots=True, jitter_us=4, blocks=4, race=True):
        from gpumemtrace_torch.history import HistoryDrain
        self.rng = random.Random(seed)
        self.ring = UidRing(capacity, seed=seed, jitter_us=jitter_us)
        self.rec = Recorder()
        self.drain = HistoryDrain(self.rec, offset=lambda: 0)
        self.counters, self.snapshots, self.blocks, self.race = counters, snapshots, blocks, race
        self.read = None   # entries the counters had seen at the last drain (snapshot entries excluded)
        self.capacity = capacity

    def racer(self, ring):
        ring.append("alloc", 0x900000000000 + self.rng.randint(0, 3) * 512, 512)

    def iterate(self, n):
        for _ in range(n):
            sim.training_step(self.ring, self.blocks)

    def drain_once(self, race=None):
        from gpumemtrace_torch.anchor import Hints
        race = self.race if race is None else race
        seen = self.ring.appended - self.ring.snapshots
        appended = None if self.read is None else seen - self.read + 1   # + our last snapshot entry
        self.read = seen
        copy = self.ring.snapshot(race_before=self.rng.randint(0, 5) if race else 0,
                                  race_after=self.rng.randint(0, 2) if race else 0, racer=self.racer)
        hints = Hints(appended=appended if self.counters else None, snapshots=1 if self.snapshots else None,
                      marks_recorded=True, capacity=self.capacity)
        self.drain.drain({"device_traces": [copy]}, hints={0: hints})

    def run(self, drains, step=None):
        for k in range(drains):
            self.iterate(self.rng.randint(1, self.capacity // (4 * self.blocks)))
            if step is not None and k == drains // 2:
                self.ring.clock_step(step)
            self.drain_once()
        self.drain_once(race=False)   # the exit drain: nothing appended after it
        return self

    def forwarded(self):
        return collections.Counter(e[8][0]["line"] for e in self.rec.events)

    def expected(self):
        return self.ring.uid - self.ring.snapshots


class ExactDrainTest(unittest.TestCase):
    def check_exact(self, loop):
        got = loop.forwarded()
        self.assertEqual([uid for uid, n in got.items() if n > 1], [], "entries forwarded twice")
        self.assertEqual(len(got), loop.expected(), "entries never forwarded")
        self.assertEqual(loop.rec.marks, [])
        self.assertEqual(loop.drain.lost_drains, 0)

    def test_times_reconverted_at_every_copy(self):
        # Each copy's times are off by up to 4 us either way (several us between two copies of the
        # same entry), the ring is full at every drain, the loop's keys repeat every iteration.
        for seed in range(4):
            with self.subTest(seed=seed):
                loop = Loop(seed).run(150)
                self.check_exact(loop)
                self.assertGreater(loop.ring.appended, 10 * loop.capacity)  # it wrapped many times over

    def test_without_counters_or_snapshot_count(self):
        # The structure alone (tail, marks, our snapshot right after the boundary, time) is enough.
        for kw in (dict(counters=False), dict(snapshots=False), dict(counters=False, snapshots=False)):
            with self.subTest(**kw):
                self.check_exact(Loop(11, **kw).run(100))

    def test_clock_steps_both_ways(self):
        # A wall-clock step (NTP) of 50 ms forward, or back, half-way: later copies move every time by
        # up to the step, far beyond the time slack; the other signs still place each drain exactly.
        for step in (50000, -50000):
            with self.subTest(step=step):
                self.check_exact(Loop(5).run(100, step=step))

    def test_one_block_per_iteration(self):
        # The shortest period there is: alloc A, free A, alloc A, ... in a full ring.
        for seed in range(3):
            with self.subTest(seed=seed):
                self.check_exact(Loop(seed, blocks=1).run(120))

    def test_identical_tests_drained_after_each(self):
        # As the pytest plugin drains: identical tiny tests, a drain after each, in a small ring, so
        # that (test, snapshot) repeats with a period of 3 entries. Counters and the snapshot count
        # tell the repeats apart.
        from gpumemtrace_torch.anchor import Hints
        from gpumemtrace_torch.history import HistoryDrain
        ring, rec = UidRing(64, seed=3), Recorder()
        d = HistoryDrain(rec, offset=lambda: 0)
        read = None
        for _ in range(400):
            ring.append("alloc", 0x1000, 512)
            ring.append("free_requested", 0x1000, 512)
            seen = ring.appended - ring.snapshots
            hints = Hints(appended=None if read is None else seen - read + 1, snapshots=1, marks_recorded=True,
                          capacity=64)
            read = seen
            d.drain({"device_traces": [ring.snapshot()]}, hints={0: hints})
        got = collections.Counter(e[8][0]["line"] for e in rec.events)
        self.assertEqual((len(got), max(got.values()), rec.marks), (ring.uid - ring.snapshots, 1, []))

    def test_real_wrap_marked_then_exact_again(self):
        loop = Loop(2).run(20)
        lost_before = loop.expected()
        loop.iterate(3 * loop.capacity)          # far more than the ring holds between two drains
        loop.drain_once(race=False)
        wrapped_over = loop.expected() - lost_before - loop.capacity   # entries overwritten unseen
        self.assertEqual(len(loop.rec.marks), 1)
        self.assertIn("wrapped", loop.rec.marks[0])
        loop.run(20)
        got = loop.forwarded()
        self.assertEqual([uid for uid, n in got.items() if n > 1], [])
        self.assertEqual(loop.expected() - len(got), wrapped_over)
        self.assertEqual(len(loop.rec.marks), 1)

    def test_cleared_history_is_not_a_wrap(self):
        # sharing.py clears the ring when the program asks (enabled=None) and tells the drain: the next
        # copy is new, nothing is lost, nothing marked.
        from gpumemtrace_torch.anchor import Hints
        loop = Loop(4).run(10)
        n = loop.expected()
        loop.ring.slots, loop.ring.next = [], 0
        loop.drain.forget()
        loop.iterate(5)
        loop.drain.drain({"device_traces": [loop.ring.snapshot()]},
                         hints={0: Hints(appended=40 + 1, snapshots=1, marks_recorded=True, capacity=512)})
        self.assertEqual(loop.rec.marks, [])
        self.assertEqual(len(loop.forwarded()), n + 40)

    def test_a_drain_reads_what_is_new_not_the_ring(self):
        # A ring of 20000 entries, 10 new ones: the drain reads them and a bounded margin.
        from gpumemtrace_torch.anchor import COUNT_SLACK, Hints
        from gpumemtrace_torch.history import HistoryDrain

        class Counting(dict):
            reads = 0

            def get(self, *args):
                type(self).reads += 1
                return dict.get(self, *args)

        def entry(action, addr, t):
            return Counting(action=action, addr=addr, size=512, stream=0, time_us=t)

        rec = Recorder()
        d = HistoryDrain(rec, offset=lambda: 0)
        old = [entry("alloc", 0x1000 + i * 512, 10 + i) for i in range(20000)]
        d.drain({"device_traces": [old]})
        Counting.reads = 0
        new = [entry("free_requested", 0x1000 + i * 512, 50000 + i) for i in range(10)]
        d.drain({"device_traces": [old + new]}, hints={0: Hints(appended=10)})
        self.assertEqual([e[0] for e in rec.events[20000:]], ["free_requested"] * 10)
        self.assertLess(Counting.reads, 40 * 10 + 8 * (COUNT_SLACK + 20), "the drain re-read the ring")
        self.assertEqual(rec.marks, [])


class SyncTest(unittest.TestCase):
    def test_sync_boundary(self):
        # docs/trace-format.md "Delayed events and sync": below every entry a later drain can deliver,
        # allowing the slack by which a later copy may re-convert an entry's time.
        from gpumemtrace_torch.history import CLOCK_SLACK_US, HistoryDrain
        rec = Recorder()
        d = HistoryDrain(rec, offset=lambda: 0)
        called = 10**9
        busy = [{"action": "alloc", "addr": 0x1000, "size": 512, "stream": 0, "time_us": called + 500}]
        old = [{"action": "alloc", "addr": 0x2000, "size": 512, "stream": 0, "time_us": called - 10**6}]
        d.drain({"device_traces": [busy]}, called)
        self.assertEqual(rec.syncs, [(called + 500 - CLOCK_SLACK_US - 1) * 1000])
        d.drain({"device_traces": [busy, old]}, called + 10)
        self.assertEqual(len(rec.syncs), 1)  # would go back: not written
        d.drain({"device_traces": [[], []]}, called + 10**6)
        self.assertEqual(rec.syncs[-1], (called + 10**6 - CLOCK_SLACK_US - 1) * 1000)

    def test_promise_kept_through_reconversion_and_steps(self):
        # Every forwarded event's time is above every sync written before it, and syncs only grow,
        # with times moving between copies and the wall clock stepping back by 50 ms.
        loop = Loop(9)
        syncs_seen = []
        order = []
        rec = loop.rec
        original_sync, original_record = rec.sync, rec.record

        def sync(t):
            original_sync(t)
            order.append(("sync", t))

        def record(entries):
            order.extend(("event", e[6]) for e in entries)
            return original_record(entries)

        rec.sync, rec.record = sync, record
        for k in range(60):
            loop.iterate(loop.rng.randint(1, 20))
            if k == 30:
                loop.ring.clock_step(-50000)
            loop.drain.drain({"device_traces": [loop.ring.snapshot()]}, called_us=sim.T0_US + loop.ring.tick)
        synced = 0
        for kind, t in order:
            self.assertGreater(t, synced, kind)
            if kind == "sync":
                syncs_seen.append(t)
                synced = t
        self.assertGreater(len(syncs_seen), 30)


class CountersTest(unittest.TestCase):
    def stats(self, allocs, frees, completed, dev_alloc=0, dev_free=0, shift=0, device_counts=True):
        s = {"allocation.all.allocated": allocs, "allocation.all.freed": frees,
             "allocation.all.current": allocs - frees + shift,
             "active.all.allocated": allocs, "active.all.freed": completed, "active.all.current": allocs - completed,
             "segment.all.allocated": dev_alloc, "segment.all.freed": dev_free, "segment.all.current": dev_alloc - dev_free,
             "reserved_bytes.all.allocated": dev_alloc << 21, "reserved_bytes.all.freed": dev_free << 21,
             "reserved_bytes.all.current": (dev_alloc - dev_free) << 21, "num_ooms": 0}
        if device_counts:
            s.update(num_device_alloc=dev_alloc, num_device_free=dev_free)
        return s

    def read(self, *stats):
        from gpumemtrace_torch import counters
        fake = type("T", (), {})()
        fake.cuda = type("C", (), {"device_count": staticmethod(lambda: len(stats)),
                                   "memory_stats": staticmethod(lambda d: stats[d])})
        return counters.read(fake)

    def test_entries_between_two_reads(self):
        from gpumemtrace_torch.counters import appended
        a, = self.read(self.stats(10, 4, 4, 2))
        b, = self.read(self.stats(15, 9, 8, 3, 1))
        self.assertEqual(appended(a, b, free_completed=True), (5 + 5 + 4 + 1 + 1, True))
        self.assertEqual(appended(a, b, free_completed=False), (5 + 5 + 1 + 1, True))

    def test_reset_is_detected(self):
        # reset_accumulated_memory_stats(): accumulated counters back to 0, `current` kept.
        from gpumemtrace_torch.counters import appended
        a, = self.read(self.stats(100, 60, 60, 5))
        dropped, = self.read(self.stats(3, 1, 1, 0, shift=40))
        self.assertEqual(appended(a, dropped), (None, False))
        # ... even once the counters have grown past their old values: the shift gave it away.
        regrown, = self.read(self.stats(300, 200, 200, 5, shift=40))
        self.assertEqual(appended(a, regrown), (None, False))

    def test_without_device_counts(self):
        # A release without num_device_alloc/free: maps are not counted; the estimate says so when
        # reserved bytes moved (and bounds them from above for the poller).
        from gpumemtrace_torch.counters import appended
        a, = self.read(self.stats(10, 4, 4, 2, device_counts=False))
        same, = self.read(self.stats(12, 6, 6, 2, device_counts=False))
        more, = self.read(self.stats(12, 6, 6, 3, device_counts=False))
        self.assertEqual(appended(a, same), (2 + 2 + 2, True))
        n, exact = appended(a, more)
        self.assertFalse(exact)
        self.assertGreaterEqual(n, 2 + 2 + 2 + 1)

    def test_empty_before_cuda_init(self):
        from gpumemtrace_torch.counters import appended
        a, = self.read({})
        self.assertIsNone(a)
        self.assertEqual(appended(a, a), (None, False))


class SegmentTableTest(unittest.TestCase):
    def test_expandable_map_and_unmap(self):
        # Contiguous mapped ranges, as PyTorch's snapshot reports expandable segments.
        from gpumemtrace_torch.segments import SegmentTable
        MiB = 1 << 20
        t = SegmentTable()
        base = 0x7f0000000000
        t.map(0, base, 2 * MiB)
        t.map(0, base + 2 * MiB, 4 * MiB)            # grows the range at its end
        self.assertEqual(t.of(0, base + 5 * MiB), base)
        t.unmap(0, base + 2 * MiB, 2 * MiB)          # cut in two
        self.assertEqual((t.of(0, base + MiB), t.of(0, base + 3 * MiB), t.of(0, base + 5 * MiB)),
                         (base, 0, base + 4 * MiB))
        t.map(0, base + 2 * MiB, 2 * MiB)            # the hole filled: one range again
        self.assertEqual(t.of(0, base + 5 * MiB), base)
        t.unmap(0, base + 4 * MiB, 2 * MiB)          # trimmed at the end
        self.assertEqual((t.of(0, base + 3 * MiB), t.of(0, base + 5 * MiB)), (base, 0))
        t.add(0, 0x1000000, 2 * MiB)
        t.remove(0, 0x1000000)
        self.assertEqual(t.of(0, 0x1000000), 0)


class HistoryDeltaTest(unittest.TestCase):
    """The drain's delta logic on hand-made histories."""

    def entry(self, action, addr, size, t, frames=()):
        return dict(action=action, addr=addr, size=size, stream=0, time_us=t, frames=frames_of(*frames))

    def test_delta_and_wrap(self):
        from gpumemtrace_torch.history import HistoryDrain
        rec = Recorder()
        d = HistoryDrain(rec)
        h = [self.entry("segment_alloc", 0x1000, 0x200000, 1),
             self.entry("alloc", 0x1000, 512, 2, [("a.py", "f", 3)])]
        d.drain({"device_traces": [list(h)]})
        self.assertEqual([e[0] for e in rec.events], ["segment_alloc", "alloc"])
        self.assertEqual(rec.events[1][5], 0x1000)  # the block's segment
        self.assertEqual(rec.events[1][8], frames_of(("a.py", "f", 3)))
        h += [self.entry("snapshot", 0, 0, 3), self.entry("free_requested", 0x1000, 512, 4),
              self.entry("free_completed", 0x1000, 512, 5)]
        d.drain({"device_traces": [list(h)]})
        self.assertEqual([e[0] for e in rec.events], ["segment_alloc", "alloc", "free_requested"])
        self.assertEqual(rec.marks, [])
        # The ring wrapped past the last copy: everything in the copy is forwarded, the loss marked.
        d.drain({"device_traces": [[self.entry("alloc", 0x2000, 64, 9)]]})
        self.assertEqual(rec.events[-1][0], "alloc")
        self.assertEqual(d.lost_drains, 1)
        self.assertEqual(len(rec.marks), 1)

    def test_time_conversion_and_oom(self):
        import time
        from gpumemtrace_torch.history import HistoryDrain
        rec = Recorder()
        d = HistoryDrain(rec)
        now_us = time.time_ns() // 1000
        e = {"action": "oom", "device_free": 12345, "size": 1 << 30, "stream": 0, "time_us": now_us}
        d.drain({"device_traces": [[e]]})
        action, addr, size, dev, stream, segment, time_ns, free_bytes, frames = rec.events[0]
        self.assertEqual((action, addr, free_bytes, size), ("oom", 0, 12345, 1 << 30))
        mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        self.assertLess(abs(time_ns - mono), 5 * 10**9)

    def test_cpp_frames_left_out_when_pytorch_records_them(self):
        # stacks="all" (a program asked for it): PyTorch's record mixes C++ frames in; the trace's
        # stacks of these events are Python frames only.
        from gpumemtrace_torch.history import HistoryDrain
        rec = Recorder()
        d = HistoryDrain(rec)
        d.python_only_frames = True
        e = self.entry("alloc", 0x1000, 512, 2, [("/src/c10/cuda/CUDACachingAllocator.cpp", "malloc", 1200),
                                                 ("??", "at::empty", 0), ("<eval_with_key>.3", "forward", 7),
                                                 ("train.py", "main", 3)])
        d.drain({"device_traces": [[e]]})
        self.assertEqual([f["name"] for f in rec.events[0][8]], ["forward", "main"])


class ProbesTest(unittest.TestCase):
    """probes.check on made-up torch modules: each failure is one line naming its probe."""

    def torch(self, version="2.15.0", hip=None, drop=(), impl=None):
        import types
        torch = types.ModuleType("torch")
        torch.__version__ = version
        torch.version = types.SimpleNamespace(hip=hip, cuda="13.0")
        memory = types.SimpleNamespace()

        def record(enabled="all", context="all", stacks="all", max_entries=1, device=None, skip_actions=None):
            pass
        memory._record_memory_history = impl or record
        memory._snapshot = lambda: {}
        torch.cuda = types.SimpleNamespace(memory=memory, _lazy_call=print, memory_stats=dict, device_count=len)
        for owner, name in drop:
            delattr(getattr(torch, owner) if owner == "cuda" else torch.cuda.memory, name)
        return torch

    def failure(self, torch):
        from gpumemtrace_torch import probes
        with self.assertRaises(probes.ProbeFailed) as cm:
            probes.check(torch)
        return str(cm.exception)

    def test_probes(self):
        from gpumemtrace_torch import probes
        f = probes.check(self.torch("2.99.0"))       # newer than any known: fine
        self.assertTrue(f.takes("skip_actions") and not f.takes("clear_history"))
        self.assertIn("(probe: floor)", self.failure(self.torch("2.3.1")))
        self.assertIn("(probe: cuda)", self.failure(self.torch(hip="6.2")))
        self.assertIn("no torch.cuda.memory._snapshot (probe: api)", self.failure(self.torch(drop=[("memory", "_snapshot")])))

        def other(enabled="all", size=1):
            pass
        self.assertIn("takes no 'context', 'stacks', 'max_entries' (probe: signature)",
                      self.failure(self.torch(impl=other)))

        def open_ended(enabled="all", *args, **kwargs):
            pass
        self.assertTrue(probes.check(self.torch(impl=open_ended)).takes("clear_history"))

    def test_entry_shape(self):
        from gpumemtrace_torch.probes import check_entries
        good = {"action": "alloc", "addr": 1, "size": 2, "stream": 0, "time_us": 3}
        oom = {"action": "oom", "device_free": 1, "size": 2, "stream": 0, "time_us": 3}
        self.assertIsNone(check_entries({"segments": [], "device_traces": [[good, oom], []]}))
        self.assertIn("no int 'time_us'", check_entries({"device_traces": [[dict(good, time_us=None)]]}))
        self.assertIn("no str 'action'", check_entries({"device_traces": [[{"size": 1}]]}))
        self.assertIn("(probe: entries)", check_entries({"traces": []}))


class QualnameTest(unittest.TestCase):
    """qualname.qualify: PyTorch's (filename, line, co_name) -> co_qualname from the source."""

    SOURCE = (
        "import functools\n"                                   # 1
        "class Model:\n"                                       # 2
        "    def __init__(self):\n"                            # 3
        "        self.w = 1\n"                                 # 4
        "    @functools.lru_cache\n"                           # 5
        "    def forward(self, x):\n"                          # 6
        "        def inner():\n"                               # 7
        "            return x\n"                               # 8
        "        f = lambda: x\n"                              # 9
        "        return sum(i for i in range(3))\n"            # 10
        "    class Head:\n"                                    # 11
        "        def forward(self):\n"                         # 12
        "            return '\\d'\n"                           # 13 (an invalid escape: SyntaxWarning)
        "def forward():\n"                                     # 14
        "    return 0\n")                                      # 15

    def test_qualified_names(self):
        import tempfile
        from gpumemtrace_torch import qualname
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(self.SOURCE)
        self.addCleanup(os.unlink, f.name)
        q = qualname.qualify
        cases = [(4, "__init__", "Model.__init__"), (7, "forward", "Model.forward"),
                 (8, "inner", "Model.forward.<locals>.inner"), (9, "<lambda>", "Model.forward.<locals>.<lambda>"),
                 (10, "<genexpr>", "Model.forward.<locals>.<genexpr>"), (13, "forward", "Model.Head.forward"),
                 (15, "forward", "forward"), (1, "<module>", "<module>"),
                 (4, "not_there", "not_there")]          # a name the line's code does not have: left alone
        for line, name, want in cases:
            self.assertEqual(q(f.name, line, name), want if qualname.ENABLED else name, (line, name))
        self.assertEqual(q("/no/such/file.py", 3, "__init__"), "__init__")
        self.assertEqual(q("<eval_with_key>.3", 3, "forward"), "forward")

    def test_left_alone_when_unreadable(self):
        import tempfile
        from gpumemtrace_torch import qualname
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("class A:\n    def f(self):\n        return (\n")  # does not compile
        self.addCleanup(os.unlink, f.name)
        self.assertEqual(qualname.qualify(f.name, 2, "f"), "f")

    def test_no_warning_reaches_stderr(self):
        import subprocess
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(self.SOURCE)
        self.addCleanup(os.unlink, f.name)
        code = ("import sys; sys.path.insert(0, %r)\nfrom gpumemtrace_torch import qualname\n"
                "print(qualname.qualify(%r, 13, 'forward'))" % (os.path.join(ROOT, "tools", "python"), f.name))
        p = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True)
        self.assertEqual(p.stderr, "")
        self.assertIn("forward", p.stdout)


if __name__ == "__main__":
    unittest.main()
