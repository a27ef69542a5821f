# tests/e2e/test_inlined_frames.py — inlined frames of optimized programs, named as addr2line -i names them.
"""Every inlined level of an optimized program is a frame of its own, with its own call line.

The programs of tests/e2e/inlined/ (built with -g at -O1, -O2, -O3, with -flto, by clang, and through
a shared library: tests/module.mk) run on the simulated runtime under the recorder, with symbols
(GPUMEMTRACE_SYMBOLIZE=1, the writer names the frames) and without (=0, gpumem-report names them from
the files). Every native frame of the programs' own modules is compared, level for level, with
`eu-addr2line -i -f -C --relative` at the same address (the frame's offset minus one: a return
address), in the trace the writer wrote and in the reports of both traces.

Three documented differences (docs/trace-format.md, "frame"):
  - GCC's link-time optimized units: eu-addr2line (elfutils 0.188) finds no scope there and lists no
    inlined level, so the lto program is compared with binutils' addr2line -i, which does;
  - clang writes no .debug_aranges, and there eu-addr2line finds no unit at all (`??:0`); the
    recorder reads the units' own ranges (trace/dwarf_symbols.h, UnitIndex), and the clang program is
    compared with binutils' addr2line -i too;
  - the real (outermost) function of a C++ function with internal linkage (no DW_AT_linkage_name) is
    named by its ELF symbol, `(anonymous namespace)::upload_weights(int)` where eu-addr2line says
    `upload_weights`.
The chains are also checked against the source (each level's line is the line of its call), and the
text, JSON, HTML and folded outputs must show every level.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "report"))

from recorder_testlib import LIB, PROGRAMS, ROOT, Trace, run_traced, tempdir, trace_files  # noqa: E402
from reportlib import REPORT, run_report  # noqa: E402

MiB = 1 << 20
INLINED = os.path.realpath(os.path.join(PROGRAMS, "inlined"))  # as the trace names modules
SOURCES = os.path.join(ROOT, "tests", "e2e", "inlined")
LIBRARY = os.path.join(INLINED, "libinlined_lib.so")

# Program -> {leak size: [(function, inlined?, source file, text on the line of that level)]}, innermost
# first, as far as main. Each level's line is the one line of its source file that holds the text.
CHAIN_C = {
    3 * MiB: [("alloc_scratch", True, "chain.c", "if (cudaMalloc(&p, bytes) != cudaSuccess) return NULL;"),
              ("build_batch", True, "chain.c", "void* scratch = alloc_scratch("),
              ("train_step", False, "chain.c", "void* p = build_batch(batch);"),
              ("main", False, "chain.c", "void* a = train_step(")],
    5 * MiB: [("stage_reserve", True, "chain.c", "if (cudaMalloc(&p, bytes) != cudaSuccess) p = NULL;"),
              ("stage_tensor", True, "chain.c", "void* p = stage_reserve(bytes);"),
              ("prepare_step", True, "chain.c", "void* p = stage_tensor("),
              ("main", False, "chain.c", "void* b = prepare_step(")],
}
EXPECTED = {
    "chain_O1": CHAIN_C,
    "chain_O2": CHAIN_C,
    "chain_O3": CHAIN_C,
    "chain_clang": CHAIN_C,
    "templates": {
        7 * MiB: [("float* model::Pool<float>::reserve<2>(unsigned long)", True, "templates.cpp",
                   "if (cudaMalloc(&p, count * sizeof(T) * Scale)"),
                  ("model::Pool<float>::grow(unsigned long)", True, "templates.cpp", "T* p = reserve<2>(count);"),
                  ("warm_cache", True, "templates.cpp", "float* p = pool.grow(count);"),
                  ("operator()", True, "templates.cpp", "float* p = warm_cache(pool, count);"),
                  ("model::make_cache(model::Pool<float>&, unsigned long)", False, "templates.cpp",
                   "float* p = fill(megabytes"),
                  ("main", False, "templates.cpp", "float* cache = model::make_cache(")],
        9 * MiB: [("checked_alloc", True, "templates.cpp", "if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;"),
                  ("(anonymous namespace)::upload_weights(int)", False, "templates.cpp", "void* p = checked_alloc("),
                  ("main", False, "templates.cpp", "void* weights = upload_weights(")],
        11 * MiB: [("lib_reserve", True, "inlined_lib.cpp", "if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;"),
                   ("lib_workspace", True, "inlined_lib.cpp", "void* p = lib_reserve("),
                   ("lib_alloc_workspace", False, "inlined_lib.cpp", "void* p = lib_workspace(megabytes);"),
                   ("main", False, "templates.cpp", "void* workspace = lib_alloc_workspace(")],
    },
    "lto": {
        13 * MiB: [("lto_grab(unsigned long)", True, "lto_part.cpp", "if (cudaMalloc(&p, bytes) != cudaSuccess)"),
                   ("lto_plan(int)", True, "lto_part.cpp", "void* p = lto_grab("),
                   ("lto_step(int)", False, "lto_main.cpp", "void* p = lto_plan(megabytes);"),
                   ("main", False, "lto_main.cpp", "return lto_step(")],
    },
}
# Programs whose reference is binutils' addr2line (see the docstring).
BINUTILS_REFERENCE = {"lto", "chain_clang"}
# Real functions that the recorder names by their ELF symbol where eu-addr2line gives DW_AT_name.
ELF_NAMED = {"(anonymous namespace)::upload_weights(int)": "upload_weights"}

_LOCATION = re.compile(r"^(?: \(inlined by\) )?(.*) at (.*?):(\d+|\?)(?::\d+)?(?: \(discriminator \d+\))?$")


def source_line(name, text):
    """The line number of the one line of tests/e2e/inlined/NAME that holds `text`."""
    with open(os.path.join(SOURCES, name)) as f:
        hits = [n for n, line in enumerate(f, 1) if text in line]
    if len(hits) != 1:
        raise AssertionError(f"{name}: {len(hits)} lines hold {text!r}")
    return hits[0]


def absolute(path):
    """A source path as the DWARF of the test programs gives it (relative to the repository, where
    make compiles them) made absolute, as binutils' addr2line prints it."""
    return path if not path or path.startswith("/") else os.path.normpath(os.path.join(ROOT, path))


