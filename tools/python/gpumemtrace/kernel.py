# tools/python/gpumemtrace/kernel.py — a Jupyter kernel under the recorder: its kernel spec, and the shim that starts ipykernel.
"""`gpumemtrace kernel install` (docs/notebooks.md) runs `python -m gpumemtrace.kernel install ...`
with the interpreter the kernel is for; it writes a kernel spec whose argv runs this file as a script:

    PYTHON .../gpumemtrace/kernel.py --library LIB --python-path DIR [--output DIR] -- -f {connection_file}

That shim puts the recorder in front of LD_PRELOAD, the package's folder (sitecustomize.py: PyTorch's
tensor-level events; this package: the magics) in front of PYTHONPATH, and the trace folder into
GPUMEMTRACE_OUTPUT, then execs `PYTHON -m ipykernel_launcher ...` in place: the kernel is the traced
process, its trace gpumemtrace.python3.X.PID.jsonl.zst. A kernel spec's own "env" would replace the
user's LD_PRELOAD and PYTHONPATH instead of extending them, hence the shim. The shim imports nothing
but os and sys (it runs with this folder first on sys.path, where report.py would shadow nothing it
uses). The spec itself is installed by jupyter_client's KernelSpecManager, where Jupyter looks.

Exit status of `install`: 0; 2 with one line on stderr (no ipykernel for this Python, a folder that
cannot be written).
"""
import os
import sys

DEFAULT_NAME = "gpumemtrace"
DEFAULT_OUTPUT = "gpumemtrace-traces"   # relative: the kernel's working folder, the notebook's own


def _prepend(env, name, value, sep=":"):
    old = env.get(name)
    env[name] = value + (sep + old if old else "")


def launch(argv):
    """The shim: argv is `--library LIB --python-path DIR [--output DIR] -- KERNEL ARGS...`."""
    options, rest = {}, []
    i = 0
    while i < len(argv):
        if argv[i] == "--":
            rest = argv[i + 1:]
            break
        options[argv[i]] = argv[i + 1]
        i += 2
    output = os.path.abspath(options.get("--output", DEFAULT_OUTPUT))
    try:
        os.makedirs(output, mode=0o700, exist_ok=True)
    except OSError as e:
        # The kernel still starts (an unusable kernel helps nobody); the recorder says it writes nothing.
        sys.stderr.write("gpumemtrace kernel: cannot create the trace folder %s: %s\n" % (output, e.strerror))
    env = dict(os.environ)
    _prepend(env, "LD_PRELOAD", options["--library"])
    _prepend(env, "PYTHONPATH", options["--python-path"], os.pathsep)
    env["GPUMEMTRACE_OUTPUT"] = output + "/"
    env.setdefault("GPUMEMTRACE_VERBOSE", "0")  # the kernel's stderr goes to the notebook server's log
    python = sys.executable
    os.execve(python, [python, "-m", "ipykernel_launcher"] + rest, env)


def spec(library, python_path, output=None, display_name=None, python=None):
    """The kernel.json of a kernel that runs `python` (default: this one) under the recorder."""
    python = python or sys.executable
    argv = [python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel.py"),
            "--library", library, "--python-path", python_path]
    if output:
        argv += ["--output", os.path.abspath(output)]
    argv += ["--", "-f", "{connection_file}"]
    return {"argv": argv, "display_name": display_name or "Python 3 (gpumemtrace)", "language": "python",
            "metadata": {"debugger": True}}


def install(argv):
    """`install --library LIB --python-path DIR [--name N] [--display-name T] [--user | --prefix P |
    --sys-prefix] [--output DIR]`: installs the spec; returns the exit status."""
    import argparse
    import json
    import tempfile

    class Parser(argparse.ArgumentParser):
        def error(self, message):  # one line, exit 2, as the launcher's own usage errors
            sys.stderr.write("gpumemtrace kernel install: %s (see gpumemtrace kernel --help)\n" % message)
            sys.exit(2)

    ap = Parser(prog="gpumemtrace kernel install", add_help=False)
    ap.add_argument("--library", required=True)
    ap.add_argument("--python-path", required=True)
    ap.add_argument("--name", default=DEFAULT_NAME)
    ap.add_argument("--display-name")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true")
    where.add_argument("--prefix")
    where.add_argument("--sys-prefix", action="store_true")
    ap.add_argument("--output")
    args = ap.parse_args(argv)
    import importlib
    try:
        importlib.import_module("ipykernel")  # the kernel's own module: without it the kernel would not start
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError as e:
        sys.stderr.write("gpumemtrace kernel install: %s has no %s: install ipykernel for it (pip install "
                         "ipykernel, or apt install python3-ipykernel), or name another with --python\n"
                         % (sys.executable, e.name))
        return 2
    prefix = sys.prefix if args.sys_prefix else args.prefix
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "kernel.json"), "w", encoding="utf-8") as f:
            json.dump(spec(args.library, args.python_path, args.output, args.display_name), f, indent=1)
        try:
            where = KernelSpecManager().install_kernel_spec(tmp, args.name, user=args.user, prefix=prefix)
        except (OSError, ValueError) as e:
            hint = "; use --user, or --prefix DIR" if isinstance(e, PermissionError) else ""
            sys.stderr.write("gpumemtrace kernel install: %s%s\n" % (e, hint))
            return 2
    print("installed the kernel %r (%s) in %s" % (args.name, args.display_name or "Python 3 (gpumemtrace)", where))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "install":
        sys.exit(install(sys.argv[2:]))
    launch(sys.argv[1:])
