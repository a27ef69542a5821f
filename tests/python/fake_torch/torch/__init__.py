# tests/python/fake_torch/torch/__init__.py — a stand-in `torch` with the surface the gpumemtrace hook uses.
"""A stand-in `torch` for tests (no PyTorch on the test machine). It offers exactly the surface the
gpumemtrace hook uses, shaped like PyTorch 2.4-2.11: torch.__version__, torch.version, lazy CUDA init
with torch.cuda._lazy_call, torch.cuda.is_available,
torch.cuda.memory._record_memory_history/_snapshot/_dump_snapshot (a bounded history ring whose
_snapshot() appends a "snapshot" entry after copying, entries with time_us in realtime µs and
Python frames innermost first), torch._C._cuda_attach_out_of_memory_observer, memory_stats counters,
max_memory_reserved/allocated, torch.cuda.synchronize, torch._C._cuda_clearCublasWorkspaces,
torch.autograd.backward (Tensor.backward calls it), the lazy import of torch._inductor through the
module's __getattr__ that PyTorch's frame symbolizer triggers (torch/_inductor). A tiny caching
allocator stands behind torch.empty(nbytes, device="cuda") and torch.ones(n, device="cuda").

Knobs (environment): FAKE_TORCH_VERSION (default 2.11.0+cu130), FAKE_TORCH_BACKEND (native),
FAKE_TORCH_NO_SKIP_ACTIONS (set: _record_memory_history refuses skip_actions, as older releases),
FAKE_TORCH_LIMIT (bytes the device can reserve, default 1 GiB), FAKE_TORCH_CUDART (path of a CUDA
runtime, e.g. the simulated one: segments then come from its cudaMalloc, bound through the global
scope so that libgpumemtrace.so sees them), FAKE_TORCH_CALL_LOG (a file that records synchronize and
clearCublasWorkspaces, _snapshot calls and the import of torch._inductor with their time,
torch/_calls.py).
"""
import os

__version__ = os.environ.get("FAKE_TORCH_VERSION", "2.11.0+cu130")

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
            cuda._allocator().free(b)

    def data_ptr(self):
        return self._block.addr

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
    cuda._lazy_init()
    return Tensor(cuda._allocator().malloc(int(nbytes)))


def ones(n, device="cuda"):
    """n float32 elements (their values are not kept)."""
    return empty(4 * int(n), device)
