"""gpumemtrace's Python startup hook: put this directory on PYTHONPATH (the `gpumemtrace` launcher
does) and every Python process that runs under LD_PRELOAD=libgpumemtrace.so gets PyTorch's
caching-allocator events in its trace (tools/python/gpumemtrace_torch, docs/pytorch.md).

This file hides any other `sitecustomize` further down sys.path (Debian ships one, virtualenvs and
conda may too), so it first imports that one — the bootstrap pattern of ddtrace and OpenTelemetry —
then installs the hook. It never raises, prints nothing on success, and does nothing when the library
is not preloaded, when GPUMEMTRACE_TORCH=0, or until the program imports torch itself.
"""


def _chain_previous_sitecustomize():
    import importlib
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    mine = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        try:
            importlib.import_module("sitecustomize")
        except ImportError as e:
            if getattr(e, "name", None) != "sitecustomize":
                raise  # their sitecustomize failed to import something: same as without us
    except Exception:
        # Python reports a failing sitecustomize as a warning and goes on; do the same.
        import traceback
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n")
        traceback.print_exc()
    finally:
        sys.path[:] = saved
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
