# tools/python/gpumemtrace_torch/sharing.py — PyTorch's allocation history shared between the program and the hook.
"""PyTorch's allocation history shared between the program and the hook (docs/pytorch.md, "When the
program records the history too").

PyTorch has ONE history per process: every _record_memory_history() call replaces the previous
settings (context, stacks, max_entries, and skip_actions, reset to the call's; recordHistory in
c10/cuda/CUDACachingAllocator.cpp), and enabled=None clears the ring. So that a program that records
its own history (or dumps it with _dump_snapshot()) keeps working beside the hook, the hook replaces
torch.cuda.memory._record_memory_history with a wrapper, when torch is imported (before the program
can call it), that runs PyTorch's with the settings both need:

  enabled      "all" (or "state", which keeps no history, becomes "all")
  context      the more detailed of the two (None < "state" < "alloc" < "all")
  stacks       "all" if the program asks for it, else "python"
  max_entries  the larger of the two; when that changes what is in force, the hook drains first and
               the ring is cleared (PyTorch's ring keeps its order only while its size stays put)
  skip_actions what the program skips, but never an action the trace needs (alloc, free_requested,
               segment_*, oom, snapshot); free_completed is skipped for the hook alone only while the
               program has not asked for the history itself (the program's dumps keep what it asked for)
  record_cuda  True; every other argument: the program's
enabled=None from the program: the hook drains, PyTorch clears the ring as asked, and the history
starts again with the hook's settings. A call whose values PyTorch rejects (a bad context, stacks or
enabled) is passed on unchanged, so the program gets PyTorch's own error. The legacy form
(enabled=True/False) is passed on, then the settings above are applied again. Each difference
between what the program asked and what is in force is said once, in one line.

It also counts _snapshot() calls, ours and the program's (torch._C._cuda_memorySnapshot, which
_snapshot, _dump_snapshot and memory_snapshot all call): each appends a "snapshot" entry to the ring,
which anchor.py uses as a mark and which no memory counter counts.

Thread-safety: the wrapper runs on the program's threads; it takes the hook's lock around the drain
and PyTorch's call, so a drain never sees the settings change under it.
"""
import functools
import inspect
import sys

_CONTEXT_RANK = {None: 0, "state": 1, "alloc": 2, "all": 3}
NEEDED = frozenset(("alloc", "free_requested", "segment_alloc", "segment_free", "oom", "snapshot"))
DEFAULTS = {"enabled": "all", "context": "all", "stacks": "all", "max_entries": sys.maxsize}


