# tools/python/gpumemtrace_torch/__init__.py — PyTorch caching-allocator events for gpumemtrace.
"""PyTorch caching-allocator events for gpumemtrace. See docs/pytorch.md.

on_torch_imported() is called by tools/python/sitecustomize.py once the program imported torch itself
(sitecustomize watches for it; we never import torch, and this package is imported only then). It
does nothing on the GPU until the program initialises CUDA itself (torch.cuda._lazy_call: we never
initialise CUDA — that would break programs that fork DataLoader workers first). Then it turns on PyTorch's allocation history and
forwards it into the trace through libgpumemtrace.so:
  - from a daemon thread, whenever PyTorch's own counters say enough entries have piled up (so the
    ring does not wrap between two drains), at most every GPUMEMTRACE_TORCH_POLL_MS;
  - from PyTorch's out-of-memory observer, before OutOfMemoryError is raised;
  - at exit (atexit) and on SIGTERM (then the default action runs as before: the process still dies
    of SIGTERM).
Each drain forwards exactly the entries new since the last one (anchor.py), however PyTorch
re-converts their times. A drain is skipped when PyTorch's cumulative counters show no allocator
event since the last one, and a drain's _snapshot() never makes PyTorch import torch._inductor
(history.take_snapshot; the import costs seconds, and the exit drain of every short process would
pay it, docs/pytorch.md). A program that records the history itself keeps working (sharing.py).
The allocator's settings go into the trace too: those in force when the history starts, and every
later _set_allocator_settings / set_per_process_memory_fraction call (settings.py).
It also brackets every torch.autograd.backward() call with a scope (backward_scope.py), so that
blocks the autograd threads allocate, which PyTorch records without frames, can be attributed to the
backward() call that ran them.
Each drain ends with a `sync` event (and one is written when recording starts): the events reach the
trace late, marked "delayed", and readers merge them into the timeline by time up to each sync.
Supported: PyTorch 2.4 and newer with the native caching allocator, as long as the probes pass
(probes.py); otherwise one line says which probe failed and the trace keeps the driver-level events.
Nothing here may raise into the program.
"""
import os
import sys
import threading
import time

from . import backward_scope
from . import bridge as _bridge_mod
from . import counters as _counters
from . import probes
from .anchor import Hints
from .history import HistoryDrain, take_snapshot
from .probes import MIN_VERSION, parse_version  # noqa: F401  (the floor, for tests and callers)
from .settings import AllocatorSettingsWatch
from .sharing import HistorySharing

DEFAULT_ENTRIES = 65536
DEFAULT_POLL_MS = 200


def _env_int(name, default, lo, hi, warn):
    """The variable's value, or `default` (with one line saying why) when it is not an integer in
    [lo, hi]."""
    text = os.environ.get(name)
    if text is None or text == "":
        return default
    try:
        v = int(text)
        if lo <= v <= hi:
            return v
    except ValueError:
        pass
    warn("%s=%s is not an integer from %d to %d; using %d" % (name, text, lo, hi, default))
    return default


