# tools/python/sitecustomize.py — gpumemtrace's Python startup hook (PyTorch events for every process).
"""gpumemtrace's Python startup hook: put this directory on PYTHONPATH (the `gpumemtrace` launcher
does) and every Python process that runs under LD_PRELOAD=libgpumemtrace.so gets PyTorch's
caching-allocator events in its trace (tools/python/gpumemtrace_torch, docs/pytorch.md).

This file hides any other `sitecustomize` further down sys.path (Debian ships one, virtualenvs and
conda may too), so it first imports that one — the bootstrap pattern of ddtrace and OpenTelemetry —
then starts watching for torch. It never raises and prints nothing on success.

What a program can see of it (docs/performance.md, "Python start-up"): it imports no module at
start-up (it uses only `sys`, `os` and the import system's own frozen modules, which every
interpreter has loaded before `site` runs), and it adds one finder to sys.meta_path, just before the
path finder, that does nothing but wait for `import torch`. When torch's own __init__ has run, the
finder takes itself out of sys.meta_path and only then is gpumemtrace_torch imported (with ctypes,
threading and the rest, all of which torch imported first): it looks for libgpumemtrace.so and turns
the hook on (gpumemtrace_torch.on_torch_imported). With GPUMEMTRACE_TORCH=0 not even the finder is
added. A program that never imports torch pays one failed string comparison per new import.
"""
import os
import sys

_OFF = ("0", "off", "no", "false")


def _import_system():
    """(PathFinder, module_from_spec) of the import system itself: the frozen modules every CPython
    has loaded before site.py runs, so that chaining imports nothing (importlib.util and
    importlib.machinery are not loaded at start-up on most interpreters)."""
    bootstrap = sys.modules.get("_frozen_importlib")
    external = sys.modules.get("_frozen_importlib_external")
    if bootstrap is not None and external is not None:
        return external.PathFinder, bootstrap.module_from_spec
    import importlib.machinery
    import importlib.util
    return importlib.machinery.PathFinder, importlib.util.module_from_spec


def _chain_previous_sitecustomize():
    """Runs the `sitecustomize` that this one hides, as Python would have: found on sys.path without
    our directory, executed as module `sitecustomize`. sys.path itself is never touched, so what that
    module does to it (a venv's or conda's additions) stays. Afterwards sys.modules["sitecustomize"]
    is this module again; the chained one is kept as `chained` (its functions may refer to it)."""
    mine = sys.modules.get("sitecustomize")
    try:
        path_finder, module_from_spec = _import_system()
        here = os.path.dirname(os.path.abspath(__file__))
        path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        spec = path_finder.find_spec("sitecustomize", path)
        if spec is None or spec.loader is None:
            return
        module = module_from_spec(spec)
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


def _torch_imported(torch):
    """Runs once torch/__init__.py has finished: the hook proper (gpumemtrace_torch, docs/pytorch.md)."""
    try:
        import gpumemtrace_torch
        gpumemtrace_torch.on_torch_imported(torch)
    except Exception as e:  # never break the host program
        sys.stderr.write("gpumemtrace: PyTorch hook not installed: %r\n" % (e,))


class _TorchWatch:
    """A meta path finder that only watches: for `torch` it asks the finders after it for the spec
    and wraps that spec's loader, so that _torch_imported(torch) runs right after torch's __init__
    executed; every other name goes on to the next finder at the cost of one comparison. It leaves
    sys.meta_path when torch is executed, not when torch is merely looked up (a program that asks
    importlib.util.find_spec("torch") whether torch is installed has not imported it yet)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        try:
            later = sys.meta_path[sys.meta_path.index(self) + 1:]
        except ValueError:
            return None  # taken out already: torch is being executed by a spec found before
        for finder in later:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        watch = self

        def exec_module(module):
            watch.leave()
            try:
                del loader.exec_module  # back to the class's method
            except AttributeError:
                pass
            original(module)
            _torch_imported(module)

        try:
            loader.exec_module = exec_module
        except Exception:
            pass
        return spec

    def leave(self):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass

    def invalidate_caches(self):
        pass


def _watch_for_torch():
    if os.environ.get("GPUMEMTRACE_TORCH", "auto").lower() in _OFF:
        return
    torch = sys.modules.get("torch")
    if torch is not None:  # a chained sitecustomize imported it
        _torch_imported(torch)
        return
    # Just before the path finder, where torch is found; sys.meta_path[0] stays what it was.
    position = next((i for i, f in enumerate(sys.meta_path) if getattr(f, "__name__", "") == "PathFinder"),
                    len(sys.meta_path))
    sys.meta_path.insert(position, _TorchWatch())


_chain_previous_sitecustomize()
try:
    _watch_for_torch()
except Exception as e:  # never break the host program
    sys.stderr.write("gpumemtrace: PyTorch hook not installed: %r\n" % (e,))
