# tests/report/test_report_bounded_input.py — every input costs bounded time, memory and disk (issue 27).
"""gpumem-report and gpumem-snapshot2trace on inputs made to cost gigabytes or to crash them: stacks of
millions of frame references, frames with thousands of inlined levels, millions of definitions, JSON
nested 50,000 deep, streams that never end, an output that is the input. Each is refused with one
line and exit 2, within the limits docs/security.md lists, or handled without leaving anything behind."""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "snapshot"))
import snapshot_samples  # noqa: E402  (tests/snapshot: PyTorch-shaped snapshots as plain dicts)
from reportlib import (BUILD, REPORT, ReportTestCase, report_json, run_measured, run_report, skip_bounds_under_sanitizer,
                       zstd)

MiB = 1 << 20
CONVERT = os.path.join(BUILD, "gpumem-snapshot2trace")
HEADER = b'{"type":"header","format":"gpumemtrace","version":2,"pid":7}\n'
FOOTER = b'{"type":"footer","events":1,"dropped_total":0,"end_time":10}\n'


def site(stack=0, sid=1):
    return (b'{"type":"site","id":%d,"tid":1,"api":"cudaMalloc","op":"alloc","kind":"device","device":0,"stack":%d}\n'
            % (sid, stack))


EVENT = b'{"e":1,"t":5,"a":"0x7000","s":4096}\n'


def read(path):
    with open(path, "rb") as f:
        return f.read()


