#!/usr/bin/env python3
# tests/docs/check_docs.py — README.md and docs/*.md checked against the tool: commands run, names exist.
"""Checks that README.md and docs/*.md say what the tool does.

    python3 tests/docs/check_docs.py [--build build] [--only NAME ...]   # one line per problem; exit 1 if any

The checks (each a function below, each run by tests/docs/test_docs.py in `make test`, which also
plants a false claim for each and sees it fail):
  commands   the blocks marked in the docs are run on the simulated runtime (tests/docs/docs_sandbox.py);
             a block of output must appear in what its command prints (addresses, times, pids aside)
  variables  every GPUMEMTRACE_* variable the code reads is in docs/configuration.md's tables, every
             one there is read, and every one the docs name is one of them
  options    every option of `gpumem-report --help` is in docs/report.md's table and every option of
             `gpumemtrace --help` in docs/launcher.md's, each row names a real option, and every
             `--option` the docs write belongs to one of them or to another tool (FOREIGN_OPTIONS)
  exits      each exit status the docs and the --help texts state is the one the tool returns (EXITS)
  facts      each figure of FACTS (the recorder's exported symbols, the demo's events, ...) is what its
             command counts
  json       every key of docs/report.md's JSON example is in a real report, and every key of real
             reports is in that example or named in docs/report.md (what_if, time_to_oom: docs/what-if.md)
  make       every `make TARGET` the docs write is a target of the Makefile, and its VAR=... a variable
  links      every relative link resolves, to a heading where it names one
  paths      every repository path the docs name exists (tests/..., report/..., build/...), and every
             file named alone (`test_report_jobs.py`) is somewhere in the repository

The marks, HTML comments on the line before a fenced block (GitHub does not show them):
  <!-- check: run [exit=N] -->        the block is one bash script (set -e); it must exit N (default 0)
  <!-- check: each -->                every command line of the block is run on its own; each must
                                      exit 0 or 1 (a gate may fail; never a usage or input error)
  <!-- check: output [exit=N]: CMD --> CMD is run; the block must appear in its output (stdout and
                                      stderr), a line `...` standing for any lines
  <!-- check: output: above -->       the same, with the output of the file's last block run above
Commands run in a sandbox folder (docs_sandbox.py says what is in it); blocks without a mark are not run.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from docs_sandbox import ROOT, Sandbox, build_dir, commands_can_run, shown_in  # noqa: E402
from check_keys import check_json, check_trace_format  # noqa: E402


class Docs:
    """README.md and docs/*.md as text, from `root` (a copy of the docs for the planted-claim tests;
    the code is always read from ROOT)."""

    def __init__(self, root=ROOT):
        self.root = root
        names = ["README.md"] + sorted("docs/" + n for n in os.listdir(os.path.join(root, "docs")) if n.endswith(".md"))
        self.text = {}
        for n in names:
            with open(os.path.join(root, n), encoding="utf-8") as f:
                self.text[n] = f.read()

    def lines(self):
        """(file, line number, line) of every line."""
        for name, text in self.text.items():
            for i, line in enumerate(text.split("\n"), 1):
                yield name, i, line

    def line_of(self, name, offset):
        return self.text[name].count("\n", 0, offset) + 1

    def blocks(self):
        """(file, line of the opening fence, mark or None, block text) of every fenced block."""
        for name, text in self.text.items():
            lines = text.split("\n")
            i = 0
            while i < len(lines):
                if lines[i].lstrip().startswith("```"):
                    start = i
                    j = i + 1
                    while j < len(lines) and not lines[j].lstrip().startswith("```"):
                        j += 1
                    prev = lines[start - 1].strip() if start > 0 else ""
                    m = re.fullmatch(r"<!-- check: (.*?) -->", prev)
                    yield name, start + 1, (m.group(1) if m else None), "\n".join(lines[start + 1:j]) + "\n"
                    i = j + 1
                else:
                    i += 1

    def prose(self, name):
        """The file without its fenced blocks (for the names a text mentions)."""
        return re.sub(r"^```.*?^```", "", self.text[name], flags=re.S | re.M)


def run_tool(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


# ---------------------------------------------------------------- commands

def command_lines(block):
    """The command lines of a shell block: comment lines dropped, `\\` continuations joined."""
    out, cur = [], ""
    for line in block.split("\n"):
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    return out


def check_commands(docs, sandbox):
    problems = []
    above = {}  # file -> the output of its last block that was run
    for name, line, mark, block in docs.blocks():
        if mark is None:
            continue
        where = f"{name}:{line}"
        m = re.fullmatch(r"(run|each|output)(?: exit=(\d+))?(?:: (.+))?", mark)
        if not m or (m.group(1) == "output") != bool(m.group(3)):
            problems.append(f"{where}: unknown check mark `{mark}`")
            continue
        kind, want, cmd = m.group(1), int(m.group(2) or 0), m.group(3)
        if kind == "run":
            status, out = sandbox.run(block, strict=want == 0)
            if status != want:
                problems.append(f"{where}: the block exits {status}, not {want}:\n{out[-2000:]}")
        elif kind == "each":
            out = ""
            for c in command_lines(block):
                status, one = sandbox.run(c)
                out += one
                if status not in (0, 1):
                    problems.append(f"{where}: `{c.strip()}` exits {status}:\n{one[-2000:]}")
        elif cmd == "above":
            if name not in above:
                problems.append(f"{where}: `output: above` with no block run above it")
            elif not shown_in(block, above[name]):
                problems.append(f"{where}: the block is not what the block above prints; it prints:\n{above[name][-4000:]}")
            continue
        else:
            status, out = sandbox.run(cmd)
            if status != want:
                problems.append(f"{where}: `{cmd}` exits {status}, not {want}:\n{out[-2000:]}")
            elif not shown_in(block, out):
                problems.append(f"{where}: the block is not what `{cmd}` prints; it prints:\n{out[-4000:]}")
        above[name] = out
    return problems


# ---------------------------------------------------------------- variables

# Names the docs write that are not variables: config.h's list, a hook table's macro, the misspelt examples.
NOT_VARIABLES = {"GPUMEMTRACE_VARIABLES", "GPUMEMTRACE_DRIVER_HOOK", "GPUMEMTRACE_STACK_DEPHT", "GPUMEMTRACE_COLOUR"}
SOURCE_DIRS = ("interpose", "cupti", "tools", "tests", "bench", "report", "examples", "packaging", "trace", "util")
SOURCE_ENDINGS = (".cpp", ".cc", ".c", ".h", ".py", ".sh", ".mk")


def sources():
    for top in SOURCE_DIRS:
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for n in files:
                if n.endswith(SOURCE_ENDINGS):
                    path = os.path.join(folder, n)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        yield os.path.relpath(path, ROOT), f.read()
    with open(os.path.join(ROOT, "Makefile")) as f:
        yield "Makefile", f.read()


def variables_read_by_the_code():
    """Names read with getenv / os.environ, literally or through a constant (config.h's var::kName, a
    Python NAME = "GPUMEMTRACE_..."), and names the Makefiles or scripts set or expand."""
    texts = dict(sources())
    listed = dict(re.findall(r'X\((k\w+), "(GPUMEMTRACE_[A-Z0-9_]+)"\)', texts["interpose/recorder/config.h"]))
    found = set()
    literal = [r'getenv\("(GPUMEMTRACE_[A-Z0-9_]+)"', r'environ(?:\.get\(|\.setdefault\(|\.pop\(|\[)\s*"(GPUMEMTRACE_[A-Z0-9_]+)"',
               r'\$\{?(GPUMEMTRACE_[A-Z0-9_]+)', r'_env_\w+\("(GPUMEMTRACE_[A-Z0-9_]+)"']
    for path, text in texts.items():
        for p in literal:
            found.update(re.findall(p, text))
        if path.endswith(".py"):  # NAME = "GPUMEMTRACE_X" then os.environ.get(NAME)
            for const, var in re.findall(r'^(\w+) = "(GPUMEMTRACE_[A-Z0-9_]+)"', text, re.M):
                if re.search(rf"(?:environ\.get|getenv|environ\[|_env_\w+)\(?\s*{const}\b", text):
                    found.add(var)
        if path != "interpose/recorder/config.h":
            found.update(var for const, var in listed.items() if re.search(rf"\b{const}\b", text))
    return found


def documented_variables(docs):
    """{name: line} of the rows of docs/configuration.md's tables."""
    text = docs.text["docs/configuration.md"]
    return {m.group(1): docs.line_of("docs/configuration.md", m.start())
            for m in re.finditer(r"^\| `(GPUMEMTRACE_[A-Z0-9_]+)`", text, re.M)}


def check_variables(docs):
    read, documented = variables_read_by_the_code(), documented_variables(docs)
    problems = [f"docs/configuration.md: {v} is read by the code but not in a table" for v in sorted(read - set(documented))]
    problems += [f"docs/configuration.md:{documented[v]}: {v} is documented but no code reads it"
                 for v in sorted(set(documented) - read)]
    for name, i, line in docs.lines():
        for v in re.findall(r"\bGPUMEMTRACE_[A-Z0-9_]*[A-Z0-9]\b", line):
            if v not in documented and v not in NOT_VARIABLES:
                problems.append(f"{name}:{i}: {v} is not a variable of docs/configuration.md")
    return problems


# ---------------------------------------------------------------- options

# `--options` the docs write for other programs: the user's (train.py, app), torchrun, pip, git, ld.so, the
# linker, jq, zstd, valgrind, eu-addr2line, flamegraph.pl, chromium. Our own scripts' options (bench/,
# tests/) are found in their sources instead.
FOREIGN_OPTIONS = {"--epochs", "--train", "--nproc-per-node", "--no-index", "--detach", "--list", "--exclude-libs",
                   "--wrap", "--argjson", "--no-check", "--tool", "--relative", "--countname", "--headless",
                   "--no-sandbox", "--dump-dom", "--gtest_filter", "--benchmark_filter", "--benchmark_min_time",
                   "--separate-threads",  # valgrind's (callgrind per thread)
                   "--fail-on-lek"}  # troubleshooting.md's example of a typo


def script_options():
    """The options our own scripts (bench/, tests/) define: every quoted "--name" in their sources."""
    return {o for path, text in sources() if path.startswith(("bench/", "tests/")) and path.endswith(".py")
            for o in re.findall(r"[\"'](--[a-z][\w-]*)[\"']", text)}


def help_options(program, subcommand=None):
    """The options a --help text lists: the first column of its option lines (`-o,--output FILE`,
    `-q, --quiet`), and --version wherever it stands; for the launcher only its own, not the report
    options it names as examples of what it passes on. `subcommand`: that of the launcher (`top`)."""
    text = run_tool([program, *([subcommand] if subcommand else []), "--help"]).stdout
    if subcommand:
        text = text.split("Options:")[1]
    elif os.path.basename(program) == "gpumemtrace":
        text = text.split("Options (before --):")[1].split("Any other option")[0]
    else:
        text = text.split("Options:")[1].split("Subcommands:")[0]
    opts = set()
    for line in text.split("\n"):
        if re.match(r"\s+-", line):
            opts.update(re.findall(r"(?<![\w-])(--[a-z][\w-]*|-[a-z])\b", re.split(r"(?<=\S)\s{2,}", line.strip())[0]))
    if "--version" in text:
        opts.add("--version")
    return opts


def section(docs, name, heading, end=None):
    """(the text of a doc from `heading` up to `end` after it, or to its end; where that text starts)."""
    text = docs.text[name]
    start = text.index(heading)
    stop = text.find(end, start + len(heading)) if end else -1
    return text[start:stop if stop >= 0 else len(text)], start


def table_options(docs, name, heading, end=None):
    """{option: line} of the first cells of the option tables after `heading` in a doc (up to `end`
    after it, when given)."""
    text, start = section(docs, name, heading, end)
    out = {}
    for m in re.finditer(r"^\| (`[^|]*)\|", text, re.M):
        if not m.group(1).startswith("`-"):
            continue
        for opt in re.findall(r"(?<![\w-])(--[a-z][\w-]*|-[a-z])", m.group(1)):
            out.setdefault(opt, docs.line_of(name, start + m.start()))
    return out


def check_options(docs, build):
    problems = []
    report_opts = help_options(os.path.join(build, "gpumem-report"))
    launcher_opts = help_options(os.path.join(build, "gpumemtrace"))
    top_opts = help_options(os.path.join(build, "gpumemtrace"), "top")
    kernel_opts = help_options(os.path.join(build, "gpumemtrace"), "kernel")
    dump_opts = help_options(os.path.join(build, "gpumemtrace"), "dump")
    for doc, heading, end, opts, prog in (
            ("docs/report.md", "| option | meaning |", None, report_opts, "gpumem-report"),
            ("docs/launcher.md", "## Options", "\n## ", launcher_opts, "gpumemtrace"),
            ("docs/launcher.md", "## `gpumemtrace top`", "\n## ", top_opts, "gpumemtrace top"),
            ("docs/launcher.md", "## `gpumemtrace dump`", "\n## ", dump_opts, "gpumemtrace dump"),
            ("docs/launcher.md", "## `gpumemtrace kernel install`", "\n## ", kernel_opts, "gpumemtrace kernel")):
        table = table_options(docs, doc, heading, end)
        problems += [f"{doc}: {o} (`{prog} --help`) is not in the option table" for o in sorted(opts - set(table))]
        problems += [f"{doc}:{table[o]}: {o} is not an option of {prog}" for o in sorted(set(table) - opts)]
        # Within the section: each command's table has its own --help row.
        rows = re.findall(r"^\| (`-[^|]*)\|", section(docs, doc, heading, end)[0], re.M)
        problems += [f"{doc}: the option table after {heading} has the row `{r.strip()}` twice"
                     for r in sorted(set(rows)) if rows.count(r) > 1]
    known = report_opts | launcher_opts | top_opts | kernel_opts | dump_opts | FOREIGN_OPTIONS | script_options()
    for name, i, line in docs.lines():
        for o in re.findall(r"(?<![\w-])(--[a-z][a-z0-9_-]*[a-z0-9])", line):
            if o not in known:
                problems.append(f"{name}:{i}: {o} is an option of neither gpumem-report nor gpumemtrace nor of our scripts (else add it to FOREIGN_OPTIONS)")
    return problems


# ---------------------------------------------------------------- exit statuses

# Each situation, the command that makes it, and where the docs (or a --help text) state its status:
# (file, regular expression whose group is the status). Fixtures (EXIT_FIXTURES): clean.jsonl, leak.jsonl.zst, cut.jsonl.
EXITS = [
    ("a report without gates", "gpumem-report clean.jsonl", 0, [("docs/report.md", r"Exit status: \*\*(\d)\*\* fine"),
                                                                ("gpumem-report", r"exit status: (\d) fine")]),
    ("a gate that fails", "gpumem-report --fail-on-leak leak.jsonl.zst", 1,
     [("docs/report.md", r"\*\*(\d)\*\* a gate failed"), ("gpumem-report", r"(\d) a gate failed"),
      ("docs/launcher.md", r"(\d) a gate failed"), ("gpumemtrace", r"(\d) a gate failed")]),
    ("a usage error", "gpumem-report --top x leak.jsonl.zst", 2,
     [("docs/report.md", r"\*\*(\d)\*\* bad input or usage"), ("gpumem-report", r"(\d) bad input or usage")]),
    ("a refused allocator setting", "gpumem-report --what-if max_split_size_mb:10 leak.jsonl.zst", 2,
     [("docs/what-if.md", r"usage error \(exit (\d)\)")]),
    ("a gate on a cut trace", "gpumem-report --fail-on-leak cut.jsonl", 3,
     [("docs/report.md", r"\*\*(\d)\*\* a gate \(`--fail-on-leak`"), ("gpumem-report", r"(\d) a gate met a cut trace"),
      ("docs/launcher.md", r"(\d) a gate met a cut trace"), ("gpumemtrace", r"(\d) a gate met a cut trace")]),
    ("a site that would fill the device soon", "gpumem-report --fail-on-oom-within 1d tests/report/real/eval.jsonl.zst", 1,
     [("docs/what-if.md", r"fails \(exit (\d)")]),
    ("the launcher: a command not found", "gpumemtrace run -o out -- no-such-command-gpumem", 127,
     [("docs/launcher.md", r"(\d+) means CMD could not be found"), ("gpumemtrace", r"cannot be found gives (\d+)")]),
    ("the launcher: a command that cannot be executed", "gpumemtrace run -o out -- ./known.supp", 126,
     [("docs/launcher.md", r"(\d+) that it could not be executed"), ("gpumemtrace", r"cannot be\s+executed (\d+)")]),
    ("the launcher: bad usage", "gpumemtrace run --top x -- true", 2,
     [("docs/launcher.md", r"Exit status (\d) also means bad usage"), ("gpumemtrace", r"(\d) for bad usage")]),
    ("the launcher: no trace written under ci", "gpumemtrace ci -o out -- true", 2,
     [("docs/launcher.md", r"(\d) the traces could not be read or no trace was written"),
      ("gpumemtrace", r"(\d) the traces could not be read")]),
    ("the launcher: CMD's status", "gpumemtrace run -o out -- sh -c 'exit 5'", 5, []),
    ("gpumemtrace top: a file that is no trace", "gpumemtrace top --batch known.supp", 2,
     [("docs/launcher.md", r"0; (\d) when the trace cannot be found or read"),
      ("gpumemtrace", r"Exit 0; (\d) when the\s+trace cannot be found or read")]),
    ("gpumemtrace top: a trace that ended", "gpumemtrace top --batch clean.jsonl", 0,
     [("docs/launcher.md", r"\| (\d); 2 when the trace cannot be found or read")]),
    ("the launcher: CMD killed by SIGTERM", "gpumemtrace run -o out -- sh -c 'kill -TERM $$'", 128 + 15,
     [("docs/launcher.md", r"(\d+)\+N when signal N killed it", 15), ("gpumemtrace", r"\((\d+)\+N if a signal N killed it", 15)]),
]


EXIT_FIXTURES = ("head -n -1 trace.jsonl > cut.jsonl && cp trace.jsonl.zst leak.jsonl.zst && "
                 "LD_PRELOAD=build/libgpumemtrace.so GPUMEMTRACE_OUTPUT=clean.jsonl GPUMEMTRACE_QUIET=1 "
                 "build/tests/programs/report_clean >/dev/null")


def check_exits(docs, sandbox):
    problems = []
    helps = {p: run_tool([os.path.join(sandbox.build, p), "--help"]).stdout for p in ("gpumem-report", "gpumemtrace")}
    folder = sandbox.fresh()
    status, out = sandbox.run(EXIT_FIXTURES, sandbox=folder)
    if status != 0:
        return [f"check_docs.py EXIT_FIXTURES failed:\n{out[-1500:]}"]
    for n, (what, cmd, status, claims) in enumerate(EXITS):
        got, out = sandbox.run(cmd.replace("-o out", f"-o out{n}"), sandbox=folder)
        if got != status:
            problems.append(f"check_docs.py EXITS: {what}: `{cmd}` exits {got}, not {status}:\n{out[-1500:]}")
            continue
        for where, pattern, *signal in claims:  # a third item: N of "128+N"
            text = helps.get(where) or docs.text[where]
            m = re.search(pattern, text)
            label = f"`{where} --help`" if where in helps else where
            if not m:
                problems.append(f"{label}: no longer says /{pattern}/ ({what}): update check_docs.py EXITS")
            elif int(m.group(1)) + sum(signal) != status:
                line = "" if where in helps else f":{docs.line_of(where, m.start())}"
                problems.append(f"{label}{line}: says {m.group(0)!r} for {what}; it is {status}")
    return problems


# ---------------------------------------------------------------- facts

# Figures the prose states that a command can count: (file, regular expression whose group is the
# figure, command run in the sandbox that prints it).
FACTS = [
    ("docs/install.md", r"`-Wl,--exclude-libs,ALL`\): (\d+) symbols",
     "nm -D --defined-only build/libgpumemtrace.so | wc -l"),
    ("docs/performance.md", r"examples/train_loop 50, (\d+) events",
     "zstd -dcq trace.jsonl.zst | tail -n 1 | python -c 'import json,sys; print(json.load(sys.stdin)[\"events\"])'"),
    ("docs/configuration.md", r"`GPUMEMTRACE_SIM_CAPACITY` \| `(\d+)G`",
     "zstd -dcq trace.jsonl.zst | grep -m1 '\"type\":\"device\"' | python -c 'import json,sys; print(json.load(sys.stdin)[\"total\"] >> 30)'"),
    ("README.md", r"`GPUMEMTRACE_SIM_CAPACITY` sets the simulated device's size \(default `(\d+)G`",
     "zstd -dcq trace.jsonl.zst | grep -m1 '\"type\":\"device\"' | python -c 'import json,sys; print(json.load(sys.stdin)[\"total\"] >> 30)'"),
]


def check_facts(docs, sandbox):
    problems = []
    folder = sandbox.fresh()
    for name, pattern, cmd in FACTS:
        m = re.search(pattern, docs.text[name])
        if not m:
            problems.append(f"{name}: no longer says /{pattern}/: update check_docs.py FACTS")
            continue
        status, out = sandbox.run(cmd, sandbox=folder)
        if status != 0 or out.strip() != m.group(1):
            problems.append(f"{name}:{docs.line_of(name, m.start(1))}: says {m.group(1)}; `{cmd}` says {out.strip()}")
    return problems


# ---------------------------------------------------------------- make targets

def make_targets():
    """The Makefile's targets, from `make -pRrq` (prints the rules, runs nothing)."""
    out = run_tool(["make", "-C", ROOT, "-pRrq", "-f", "Makefile", "--no-print-directory", ".gpumem-no-target"]).stdout
    return set(re.findall(r"^([A-Za-z0-9][\w.-]*):(?!=)", out, re.M))


def make_commands(docs):
    """(file, line, command) of every `make ...` the docs write: in a code span, or a line of a block."""
    for name, i, line in docs.lines():
        for span in re.findall(r"`((?:nice )?make [^`]*)`", line):
            yield name, i, span
        m = re.match(r"\s*(?:\$ )?((?:nice (?:-n \d+ )?)?make .*)", line)
        if m and "`" not in line:
            yield name, i, m.group(1)


def check_make(docs):
    targets = make_targets()
    makefiles = "".join(open(os.path.join(ROOT, p)).read() for p in
                        ["Makefile"] + [os.path.join(d, "module.mk") for d in sorted(os.listdir(ROOT))
                                        if os.path.isfile(os.path.join(ROOT, d, "module.mk"))])
    problems = []
    for name, i, cmd in make_commands(docs):
        words = cmd.split("#")[0].split()
        for w in words[words.index("make") + 1:]:
            if re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", w):
                v = w.split("=")[0]
                if not re.search(rf"\$\({v}\)|^{v}\s*[:?+]?=", makefiles, re.M):
                    problems.append(f"{name}:{i}: `{cmd}`: the Makefile has no variable {v}")
            elif re.fullmatch(r"[a-z][\w-]*", w):
                if w not in targets:
                    problems.append(f"{name}:{i}: `{cmd}`: no target {w}")
            elif not w.startswith("-"):
                break  # a shell word after the command (&&, |, a file)
    return problems


# ---------------------------------------------------------------- links and paths

def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def check_links(docs):
    problems = []
    anchors = {n: {slug(h) for h in re.findall(r"^#+ (.*)$", docs.prose(n), re.M)} for n in docs.text}
    for name, i, line in docs.lines():
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(name), path)) if path else name
            if not (os.path.exists(os.path.join(docs.root, dest)) or os.path.exists(os.path.join(ROOT, dest))):
                problems.append(f"{name}:{i}: link to {target}: {dest} does not exist")
            elif anchor and dest in anchors and anchor not in anchors[dest]:
                problems.append(f"{name}:{i}: link to {target}: {dest} has no heading #{anchor}")
    return problems


# Paths the docs write that are examples, not files of this repository, or files other targets make.
EXAMPLE_PATHS = re.compile(r"tests/(test_model|test_m|test_x)\.py|tests/gpu$|tests/$|build/(demo|bench|fuzz)\b|build/report/(differential-(corpus|crash)|fuzz_report_differential)|build-")
REPO_PATH = re.compile(r"(?<![\w./~-])((?:bench|cupti|docs|examples|include|interpose|packaging|report|tests|tools|trace|"
                       r"util|vendor|build)/[\w./*-]*[\w*/])")
