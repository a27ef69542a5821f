#!/usr/bin/env python3
# packaging/elfcheck.py — proves that every ELF file of a folder runs on the stated baseline with nothing else.
"""elfcheck.py [--glibc-max 2.34] [--glibcxx-max 3.4.29] [--preload REL] [--map FILE] DIR

For every ELF file under DIR (read with binutils' readelf):
  - each NEEDED library is glibc's (libc, libm, libdl, libpthread, librt, ld-linux) or one shipped in DIR;
    libstdc++/libgcc_s count as shipped only when a file of DIR is one of them;
  - its RPATH/RUNPATH entries, if any, are relative to the file ($ORIGIN...);
  - the highest GLIBC_x.y version it needs is at most --glibc-max, and GLIBCXX_ at most --glibcxx-max;
  - it is not a CUDA library, and needs none (the program's own CUDA is the one traced);
and the preload library (--preload, relative to DIR) exports only what --map's `global:` patterns name
(packaging/libgpumemtrace.map): no libstdc++, libunwind, elfutils or zstd symbol.

Prints one line per file (what it needs), then every violation. Exit status: 0 all met, 1 a
violation, 2 bad usage or readelf missing.
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GLIBC_SONAMES = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1",
                 "libresolv.so.2", "ld-linux-x86-64.so.2", "libmvec.so.1"}
# The program's CUDA stack: never shipped, never needed by what we ship.
CUDA_LIBRARY = re.compile(r"^lib(cuda|cudart|cupti|nvrtc|nvJitLink|cublas\w*|cufft\w*|curand|cusparse\w*|"
                          r"cusolver\w*|cudnn\w*|nccl|nvidia-ml|nvToolsExt)\b")


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def version_key(text):
    return tuple(int(x) for x in text.split("."))


def inspect(path):
    """What `path` needs and exports: {'needed', 'soname', 'rpath', 'versions', 'exports'}."""
    out = subprocess.run(["readelf", "-W", "-d", "-V", "--dyn-syms", path], capture_output=True, text=True,
                         check=True).stdout
    info = {"needed": [], "soname": None, "rpath": [], "versions": set(), "exports": []}
    in_needs = False
    for line in out.splitlines():
        m = re.search(r"\((NEEDED|SONAME|RPATH|RUNPATH)\)\s+\S.*?\[(.*)\]", line)
        if m:
            kind, value = m.groups()
            if kind == "NEEDED":
                info["needed"].append(value)
            elif kind == "SONAME":
                info["soname"] = value
            else:
                info["rpath"].extend(p for p in value.split(":") if p)
            continue
        if line.startswith("Version needs section"):
            in_needs = True
        elif line.startswith(("Version definition section", "Version symbols section", "Symbol table")):
            in_needs = False
        elif in_needs:
            m = re.search(r"Name: (\S+)", line)
            if m and "File:" not in line:
                info["versions"].add(m.group(1))
        # Symbol table rows: Num: Value Size Type Bind Vis Ndx Name
        fields = line.split()
        if len(fields) >= 8 and fields[0].endswith(":") and fields[0][:-1].isdigit():
            _, _, _, kind, bind, vis, ndx, name = fields[:8]
            if ndx != "UND" and bind in ("GLOBAL", "WEAK") and vis == "DEFAULT" and kind != "SECTION":
                info["exports"].append(name.split("@")[0])
    return info


def highest(versions, prefix):
    found = [v[len(prefix):] for v in versions if v.startswith(prefix) and re.fullmatch(r"[\d.]+", v[len(prefix):])]
    return max(found, key=version_key) if found else None


def export_patterns(map_file):
    """The `global:` patterns of a GNU ld version script."""
    with open(map_file) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    m = re.search(r"global:(.*?)local:", text, flags=re.S)
    if not m:
        raise ValueError(f"{map_file}: no global: ... local: section")
    return [p.strip() for p in m.group(1).split(";") if p.strip()]


def check_tree(tree, glibc_max="2.34", glibcxx_max="3.4.29", preload=None, map_file=None):
    """Returns (lines, violations): one summary line per ELF file, and what breaks the baseline."""
    files = []
    for base, dirs, names in os.walk(tree):
        dirs.sort()
        files.extend(os.path.join(base, n) for n in sorted(names) if is_elf(os.path.join(base, n)))
    infos = {f: inspect(f) for f in files}
    shipped = {os.path.basename(f) for f in files} | {i["soname"] for i in infos.values() if i["soname"]}
    lines, violations = [], []
    for path, info in infos.items():
        rel = os.path.relpath(path, tree)
        glibc = highest(info["versions"], "GLIBC_")
        glibcxx = highest(info["versions"], "GLIBCXX_")
        lines.append(f"{rel}: NEEDED {', '.join(info['needed']) or '-'}; GLIBC_{glibc or '-'}; "
                     f"GLIBCXX_{glibcxx or '-'}; RPATH {':'.join(info['rpath']) or '-'}; "
                     f"{os.path.getsize(path) / 1e6:.1f} MB")
        if CUDA_LIBRARY.match(os.path.basename(path)):
            violations.append(f"{rel}: a CUDA library is shipped")
        for lib in info["needed"]:
            if CUDA_LIBRARY.match(lib):
                violations.append(f"{rel}: needs the CUDA library {lib}")
            elif lib not in GLIBC_SONAMES and lib not in shipped:
                violations.append(f"{rel}: needs {lib}, which is neither glibc's nor shipped")
        for entry in info["rpath"]:
            if not entry.startswith("$ORIGIN"):
                violations.append(f"{rel}: RPATH/RUNPATH entry {entry} is not relative ($ORIGIN...)")
        if glibc and version_key(glibc) > version_key(glibc_max):
            violations.append(f"{rel}: needs GLIBC_{glibc}, above the baseline {glibc_max}")
        if glibcxx and version_key(glibcxx) > version_key(glibcxx_max):
            violations.append(f"{rel}: needs GLIBCXX_{glibcxx}, above the baseline {glibcxx_max}")
    if preload:
        path = os.path.join(tree, preload)
        if path not in infos:
            violations.append(f"{preload}: the preload library is missing")
        else:
            patterns = export_patterns(map_file or os.path.join(HERE, "libgpumemtrace.map"))
            stray = sorted(s for s in infos[path]["exports"] if not any(fnmatch.fnmatchcase(s, p) for p in patterns))
            lines.append(f"{preload}: exports {len(infos[path]['exports'])} symbols")
            if stray:
                violations.append(f"{preload}: exports {len(stray)} symbols its version script does not name, "
                                  f"e.g. {', '.join(stray[:5])}")
    return lines, violations


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--glibc-max", default="2.34")
    ap.add_argument("--glibcxx-max", default="3.4.29")
    ap.add_argument("--preload", help="the preload library, relative to DIR")
    ap.add_argument("--map", help="its version script (default packaging/libgpumemtrace.map)")
    args = ap.parse_args()
    if not os.path.isdir(args.dir):
        print(f"elfcheck.py: {args.dir} is not a directory", file=sys.stderr)
        return 2
    try:
        lines, violations = check_tree(args.dir, args.glibc_max, args.glibcxx_max, args.preload, args.map)
    except FileNotFoundError as e:
        print(f"elfcheck.py: {e} (readelf is in binutils)", file=sys.stderr)
        return 2
    except (subprocess.CalledProcessError, ValueError) as e:
        print(f"elfcheck.py: {e}", file=sys.stderr)
        return 2
    for line in lines:
        print(f"elfcheck: {line}")
    for v in violations:
        print(f"elfcheck: FAILED: {v}", file=sys.stderr)
    if not violations:
        print(f"elfcheck: every ELF file under {args.dir} needs glibc {args.glibc_max} or older and nothing unshipped")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
