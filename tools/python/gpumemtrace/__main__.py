# tools/python/gpumemtrace/__main__.py — `python -m gpumemtrace` and the wheel's console scripts.
"""`python -m gpumemtrace run -- python train.py` is `gpumemtrace run -- python train.py`: this
process becomes the native launcher (exec, so signals, exit status and /proc/self/exe are the
launcher's own; docs/launcher.md). The wheel's console scripts `gpumemtrace` and `gpumem-report`
come here too (main, report_main).

Exit status: the program's; 2 with one line on stderr when the native program is not found (a
source tree not built yet) or cannot be executed.
"""
import os
import sys

from gpumemtrace import _native


def _exec(name, args):
    path = _native.program(name)
    if path is None:
        tried = ", ".join(_native.candidate_dirs())
        sys.stderr.write(f"gpumemtrace: the native {name} was not found (looked in {tried}; in a source tree, "
                         "run make)\n")
        return 2
    try:
        os.execv(path, [path, *args])
    except OSError as e:
        sys.stderr.write(f"gpumemtrace: cannot execute {path}: {e.strerror}\n")
        return 2


def main():
    """`gpumemtrace ARGS`: the launcher."""
    return _exec(_native.LAUNCHER, sys.argv[1:])


def report_main():
    """`gpumem-report ARGS`: the analyzer."""
    return _exec(_native.REPORT, sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