class TorchHook:
    """The hook's state: one per process (HOOK below), from install(torch) to exit.

    Thread-safety: drains run on the poller thread, the OOM observer's thread (the allocating one), the
    atexit/SIGTERM thread, pytest's (drain_now) and a program thread calling _record_memory_history
    (sharing.py); `lock` serializes them and guards every attribute. It is an RLock because the SIGTERM
    handler may run the final drain on the main thread while that thread is inside a drain (the
    process then dies of SIGTERM without returning to it), and because sharing.py drains while
    holding it."""

    def __init__(self):
        self.lock = threading.RLock()
        self.bridge = None          # bridge.Bridge once libgpumemtrace.so was found
        self.drain = None           # HistoryDrain once the history is on
        self.sharing = None         # sharing.HistorySharing once torch is imported
        self.settings = None        # settings.AllocatorSettingsWatch once torch is imported
        self.warned = set()
        self.stop = None            # threading.Event that ends the poller
        # PyTorch's counters (counters.read) when the last drain began: equal counters at the next one
        # mean no entry was appended since; their difference, how many were.
        self.drained_counters = None
        self.drained_snapshots = None  # sharing.snapshot_calls when the last drain began
        self.checked_entries = False
        self.entries = DEFAULT_ENTRIES  # GPUMEMTRACE_TORCH_ENTRIES: the ring the hook asks for
        self.pid = None                # the process that turned the history on (a forked child does not drain)

    def warn(self, msg):
        if msg in self.warned:
            return
        self.warned.add(msg)
        try:
            sys.stderr.write("gpumemtrace: %s\n" % msg)
            sys.stderr.flush()
        except Exception:
            pass

    def install(self, torch):
        if os.environ.get("GPUMEMTRACE_TORCH", "auto").lower() in ("0", "off", "no", "false"):
            return
        b = _bridge_mod.load()
        if b is None:
            return  # not under libgpumemtrace.so
        self.bridge = b
        self.on_torch_imported(torch)

    def on_torch_imported(self, torch):
        try:
            try:
                features = probes.check(torch)
            except probes.ProbeFailed as e:
                self.warn(str(e))
                return
            # Before the program can call it: its own history calls go through sharing.py.
            self.sharing = HistorySharing(torch, features, self)
            self.settings = AllocatorSettingsWatch(torch, self.bridge, self.warn)
            if threading.current_thread() is threading.main_thread():
                self.install_sigterm()
            torch.cuda._lazy_call(self.enable_guarded)
        except Exception as e:
            self.warn("PyTorch hook disabled: %r" % (e,))

    def enable_guarded(self):
        # Runs inside torch.cuda._lazy_init(): an exception here would surface in the program as a
        # DeferredCudaCallError. Swallow everything.
        try:
            self.enable()
        except Exception as e:
            self.warn("PyTorch tensor-level events disabled: %r" % (e,))

    def enable(self):
        import torch
        with self.lock:
            if self.drain is not None or self.sharing is None:
                return
            backend = "native"
            try:
                backend = torch.cuda.get_allocator_backend()
            except Exception:
                pass
            if backend != "native":
                self.warn("PyTorch allocator backend %r: tensor-level events need the native caching "
                          "allocator (probe: backend); the trace has driver-level events only" % backend)
                return
            entries = _env_int("GPUMEMTRACE_TORCH_ENTRIES", DEFAULT_ENTRIES, 1024, 1 << 26, self.warn)
            poll_ms = _env_int("GPUMEMTRACE_TORCH_POLL_MS", DEFAULT_POLL_MS, 10, 60000, self.warn)
            # The trace keeps no stack for a release unless GPUMEMTRACE_FREE_STACKS=1: then PyTorch
            # need not gather one at every free either (context="alloc"; it gives a free entry the
            # allocation's stack instead, which is not where the free happened and is not forwarded).
            ours = {"enabled": "all", "context": "all" if self.bridge.free_stacks else "alloc",
                    "stacks": "python", "max_entries": entries}
            if self.sharing.features.takes("skip_actions"):
                # free_completed entries are never forwarded (the trace frees a block when PyTorch's
                # allocated bytes drop, at free_requested): without them the ring holds two entries
                # per block instead of three, so each drain's copy comes a third less often.
                ours["skip_actions"] = ["free_completed"]
            self.entries, self.pid = entries, os.getpid()
            drain = HistoryDrain(self.bridge)
            # The history can only start at CUDA's initialisation, which runs this first: nothing
            # before these counters can be in the ring but what the program recorded itself.
            counters = self.counters(torch)
            start_us = time.time_ns() // 1000
            self.sharing.start(ours)
            snapshots = self.sharing.snapshot_calls
            snap = take_snapshot(torch)
            self.settings.started(snap)
            drain.seed_segments(snap)
            # Every entry is newer than the first sync: the moment recording started for the hook, or
            # the oldest entry the program's own earlier history left in the ring.
            oldest = min([start_us] + [int(t[0].get("time_us") or start_us)
                                       for t in snap.get("device_traces") or [] if t])
            drain.sync_at(drain.boundary_ns([], oldest))
            problem = probes.check_entries(snap)
            if problem is not None:
                self.warn("PyTorch %s: %s; the trace has driver-level events only"
                          % (getattr(torch, "__version__", "?"), problem))
                return
            drain.python_only_frames = self.sharing.stacks() == "all"
            drain.drain(snap, start_us)
            self.drain = drain
            self.drained_counters = counters
            self.drained_snapshots = snapshots
            try:
                torch._C._cuda_attach_out_of_memory_observer(self.on_oom)
            except Exception:
                pass
            import atexit
            atexit.register(self.final_drain)
            self.start_poller(torch, poll_ms)
            try:
                backward_scope.install(torch)
            except Exception as e:
                self.warn("backward() intervals not recorded: %r" % (e,))

    @staticmethod
    def counters(torch):
        try:
            return _counters.read(torch)
        except Exception:
            return None  # unknown: never equal, so the drain runs

    def appended(self, counters):
        """Per device: entries appended since the last drain began (None: unknown), from PyTorch's
        counters and the _snapshot() calls seen."""
        prev = self.drained_counters
        if counters is None or prev is None or len(prev) != len(counters):
            return None
        free_completed = not self.sharing.skips("free_completed")
        return [_counters.appended(p, c, free_completed) for p, c in zip(prev, counters)]

    def hints(self, counters):
        """{device: anchor.Hints} for a drain that read `counters` just before its _snapshot()."""
        calls = self.sharing.snapshot_calls
        snapshots = None
        if calls is not None and self.drained_snapshots is not None:
            snapshots = calls - self.drained_snapshots
        per_device = self.appended(counters) or []
        capacity = self.sharing.capacity()
        out = {}
        for dev, (n, exact) in enumerate(per_device):
            appended = n + (snapshots if snapshots is not None else 1) if n is not None and exact else None
            out[dev] = Hints(appended=appended, snapshots=snapshots, marks_recorded=not self.sharing.skips("snapshot"),
                             capacity=capacity)
        return out

    def drain_now(self):
        """Forwards everything PyTorch recorded since the last drain; nothing (not even a _snapshot()
        call) when its counters did not move. Safe from any thread holding the GIL."""
        with self.lock:
            d = self.drain
            if d is None or os.getpid() != self.pid:
                return  # off, or a forked child: its copy of the allocator is the parent's, CUDA unusable
            try:
                import torch
                # Read before the snapshot: an entry appended after this read moves the counters
                # again, so the next drain runs and finds it.
                counters = self.counters(torch)
                if counters is not None and counters == self.drained_counters:
                    return
                hints = self.hints(counters)
                snapshots = self.sharing.snapshot_calls
                called_us = time.time_ns() // 1000
                snap = take_snapshot(torch)
                if not self.checked_entries:
                    problem = probes.check_entries(snap)
                    if problem is not None:
                        self.disable("PyTorch %s: %s; tensor-level events stop here"
                                     % (getattr(torch, "__version__", "?"), problem))
                        return
                    self.checked_entries = any(snap.get("device_traces") or ())
                d.python_only_frames = self.sharing.stacks() == "all"
                d.drain(snap, called_us, hints)
                self.drained_counters = counters
                self.drained_snapshots = snapshots
                if self.bridge.layout_mismatch:
                    self.warn("libgpumemtrace.so and tools/python are from different builds: "
                              "tensor-level events not recorded")
            except Exception as e:
                self.warn("PyTorch history drain failed: %r" % (e,))

    def disable(self, msg):
        self.warn(msg)
        self.drain = None
        if self.stop is not None:
            self.stop.set()

    def on_history_cleared(self):
        """sharing.py cleared PyTorch's ring (the program asked, or the shared size changed) right
        after a drain: the next copy is a new sequence."""
        with self.lock:
            if self.drain is not None:
                self.drain.forget()

    def on_oom(self, device, alloc, device_allocated, device_free):
        self.drain_now()

    def final_drain(self):
        stop = self.stop
        if stop is not None:
            stop.set()
        self.drain_now()
        d = self.drain
        if d is not None and d.lost_drains:
            self.warn("PyTorch allocation history wrapped %d time(s) between drains; some tensor events "
                      "are missing (raise GPUMEMTRACE_TORCH_ENTRIES, lower GPUMEMTRACE_TORCH_POLL_MS)"
                      % d.lost_drains)

    def start_poller(self, torch, poll_ms):
        stop = threading.Event()
        self.stop = stop

        def run():
            while not stop.wait(poll_ms / 1000.0):
                try:
                    due = self.drain_due(self.counters(torch))
                except Exception:
                    due = False
                if due:
                    self.drain_now()

        t = threading.Thread(target=run, name="gpumemtrace-torch", daemon=True)
        t.start()

    def drain_due(self, counters):
        """Whether half a ring of entries may have piled up since the last drain (or an unknown number:
        the counters were reset, reset_accumulated_memory_stats). Half of the hook's own ring size even
        when the program asked for a larger one: drains stay as small, and events as timely."""
        if counters is None:
            return False  # unreadable now; the next poll tries again
        with self.lock:
            per_device = self.appended(counters)
            capacity = min(self.sharing.capacity() or self.entries, self.entries)
        if per_device is None:
            return True
        return any(n is None or n >= capacity // 2 for n, _ in per_device)

    def install_sigterm(self):
        import signal
        try:
            if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
                return  # the program's own handler decides; atexit still drains on a normal exit
            signal.signal(signal.SIGTERM, self.on_sigterm)
        except Exception:
            pass

    def on_sigterm(self, signum, frame):
        import signal
        try:
            self.final_drain()
            if self.bridge is not None:
                self.bridge.flush()
        finally:
            # Same end as without us: the default action (the process dies of SIGTERM).
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)


HOOK = TorchHook()


def on_torch_imported(torch):
    """Called by tools/python/sitecustomize.py once the program's `import torch` has run torch's
    __init__: turns the hook on when libgpumemtrace.so is in the process."""
    HOOK.install(torch)


def drain_now():
    """Forwards everything PyTorch recorded since the last drain (tools/python/gpumemtrace_pytest.py
    calls it at the end of each test). Safe from any thread holding the GIL."""
    HOOK.drain_now()