# A file named without its folder (`test_report_jobs.py`) must be somewhere in the repository, but
# for other projects' files the docs cite.
BARE_FILE = re.compile(r"`([A-Za-z0-9_-]+\.(?:py|cpp|h|cc|c|sh|mk|supp|js|css|cu|map))`")
OTHER_PROJECTS_FILES = {"AllocatorConfig.cpp", "nvToolsExtMemCudaRt.h"}


def repo_file_names():
    names = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d != "node_modules"]
        names.update(files)
    return names


def check_paths(docs, build):
    problems = []
    names = repo_file_names() | OTHER_PROJECTS_FILES
    for name, i, line in docs.lines():
        for p in REPO_PATH.findall(line):
            if EXAMPLE_PATHS.search(p) or "::" in line[line.find(p):line.find(p) + len(p) + 2]:
                continue
            base = build if p.startswith("build/") else ROOT
            rel = p[len("build/"):] if p.startswith("build/") else p
            if not any(glob.glob(os.path.join(base, rel) + ext) for ext in ("", ".cpp", ".c", ".py")):
                problems.append(f"{name}:{i}: {p} does not exist")
        problems += [f"{name}:{i}: {f}: no file of that name in the repository" for f in BARE_FILE.findall(line)
                     if f not in names]
    return problems


