# tests/transparency/cuda_at_start/usercustomize.py — makes every Python process of the suites a CUDA program.
"""Imported at start-up by every Python process of `make test-transparency` that reads PYTHONPATH
(Python imports `usercustomize` from sys.path after `sitecustomize`), in the plain and the traced runs
alike: one cudaMalloc and cudaFree on the simulated runtime (build/sim), as `torch.cuda.init()` makes
the first CUDA call of a real program. Under the recorder, every such process then has a started
recorder (its writer thread, signal handlers, unwinder, start-up line), not a dormant library that only
waits for a CUDA call; that is the program the suites must not be able to tell apart.

The runtime is loaded RTLD_GLOBAL and its calls looked up in the global scope, as a program linked to
libcudart calls them, so that the preloaded recorder's definitions come first. Errors are ignored:
where the runtime cannot be loaded, both runs are the same without it."""
import ctypes
import os

try:
    ctypes.CDLL(os.environ["TRANSPARENCY_CUDART"], mode=ctypes.RTLD_GLOBAL)
    _cuda = ctypes.CDLL(None)
    _pointer = ctypes.c_void_p()
    if _cuda.cudaMalloc(ctypes.byref(_pointer), ctypes.c_size_t(1 << 20)) == 0:
        _cuda.cudaFree(_pointer)
    del _cuda, _pointer
except (KeyError, OSError, AttributeError):
    pass
