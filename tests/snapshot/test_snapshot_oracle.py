# tests/snapshot/test_snapshot_oracle.py — every figure gpumem-report prints for a real PyTorch snapshot, against an independent oracle.
"""Real PyTorch snapshots that people recorded outside this project (../shared/corpus/pytorch-snapshots, with
its MANIFEST.md; PYTORCH_SNAPSHOT_CORPUS names another folder of the same kind), each compared with
what the snapshot itself says (snapshot_oracle.py: a restricted unpickler and the snapshot's own
segments and history, no gpumem-report code):

- the converted trace's starting state (events marked "initial") is the final state unwound through
  the history;
- per device: the reserved and allocated peaks and when they were first reached, the fragmentation at
  the allocated peak (every cached segment counted, expandable segments' mapped memory too), each OOM
  (request, time, the device's free bytes, the memory and its fragmentation then), in the JSON and the
  text; no timeline sample above its peak or with more allocated than reserved;
- the what-if replay of the recorded settings reproduces every real history; a replay that did not
  shows no figure; no row shows more allocated than reserved;
- the words: a snapshot is a moment ("snapshot"), memory from before the history is "allocated before
  recording started", never autograd, leaked or held at exit; no growth without a history that rises;
- an inconsistent snapshot (blocks outside its segments) gets one warning line naming it, and no
  impossible figure.
The corpus stays outside the repository: without the folder, every test skips, saying so.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import snapshot_oracle as oracle  # noqa: E402

BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
REPORT = os.path.join(BUILD, "gpumem-report")
CONVERT = os.path.join(BUILD, "gpumem-snapshot2trace")
CORPUS = os.environ.get("PYTORCH_SNAPSHOT_CORPUS") or os.path.join(ROOT, "..", "shared", "corpus",
                                                                       "pytorch-snapshots")
NO_CORPUS = f"no real PyTorch snapshots at {CORPUS} (set PYTORCH_SNAPSHOT_CORPUS to a folder of them)"


def format_bytes(n):
    """report/outputs/units.cpp's format_bytes."""
    if n < 1024:
        return f"{n} B"
    value, unit = float(n), 0
    while value >= 1024 and unit < 5:
        value /= 1024
        unit += 1
    return f"{value:.1f} {['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'][unit]}"


def format_seconds(ns):
    """report/outputs/units.cpp's format_seconds."""
    if ns < 1_000_000:
        return f"{ns / 1e3:.1f} us"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.3f} s"


def corpus_files():
    if not os.path.isdir(CORPUS):
        return []
    return sorted(os.path.join(CORPUS, n) for n in os.listdir(CORPUS)
                  if not n.endswith(".md") and os.path.isfile(os.path.join(CORPUS, n)))


_cache = {}
_snapshots = {}


def snapshot(path):
    """The oracle of one snapshot, read once per test run."""
    if path not in _snapshots:
        _snapshots[path] = oracle.Snapshot(path)
    return _snapshots[path]


def analysed(path):
    """(oracle, JSON report, text report) of one snapshot, computed once per test run."""
    if path not in _cache:
        snap = snapshot(path)
        run = lambda *args: subprocess.run([REPORT, *args, path], capture_output=True, text=True, timeout=300)
        j, t = run("--format", "json"), run("--width", "0", "--top", "3")
        assert j.returncode == 0 and t.returncode == 0, j.stderr + t.stderr
        _cache[path] = (snap, json.loads(j.stdout), t.stdout)
    return _cache[path]


class CorpusCase(unittest.TestCase):
    def setUp(self):
        self.files = corpus_files()
        if not self.files:
            self.skipTest(NO_CORPUS)
        if not os.access(REPORT, os.X_OK):
            self.skipTest(REPORT + " not built")

    def consistent(self):
        for path in self.files:
            snap, j, text = analysed(path)
            if not snap.inconsistent():
                yield path, snap, j, text

    def assertFragmentation(self, got, want, where):
        for key in ("reserved", "allocated", "free_in_reserved", "largest_free_block"):
            self.assertEqual(got[key], want[key], f"{where}: {key}")
        self.assertAlmostEqual(got["ratio"], want["ratio"], places=9, msg=f"{where}: ratio")