class HistorySharing:
    def __init__(self, torch, features, hook):
        self.memory = torch.cuda.memory
        self.torch_c = getattr(torch, "_C", None)
        self.features = features
        self.hook = hook                     # TorchHook: lock, warn, drain_now, on_history_cleared
        self.original = self.memory._record_memory_history
        self.program = None                  # the program's last settings (dict of its arguments)
        self.ours = None                     # the hook's, once it records
        self.in_force = None                 # what PyTorch was last called with
        self.snapshot_calls = 0              # _snapshot() calls seen (None when they cannot be seen)
        self.install()

    # -- the wrappers --
    def install(self):
        original = self.original
        sharing = self

        @functools.wraps(original)
        def _record_memory_history(*args, **kwargs):
            return sharing.program_call(args, kwargs)

        _record_memory_history.__gpumemtrace_wrapper__ = True
        self.memory._record_memory_history = _record_memory_history
        snap = getattr(self.torch_c, "_cuda_memorySnapshot", None)
        if callable(snap):
            @functools.wraps(snap)
            def _cuda_memorySnapshot(*args, **kwargs):
                sharing.snapshot_calls += 1
                return snap(*args, **kwargs)
            try:
                setattr(self.torch_c, "_cuda_memorySnapshot", _cuda_memorySnapshot)
            except (AttributeError, TypeError):
                self.snapshot_calls = None
        else:
            self.snapshot_calls = None

    def program_call(self, args, kwargs):
        asked = self.bind(args, kwargs)
        if asked is None and self.ours is not None:
            # The legacy form (enabled=True/False): PyTorch's own call, then the shared settings again,
            # on a cleared ring (the legacy call may have resized or cleared it).
            enabled = args[0] if args else kwargs.get("enabled", True)
            with self.hook.lock:
                self.hook.drain_now()
                result = self.original(*args, **kwargs)
                self.program = {"enabled": "all"} if enabled else None
                self.apply(clear=True)
            return result
        if asked is None or not self.valid(asked):
            return self.original(*args, **kwargs)   # PyTorch's own behaviour, and its own error
        if self.ours is None:
            # The hook does not record (yet): the program's call as it is; merged when the hook starts.
            self.program = asked if asked.get("enabled") is not None else None
            return self.original(*args, **kwargs)
        with self.hook.lock:
            self.hook.drain_now()
            if asked.get("enabled") is None:
                self.program = None
                self.original(**self.call_args(asked))      # clears the ring, as the program asked
                self.apply(clear=False)
                self.hook.on_history_cleared()
                self.hook.warn("the program turned PyTorch's allocation history off: it was cleared as asked "
                               "and keeps recording for gpumemtrace (docs/pytorch.md)")
                return None
            self.program = asked
            self.apply(clear=bool(asked.get("clear_history")))
        return None

    def bind(self, args, kwargs):
        """The program's arguments by name, defaults filled in; None for the legacy bool form or
        arguments that do not bind (then PyTorch's own call decides)."""
        try:
            bound = inspect.signature(self.original).bind(*args, **kwargs)
        except (TypeError, ValueError):
            return None
        asked = dict(DEFAULTS)
        asked.update(bound.arguments)
        extra = asked.pop("kwargs", None)
        if isinstance(extra, dict):
            asked.update(extra)
        asked.pop("args", None)
        if isinstance(asked.get("enabled"), bool):
            return None
        return asked

    @staticmethod
    def valid(asked):
        return (asked.get("enabled") in (None, "state", "all") and asked.get("context") in _CONTEXT_RANK
                and asked.get("stacks") in ("python", "all"))

    # -- the settings in force --
    def start(self, ours):
        """The hook starts recording with `ours` (enabled, context, stacks, max_entries and, when the
        release takes it, skip_actions): merged with what the program asked, if anything."""
        self.ours = dict(ours)
        self.apply(clear=False)

    def merged(self):
        ours, prog = self.ours, self.program
        if prog is None:
            return dict(ours)
        out = {k: v for k, v in prog.items() if k not in ("enabled", "context", "stacks", "max_entries",
                                                          "skip_actions", "clear_history")}
        out["enabled"] = "all"
        out["context"] = max(ours["context"], prog.get("context"), key=lambda c: _CONTEXT_RANK.get(c, 0))
        out["stacks"] = "all" if prog.get("stacks") == "all" else ours["stacks"]
        out["max_entries"] = max(int(ours["max_entries"]), int(prog.get("max_entries") or 1))
        skip = [a for a in (prog.get("skip_actions") or ()) if a not in NEEDED]
        if skip or "skip_actions" in ours:
            out["skip_actions"] = skip
        if "record_cuda" in out:
            out["record_cuda"] = True
        return out

    def call_args(self, settings):
        """`settings` as arguments the release takes (an argument it does not take is left out: its
        default is what an older release does)."""
        return {k: v for k, v in settings.items() if self.features.takes(k) and not (k == "skip_actions" and not v)}

    def apply(self, clear):
        want = self.merged()
        before = self.in_force
        resized = before is not None and before.get("max_entries") != want.get("max_entries")
        if (clear or resized) and self.features.takes("clear_history"):
            want_call = dict(want, clear_history=True)
        else:
            want_call = want
        if (clear or resized) and not self.features.takes("clear_history"):
            self.original(enabled=None)              # clears: the only way on releases without clear_history
        try:
            self.original(**self.call_args(want_call))
        except (TypeError, ValueError, RuntimeError):
            # A release that refuses skip_actions' value: the same without it.
            if not want_call.get("skip_actions"):
                raise
            want_call = {k: v for k, v in want_call.items() if k != "skip_actions"}
            want = {k: v for k, v in want.items() if k != "skip_actions"}
            self.original(**self.call_args(want_call))
        self.in_force = want
        if clear or resized:
            self.hook.on_history_cleared()
        self.tell()

    def tell(self):
        prog = self.program
        if prog is None:
            return
        force = self.in_force
        diffs = []
        for k in ("context", "stacks", "max_entries", "record_cuda"):
            if k in prog and prog.get(k) != force.get(k) and k in force:
                diffs.append("%s=%r (asked %r)" % (k, force.get(k), prog.get(k)))
        asked_skip = sorted(prog.get("skip_actions") or ())
        kept = sorted(force.get("skip_actions") or ())
        if asked_skip != kept:
            diffs.append("skip_actions=%r (asked %r)" % (kept, asked_skip))
        if diffs:
            self.hook.warn("the program's PyTorch allocation history runs with %s: gpumemtrace records it too "
                           "(docs/pytorch.md)" % ", ".join(diffs))

    # -- what the drain needs to know --
    def skips(self, action):
        return action in ((self.in_force or {}).get("skip_actions") or ())

    def stacks(self):
        return (self.in_force or {}).get("stacks")

    def capacity(self):
        return int((self.in_force or {}).get("max_entries") or 0) or None
