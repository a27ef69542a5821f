"""PyTorch caching-allocator events for gpumemtrace (issue 5, part 2). See docs/pytorch.md.

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
from .history import HistoryDrain

MIN_VERSION = (2, 4)
MAX_VERSION = (2, 11)

_lock = threading.RLock()
_state = {"bridge": None, "drain": None, "enabled": False, "warned": set(), "stop": None}


def _warn(msg):
    if msg in _state["warned"]:
        return
    _state["warned"].add(msg)
    try:
        sys.stderr.write("gpumemtrace: %s\n" % msg)
        sys.stderr.flush()
    except Exception:
        pass


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


def install():
    if os.environ.get("GPUMEMTRACE_TORCH", "auto").lower() in ("0", "off", "no", "false"):
        return
    b = _bridge_mod.load()
    if b is None:
        return  # not under libgpumemtrace.so
    _state["bridge"] = b
    if "torch" in sys.modules:
        _on_torch_imported(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportHook())


class _TorchImportHook:
    """Meta path finder that only watches: when `torch` is about to be executed it wraps the real
    loader's exec_module so that _on_torch_imported runs right after torch/__init__.py finished."""

    def __init__(self):
        self._busy = False

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

        def exec_module(module, _orig=orig):
            _orig(module)
            try:
                del loader.exec_module  # back to the class's method
            except AttributeError:
                pass
            _on_torch_imported(module)

        try:
            loader.exec_module = exec_module
        except Exception:
            pass
        return spec


def _on_torch_imported(torch):
    try:
        version = parse_version(getattr(torch, "__version__", ""))
        if version is None or not (MIN_VERSION <= version <= MAX_VERSION):
            _warn("PyTorch %s is not supported for tensor-level events (2.4 to 2.11); "
                  "the trace has driver-level events only" % getattr(torch, "__version__", "?"))
            return
        if getattr(torch.version, "hip", None):
            _warn("ROCm PyTorch: tensor-level events not supported; driver-level events only")
            return
        cuda = torch.cuda
        if threading.current_thread() is threading.main_thread():
            _install_sigterm()
        cuda._lazy_call(_enable_guarded)
    except Exception as e:
        _warn("PyTorch hook disabled: %r" % (e,))


def _enable_guarded():
    # Runs inside torch.cuda._lazy_init(): an exception here would surface in the program as a
    # DeferredCudaCallError. Swallow everything.
    try:
        _enable()
    except Exception as e:
        _warn("PyTorch tensor-level events disabled: %r" % (e,))


def _enable():
    import torch
    with _lock:
        if _state["enabled"]:
            return
        backend = "native"
        try:
            backend = torch.cuda.get_allocator_backend()
        except Exception:
            pass
        if backend != "native":
            _warn("PyTorch allocator backend %r: tensor-level events need the native caching allocator; "
                  "the trace has driver-level events only" % backend)
            return
        entries = _env_int("GPUMEMTRACE_TORCH_ENTRIES", 65536, 1024, 1 << 26)
        mem = torch.cuda.memory
        drain = HistoryDrain(_state["bridge"])
        # Every history entry is newer than this: the first sync (readers start merging the delayed
        # events into the timeline by time from here).
        start_us = time.time_ns() // 1000
        mem._record_memory_history(enabled="all", context="all", stacks="python", max_entries=entries)
        drain.sync_at(drain.boundary_ns([], start_us))
        drain.entries = entries
        try:
            drain.seed_segments(mem._snapshot())
            drain.drain({"device_traces": []})
        except Exception:
            pass
        _state["drain"] = drain
        _state["enabled"] = True
        try:
            torch._C._cuda_attach_out_of_memory_observer(_on_oom)
        except Exception:
            pass
        import atexit
        atexit.register(_final_drain)
        _start_poller(torch, entries)
        try:
            backward_scope.install(torch)
        except Exception as e:
            _warn("backward() intervals not recorded: %r" % (e,))


def drain_now():
    """Forward everything PyTorch recorded since the last drain. Safe from any thread holding the GIL."""
    with _lock:
        d = _state["drain"]
        if d is None:
            return
        try:
            import torch
            called_us = time.time_ns() // 1000
            d.drain(torch.cuda.memory._snapshot(), called_us)
        except Exception as e:
            _warn("PyTorch history drain failed: %r" % (e,))


def _on_oom(device, alloc, device_allocated, device_free):
    drain_now()


def _final_drain():
    stop = _state.get("stop")
    if stop is not None:
        stop.set()
    drain_now()
    d = _state["drain"]
    if d is not None and d.lost_drains:
        _warn("PyTorch allocation history wrapped %d time(s) between drains; some tensor events are "
              "missing (raise GPUMEMTRACE_TORCH_ENTRIES, lower GPUMEMTRACE_TORCH_POLL_MS)" % d.lost_drains)


def _event_count(torch):
    """Cheap estimate of history entries appended so far (PyTorch's cumulative counters)."""
    total = 0
    for dev in range(torch.cuda.device_count()):
        s = torch.cuda.memory_stats(dev)
        # alloc + free_requested + free_completed per block; segment alloc/free (map/unmap alike)
        total += 3 * s.get("allocation.all.allocated", 0) + 2 * s.get("segment.all.allocated", 0) \
            + s.get("num_ooms", 0)
    return total


def _start_poller(torch, entries):
    poll_ms = _env_int("GPUMEMTRACE_TORCH_POLL_MS", 200, 10, 60000)
    stop = threading.Event()
    _state["stop"] = stop

    def run():
        last = _event_count(torch)
        while not stop.wait(poll_ms / 1000.0):
            try:
                now = _event_count(torch)
            except Exception:
                return
            if now - last >= entries // 2:
                drain_now()
                last = now

    t = threading.Thread(target=run, name="gpumemtrace-torch", daemon=True)
    t.start()


def _install_sigterm():
    import signal
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # the program's own handler decides; atexit still drains on a normal exit
        signal.signal(signal.SIGTERM, _on_sigterm)
    except Exception:
        pass


def _on_sigterm(signum, frame):
    import signal
    try:
        _final_drain()
        if _state["bridge"] is not None:
            _state["bridge"].flush()
    finally:
        # Same end as without us: the default action (the process dies of SIGTERM).
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
