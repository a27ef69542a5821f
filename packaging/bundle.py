#!/usr/bin/env python3
# packaging/bundle.py — lays out the release bundle's folder, packs it as a tarball, sizes dist/gpu.
"""The release bundle (packaging/module.mk, docs/install.md):

  bundle.py tree DIR --bin FILE... --lib FILE --python DIR --include FILE --doc FILE... --third-party DIR
      DIR/ (emptied first): bin/ (the programs), lib/ (the recorder), python/ (tools/python without
      caches), include/, share/doc/gpumemtrace/ (docs, third-party licenses and versions). ELF files
      are copied without debug info (their symbol tables stay, for readable stacks).
  bundle.py tarball DIR OUT.tar.gz
      OUT.tar.gz holding DIR's folder by name, reproducibly: names sorted, owner root, fixed times.
  bundle.py carry-size DIR --limit-mib N
      DIR's size plus the git working tree's tracked files: what the device tool carries; exit 1 above N.

Exit status: 0 done, 1 a limit exceeded or a step failed (one line on stderr), 2 bad usage.
"""
import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tarfile

from elfcheck import is_elf  # packaging/elfcheck.py, beside this file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Every file in the tarball gets this time (2024-01-01): the same inputs give the same bytes.
FIXED_MTIME = 1704067200


def copy_file(src, dst, mode):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if is_elf(src):
        # --strip-debug: DWARF out (most of the size), .symtab kept.
        subprocess.run(["strip", "--strip-debug", "-o", dst, src], check=True)
    else:
        shutil.copyfile(src, dst)
    os.chmod(dst, mode)


def python_files(top):
    """The files of tools/python, relative to it: sources only (no __pycache__, no .pyc)."""
    out = []
    for base, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                out.append(os.path.relpath(os.path.join(base, name), top))
    return out


def make_tree(args):
    tree = args.dir
    if os.path.exists(tree):
        shutil.rmtree(tree)
    for program in args.bin:
        copy_file(program, os.path.join(tree, "bin", os.path.basename(program)), 0o755)
    copy_file(args.lib, os.path.join(tree, "lib", os.path.basename(args.lib)), 0o755)
    for rel in python_files(args.python):
        copy_file(os.path.join(args.python, rel), os.path.join(tree, "python", rel), 0o644)
    for header in args.include:
        copy_file(header, os.path.join(tree, "include", os.path.basename(header)), 0o644)
    doc = os.path.join(tree, "share", "doc", "gpumemtrace")
    for path in args.doc:
        # README.md at the top of doc/, docs/* below it as in the repository (README's links hold).
        copy_file(path, os.path.join(doc, os.path.relpath(os.path.abspath(path), ROOT)), 0o644)
    licenses = os.path.join(args.third_party, "licenses")
    for name in sorted(os.listdir(licenses)):
        copy_file(os.path.join(licenses, name), os.path.join(doc, "third-party", name), 0o644)
    copy_file(os.path.join(args.third_party, "VERSIONS"), os.path.join(doc, "third-party", "VERSIONS"), 0o644)
    return 0


def make_tarball(args):
    tree = os.path.abspath(args.dir)
    top = os.path.basename(tree)

    def normalize(info):
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = FIXED_MTIME
        info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
        return info

    entries = []
    for base, dirs, files in os.walk(tree):
        dirs.sort()
        entries.extend(os.path.join(base, d) for d in dirs)
        entries.extend(os.path.join(base, f) for f in sorted(files))
    tmp = args.out + ".partial"
    # gzip's own header carries a time and a file name too: fixed, and none.
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=FIXED_MTIME,
                                               compresslevel=9) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(tree, arcname=top, recursive=False, filter=normalize)
        for path in entries:
            tar.add(path, arcname=os.path.join(top, os.path.relpath(path, tree)), recursive=False, filter=normalize)
    os.replace(tmp, args.out)
    print(f"bundle.py: {args.out}: {os.path.getsize(args.out) / 1e6:.1f} MB")
    return 0


def tree_size(path):
    total = 0
    for base, _, files in os.walk(path):
        total += sum(os.lstat(os.path.join(base, f)).st_size for f in files)
    return total


def carry_size(args):
    bundle = tree_size(args.dir)
    tracked = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True).stdout
    working = sum(os.lstat(os.path.join(ROOT, p)).st_size for p in tracked.decode().split("\0")
                  if p and os.path.lexists(os.path.join(ROOT, p)))
    mib = 1 << 20
    total = bundle + working
    print(f"bundle.py: {args.dir}: {bundle / mib:.1f} MiB + working tree {working / mib:.1f} MiB = "
          f"{total / mib:.1f} MiB to carry (limit {args.limit_mib} MiB)")
    if total > args.limit_mib * mib:
        print(f"bundle.py: {args.dir} does not fit the device tool's {args.limit_mib} MiB", file=sys.stderr)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tree")
    t.add_argument("dir")
    t.add_argument("--bin", nargs="+", required=True)
    t.add_argument("--lib", required=True)
    t.add_argument("--python", required=True)
    t.add_argument("--include", nargs="*", default=[])
    t.add_argument("--doc", nargs="*", default=[])
    t.add_argument("--third-party", required=True)
    z = sub.add_parser("tarball")
    z.add_argument("dir")
    z.add_argument("out")
    c = sub.add_parser("carry-size")
    c.add_argument("dir")
    c.add_argument("--limit-mib", type=int, required=True)
    args = ap.parse_args()
    try:
        return {"tree": make_tree, "tarball": make_tarball, "carry-size": carry_size}[args.command](args)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"bundle.py {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
