# tools/python/gpumemtrace_torch/settings.py — PyTorch's caching-allocator settings, into the trace.
"""PyTorch's caching-allocator settings, into the trace as "allocator_settings" records
(docs/trace-format.md; docs/pytorch.md, "Allocator settings"), so that the report replays a run under
the settings it really had and names the cap an OOM ran into.

What the releases do (pytorch/pytorch, read at the commits docs/pytorch.md cites):
- At start the allocator parses one variable: PYTORCH_CUDA_ALLOC_CONF in 2.4-2.8
  (c10/cuda/CUDAAllocatorConfig.h, CUDAAllocatorConfig::instance(); PYTORCH_HIP_ALLOC_CONF on ROCm
  builds only); in newer ones PYTORCH_ALLOC_CONF first, then PYTORCH_CUDA_ALLOC_CONF (deprecated, with
  a warning), then PYTORCH_HIP_ALLOC_CONF: the first that is set (c10/core/AllocatorConfig.cpp,
  AcceleratorAllocatorConfig::instance()); some releases read the CUDA-only options the other way
  round. Which one won is therefore not repeated here: PyTorch's own account of what it parsed and
  uses is read instead, _snapshot()["allocator_settings"] (the text it last parsed, under the key
  "PYTORCH_CUDA_ALLOC_CONF", and the values of expandable_segments, max_split_size,
  garbage_collection_threshold and roundup_power2_divisions its allocator reads). That becomes one
  "in_force" record when the history starts: the text, with the options the snapshot reports
  replaced by the reported values.
- Later, torch.cuda.memory._set_allocator_settings(text) parses a text the same way (three options back
  to their defaults first). 2.4-2.8: a function calling torch._C._cuda_cudaCachingAllocator_set_allocator_settings;
  newer: torch._C._accelerator_setAllocatorSettings, first bound to the name directly, then behind a
  deprecated function (torch/cuda/memory.py at 00b65a04a2d3).
- torch.cuda.set_per_process_memory_fraction(fraction, device) is torch.cuda.memory's (torch.cuda
  re-exports it: the same function). It initialises CUDA, checks its arguments and calls
  torch._C._cuda_setMemoryFraction(fraction, device index): a cap for that device only.

The hook wraps those torch._C functions, which PyTorch's Python functions look up at each call, so
every way to them passes the wrapper (either name of set_per_process_memory_fraction, a reference the
program took first, a call to torch._C itself); and torch.cuda.memory._set_allocator_settings itself
where it is one of them (the alias), never both ways (one record per call). A call that returns is
recorded right after it, live: the settings apply to the requests after it, and the report places the
record among PyTorch's delayed events by time. A call that raises is not recorded.
Only the allocator's own options reach the trace: the library drops anything else
(trace/alloc_conf.h). Nothing here may raise into the program.
Thread-safety: the wrappers run on the program's threads; the bridge call is thread-safe.
"""
import functools

SOURCE_IN_FORCE = "in_force"
SOURCE_SET = "_set_allocator_settings"
SOURCE_FRACTION = "set_per_process_memory_fraction"
# torch._C's settings parsers, oldest first: the releases have one or the other.
_SET_FUNCTIONS = ("_cuda_cudaCachingAllocator_set_allocator_settings", "_accelerator_setAllocatorSettings")
_FRACTION_FUNCTION = "_cuda_setMemoryFraction"
_MiB = 1 << 20


def items(text):
    """`text`'s `key:value` items in order, split as PyTorch's tokenizer splits them (spaces dropped,
    commas inside [...] kept): [(key, "key:value"), ...]."""
    out, depth, item = [], 0, []
    for c in str(text or ""):
        if c.isspace():
            continue
        depth += (c == "[") - (c == "]")
        if c == "," and depth <= 0:
            if item:
                out.append("".join(item))
            item = []
            continue
        item.append(c)
    if item:
        out.append("".join(item))
    return [(i.split(":", 1)[0], i) for i in out]