# ---------------------------------------------------------------- main

SANDBOXED = ("commands", "exits", "facts", "json", "trace")
CHECKS = ["commands", "variables", "options", "exits", "facts", "json", "trace", "make", "links", "paths"]


def run_checks(names, docs=None, build=None, sandbox=None):
    """{check name: [problem, ...]}; checks that run commands are skipped (None) where they cannot run."""
    docs = docs or Docs()
    build = build or build_dir()
    why_not = commands_can_run(build)
    own_sandbox = sandbox is None and why_not is None and any(n in SANDBOXED for n in names)
    sandbox = Sandbox(build) if own_sandbox else sandbox
    try:
        calls = {"commands": lambda: check_commands(docs, sandbox), "variables": lambda: check_variables(docs),
                 "options": lambda: check_options(docs, build), "exits": lambda: check_exits(docs, sandbox),
                 "facts": lambda: check_facts(docs, sandbox),
                 "json": lambda: check_json(docs, sandbox), "trace": lambda: check_trace_format(docs, sandbox),
                 "make": lambda: check_make(docs),
                 "links": lambda: check_links(docs), "paths": lambda: check_paths(docs, build)}
        return {n: (None if why_not and n in SANDBOXED + ("options",) else calls[n]()) for n in names}
    finally:
        if own_sandbox:
            sandbox.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=None)
    ap.add_argument("--only", action="append", choices=CHECKS)
    args = ap.parse_args()
    build = os.path.abspath(args.build) if args.build else build_dir()
    results = run_checks(args.only or CHECKS, build=build)
    bad = 0
    for name, problems in results.items():
        if problems is None:
            print(f"{name}: skipped ({commands_can_run(build)})")
            continue
        print(f"{name}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
        for p in problems:
            print("  " + p.replace("\n", "\n    "))
        bad += len(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