class StartingState(CorpusCase):
    def test_initial_events_are_the_unwound_final_state(self):
        if not os.access(CONVERT, os.X_OK):
            self.skipTest(CONVERT + " not built")
        for path in self.files:
            snap = snapshot(path)
            if snap.inconsistent():
                continue
            with self.subTest(snapshot=os.path.basename(path)), tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "trace.jsonl")
                p = subprocess.run([CONVERT, path, out], capture_output=True, text=True, timeout=300)
                self.assertEqual(p.returncode, 0, p.stderr)
                with open(out) as f:
                    initial = [r for r in map(json.loads, f) if r.get("type") == "event" and r.get("initial")]
                for device in snap.used_devices():
                    start = snap.devices[device].start
                    mine = [e for e in initial if e["device"] == device]
                    segments = {int(e["addr"], 16): e["size"] for e in mine if e["api"] == "torch.segment_alloc"}
                    mapped = oracle.Ranges()
                    for e in mine:
                        if e["api"] == "torch.segment_map" and e["op"] == "map":
                            mapped.add(int(e["addr"], 16), int(e["addr"], 16) + e["size"])
                    blocks = {int(e["addr"], 16): e["size"] for e in mine if e["op"] == "block_alloc"}
                    self.assertEqual(segments, start.segments, f"device {device}: segments")
                    self.assertEqual(mapped.items(), start.mapped.items(), f"device {device}: mapped ranges")
                    self.assertEqual(blocks, start.blocks, f"device {device}: blocks")
                    self.assertTrue(all(e["t"] == 0 for e in mine))


class Figures(CorpusCase):
    def test_peaks_and_fragmentation_at_the_allocated_peak(self):
        for path, snap, j, text in self.consistent():
            name = os.path.basename(path)
            devices = {d["device"]: d for d in j["processes"][0]["devices"]}
            peaks = {p["device"]: p for p in j["peaks"]}
            for device in snap.used_devices():
                with self.subTest(snapshot=name, device=device):
                    reserved, reserved_t, _ = snap.peak(device, 1)
                    allocated, allocated_t, index = snap.peak(device, 2)
                    self.assertEqual(devices[device]["peak_bytes"], reserved)
                    self.assertEqual(devices[device]["peak_allocated_bytes"], allocated)
                    self.assertLessEqual(allocated, reserved)
                    peak = peaks[device]
                    self.assertEqual((peak["bytes"], peak["time_ns"]), (reserved, reserved_t))
                    self.assertEqual((peak["allocated"]["bytes"], peak["allocated"]["time_ns"]),
                                     (allocated, allocated_t))
                    want = snap.state_at(device, index).fragmentation()
                    self.assertFragmentation(peak["fragmentation"], want, "at the allocated peak")
                    frag = [f for f in j["fragmentation"] if f["device"] == device]
                    self.assertEqual(len(frag), 1)
                    self.assertFragmentation(frag[0]["at_peak"], want, "fragmentation section")
                    # The text says the same.
                    line = next(l for l in text.splitlines() if l.startswith(f"peak (device {device}): "))
                    self.assertIn(f"{format_bytes(reserved)} reserved at {format_seconds(reserved_t)}", line)
                    self.assertIn(f"{format_bytes(allocated)} allocated at {format_seconds(allocated_t)}", line)
                    self.assertIn(f"reserved {format_bytes(want['reserved'])}, allocated "
                                  f"{format_bytes(want['allocated'])}, free inside segments "
                                  f"{format_bytes(want['free_in_reserved'])}, largest free block "
                                  f"{format_bytes(want['largest_free_block'])}, fragmentation {want['ratio']:.2f}",
                                  text)

    def test_timeline_never_above_its_peaks(self):
        for path, snap, j, text in self.consistent():
            for d in j["processes"][0]["devices"]:
                if d["device"] not in snap.devices:
                    continue
                reserved, _, _ = snap.peak(d["device"], 1)
                allocated, _, _ = snap.peak(d["device"], 2)
                with self.subTest(snapshot=os.path.basename(path), device=d["device"]):
                    for s in d["timeline"]:
                        self.assertLessEqual(s["allocated"], s["reserved"])
                        self.assertLessEqual(s["reserved"], reserved)
                        self.assertLessEqual(s["allocated"], allocated)

    def test_ooms(self):
        for path, snap, j, text in self.consistent():
            for device in snap.used_devices():
                want = snap.devices[device].ooms
                got = [o for o in j["ooms"] if o["device"] == device]
                with self.subTest(snapshot=os.path.basename(path), device=device):
                    self.assertEqual(len(got), len(want))
                    entries = snap.devices[device].entries
                    at = [i + 1 for i, e in enumerate(entries) if e.get("action") == "oom"]
                    for o, w, index in zip(got, want, at):
                        self.assertEqual((o["requested"], o["time_ns"], o["device_free"]),
                                         (w["requested"], w["time_ns"], w["device_free"]))
                        state = snap.state_at(device, index)
                        self.assertEqual((o["live_bytes"], o["allocated_bytes"]),
                                         (state.reserved(), state.allocated()))
                        self.assertFragmentation(o["fragmentation"], state.fragmentation(), "at the OOM")
                        self.assertIn(f"device free {format_bytes(w['device_free'])}", text)
                        # Free bytes in the allocator's segments are never called 0 B when there are some.
                        if state.fragmentation()["free_in_reserved"]:
                            self.assertNotIn("0 B inside the allocator's segments", o["explanation"])