def run_addr2line(command, module, offsets):
    """{offset: [(function, file, line), ...] innermost first} for return-address offsets in module,
    looked up at offset - 1 by `command` (an addr2line -i -f -C --pretty-print)."""
    proc = subprocess.run(command + ["-e", module] + [hex(o - 1) for o in offsets], capture_output=True, text=True,
                          timeout=60, check=True)
    answers = []
    for line in proc.stdout.splitlines():
        m = _LOCATION.match(line)
        if not m:
            raise AssertionError(f"{command[0]}: unexpected line {line!r}")
        function, file, number = m.group(1), m.group(2), m.group(3)
        level = (function, "" if file == "??" else file, 0 if file == "??" else int(number))
        if line.startswith(" (inlined by) "):
            answers[-1].append(level)
        else:
            answers.append([level])
    if len(answers) != len(offsets):
        raise AssertionError(f"{command[0]}: {len(answers)} answers for {len(offsets)} addresses:\n{proc.stdout}")
    return dict(zip(offsets, answers))


EU_ADDR2LINE = ["eu-addr2line", "-i", "-f", "-C", "--relative", "--pretty-print"]
BINUTILS_ADDR2LINE = ["addr2line", "-i", "-f", "-C", "--pretty-print"]


def reference(module, offsets, binutils):
    """The reference levels of each offset: eu-addr2line's; with `binutils`, binutils' addr2line's,
    except that it names the file of a function that link-time optimization left whole (not inlined
    into anything, nothing inlined into it at the address) `<artificial>`, the name of the LTO unit:
    there eu-addr2line, which is right about such a frame, must agree with it on all else and is taken."""
    if not binutils:
        return run_addr2line(EU_ADDR2LINE, module, offsets)
    out = run_addr2line(BINUTILS_ADDR2LINE, module, offsets)
    artificial = [o for o, answer in out.items() if len(answer) == 1 and answer[0][1].endswith("/<artificial>")]
    eu = run_addr2line(EU_ADDR2LINE, module, artificial) if artificial else {}
    for offset in artificial:
        (function, _, line), = out[offset]
        if [(function, line)] != [(f, n) for f, _, n in eu[offset]]:
            raise AssertionError(f"{module} {hex(offset - 1)}: addr2line {out[offset]}, eu-addr2line {eu[offset]}")
        out[offset] = [(function, absolute(eu[offset][0][1]), line)]
    return out


