# tools/python/gpumemtrace_torch/probes.py — what the installed PyTorch offers, checked feature by feature instead of by version.
"""What the installed PyTorch offers the hook, checked by looking (docs/pytorch.md, "Releases and
probes"). A release newer than any we know works unless one of these fails; a failure is one line
that names the probe, and the trace keeps the driver-level events.

  floor      torch.__version__ at least 2.4 (older releases are not tested; a version that cannot be
             read passes: the probes below decide)
  cuda       a CUDA build (torch.version.hip unset)
  api        torch.cuda._lazy_call, torch.cuda.memory_stats, torch.cuda.device_count,
             torch.cuda.memory._record_memory_history and _snapshot exist
  signature  _record_memory_history takes enabled, context, stacks and max_entries by name
             (inspect.signature; PyTorch sets __signature__ from _record_memory_history_impl);
             which of clear_history / skip_actions / record_cuda it takes is noted, not required
  backend    torch.cuda.get_allocator_backend() is "native" (checked when CUDA starts)
  entries    a copy's entries are dicts with a str "action", an int "size" and an int "time_us", and
             an int "addr" (or "device_free" for "oom") (checked on the first entries of each drain)
"""
import inspect

MIN_VERSION = (2, 4)
REQUIRED = ("enabled", "context", "stacks", "max_entries")
OPTIONAL = ("clear_history", "skip_actions", "record_cuda", "compile_context", "global_record_annotations",
            "record_pinned_host_memory", "device")


class ProbeFailed(Exception):
    """str(): the one line the user sees."""


def parse_version(text):
    """'2.11.0a0+git1234' -> (2, 11); None when unreadable."""
    try:
        parts = str(text).split("+")[0].split(".")
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or "x")
    except (ValueError, IndexError):
        return None


class Features:
    """What the release's _record_memory_history takes (parameter names), from the signature probe."""

    def __init__(self, params, open_ended):
        self.params = params          # the named parameters
        self.open_ended = open_ended  # it also takes **kwargs: optional names cannot be known up front

    def takes(self, name):
        return name in self.params or self.open_ended


def check(torch):
    """Features, or raises ProbeFailed. Never imports or initialises anything."""
    text = getattr(torch, "__version__", "?")
    version = parse_version(text)
    if version is not None and version < MIN_VERSION:
        raise ProbeFailed("PyTorch %s is older than 2.4 (probe: floor); the trace has driver-level events only"
                          % text)
    if getattr(getattr(torch, "version", None), "hip", None):
        raise ProbeFailed("PyTorch %s is a ROCm build (probe: cuda); the trace has driver-level events only" % text)
    cuda = getattr(torch, "cuda", None)
    memory = getattr(cuda, "memory", None)
    for owner, name, where in ((cuda, "_lazy_call", "torch.cuda"), (cuda, "memory_stats", "torch.cuda"),
                               (cuda, "device_count", "torch.cuda"),
                               (memory, "_record_memory_history", "torch.cuda.memory"),
                               (memory, "_snapshot", "torch.cuda.memory")):
        if not callable(getattr(owner, name, None)):
            raise ProbeFailed("PyTorch %s has no %s.%s (probe: api); the trace has driver-level events only"
                              % (text, where, name))
    try:
        sig = inspect.signature(memory._record_memory_history)
    except (TypeError, ValueError):
        raise ProbeFailed("PyTorch %s: the signature of torch.cuda.memory._record_memory_history cannot be "
                          "read (probe: signature); the trace has driver-level events only" % text)
    params = {n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    open_ended = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    missing = [n for n in REQUIRED if n not in params]
    if missing and not open_ended:
        raise ProbeFailed("PyTorch %s: torch.cuda.memory._record_memory_history takes no %s (probe: signature); "
                          "the trace has driver-level events only" % (text, ", ".join(repr(m) for m in missing)))
    return Features(params, open_ended)


def check_entries(snapshot):
    """None, or the one line saying how a _snapshot()'s shape differs from what the drain reads. Looks
    at the first and the last entry of each device's copy (the drain reads every entry's fields with
    defaults; this catches a release that renamed them)."""
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("device_traces"), list):
        return "a _snapshot() has no list 'device_traces' (probe: entries)"
    for trace in snapshot["device_traces"]:
        if not isinstance(trace, list):
            return "a _snapshot()'s device trace is not a list (probe: entries)"
        for e in (trace[:1] + trace[-1:]):
            if not isinstance(e, dict):
                return "a history entry is not a dict (probe: entries)"
            if not isinstance(e.get("action"), str):
                return "a history entry has no str 'action' (probe: entries)"
            for field in ("size", "time_us"):
                if not isinstance(e.get(field), int):
                    return "a history entry has no int %r (probe: entries)" % field
            where = "device_free" if e.get("action") == "oom" and "addr" not in e else "addr"
            if not isinstance(e.get(where), int):
                return "a %r history entry has no int %r (probe: entries)" % (e.get("action"), where)
    return None
