# tools/python/sitecustomize.py — gpumemtrace's Python startup hook (PyTorch events for every process).
"""gpumemtrace's Python startup hook: put this directory on PYTHONPATH (the `gpumemtrace` launcher
does) and every Python process that runs under LD_PRELOAD=libgpumemtrace.so gets PyTorch's
caching-allocator events in its trace (tools/python/gpumemtrace_torch, docs/pytorch.md).

This file hides any other `sitecustomize` further down sys.path (Debian ships one, virtualenvs and
conda may too), so it first imports that one — the bootstrap pattern of ddtrace and OpenTelemetry —
then installs the hook. It never raises, prints nothing on success, and does nothing when the library
is not preloaded, when GPUMEMTRACE_TORCH=0, or until the program imports torch itself.
"""


def _chain_previous_sitecustomize():
    """Runs the `sitecustomize` that this one hides, as Python would have: found on sys.path without
    our directory, executed as module `sitecustomize`. sys.path itself is never touched, so what that
    module does to it (a venv's or conda's additions) stays. Afterwards sys.modules["sitecustomize"]
    is this module again; the chained one is kept as `chained` (its functions may refer to it)."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    mine = sys.modules.get("sitecustomize")
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        globals()["chained"] = module
        sys.modules["sitecustomize"] = module  # while it runs, as in a plain import
        spec.loader.exec_module(module)
    except Exception:
        # Python reports a failing sitecustomize as a warning and goes on; do the same.
        import traceback
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n")
        traceback.print_exc()
    finally:
        if mine is not None:
            sys.modules["sitecustomize"] = mine


def _install():
    try:
        import gpumemtrace_torch
        gpumemtrace_torch.install()
    except Exception as e:  # never break the host program
        import sys
        sys.stderr.write("gpumemtrace: PyTorch hook not installed: %r\n" % (e,))


_chain_previous_sitecustomize()
_install()
