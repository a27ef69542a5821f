# tests/python/fake_torch/torch/__init__.py — a stand-in `torch` with the surface the gpumemtrace hook uses.
"""A stand-in `torch` for tests (no PyTorch on the test machine). It offers exactly the surface the
gpumemtrace hook uses, shaped like the PyTorch release FAKE_TORCH_VERSION names (2.4, 2.8, 2.11,
2.15; _release.py lists what differs and where it was read): torch.__version__, torch.version, lazy
CUDA init (Python's, and the C++ one _record_memory_history runs alone), torch.cuda._lazy_call,
torch.cuda.memory._record_memory_history/_snapshot/_dump_snapshot over a ring kept as c10 keeps it
(cuda/_allocator.py) whose entries' time_us are converted again at every _snapshot() (cuda/_clock.py),
torch._C._cuda_memorySnapshot / _cuda_attach_out_of_memory_observer, memory_stats counters ({} before
CUDA init) and reset_accumulated_memory_stats, expandable segments (map/unmap), record_stream (a late
free_completed), torch.cuda.synchronize, torch._C._cuda_clearCublasWorkspaces,
torch.autograd.backward (Tensor.backward calls it), the allocator's settings (the variables,
_set_allocator_settings, set_per_process_memory_fraction and its cap, the snapshot's
"allocator_settings": cuda/_config.py, _release.py), the lazy import of torch._inductor through the
module's __getattr__ that PyTorch's frame symbolizer triggers (torch/_inductor). A caching allocator
stands behind torch.empty(nbytes, device="cuda") and torch.ones(n, device="cuda").

Knobs (environment): FAKE_TORCH_VERSION (default 2.11.0+cu130), FAKE_TORCH_BACKEND (native),
FAKE_TORCH_NO_SKIP_ACTIONS (set: the C++ side refuses skip_actions' value), FAKE_TORCH_LIMIT (bytes the
device can reserve, default 1 GiB), FAKE_TORCH_CUDART (path of a CUDA runtime, e.g. the simulated one:
segments then come from its cudaMalloc, and expandable segments from the simulated driver next to it,
bound through the global scope so that libgpumemtrace.so sees them), PYTORCH_CUDA_ALLOC_CONF /
PYTORCH_ALLOC_CONF (as the release reads them: cuda/_config.py; expandable_segments is what the
allocator acts on), FAKE_TORCH_CLOCK_JITTER_US / FAKE_TORCH_CLOCK_STEP_US (cuda/_clock.py),
FAKE_TORCH_CALL_LOG (a file that records synchronize and clearCublasWorkspaces, _snapshot calls,
_record_memory_history's context and skip list, and the import of torch._inductor with their time,
torch/_calls.py).
"""
from . import _release  # noqa: E402

__version__ = _release.VERSION

from . import version  # noqa: E402
from . import _C  # noqa: E402
from . import cuda  # noqa: E402
from . import autograd  # noqa: E402


class Tensor:
    def __init__(self, block):
        self._block = block

    def __del__(self):
        b, self._block = self._block, None
        if b is not None:
            cuda._allocator().free(b, cuda.memory._context(3))

    def data_ptr(self):
        return self._block.addr

    def __mul__(self, other):
        """A new tensor of the same size (the values are not kept)."""
        return empty(self._block.requested)

    def record_stream(self, stream):
        """The block is in use on `stream` too: its free completes only when that use has (a later
        free_completed; CUDACachingAllocator recordStream / insert_events)."""
        if stream.cuda_stream != self._block.stream:
            self._block.stream_uses.add(stream.cuda_stream)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        # As PyTorch's Tensor.backward: through the module attribute, so a wrapper installed later
        # is called.
        return autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


# As torch/__init__.py: these submodules are imported on first attribute access (torch._inductor
# takes seconds to import in real PyTorch).
_lazy_modules = {"_dynamo", "_inductor"}


def __getattr__(name):
    if name in _lazy_modules:
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'torch' has no attribute '%s'" % name)


def empty(nbytes, device="cuda"):
    cuda._lazy_init()  # device_lazy_init: Python's init, which runs the queued calls
    b = cuda._allocator().malloc(int(nbytes), cuda.current_stream().cuda_stream, cuda.memory._context(1),
                                 _C._oom_observers)
    if b is None:
        raise cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes" % int(nbytes))
    return Tensor(b)


def ones(n, device="cuda"):
    """n float32 elements (their values are not kept)."""
    return empty(4 * int(n), device)
