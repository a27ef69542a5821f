# tools/python/gpumemtrace_torch/__init__.py — PyTorch caching-allocator events for gpumemtrace.
"""PyTorch caching-allocator events for gpumemtrace. See docs/pytorch.md.

install() is called by tools/python/sitecustomize.py at interpreter start. It does nothing until the
program imports torch itself (an import hook: we never import torch), and nothing on the GPU until the
program initialises CUDA itself (torch.cuda._lazy_call: we never initialise CUDA — that would break
programs that fork DataLoader workers first). Then it turns on PyTorch's allocation history and
forwards it into the trace through libgpumemtrace.so:
  - from a daemon thread, whenever PyTorch's own counters say enough events have piled up (so the
    ring does not wrap between two drains), at most every GPUMEMTRACE_TORCH_POLL_MS;
  - from PyTorch's out-of-memory observer, before OutOfMemoryError is raised;
  - at exit (atexit) and on SIGTERM (then the default action runs as before: the process still dies
    of SIGTERM).
A drain is skipped when PyTorch's cumulative counters show no allocator event since the last one, and
a drain's _snapshot() never makes PyTorch import torch._inductor (history.take_snapshot; the import
costs seconds, and the exit drain of every short process would pay it, docs/pytorch.md).
It also brackets every torch.autograd.backward() call with a scope (backward_scope.py), so that
blocks the autograd threads allocate, which PyTorch records without frames, can be attributed to the
backward() call that ran them.
Each drain ends with a `sync` event (and one is written when recording starts): the events reach the
trace late, marked "delayed", and readers merge them into the timeline by time up to each sync.
Supported: PyTorch 2.4 to 2.11 with the native caching allocator; anything else gets one warning and
the trace keeps the driver-level events only. Nothing here may raise into the program.
"""
import os
import sys
import threading
import time

from . import backward_scope
from . import bridge as _bridge_mod
from .history import HistoryDrain, allocator_counters, take_snapshot

MIN_VERSION = (2, 4)
MAX_VERSION = (2, 11)


def _env_int(name, default, lo, hi):
    try:
        v = int(os.environ.get(name, default))
        return v if lo <= v <= hi else default
    except ValueError:
        return default


def parse_version(text):
    """'2.11.0a0+git1234' -> (2, 11); None when unreadable."""
    try:
        parts = str(text).split("+")[0].split(".")
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or "x")
    except (ValueError, IndexError):
        return None


