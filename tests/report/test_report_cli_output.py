# tests/report/test_report_cli_output.py — gpumem-report's command line, inputs, gates and output errors.
"""The report's command line and output: a report that cannot be written is an error (exit 2, one
line), JSON output survives names that are not UTF-8, usage errors are one line, traces come from
standard input or a FIFO, -o never empties a trace, --top N shows N entries in every section, diff
honours every gate, and suppressions match only the allocation site's frames."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading

from reportlib import REPORT, ReportTestCase, run_report
from tracegen import KiB, MiB, Trace

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "golden", "blocks.jsonl")


class CliOutput(ReportTestCase):
    def test_output_file_that_cannot_be_written_exits_2(self):
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full")
        for fmt in ("text", "json"):
            with self.subTest(format=fmt):
                proc = run_report("--format", fmt, "-o", "/dev/full", TRACE)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                lines = proc.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertIn("/dev/full: cannot write the report", lines[0])

    def test_standard_output_that_cannot_be_written_exits_2(self):
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full")
        with open("/dev/full", "w") as full:
            proc = subprocess.run([REPORT, TRACE], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertIn("standard output: cannot write the report", proc.stderr)

    def test_standard_output_whose_reader_left_is_not_an_error(self):
        # `gpumem-report TRACE | head`: the reader leaves before the report is written. Nothing is said
        # about it, and the gates still decide the exit status, whether SIGPIPE is ignored (as Python
        # and some CI runners leave it for their children) or not.
        for ignored in (False, True):
            for args, rc in ((["--fail-on-leak", TRACE], 1), ([TRACE], 0), (["--format", "json", TRACE], 0)):
                with self.subTest(sigpipe_ignored=ignored, args=args):
                    read, write = os.pipe()
                    os.close(read)  # the reader is gone before the first write
                    preexec = (lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN)) if ignored else None
                    try:
                        proc = subprocess.run([REPORT, *args], stdout=write, stderr=subprocess.PIPE, text=True,
                                              timeout=60, preexec_fn=preexec)
                    finally:
                        os.close(write)
                    self.assertEqual(proc.returncode, rc, proc.stderr)
                    self.assertNotIn("cannot write", proc.stderr)
                    self.assertEqual(proc.stderr.count("gpumem-report:"), rc, proc.stderr)  # the FAILED message alone

    def test_json_of_a_file_name_that_is_not_utf8(self):
        work = tempfile.mkdtemp()
        try:
            path = os.path.join(os.fsencode(work), b"trace-\xff.jsonl")
            shutil.copy(TRACE, path)
            proc = subprocess.run([os.fsencode(REPORT), b"--format", b"json", path], capture_output=True, timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            data = json.loads(proc.stdout.decode("utf-8"))
            self.assertTrue(data["processes"][0]["file"].endswith("trace-\ufffd.jsonl"))
        finally:
            shutil.rmtree(work)


def write_sections_trace(path, n=7):
    """n entries in every section of the text report: leaks, held at exit, leaking scopes, peak holders,
    OOMs (and their holders), failed calls and growing sites."""
    t = Trace(path)
    lib = t.module(3, "/usr/lib/libcublas.so.13")
    next_addr = [0x10000000]

    def take(size):
        next_addr[0] += size + 0x1000
        return next_addr[0]

    growing = []
    for _ in range(40):
        for i in range(n):
            a = take(64 * KiB)
            t.alloc(a, 64 * KiB, t.stack("grow_site_%d" % i))
            growing.append(a)
    for a in growing:
        t.free(a)
    for i in range(n):
        t.alloc(take((i + 1) * MiB), (i + 1) * MiB, t.stack("leak_site_%d" % i))
    for i in range(n):
        held = t.raw_stack([t.cudart, t.native(lib, "held_site_%d" % i), t.native(lib, "cublasCreate_v2"), t.main])
        t.alloc(take(MiB), MiB, held)
    for i in range(n):
        t.event("scope_begin", "none", device=-1, api="gpumemtrace_scope", label="scope_%d" % i)
        t.alloc(take(KiB), KiB, t.stack("scope_site_%d" % i))
        t.event("scope_end", "none", device=-1, api="gpumemtrace_scope", label="scope_%d" % i)
    for i in range(n):  # 3 s apart: separate incidents
        t.failed_alloc((1 << 40) + i * MiB, t.stack("oom_site_%d" % i), dt=3_000_000_000)
    for i in range(n):
        t.failed_alloc(16, t.stack("bad_call_%d" % i), result=1)
    t.close()


def sections(text):
    """{first words of a section's heading: [its blocks' lines]}: a block starts at a line without indent."""
    blocks = {}
    current = None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            key = re.match(r"[a-zA-Z= ]+", line).group(0).strip()
            current = [line]
            blocks.setdefault(key, []).append(current)
        elif current is not None:
            current.append(line)
    return blocks


def count(block, pattern):
    return sum(1 for line in block if re.match(pattern, line))


class Usage(ReportTestCase):
    def test_version(self):
        proc = run_report("--version", check_rc=0)
        self.assertRegex(proc.stdout, r"^gpumem-report \d+\.\d+")

    def test_usage_error_is_one_line(self):
        for args in (["--bogus", TRACE], [], ["--top"], ["--top", "x", TRACE], ["--format=xml", TRACE],
                     ["--fail-on-leak=lots", TRACE], ["diff", TRACE], ["--library=", TRACE], [TRACE, "diff"]):
            with self.subTest(args=args):
                proc = run_report(*args)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertEqual(proc.stdout, "")
                lines = proc.stderr.splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertTrue(lines[0].startswith("gpumem-report: "), lines[0])
                self.assertIn("run with --help for more", lines[0])

    def test_fail_on_leak_size_attaches_only_with_equals(self):
        # A bare --fail-on-leak is followed by a trace, never by its size.
        self.assertEqual(run_report("--fail-on-leak", TRACE).returncode, 1)
        self.assertEqual(run_report("--fail-on-leak=1GiB", TRACE).returncode, 0)
        self.assertEqual(run_report(TRACE, "--fail-on-leak").returncode, 1)

    def test_slips_are_told_what_to_write(self):
        for args, said in ((["--fail-on-laek", TRACE], "unknown option --fail-on-laek; did you mean --fail-on-leak?"),
                           (["--fromat=json", TRACE], "unknown option --fromat; did you mean --format?"),
                           (["--width-of-everything", TRACE], "unknown option --width-of-everything"),
                           (["--fail-on-leak", "1MiB", TRACE], "--fail-on-leak takes its size after '=': --fail-on-leak=1MiB"),
                           (["--fail-on-leak", "0", TRACE], "--fail-on-leak takes its size after '=': --fail-on-leak=0")):
            with self.subTest(args=args):
                proc = run_report(*args)
                self.assertEqual((proc.returncode, proc.stdout), (2, ""))
                self.assertEqual(proc.stderr, f"gpumem-report: {said} (run with --help for more)\n")
        # A word that names a file is a trace, size or not.
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        shutil.copy(TRACE, os.path.join(work, "1M"))
        proc = subprocess.run([REPORT, "--fail-on-leak", "1M"], cwd=work, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("FAILED: 1M: leaked", proc.stderr)

    def test_options_after_diff(self):
        proc = run_report("diff", TRACE, TRACE, "--format", "json", check_rc=0)
        self.assertIn("peaks", json.loads(proc.stdout))


class Streams(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.work)
        with open(TRACE, "rb") as f:
            self.plain = f.read()
        self.expected = json.loads(run_report("--format", "json", TRACE, check_rc=0).stdout)

    def check(self, proc, name):
        self.assertEqual(proc.returncode, 0, proc.stderr)
        report = json.loads(proc.stdout)
        self.assertEqual(report["processes"][0]["file"], name)
        strip = lambda leaks: [{k: v for k, v in leak.items() if k != "file"} for leak in leaks]  # noqa: E731
        self.assertEqual(strip(report["leaks"]), strip(self.expected["leaks"]))

    def test_stdin_plain_and_zstd(self):
        compressed = subprocess.run(["zstd", "-q", "-c"], input=self.plain, capture_output=True, check=True).stdout
        for name in ("-", "/dev/stdin"):
            for data in (self.plain, compressed):
                with self.subTest(name=name, zstd=data is compressed):
                    proc = subprocess.run([REPORT, "--format", "json", name], input=data, capture_output=True,
                                          timeout=60)
                    self.check(proc, name)

    def test_stdin_is_read_once(self):
        proc = subprocess.run([REPORT, "-", "-"], input=self.plain, capture_output=True, text=False, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn(b"standard input can be read only once", proc.stderr)

    def test_fifo_ends_with_its_writer(self):
        fifo = os.path.join(self.work, "trace.fifo")
        os.mkfifo(fifo)

        def write():
            with open(fifo, "wb") as f:  # opens when the report opens it for reading
                f.write(self.plain)

        writer = threading.Thread(target=write, daemon=True)  # never keeps the test run alive
        writer.start()
        try:
            proc = subprocess.run([REPORT, "--format", "json", fifo], capture_output=True, timeout=30)
        finally:
            writer.join(timeout=30)
        self.check(proc, fifo)


class OutputAmongInputs(ReportTestCase):
    def test_output_that_is_an_input_is_refused_and_kept(self):
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        trace = os.path.join(work, "t.jsonl")
        shutil.copy(TRACE, trace)
        os.link(trace, os.path.join(work, "hard.jsonl"))
        with open(trace, "rb") as f:
            before = f.read()
        for output, inputs in ((trace, [trace]), (os.path.join(work, ".", "t.jsonl"), [trace]),
                               (os.path.join(work, "hard.jsonl"), [trace]), (trace, [work]),
                               (trace, ["diff", TRACE, trace])):
            with self.subTest(output=output, inputs=inputs):
                proc = run_report("-o", output, *inputs)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
                self.assertIn("is one of the traces", proc.stderr)
                with open(trace, "rb") as f:
                    self.assertEqual(f.read(), before)


class TopN(ReportTestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp()
        cls.trace = os.path.join(cls.work, "sections.jsonl")
        write_sections_trace(cls.trace)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work)

    def counts(self, top):
        text = run_report("--top", top, "--frames", "1", self.trace).stdout
        s = sections(text)
        entry = r"^  \S+ \S+ in \d+ allocations? \("
        holder = r"^    \S+ \S+ \(\d+%\) in \d+ allocations?:"
        return {
            "leaks": count(s["leaks"][0], entry),
            "held at exit": count(s["held at exit"][0], entry),
            "scopes": count(s["scopes"][0], r"^  LEAK "),
            "peak holders": count(s["peak"][0], holder),
            "OOMs": len(s.get("OOM", [])),
            "OOM holders": max((count(b, holder) for b in s.get("OOM", [])), default=0),
            "failed calls": count(s["failed calls"][0], r"^  cudaMalloc "),
            "growth": len(s.get("growth", [])) if "growth: none" not in text else 0,
        }

    def test_every_section_shows_exactly_n(self):
        everything = self.counts(100)
        for section, n in everything.items():
            self.assertGreaterEqual(n, 4, (section, everything))  # the trace has more than any N below
        for top in (0, 1, 3):
            with self.subTest(top=top):
                self.assertEqual(self.counts(top), {section: top for section in everything})

    def test_diff_sections(self):
        text = run_report("diff", "--top", "2", "--frames", "1", TRACE, self.trace).stdout
        self.assertEqual(count(text.splitlines(), r"^    [+-]\S+ \S+ \(\S+ \S+ in \d+ -> "), 2, text)


class DiffGates(ReportTestCase):
    def test_leak_and_growth_gates_judge_the_new_run(self):
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        clean = os.path.join(work, "clean.jsonl")
        t = Trace(clean)
        t.alloc(0x1000, MiB, t.stack("step"))
        t.free(0x1000)
        t.close()
        leaky = os.path.join(work, "leaky.jsonl")
        write_sections_trace(leaky)
        self.assertEqual(run_report("diff", clean, leaky).returncode, 0)
        for gate in ("--fail-on-leak", "--fail-on-growth"):
            with self.subTest(gate=gate):
                proc = run_report("diff", gate, clean, leaky)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertIn("FAILED: " + leaky, proc.stderr)
                self.assertEqual(run_report("diff", gate, leaky, clean).returncode, 0)
        self.assertEqual(run_report("diff", "--fail-on-leak=1GiB", clean, leaky).returncode, 0)


class SiteSuppressions(ReportTestCase):
    def test_module_patterns_match_only_the_allocation_site(self):
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        path = os.path.join(work, "t.jsonl")
        t = Trace(path)
        libc = t.module(3, "/usr/lib/x86_64-linux-gnu/libc.so.6")
        mylib = t.module(4, "/opt/app/libmodel.so")
        # The user's code -> pthread_once in libc -> the CUDA runtime; below main, __libc_start_main.
        once = t.native(libc, "__pthread_once_slow")
        start = t.native(libc, "__libc_start_main")
        via_libc = t.raw_stack([t.cudart, once, t.native(1, "load_weights", "/src/app.cu", 30), t.main, start])
        in_lib = t.raw_stack([t.cudart, t.native(mylib, "model_init"), t.main, start])
        t.alloc(0x1000, 2 * MiB, via_libc)
        t.alloc(0x900000, MiB, in_lib)
        t.close()
        rules = os.path.join(work, "rules.supp")
        for pattern, suppressed in (("libc.so", 0), ("libcudart", 0), ("__libc_start_main", 0),
                                    ("libmodel.so", MiB), ("load_weights", 2 * MiB), ("^main$", 3 * MiB)):
            with self.subTest(pattern=pattern):
                with open(rules, "w") as f:
                    f.write("leak:%s\n" % pattern)
                report = json.loads(run_report("--format", "json", "--suppressions", rules, path, check_rc=0).stdout)
                hidden = sum(leak["bytes"] for leak in report["leaks"] if leak.get("suppressed"))
                self.assertEqual(hidden, suppressed)