class Replay(CorpusCase):
    def test_recorded_settings_replay_reproduces_every_real_history(self):
        for path, snap, j, text in self.consistent():
            replayed = {w["device"]: w for w in j["what_if"]}
            for device in snap.used_devices():
                if not snap.devices[device].entries:
                    continue
                with self.subTest(snapshot=os.path.basename(path), device=device):
                    w = replayed.get(device)
                    if w is None:
                        continue  # no what-if asked for this device (no OOM, no fragmented peak)
                    self.assertTrue(w["replay"]["faithful"], w["replay"]["divergence"])
                    self.assertEqual(w["rows"][0]["reserved_peak"], snap.peak(device, 1)[0])
                    self.assertEqual(w["settings_from"], "trace" if snap.settings else "inferred")

    def test_every_history_replays_when_asked(self):
        """--what-if on every device that has a history: the recorded run must match it."""
        for path in self.files:
            snap = snapshot(path)
            if snap.inconsistent() or not any(d.entries for d in snap.devices.values()):
                continue
            p = subprocess.run([REPORT, "--format", "json", "--what-if", "expandable_segments:True", path],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            j = json.loads(p.stdout)
            for w in j["what_if"]:
                if not snap.devices[w["device"]].entries:
                    continue
                with self.subTest(snapshot=os.path.basename(path), device=w["device"]):
                    self.assertTrue(w["replay"]["faithful"], w["replay"]["divergence"])
                    self.assertEqual(w["rows"][0]["reserved_peak"], snap.peak(w["device"], 1)[0])
                    for row in w["rows"]:
                        self.assertLessEqual(row["allocated_peak"], row["reserved_peak"], row["settings"])

    def test_no_figure_from_a_replay_that_diverged(self):
        for path in self.files:
            snap, j, text = analysed(path)
            for w in j["what_if"]:
                with self.subTest(snapshot=os.path.basename(path), device=w["device"]):
                    for row in w["rows"]:
                        self.assertLessEqual(row["allocated_peak"], row["reserved_peak"], row["settings"])
                    if not w["replay"]["faithful"]:
                        self.assertEqual(w["rows"], [])
                        self.assertIsNone(w["advice"])
                        self.assertIsNone(w["headroom"])


class Html(CorpusCase):
    def test_the_page_carries_the_same_figures(self):
        """The HTML page's data is the JSON's (stacks as table indices): its peaks, OOMs, fragmentation and
        what-if rows agree with the oracle too. Checked on the files with an OOM or a replay (cheap enough)."""
        for path, snap, j, text in self.consistent():
            if not j["ooms"] and not j["what_if"]:
                continue
            with self.subTest(snapshot=os.path.basename(path)), tempfile.TemporaryDirectory() as d:
                page = os.path.join(d, "report.html")
                p = subprocess.run([REPORT, "--format", "html", "-o", page, path], capture_output=True, text=True,
                                   timeout=300)
                self.assertEqual(p.returncode, 0, p.stderr)
                with open(page) as f:
                    data = json.loads(re.search(r'id="gpumem-data">(.*?)</script>', f.read(), re.S).group(1))
                for key, fields in (("peaks", ("device", "bytes", "time_ns", "fragmentation")),
                                    ("ooms", ("device", "requested", "time_ns", "device_free", "fragmentation")),
                                    ("fragmentation", ("device", "at_peak"))):
                    self.assertEqual([{k: e.get(k) for k in fields} for e in data[key]],
                                     [{k: e.get(k) for k in fields} for e in j[key]], key)
                self.assertEqual([(w["device"], w["replay"], w["rows"] and w["rows"][0]["reserved_peak"])
                                  for w in data["what_if"]],
                                 [(w["device"], w["replay"], w["rows"] and w["rows"][0]["reserved_peak"])
                                  for w in j["what_if"]])


class Words(CorpusCase):
    def test_a_snapshot_is_a_moment(self):
        for path in self.files:
            snap, j, text = analysed(path)
            head = text.splitlines()[0]
            with self.subTest(snapshot=os.path.basename(path)):
                self.assertIn("snapshot", head)
                for wrong in ("clean exit", "held at exit", "alive at exit", "autograd engine"):
                    self.assertFalse(wrong in text, f"{wrong!r} in the text")
                self.assertEqual(j["leaks"], [])
                # Without a history (a "snapshot" marker is none; an inconsistent snapshot's is not
                # used) the peak is the one moment: its holders are not listed a second time.
                no_history = snap.inconsistent() or not any(e.get("action") != "snapshot"
                                                            for d in snap.devices.values() for e in d.entries)
                self.assertEqual("listed as live above" in text, no_history and bool(j["peaks"]))

    def test_memory_from_before_the_history(self):
        for path, snap, j, text in self.consistent():
            for device in snap.used_devices():
                start = snap.devices[device].start
                final = snap.devices[device].final
                if not start.blocks:
                    continue
                with self.subTest(snapshot=os.path.basename(path), device=device):
                    # Blocks live at the start whose allocation the snapshot does not show: named so.
                    if any(a not in final.blocks for a in start.blocks) or not snap.devices[device].entries:
                        self.assertTrue("allocated before recording started" in text, "not named so")

    def test_no_growth_without_a_rising_history(self):
        for path, snap, j, text in self.consistent():
            for g in j["growth"]:
                d = snap.devices.get(g["device"])
                with self.subTest(snapshot=os.path.basename(path), device=g["device"]):
                    self.assertTrue(d is not None and d.entries, "growth on a device without a history")
                    level = 2 if g["level"] == "block" else 1
                    first, last = d.points[0][level], d.points[-1][level]
                    highest = max(p[level] for p in d.points)
                    self.assertGreater(highest, first, "growth while the device's total never rose")
                    self.assertNotIn("before recording started", json.dumps(g["stack"]))
            self.assertLessEqual(text.count("growth: none"), 1)
            for t in j["time_to_oom"]:
                with self.subTest(snapshot=os.path.basename(path), forecast=t["device"]):
                    self.assertFalse(any(o["device"] == t["device"] for o in j["ooms"]),
                                     "a forecast of an OOM that already happened")


class Inconsistent(CorpusCase):
    def test_one_warning_and_no_impossible_figure(self):
        seen = 0
        for path in self.files:
            snap, j, text = analysed(path)
            if not snap.inconsistent():
                continue
            seen += 1
            with self.subTest(snapshot=os.path.basename(path)):
                warnings = [l for l in text.splitlines() if l.startswith("warning:") and "inconsistent" in l]
                self.assertEqual(len(warnings), 1, "\n".join(text.splitlines()[:5]))
                self.assertIn("outside", warnings[0])
                for d in j["processes"][0]["devices"]:
                    self.assertLessEqual(d["peak_allocated_bytes"], d["peak_bytes"])
                    for s in d["timeline"]:
                        self.assertLessEqual(s["allocated"], s["reserved"])
                self.assertEqual(j["what_if"], [])
                self.assertEqual(j["growth"], [])
                self.assertNotIn("growth: none", text)   # not a verdict either: none is given
        if not seen:
            self.skipTest("no inconsistent snapshot in the corpus")


if __name__ == "__main__":
    unittest.main()