class Case(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="gpumem-bounded-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def trace(self, name, chunks):
        path = os.path.join(self.dir, name)
        zstd(path, chunks)
        return path

    def refused(self, path, why, limit_s=60, seconds=10, rss=200 * MiB):
        """gpumem-report refuses `path`: exit 2, one line naming `why`, within `seconds` and `rss`."""
        rc, stderr, took, peak = run_measured([REPORT, "--format", "json", "-o", os.devnull, path], limit_s=limit_s)
        self.assertEqual(rc, 2, stderr[-500:])
        self.assertIn(why, stderr)
        self.assertEqual(len(stderr.splitlines()), 1, stderr[-500:])
        self.assertLess(took, seconds)
        self.assertLess(peak, rss, f"max RSS {peak / MiB:.0f} MiB")
        return stderr


class StackLimits(Case):
    """A stack's frame references (format.h kMaxStackFrames, 1024) and a frame's inlined calls
    (kMaxInlinedLevels, 64) are bounded as the line is read; a stack's logical frames and names once
    resolved too (trace_reader.h kMaxLogicalFrames, kMaxStackTextBytes)."""

    @skip_bounds_under_sanitizer
    def test_a_stack_of_two_million_frame_references_is_refused(self):
        # 624 bytes of zstd. Resolving it took 26-48 s and 1.5-6 GB.
        path = self.trace("long.jsonl.zst", [HEADER, b'{"type":"frame","id":1,"function":"f"}\n',
                                             b'{"type":"stack","id":1,"frames":[' + b",".join([b"1"] * 2_000_000) + b"]}\n",
                                             site(1), EVENT, FOOTER])
        self.assertLess(os.path.getsize(path), 4096)
        self.refused(path, 'long.jsonl.zst:3: field "frames": more than 1024 frames in one stack', limit_s=30)

    @skip_bounds_under_sanitizer
    def test_frames_with_sixty_thousand_inlined_levels_are_refused(self):
        # 50 frames x 60,000 levels, a few KB of zstd: 47-70 s and 2.4-12 GB.
        levels = b",".join([b'{"function":"g"}'] * 60_000)
        frames = [b'{"type":"frame","id":%d,"function":"f","inlined":[%s]}\n' % (i, levels) for i in range(1, 51)]
        path = self.trace("inlined.jsonl.zst", [HEADER, *frames,
                                                b'{"type":"stack","id":1,"frames":[%s]}\n' % b",".join(b"%d" % i for i in range(1, 51)),
                                                site(1), EVENT, FOOTER])
        self.refused(path, 'inlined.jsonl.zst:2: field "inlined": more than 64 inlined calls in one frame', limit_s=30)

    def test_at_the_limits_a_stack_is_read(self):
        # 1024 references and 64 inlined levels: what the limits allow is read, and shown whole.
        levels = b",".join(b'{"function":"inl%d"}' % i for i in range(64))
        path = self.trace("edge.jsonl.zst", [HEADER, b'{"type":"frame","id":1,"function":"f","inlined":[%s]}\n' % levels,
                                             b'{"type":"frame","id":2,"function":"g"}\n',
                                             b'{"type":"stack","id":1,"frames":[1,%s]}\n' % b",".join([b"2"] * 1023),
                                             site(1), EVENT, FOOTER])
        leak = report_json(path)["leaks"][0]
        self.assertEqual(len(leak["stack"]), 65 + 1023)
        self.assertEqual(leak["stack"][0]["function"], "inl0")

    def test_a_stack_that_resolves_to_too_many_frames_is_refused(self):
        # 200 frame references, each to a frame with 64 inlined calls: 13,000 logical frames.
        levels = b",".join([b'{"function":"g"}'] * 64)
        path = self.trace("wide.jsonl.zst", [HEADER, b'{"type":"frame","id":1,"function":"f","inlined":[%s]}\n' % levels,
                                             b'{"type":"stack","id":1,"frames":[%s]}\n' % b",".join([b"1"] * 200),
                                             site(1), EVENT, FOOTER])
        self.refused(path, "wide.jsonl.zst:3: stack 1 has 13000 frames with its inlined calls, more than 8192")

    def test_a_stack_that_resolves_to_megabytes_of_names_is_refused(self):
        # 300 references to one frame named with 4 KiB: 1.2 MiB of names, copied per stack resolved.
        path = self.trace("names.jsonl.zst", [HEADER, b'{"type":"frame","id":1,"function":"%s"}\n' % (b"n" * 4000),
                                              b'{"type":"stack","id":1,"frames":[%s]}\n' % b",".join([b"1"] * 300),
                                              site(1), EVENT, FOOTER])
        self.refused(path, "names.jsonl.zst:3: stack 1 has 1171 KiB of names with its inlined calls, more than 1024 KiB")


class DefinitionLimits(Case):
    """What a trace may define (trace_reader.h): 65,536 modules; 1,048,576 frames, stacks and sites;
    256 MiB of names; 2^25 frame references in all stacks."""

    @skip_bounds_under_sanitizer
    def test_millions_of_sites_are_refused(self):
        # 5M sites took 16 s and 1.8 GB; the reader stops at the first past its limit.
        def chunks():
            yield HEADER
            for start in range(1, 1_100_001, 100_000):
                yield b"".join(site(0, i) for i in range(start, start + 100_000))
        path = self.trace("sites.jsonl.zst", chunks())
        self.refused(path, "sites.jsonl.zst:1048578: more than 1048576 sites defined", limit_s=120, seconds=30)

    def test_more_modules_than_the_limit_are_refused(self):
        modules = b"".join(b'{"type":"module","id":%d,"path":"/lib/m%d.so"}\n' % (i, i) for i in range(1, 65_538))
        path = self.trace("modules.jsonl.zst", [HEADER, modules, site(), EVENT, FOOTER])
        self.refused(path, "modules.jsonl.zst:65538: more than 65536 modules defined")

    def test_a_module_defined_again_is_not_counted_twice(self):
        again = b'{"type":"module","id":1,"path":"/lib/m.so"}\n' * 70_000
        path = self.trace("again.jsonl.zst", [HEADER, again, site(), EVENT, FOOTER])
        self.assertEqual(report_json(path)["summary"]["leaked_bytes"], 4096)

    @skip_bounds_under_sanitizer
    def test_more_than_256_mib_of_names_are_refused(self):
        # 66,000 frames named with 4,090 bytes each: 257 MiB of names from a few hundred KB of zstd.
        def chunks():
            yield HEADER
            for start in range(1, 66_001, 1000):
                yield b"".join(b'{"type":"frame","id":%d,"function":"%s%06d"}\n' % (i, b"x" * 4084, i)
                               for i in range(start, start + 1000))
        path = self.trace("text.jsonl.zst", chunks())
        self.refused(path, "more than 256 MiB of names defined", limit_s=120, seconds=30, rss=600 * MiB)

    @skip_bounds_under_sanitizer
    def test_more_frame_references_than_the_limit_are_refused(self):
        # 32,769 stacks of 1024 references: past 2^25 references in all (each stack is within its own limit).
        refs = b",".join([b"1"] * 1024)
        def chunks():
            yield HEADER + b'{"type":"frame","id":1,"function":"f"}\n'
            for start in range(1, 32_771, 1000):
                yield b"".join(b'{"type":"stack","id":%d,"frames":[%s]}\n' % (i, refs) for i in range(start, start + 1000))
        path = self.trace("refs.jsonl.zst", chunks())
        self.refused(path, "more than 33554432 frame references in all stacks together", limit_s=120, seconds=60,
                     rss=400 * MiB)


class OfflineSymbolizerFiles(Case):
    """Frames recorded without symbols (GPUMEMTRACE_SYMBOLIZE=0) are named from their module's file:
    each file is opened once however many module records name it, and at most 128 files per trace
    (offline_symbolizer.h kMaxModuleFiles)."""

    def elf(self):
        """gpumem-report itself: an ELF file with megabytes of DWARF, its build id, and main's offset."""
        notes = subprocess.run(["readelf", "-n", REPORT], capture_output=True, text=True).stdout
        symbols = subprocess.run(["nm", REPORT], capture_output=True, text=True).stdout
        main = next(line.split()[0] for line in symbols.splitlines() if line.endswith(" T main"))
        return REPORT, notes.split("Build ID:")[1].split()[0], int(main, 16) + 1

    def trace_of_modules(self, name, paths, build_id, offset):
        # One module record per path, each with one frame in it that needs symbols (in main).
        lines = [HEADER]
        for i, path in enumerate(paths, 1):
            lines.append(b'{"type":"module","id":%d,"path":"%s","build_id":"%s"}\n' % (i, path.encode(), build_id.encode()))
            lines.append(b'{"type":"frame","id":%d,"module":%d,"ip":"0x%x","offset":"0x%x"}\n' % (i, i, offset, offset))
        lines.append(b'{"type":"stack","id":1,"frames":[%s]}\n' % b",".join(b"%d" % i for i in range(1, len(paths) + 1)))
        return self.trace(name, lines + [site(1), EVENT, FOOTER])

    @skip_bounds_under_sanitizer
    def test_one_file_named_by_many_modules_is_opened_once(self):
        # Each module record opened its file and loaded its debug information again: a trace naming
        # libc.so.6 under 200 ids took 31 s and 3.2 GB.
        program, build_id, offset = self.elf()
        path = self.trace_of_modules("same.jsonl.zst", [program] * 200, build_id, offset)
        rc, stderr, took, rss = run_measured([REPORT, "--format", "json", "-o", os.devnull, path], limit_s=120)
        self.assertEqual(rc, 0, stderr[-500:])
        self.assertLess(took, 10)
        self.assertLess(rss, 200 * MiB, f"max RSS {rss / MiB:.0f} MiB")

    def test_at_most_128_module_files_are_opened(self):
        program, build_id, offset = self.elf()
        copies = []
        for i in range(130):  # one file under 130 names: each name is a file to open
            copy = os.path.join(self.dir, f"lib{i:03d}.so")
            shutil.copy(program, copy) if i == 0 else os.link(copies[0], copy)
            copies.append(copy)
        path = self.trace_of_modules("many.jsonl.zst", copies, build_id, offset)
        proc = run_report("--format", "json", path, check_rc=0)
        limited = [line for line in proc.stderr.splitlines() if "module files in one trace" in line]
        self.assertEqual(len(limited), 2, proc.stderr[-1000:])  # the 129th and the 130th file
        self.assertIn("lib128.so: not opened: more than 128 module files in one trace", limited[0])
        stack = json.loads(proc.stdout)["leaks"][0]["stack"]
        self.assertEqual({f["function"] for f in stack[:128]}, {"main"})  # the first files' frames are named
        self.assertEqual({f["function"] for f in stack[128:]}, {""})


class JsonNesting(Case):
    def test_fifty_thousand_nested_lists_are_an_error_not_a_crash(self):
        # In a field nobody reads; validating it recursed once per level and overflowed the stack (SIGSEGV).
        path = self.trace("nested.jsonl.zst", [HEADER, site().replace(b"}\n", b',"zz":' + b"[" * 50_000 + b"]" * 50_000 + b"}\n"),
                                               EVENT, FOOTER])
        self.refused(path, "nested.jsonl.zst:2: lists or objects nested more than 64 levels deep")

    def test_nesting_up_to_the_limit_is_read(self):
        deep = b'{"a":' * 63 + b"1" + b"}" * 63
        path = self.trace("deep.jsonl.zst", [HEADER, site().replace(b"}\n", b',"zz":[' + deep + b"]}\n"), EVENT, FOOTER])
        self.assertEqual(report_json(path)["summary"]["leaked_bytes"], 4096)


class Streams(Case):
    """Standard input, a FIFO, a device: read through the reader while they are copied to a file with no
    name, so that one that is not a trace is refused within megabytes and nothing is left behind."""

    def run_with_tmpdir(self, argv, stdin, limit_fsize=64 * MiB, timeout=60):
        tmp = os.path.join(self.dir, "tmp")
        os.makedirs(tmp, exist_ok=True)

        def limits():
            # A copy that grows without bound meets this instead of filling the disk.
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))
        proc = subprocess.run(argv, stdin=stdin, capture_output=True, text=True, timeout=timeout, preexec_fn=limits,
                              env={**os.environ, "TMPDIR": tmp})
        return proc, tmp

    def test_dev_zero_on_standard_input_is_refused_within_megabytes(self):
        # It was copied whole into TMPDIR (39 GB of /tmp in 60 s) before anything read it.
        with open("/dev/zero", "rb") as zero:
            proc, tmp = self.run_with_tmpdir([REPORT, "-"], zero)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("-:1: a line longer than 4194304 bytes", proc.stderr)
        self.assertEqual(os.listdir(tmp), [])

    def test_dev_zero_by_name_is_refused_within_megabytes(self):
        proc, tmp = self.run_with_tmpdir([REPORT, "/dev/zero"], subprocess.DEVNULL)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("/dev/zero:1: a line longer than 4194304 bytes", proc.stderr)

    def test_a_newline_bomb_on_standard_input_is_refused(self):
        bomb = self.trace("bomb.jsonl.zst", [HEADER] + [b"\n" * (64 * MiB)] * 8)
        with open(bomb, "rb") as stdin:
            proc, tmp = self.run_with_tmpdir([REPORT, "-"], stdin)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("no record in the last 16 MiB", proc.stderr)

    def test_a_trace_on_standard_input_is_reported_as_from_a_file(self):
        trace = self.trace("t.jsonl.zst", [HEADER, site(), EVENT, FOOTER])
        with open(trace, "rb") as stdin:
            proc, tmp = self.run_with_tmpdir([REPORT, "--format", "json", "-"], stdin)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, run_report("--format", "json", trace).stdout.replace(trace, "-"))
        self.assertEqual(os.listdir(tmp), [])

    def test_a_signal_during_the_copy_leaves_nothing_behind(self):
        # The copy of a FIFO stayed in TMPDIR when gpumem-report was killed while reading it.
        tmp = os.path.join(self.dir, "tmp")
        os.makedirs(tmp)
        fifo = os.path.join(self.dir, "in.fifo")
        os.mkfifo(fifo)
        report = subprocess.Popen([REPORT, fifo], env={**os.environ, "TMPDIR": tmp}, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        with open(fifo, "wb") as writer:
            writer.write(HEADER + site())
            writer.flush()
            time.sleep(0.5)  # gpumem-report is copying, waiting for more
            self.assertIsNone(report.poll())
            report.send_signal(signal.SIGTERM)
            report.wait(timeout=30)
        self.assertEqual(os.listdir(tmp), [])


class SnapshotOutput(Case):
    """gpumem-snapshot2trace's OUT: never the snapshot, replaced only on success, write errors reported."""

    def snapshot(self):
        path = os.path.join(self.dir, "s.pickle")
        snapshot_samples.dump(snapshot_samples.planted_leak(), path)
        return path

    def convert(self, *args, stdout=subprocess.PIPE):
        return subprocess.run([CONVERT, *args], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=60)

    def setUp(self):
        super().setUp()
        if not os.path.exists(CONVERT):
            self.skipTest(f"{CONVERT} not built")

    def test_an_output_that_is_the_snapshot_is_refused(self):
        snap = self.snapshot()
        before = read(snap)
        link = os.path.join(self.dir, "link.jsonl")
        os.symlink(snap, link)
        hard = os.path.join(self.dir, "hard.jsonl")
        os.link(snap, hard)
        for out in (snap, link, hard):
            with self.subTest(out=out):
                proc = self.convert(snap, out)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("is the snapshot", proc.stderr)
                self.assertTrue(os.path.exists(snap))  # it was emptied, then removed
                self.assertEqual(read(snap), before)
        with open(snap, "ab") as same:
            proc = self.convert(snap, "-", stdout=same)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(read(snap), before)

    def test_a_failed_conversion_leaves_the_output_as_it_was(self):
        out = os.path.join(self.dir, "out.jsonl")
        with open(out, "w") as f:
            f.write("kept\n")
        bad = os.path.join(self.dir, "bad.pickle")
        with open(bad, "wb") as f:
            f.write(b"\x80\x04junk")
        proc = self.convert(bad, out)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(read(out).decode(), "kept\n")  # it was emptied, then removed
        self.assertEqual(sorted(os.listdir(self.dir)), ["bad.pickle", "out.jsonl"])

    def test_a_new_output_is_private_and_a_replaced_one_keeps_its_mode(self):
        snap = self.snapshot()
        out = os.path.join(self.dir, "new.jsonl")
        old = os.umask(0o022)
        try:
            self.assertEqual(self.convert(snap, out).returncode, 0)
        finally:
            os.umask(old)
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o600)
        os.chmod(out, 0o640)
        self.assertEqual(self.convert(snap, out).returncode, 0)
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o640)
        self.assertIn(b'"type":"header"', read(out))

    def test_write_errors_are_reported(self):
        snap = self.snapshot()
        with open("/dev/full", "wb") as full:
            proc = self.convert(snap, "-", stdout=full)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("standard output: cannot write: No space left on device", proc.stderr)

    def test_a_device_output_that_fails_is_not_removed(self):
        # It was removed after a failed write: as root, OUT=/dev/full deleted /dev/full.
        full = os.path.join(self.dir, "full")
        try:
            os.mknod(full, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 7))
        except PermissionError:
            self.skipTest("mknod needs root")
        proc = self.convert(self.snapshot(), full)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("full: cannot write: No space left on device", proc.stderr)
        self.assertTrue(os.path.exists(full))

    def test_control_characters_in_names_are_escaped(self):
        bad = os.path.join(self.dir, "bad\x1b[2J.pickle")
        with open(bad, "wb") as f:
            f.write(b"\x80\x04junk")
        proc = subprocess.run([CONVERT, bad, os.path.join(self.dir, "o.jsonl")], capture_output=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertNotIn(b"\x1b", proc.stderr)
        self.assertIn(b"bad\\x1b[2J.pickle", proc.stderr)
