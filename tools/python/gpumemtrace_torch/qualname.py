# tools/python/gpumemtrace_torch/qualname.py — PyTorch's recorded frame names qualified (Model.forward), as live Python frames name them.
"""PyTorch records a Python frame as (filename, line, co_name): `__init__`, `forward`. The recorder's
live Python frames say `co_qualname` on CPython 3.11+ (`Model.__init__`, docs/python-stacks.md), so
the same code would show under two names in one report. This gives PyTorch's frames the qualified
name of the code object that holds that line, on the interpreters whose live frames do (3.11+; on
3.9-3.10 both say co_name and nothing changes).

How: the source file is compiled once (compile() only: nothing runs; faster than building an ast),
and every code object in it maps each of its lines (co_lines) to its co_qualname, per name, so a
lookup is exact: the code object named `name` that owns `line`. Cached per file and per (file, line,
name); bounded: files over MAX_BYTES, unreadable, or that do not compile keep their names, and past
MAX_FILES files / MAX_NAMES names the caches start over. Compile warnings (SyntaxWarning) are kept
from the program's stderr. Not thread-safe: called from the drain, under the hook's lock.
"""
import sys
import warnings

ENABLED = sys.version_info >= (3, 11)
MAX_BYTES = 4 << 20
MAX_FILES = 256
MAX_NAMES = 1 << 16

_files = {}   # filename -> {(line, co_name): co_qualname}, or None (left alone)
_names = {}   # (filename, line, name) -> the name to show


def qualify(filename, line, name):
    """The qualified name of frame (filename, line, name), or `name` when it cannot be known."""
    if not ENABLED:
        return name
    key = (filename, line, name)
    q = _names.get(key)
    if q is None:
        q = _lookup(filename, line, name)
        if len(_names) >= MAX_NAMES:
            _names.clear()
        _names[key] = q
    return q


def _lookup(filename, line, name):
    if not filename or not name or filename.startswith("<") or name == "<module>":
        return name
    table = _files.get(filename, False)
    if table is False:
        if len(_files) >= MAX_FILES:
            _files.clear()
        table = _files[filename] = _table(filename)
    if not table:
        return name
    return table.get((line, name), name)


def _table(filename):
    try:
        with open(filename, "rb") as f:
            source = f.read(MAX_BYTES + 1)
        if len(source) > MAX_BYTES:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = compile(source, filename, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    table = {}
    todo = [code]
    while todo:
        c = todo.pop()
        for _, _, line in c.co_lines():
            if line is not None:
                table.setdefault((line, c.co_name), c.co_qualname)
        todo.extend(k for k in c.co_consts if hasattr(k, "co_lines"))
    return table