class TorchHook:
    """The hook's state: one per process (HOOK below), from install() to exit.

    Thread-safety: drains run on the poller thread, the OOM observer's thread (the allocating one), the
    atexit/SIGTERM thread and pytest's (drain_now); `lock` serializes them and guards every attribute.
    It is an RLock because the SIGTERM handler may run the final drain on the main thread while that
    thread is inside a drain (the process then dies of SIGTERM without returning to it)."""

    def __init__(self):
        self.lock = threading.RLock()
        self.bridge = None          # bridge.Bridge once libgpumemtrace.so was found
        self.drain = None           # HistoryDrain once the history is on
        self.warned = set()
        self.stop = None            # threading.Event that ends the poller
        # History entries per allocated block: alloc, free_requested and, unless skipped, free_completed.
        self.entries_per_block = 3
        # PyTorch's cumulative counters (history.allocator_counters) when the last drain began: equal
        # counters at the next one mean no entry the trace records was appended since.
        self.drained_counters = None

    def warn(self, msg):
        if msg in self.warned:
            return
        self.warned.add(msg)
        try:
            sys.stderr.write("gpumemtrace: %s\n" % msg)
            sys.stderr.flush()
        except Exception:
            pass

    def install(self):
        if os.environ.get("GPUMEMTRACE_TORCH", "auto").lower() in ("0", "off", "no", "false"):
            return
        b = _bridge_mod.load()
        if b is None:
            return  # not under libgpumemtrace.so
        self.bridge = b
        if "torch" in sys.modules:
            self.on_torch_imported(sys.modules["torch"])
        else:
            sys.meta_path.insert(0, _TorchImportHook(self.on_torch_imported))

    def on_torch_imported(self, torch):
        try:
            version = parse_version(getattr(torch, "__version__", ""))
            if version is None or not (MIN_VERSION <= version <= MAX_VERSION):
                self.warn("PyTorch %s is not supported for tensor-level events (2.4 to 2.11); "
                          "the trace has driver-level events only" % getattr(torch, "__version__", "?"))
                return
            if getattr(torch.version, "hip", None):
                self.warn("ROCm PyTorch: tensor-level events not supported; driver-level events only")
                return
            cuda = torch.cuda
            if threading.current_thread() is threading.main_thread():
                self.install_sigterm()
            cuda._lazy_call(self.enable_guarded)
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
            if self.drain is not None:
                return
            backend = "native"
            try:
                backend = torch.cuda.get_allocator_backend()
            except Exception:
                pass
            if backend != "native":
                self.warn("PyTorch allocator backend %r: tensor-level events need the native caching "
                          "allocator; the trace has driver-level events only" % backend)
                return
            entries = _env_int("GPUMEMTRACE_TORCH_ENTRIES", 65536, 1024, 1 << 26)
            # The trace keeps no stack for a release unless GPUMEMTRACE_FREE_STACKS=1: then PyTorch
            # need not gather one at every free either (context="alloc"; it gives a free entry the
            # allocation's stack instead, which is not where the free happened and is not forwarded).
            context = "all" if self.bridge.free_stacks else "alloc"
            drain = HistoryDrain(self.bridge)
            # The history can only start at CUDA's initialisation, which runs this first: nothing
            # before these counters can be in the ring, so a drain that finds them unchanged has
            # nothing to forward.
            counters = self.counters(torch)
            # Every history entry is newer than this: the first sync (readers start merging the
            # delayed events into the timeline by time from here).
            start_us = time.time_ns() // 1000
            record = torch.cuda.memory._record_memory_history
            try:
                # free_completed entries are never forwarded (the trace frees a block when PyTorch's
                # allocated bytes drop, at free_requested): without them the ring holds two entries
                # per block instead of three, so each drain's copy comes a third less often.
                record(enabled="all", context=context, stacks="python", max_entries=entries,
                       skip_actions=["free_completed"])
                self.entries_per_block = 2
            except (TypeError, ValueError, RuntimeError):
                # A PyTorch without skip_actions (TypeError), or one that refuses the action's name:
                # the history as before, free_completed entries included.
                record(enabled="all", context=context, stacks="python", max_entries=entries)
            drain.sync_at(drain.boundary_ns([], start_us))
            try:
                drain.seed_segments(take_snapshot(torch))
            except Exception:
                pass
            self.drain = drain
            self.drained_counters = counters
            try:
                torch._C._cuda_attach_out_of_memory_observer(self.on_oom)
            except Exception:
                pass
            import atexit
            atexit.register(self.final_drain)
            self.start_poller(torch, entries)
            try:
                backward_scope.install(torch)
            except Exception as e:
                self.warn("backward() intervals not recorded: %r" % (e,))

    @staticmethod
    def counters(torch):
        try:
            return allocator_counters(torch)
        except Exception:
            return None  # unknown: never equal, so the drain runs

    def drain_now(self):
        """Forwards everything PyTorch recorded since the last drain; nothing (not even a _snapshot()
        call) when its counters did not move. Safe from any thread holding the GIL."""
        with self.lock:
            d = self.drain
            if d is None:
                return
            try:
                import torch
                # Read before the snapshot: an entry appended after this read moves the counters
                # again, so the next drain runs and finds it.
                counters = self.counters(torch)
                if counters is not None and counters == self.drained_counters:
                    return
                called_us = time.time_ns() // 1000
                d.drain(take_snapshot(torch), called_us)
                self.drained_counters = counters
                if self.bridge.layout_mismatch:
                    self.warn("libgpumemtrace.so and tools/python are from different builds: "
                              "tensor-level events not recorded")
            except Exception as e:
                self.warn("PyTorch history drain failed: %r" % (e,))

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

    def start_poller(self, torch, entries):
        poll_ms = _env_int("GPUMEMTRACE_TORCH_POLL_MS", 200, 10, 60000)
        stop = threading.Event()
        self.stop = stop

        def run():
            last = _event_count(self.counters(torch), self.entries_per_block)
            while not stop.wait(poll_ms / 1000.0):
                now = _event_count(self.counters(torch), self.entries_per_block)
                if now is None:
                    return
                if now - last >= entries // 2:
                    self.drain_now()
                    last = now

        t = threading.Thread(target=run, name="gpumemtrace-torch", daemon=True)
        t.start()

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


def _event_count(counters, per_block):
    """Estimate of the history entries appended so far from allocator_counters(), or None: `per_block`
    entries per allocated block (alloc, free_requested, and free_completed unless skipped), one per
    segment (or mapping) event, the OOMs."""
    if counters is None:
        return None
    return sum(per_block * dev["allocations"] + dev["segments"] + dev["segment_frees"] + dev["ooms"]
               for dev in counters)


class _TorchImportHook:
    """Meta path finder that only watches: when `torch` is about to be executed it wraps the real
    loader's exec_module so that `on_import(torch)` runs right after torch/__init__.py finished."""

    def __init__(self, on_import):
        self._busy = False
        self._on_import = on_import

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" or self._busy:
            return None
        self._busy = True
        try:
            import importlib.util
            spec = importlib.util.find_spec(fullname)
        except Exception:
            spec = None
        finally:
            self._busy = False
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        orig = loader.exec_module
        on_import = self._on_import

        def exec_module(module, _orig=orig):
            _orig(module)
            try:
                del loader.exec_module  # back to the class's method
            except AttributeError:
                pass
            on_import(module)

        try:
            loader.exec_module = exec_module
        except Exception:
            pass
        return spec


HOOK = TorchHook()


def install():
    """Called by tools/python/sitecustomize.py at interpreter start."""
    HOOK.install()


def drain_now():
    """Forwards everything PyTorch recorded since the last drain (tools/python/gpumemtrace_pytest.py
    calls it at the end of each test). Safe from any thread holding the GIL."""
    HOOK.drain_now()
