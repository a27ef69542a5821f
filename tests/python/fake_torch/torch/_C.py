# tests/python/fake_torch/torch/_C.py — the stand-in's torch._C: OOM observers, cuBLAS workspace clearing.
_oom_observers = []


def _cuda_attach_out_of_memory_observer(fn):
    _oom_observers.append(fn)


def _cuda_clearCublasWorkspaces():
    from . import _calls
    _calls.note("clearCublasWorkspaces")