def in_force_text(reported):
    """The settings text the allocator ran with, from _snapshot()["allocator_settings"] (a dict, as
    torch/csrc/cuda/Module.cpp builds it); None when the snapshot has no such dict. The options the
    dict reports take its values (an option left at its default is left out)."""
    if not isinstance(reported, dict):
        return None
    values = []
    if "expandable_segments" in reported:
        values.append(("expandable_segments", "expandable_segments:True" if reported["expandable_segments"] else None))
    mss = reported.get("max_split_size")
    if isinstance(mss, int) and not isinstance(mss, bool):
        # size_t max, reported as an int64: -1 (unlimited).
        values.append(("max_split_size_mb", "max_split_size_mb:%d" % (mss // _MiB) if 0 < mss < (1 << 62) else None))
    gc = reported.get("garbage_collection_threshold")
    if isinstance(gc, (int, float)) and not isinstance(gc, bool):
        values.append(("garbage_collection_threshold", "garbage_collection_threshold:%r" % float(gc) if gc > 0 else None))
    rd = reported.get("roundup_power2_divisions")
    if isinstance(rd, dict):
        try:
            pairs = sorted((int(k), int(v)) for k, v in rd.items())
        except (TypeError, ValueError):
            pairs = []
        if any(v for _, v in pairs):
            values.append(("roundup_power2_divisions",
                           "roundup_power2_divisions:[%s]" % ",".join("%d:%d" % kv for kv in pairs)))
        elif pairs:
            values.append(("roundup_power2_divisions", None))
    replaced = {k for k, _ in values}
    kept = [item for key, item in items(reported.get("PYTORCH_CUDA_ALLOC_CONF") or "") if key not in replaced]
    return ",".join(kept + [item for _, item in values if item])


class AllocatorSettingsWatch:
    """Installed when torch is imported (after the probes pass): wraps the settings functions and
    records their calls; started() records the settings in force when the history starts."""

    def __init__(self, torch, bridge, warn):
        self.bridge = bridge
        self.warn = warn
        self.installed = []          # names wrapped, for the tests
        if not bridge.records_settings:
            return
        torch_c = getattr(torch, "_C", None)
        memory = getattr(getattr(torch, "cuda", None), "memory", None)
        for name in _SET_FUNCTIONS:
            self._wrap(torch_c, memory, name, self._on_set)
        self._wrap(torch_c, None, _FRACTION_FUNCTION, self._on_fraction)

    def _wrap(self, torch_c, memory, name, note):
        original = getattr(torch_c, name, None)
        if not callable(original) or getattr(original, "__gpumemtrace_wrapper__", False):
            return

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            result = original(*args, **kwargs)
            try:
                note(args, kwargs)
            except Exception:
                pass
            return result

        wrapper.__gpumemtrace_wrapper__ = True
        try:
            setattr(torch_c, name, wrapper)
        except (AttributeError, TypeError):
            return
        self.installed.append(name)
        # The alias shape: torch.cuda.memory._set_allocator_settings is the very function.
        if memory is not None and getattr(memory, "_set_allocator_settings", None) is original:
            try:
                memory._set_allocator_settings = wrapper
                self.installed.append("memory._set_allocator_settings")
            except (AttributeError, TypeError):
                pass

    def _on_set(self, args, kwargs):
        text = args[0] if args else next(iter(kwargs.values()), None)
        if isinstance(text, str):
            self._record(SOURCE_SET, conf=text)

    def _on_fraction(self, args, kwargs):
        fraction = args[0] if args else kwargs.get("fraction")
        device = args[1] if len(args) > 1 else kwargs.get("device")
        if isinstance(fraction, (int, float)) and isinstance(device, int):
            self._record(SOURCE_FRACTION, device=device, fraction=float(fraction))

    def started(self, snapshot):
        """The history starts: records what the allocator runs with, from the hook's first _snapshot()."""
        if not self.bridge.records_settings:
            return
        text = in_force_text((snapshot or {}).get("allocator_settings"))
        if text is None:
            self.warn("PyTorch's snapshot has no allocator_settings: the trace does not record the allocator's "
                      "settings (the report infers them)")
            return
        self._record(SOURCE_IN_FORCE, conf=text)

    def _record(self, source, conf=None, device=-1, fraction=-1.0):
        if self.bridge.settings(source, conf, device, fraction) == -1:
            self.warn("the allocator settings record was refused (%s): libgpumemtrace.so and tools/python are "
                      "from different builds?" % source)