def levels(frame):
    """A trace's frame record as its logical levels, innermost first: (function, file, line)."""
    return [(i["function"], i.get("file", ""), i.get("line", 0)) for i in frame.get("inlined", [])] + \
           [(frame.get("function", ""), frame.get("file", ""), frame.get("line", 0))]


def record(program, folder, symbolize):
    os.makedirs(folder)
    proc = run_traced([os.path.join(INLINED, program)], folder,
                      env={"GPUMEMTRACE_SYMBOLIZE": symbolize, "GPUMEMTRACE_QUIET": "1"})
    files = trace_files(folder)
    if proc.returncode != 0 or len(files) != 1:
        raise AssertionError(f"{program}: exit {proc.returncode}, traces {files}\n{proc.stdout}{proc.stderr}")
    return files[0]


class InlinedFrames(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = [p for p in (REPORT, LIB, LIBRARY, *(os.path.join(INLINED, p) for p in EXPECTED))
                   if not os.path.exists(p)]
        if missing:
            raise unittest.SkipTest(f"not built: {', '.join(missing)}")
        for tool in ("eu-addr2line", "addr2line"):
            if not shutil.which(tool):  # make deps installs them (elfutils, binutils): a missing one fails
                raise AssertionError(f"{tool} not found: `make deps` installs it")
        cls.root = tempdir()
        cls.traces = {(p, s): record(p, os.path.join(cls.root, f"{p}.{s}"), s) for p in EXPECTED for s in "10"}
        cls.reports = {key: json.loads(run_report("--format", "json", path, check_rc=0).stdout)
                       for key, path in cls.traces.items()}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def own_modules(self, trace):
        return {m["id"]: m["path"] for m in trace.modules.values() if m["path"].startswith(INLINED + "/")}

    def expected_levels(self, program, trace):
        """{frame id: the reference tool's levels} for the frames of the program's own modules."""
        own = self.own_modules(trace)
        frames = [f for f in trace.frames.values() if f.get("module") in own]
        out = {}
        for module_id, path in own.items():
            mine = [f for f in frames if f["module"] == module_id]
            answers = reference(path, [int(f["offset"], 16) for f in mine], program in BINUTILS_REFERENCE)
            for f in mine:
                out[f["id"]] = answers[int(f["offset"], 16)]
        return out

    def assert_same_levels(self, program, ours, theirs, where):
        """Level for level; paths compared as the reference prints them; the real function may be
        named by its ELF symbol where the reference gives a bare DW_AT_name (ELF_NAMED)."""
        binutils = program in BINUTILS_REFERENCE
        mine = [(f, absolute(file) if binutils else file, line) for f, file, line in ours]
        self.assertEqual(len(mine), len(theirs), f"{where}: {mine} != {theirs}")
        for i, ((function, file, line), (ref_function, ref_file, ref_line)) in enumerate(zip(mine, theirs)):
            if ELF_NAMED.get(function) == ref_function:
                ref_function = function
            self.assertEqual((function, file, line), (ref_function, ref_file, ref_line), f"{where}, level {i}")

    def test_writer_names_every_level_as_addr2line(self):
        for program in EXPECTED:
            with self.subTest(program=program):
                trace = Trace(self.traces[(program, "1")])
                expected = self.expected_levels(program, trace)
                self.assertTrue(expected)
                for frame_id, theirs in expected.items():
                    self.assert_same_levels(program, levels(trace.frames[frame_id]), theirs,
                                            f"{program}: frame {trace.frames[frame_id]}")
                # There was something to get wrong: some frame has two inlined levels or more.
                self.assertTrue(any(len(t) >= 3 for t in expected.values()), expected)

    def report_levels(self, program, symbolize, size):
        """The report's stack of the leak of `size`, the frames of the program's own modules only."""
        report = self.reports[(program, symbolize)]
        own = set(self.own_modules(Trace(self.traces[(program, symbolize)])).values())
        leak = next(l for l in report["leaks"] if l["bytes"] == size)
        return [f for f in leak["stack"] if f.get("module") in own]

    def test_both_paths_report_every_level_as_addr2line(self):
        for program, leaks in EXPECTED.items():
            for symbolize in "10":
                trace = Trace(self.traces[(program, symbolize)])
                expected = self.expected_levels(program, trace)
                own = self.own_modules(trace)
                for size in leaks:
                    with self.subTest(program=program, symbolize=symbolize, size=size):
                        event = next(e for e in trace.allocs() if e["size"] == size)
                        theirs = [level for fid in trace.stacks[event["stack"]]["frames"]
                                  if trace.frames[fid].get("module") in own for level in expected[fid]]
                        stack = self.report_levels(program, symbolize, size)
                        ours = [(f["function"], f.get("file", ""), f.get("line", 0)) for f in stack]
                        self.assertTrue(ours)
                        self.assert_same_levels(program, ours, theirs, f"{program} SYMBOLIZE={symbolize}")

    def test_chains_follow_the_source(self):
        # Independent of any addr2line: the names, which are inlined, and each level's line is that of
        # its call (the innermost: of the allocation), in both paths.
        for program, leaks in EXPECTED.items():
            for symbolize in "10":
                for size, chain in leaks.items():
                    with self.subTest(program=program, symbolize=symbolize, size=size):
                        stack = self.report_levels(program, symbolize, size)
                        got = [(f["function"], f.get("inlined", False), os.path.basename(f.get("file", "")),
                                f.get("line", 0)) for f in stack][:len(chain)]
                        want = [(name, inlined, source, source_line(source, text))
                                for name, inlined, source, text in chain]
                        self.assertEqual(got, want)

    def test_text_report_lists_every_level_with_its_line(self):
        text = run_report(self.traces[("chain_O2", "1")], check_rc=0).stdout
        chain = [f"{name} (tests/e2e/inlined/chain.c:{source_line(source, line)})"
                 for name, _, source, line in CHAIN_C[3 * MiB]]
        self.assertIn("\n".join("      " + line for line in chain) + "\n", text)

    def test_folded_and_html_carry_every_level(self):
        trace = self.traces[("templates", "0")]
        folded = run_report("--folded=leaks", trace, check_rc=0).stdout
        chain = EXPECTED["templates"][7 * MiB]
        path = ";".join(f"{name} (tests/e2e/inlined/{source}:{source_line(source, text)})"
                        for name, _, source, text in reversed(chain))
        self.assertIn(path + " ", folded)  # root first, then the bytes
        html = run_report("--format", "html", trace, check_rc=0).stdout
        data = json.loads(re.search(r'<script type="application/json" id="gpumem-data">(.*?)</script>', html,
                                    re.S).group(1))
        leak = next(l for l in data["leaks"] if l["bytes"] == 7 * MiB)
        stack = data["stack_table"][leak["stack"]]["frames"]  # the page keeps each stack once
        names = [f["function"] for f in stack][:len(chain)]
        self.assertEqual(names, [name for name, *_ in chain])
        self.assertEqual([f.get("inlined", False) for f in stack][:len(chain)],
                         [inlined for _, inlined, *_ in chain])

    def test_user_code_and_library_patterns_judge_each_level(self):
        trace = self.traces[("templates", "1")]
        # The library's three levels (two inlined) fold into one line that counts them all.
        text = run_report("--library", "*/inlined_lib.cpp", trace, check_rc=0).stdout
        self.assertIn("      main (tests/e2e/inlined/templates.cpp:"
                      f"{source_line('templates.cpp', 'void* workspace = lib_alloc_workspace(')})\n"
                      "      [*/inlined_lib.cpp: 3 frames]\n", text)
        # One inlined level kept as user code among frames made library code.
        text = run_report("--library", "*.cpp", "--user-code", "warm_cache", trace, check_rc=0).stdout
        line = source_line("templates.cpp", "float* p = pool.grow(count);")
        self.assertIn(f"      warm_cache (tests/e2e/inlined/templates.cpp:{line})\n"
                      "      [*.cpp: 5 frames]\n", text)


if __name__ == "__main__":
    unittest.main()
