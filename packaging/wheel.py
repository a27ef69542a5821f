#!/usr/bin/env python3
# packaging/wheel.py — the Python wheel, written from the release bundle's folder with the standard library.
"""wheel.py BUNDLE_DIR OUT.whl --version V [--readme README.md]

Writes a wheel (PEP 427: a zip with a .dist-info folder; RECORD holds every file's sha256 and size)
whose files are the release bundle's, laid out for site-packages:

  gpumemtrace/, gpumemtrace_torch/, gpumemtrace_pytest.py   the Python helpers (BUNDLE/python)
  gpumemtrace/_bundle/{bin,lib,python}/                      the bundle itself: launcher, analyzer,
                                                             recorder and the startup folder the
                                                             launcher puts on PYTHONPATH
  gpumemtrace-V.dist-info/                                   METADATA, WHEEL, entry_points.txt, RECORD,
                                                             licenses/ (the statically linked libraries')

entry_points.txt: console scripts `gpumemtrace` and `gpumem-report` (gpumemtrace.__main__, which
executes the bundled program), and the pytest plugin (group pytest11, named gpumemtrace_pytest as
PYTEST_PLUGINS names it, so that pytest loads it once). sitecustomize.py is only inside _bundle/python:
installed at the top of site-packages it would run in every Python process of the environment.

The tag py3-none-manylinux_2_34_x86_64 is true only for files that need glibc 2.34 or older, which
`make dist` checks (packaging/elfcheck.py) before this runs. Exit status: 0 written, 1 failed.
"""
import argparse
import base64
import hashlib
import os
import sys
import zipfile

TAG = "py3-none-manylinux_2_34_x86_64"
# zip cannot hold times before 1980; every member gets this one (the same inputs give the same bytes).
FIXED_TIME = (2024, 1, 1, 0, 0, 0)
SUMMARY = ("Find out where your GPU memory went: CUDA memory leaks, peaks, OOM post-mortems and growth, "
           "with native and Python stacks")


def files_under(top):
    out = []
    for base, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out.extend(os.path.join(base, n) for n in sorted(names) if not n.endswith((".pyc", ".pyo")))
    return out


def layout(bundle):
    """(path in the wheel, source file) for every file, in order."""
    entries = []
    python = os.path.join(bundle, "python")
    for path in files_under(python):
        rel = os.path.relpath(path, python)
        if rel != "sitecustomize.py":
            entries.append((rel, path))
    for sub in ("bin", "lib", "python"):
        for path in files_under(os.path.join(bundle, sub)):
            entries.append(("gpumemtrace/_bundle/" + os.path.relpath(path, bundle), path))
    return entries


def metadata(version, readme):
    head = (f"Metadata-Version: 2.1\nName: gpumemtrace\nVersion: {version}\nSummary: {SUMMARY}\n"
            "Requires-Python: >=3.9\nClassifier: Operating System :: POSIX :: Linux\n"
            "Classifier: Programming Language :: Python :: 3\n"
            "Classifier: Topic :: Software Development :: Debuggers\n")
    if readme:
        with open(readme, encoding="utf-8") as f:
            return head + "Description-Content-Type: text/markdown\n\n" + f.read()
    return head


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(bundle, out, version, readme):
    info = f"gpumemtrace-{version}.dist-info"
    generated = {
        f"{info}/METADATA": metadata(version, readme),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: gpumemtrace packaging/wheel.py\n"
                         f"Root-Is-Purelib: false\nTag: {TAG}\n",
        f"{info}/entry_points.txt": "[console_scripts]\ngpumemtrace = gpumemtrace.__main__:main\n"
                                   "gpumem-report = gpumemtrace.__main__:report_main\n\n"
                                   "[pytest11]\ngpumemtrace_pytest = gpumemtrace_pytest\n",
        f"{info}/top_level.txt": "gpumemtrace\ngpumemtrace_pytest\ngpumemtrace_torch\n",
    }
    third_party = os.path.join(bundle, "share", "doc", "gpumemtrace", "third-party")
    licenses = [(f"{info}/licenses/{os.path.relpath(p, third_party)}", p) for p in files_under(third_party)]
    records = []
    tmp = out + ".partial"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as whl:
        def add(name, data, mode=0o644):
            member = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            member.external_attr = (0o100000 | mode) << 16  # a regular file; pip keeps the x bits
            member.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(member, data)

        for name, path in layout(bundle) + licenses:
            with open(path, "rb") as f:
                data = f.read()
            add(name, data, 0o755 if os.stat(path).st_mode & 0o111 else 0o644)
            records.append(record_line(name, data))
        for name, text in generated.items():
            add(name, text.encode())
            records.append(record_line(name, text.encode()))
        record = f"{info}/RECORD"
        add(record, "\n".join(records + [f"{record},,"]) + "\n")  # RECORD lists itself without a hash
    os.replace(tmp, out)
    print(f"wheel.py: {out}: {os.path.getsize(out) / 1e6:.1f} MB, {len(records)} files")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle")
    ap.add_argument("out")
    ap.add_argument("--version", required=True)
    ap.add_argument("--readme")
    args = ap.parse_args()
    expected = f"gpumemtrace-{args.version}-{TAG}.whl"
    if os.path.basename(args.out) != expected:  # pip reads the tags from the name
        print(f"wheel.py: the wheel must be named {expected}", file=sys.stderr)
        return 1
    try:
        write_wheel(args.bundle, args.out, args.version, args.readme)
    except OSError as e:
        print(f"wheel.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
