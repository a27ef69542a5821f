# tools/python/gpumemtrace/_native.py — finds the native programs (launcher, analyzer) beside this package.
"""Where `gpumemtrace` and `gpumem-report` are, for `python -m gpumemtrace` and the wheel's console
scripts (docs/install.md). The first layout that has the launcher wins:

  the wheel          site-packages/gpumemtrace/_bundle/bin/
  the release bundle BUNDLE/python/gpumemtrace -> BUNDLE/bin/
  make install       PREFIX/share/gpumemtrace/python/gpumemtrace -> PREFIX/bin/
  the source tree    tools/python/gpumemtrace -> build/ (after make)

The analyzer is always in the launcher's folder. Nothing here runs at import time.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = "gpumemtrace"
REPORT = "gpumem-report"


def candidate_dirs():
    """The folders that may hold the launcher, in the order they are tried."""
    return [
        os.path.join(HERE, "_bundle", "bin"),
        os.path.normpath(os.path.join(HERE, "..", "..", "bin")),
        os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "bin")),
        os.path.normpath(os.path.join(HERE, "..", "..", "..", "build")),
    ]


def bin_dir():
    """The first candidate folder with an executable launcher, or None."""
    for d in candidate_dirs():
        if os.access(os.path.join(d, LAUNCHER), os.X_OK) and os.path.isfile(os.path.join(d, LAUNCHER)):
            return d
    return None


def program(name):
    """The path of the native program `name` (LAUNCHER or REPORT), or None."""
    d = bin_dir()
    return os.path.join(d, name) if d else None
