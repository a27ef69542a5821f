# tests/report/test_report_allocator_settings.py — the report's use of the allocator settings a trace records.
"""The "allocator_settings" records (docs/trace-format.md) as gpumem-report reads and uses them
(docs/what-if.md, "The recorded settings"; docs/report.md, the OOM verdict):

- the replay takes them as its baseline, with a change mid-run reaching the model at its place in the
  timeline: the recorded segment operations are then reproduced, and without the records they are not;
- --recorded-settings goes over them, and the report says so; options the model does not replay are named;
- the "allocator limit" verdict names the cap (fraction and bytes), from set_per_process_memory_fraction
  or the per_process_memory_fraction option, also without a reading of the device's free bytes;
- the real capped trace (tests/report/real/capped.jsonl.zst), recorded before the records existed,
  behaves as before: inferred settings, the divergence at its OOM, a verdict without a cap;
- the reader: a record places itself by seq and t without moving the event lines' deltas, malformed
  ones are errors with their line, and an unknown record type is skipped (what a reader older than
  these records does with them).
"""
import json
import os
import tempfile
import unittest

from reportlib import ReportTestCase, report_json, run_report
from test_report_what_if import GiB, MiB, TraceWriter, real


class SettingsTrace(TraceWriter):
    """TraceWriter (version 1 events) plus allocator_settings records, each with the next seq and t.
    reading=False: no reading of the device's free bytes at all (no meminfo, a device line without
    "free")."""

    def __init__(self, path, free, total=80 * GiB, reading=True):
        if reading:
            return super().__init__(path, free, total)
        self.f = open(path, "w")
        self.seq = 0
        self.t = 1000
        self.line({"type": "header", "format": "gpumemtrace", "version": 1, "library": "0.1.0", "pid": 7, "ppid": 1,
                   "exe": "/usr/bin/python3", "cmdline": ["python3"], "host": "h", "start_time_ns": 0,
                   "clock": "monotonic", "clock_start_ns": 0, "backend": "interpose", "stack_depth": 64,
                   "on_full": "wait"})
        self.line({"type": "device", "device": 0, "name": "Test GPU", "total": total})

    def settings(self, source, conf=None, device=-1, fraction=None):
        self.seq += 1
        self.t += 1000
        r = {"type": "allocator_settings", "seq": self.seq, "t": self.t, "tid": 7, "source": source,
             "device": device}
        if conf is not None:
            r["conf"] = conf
        if fraction is not None:
            r["fraction"] = fraction
        self.line(r)


A = 0x7F0000000000
B = 0x7F4000000000


def expandable_midway_trace(path, records=True):
    """Default settings at start; a 30 MiB tensor gets a 30 MiB segment. Then the program turns
    expandable segments on (_set_allocator_settings): the next 30 MiB tensor gets a new expandable
    range with two 20 MiB pages mapped (PyTorch's large pages), as PyTorch does it."""
    w = SettingsTrace(path, free=60 * GiB)
    if records:
        w.settings("in_force", conf="")
    w.event("torch.segment_alloc", "alloc", "device", A, 30 * MiB)
    w.event("torch.alloc", "block_alloc", "block", A, 30 * MiB, segment=A)
    if records:
        w.settings("_set_allocator_settings", conf="expandable_segments:True")
    w.event("torch.segment_map", "map", "physical", B, 40 * MiB)
    w.event("torch.alloc", "block_alloc", "block", B, 30 * MiB, segment=B)
    w.close()


def capped_trace(path, source="set_per_process_memory_fraction", meminfo=True):
    """A cap of 2% of an 80 GiB device (1.6 GiB), 256 MiB reserved, then a 2 GiB request the allocator
    refuses without asking CUDA (its cap), as tests/gpu/scenarios/oom_capped.py does on a GPU."""
    w = SettingsTrace(path, free=78 * GiB, reading=meminfo)
    w.settings("in_force", conf="per_process_memory_fraction:0.02" if source == "option" else "")
    if source == "set_per_process_memory_fraction":
        w.settings(source, device=0, fraction=0.02)
    w.event("torch.segment_alloc", "alloc", "device", A, 256 * MiB)
    w.event("torch.alloc", "block_alloc", "block", A, 256 * MiB, segment=A)
    extra = {"free": 78 * GiB - 256 * MiB} if meminfo else {}
    w.event("torch.oom", "block_oom", "block", 0, 2 * GiB, **extra)
    w.close()


class Replay(ReportTestCase):
    def what_if(self, path, *args):
        r = report_json(path, "--what-if", "max_split_size_mb:128", *args)
        self.assertEqual(len(r["what_if"]), 1, r["what_if"])
        return r["what_if"][0]

    def test_a_change_mid_run_reaches_the_model(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "t.jsonl")
        expandable_midway_trace(path)
        w = self.what_if(path)
        self.assertEqual((w["settings_from"], w["recorded_settings"], w["settings_changes"]), ("trace", "", 1))
        self.assertTrue(w["replay"]["faithful"], w["replay"])
        self.assertEqual((w["replay"]["segment_ops_compared"], w["replay"]["blocks_compared"]), (2, 2))
        # The same run without its records: the model cannot know, and says where it parts.
        old = os.path.join(d, "old.jsonl")
        expandable_midway_trace(old, records=False)
        w = self.what_if(old)
        self.assertEqual(w["settings_from"], "inferred")
        self.assertFalse(w["replay"]["faithful"])
        self.assertIn("segment_map", w["replay"]["divergence"]["what"])

    def test_recorded_settings_option_goes_over_the_trace(self):
        path = os.path.join(tempfile.mkdtemp(), "t.jsonl")
        expandable_midway_trace(path)
        w = self.what_if(path, "--recorded-settings", "garbage_collection_threshold:0.5")
        self.assertEqual(w["settings_option"], "garbage_collection_threshold:0.5")
        self.assertEqual(w["recorded_settings"], "garbage_collection_threshold:0.5")
        text = run_report(path, "--what-if", "max_split_size_mb:128", "--recorded-settings",
                          "garbage_collection_threshold:0.5", check_rc=0).stdout
        self.assertIn("(the recorded run, settings from the trace, with --recorded-settings "
                      "`garbage_collection_threshold:0.5` over them; 1 change during the run)", text)

    def test_options_the_model_does_not_replay_are_named(self):
        path = os.path.join(tempfile.mkdtemp(), "t.jsonl")
        w = SettingsTrace(path, free=60 * GiB)
        w.settings("in_force", conf="large_segment_size_mb:40,expandable_segments:False")
        w.event("torch.segment_alloc", "alloc", "device", A, 30 * MiB)
        w.event("torch.alloc", "block_alloc", "block", A, 30 * MiB, segment=A)
        w.close()
        self.assertEqual(self.what_if(path)["unmodeled_options"], ["large_segment_size_mb"])
        text = run_report(path, "--what-if", "max_split_size_mb:128", check_rc=0).stdout
        self.assertIn("note: the recorded settings name options the model does not replay: large_segment_size_mb", text)


class Verdict(ReportTestCase):
    def oom(self, path):
        r = report_json(path)
        self.assertEqual(len(r["ooms"]), 1, r["ooms"])
        return r["ooms"][0], r

    def test_the_verdict_names_the_cap(self):
        path = os.path.join(tempfile.mkdtemp(), "t.jsonl")
        capped_trace(path)
        oom, r = self.oom(path)
        cap = int(0.02 * 80 * GiB)
        self.assertEqual(oom["verdict"], "allocator limit")
        self.assertEqual(oom["cap"], {"fraction": 0.02, "bytes": cap, "source": "set_per_process_memory_fraction"})
        self.assertIn("its cap, set_per_process_memory_fraction(0.02), 1.6 GiB of this device, which the request "
                      "would pass", oom["explanation"])
        self.assertEqual(oom["advice"], "the allocator's own cap refused it: set_per_process_memory_fraction(0.02), 1.6 GiB of this "
                         "device (the trace's record); raise or remove it")
        # The replay agrees: the recorded run's own settings reproduce the OOM, no option needed.
        w = r["what_if"][0]
        self.assertTrue(w["replay"]["faithful"], w["replay"])
        self.assertEqual(w["rows"][0]["ooms_still_happen"], [True])

    def test_the_option_of_newer_releases_and_no_reading(self):
        path = os.path.join(tempfile.mkdtemp(), "t.jsonl")
        capped_trace(path, source="option", meminfo=False)
        oom, _ = self.oom(path)
        self.assertEqual(oom["verdict"], "allocator limit")
        self.assertEqual(oom["cap"]["source"], "per_process_memory_fraction")
        self.assertIsNone(oom["device_free"])
        self.assertEqual(oom["explanation"], "the allocator refused the request with 256.0 MiB reserved: its cap, the "
                                             "option per_process_memory_fraction:0.02, 1.6 GiB of this device, which "
                                             "the request would pass")

    def test_real_capped_trace_predates_the_records(self):
        # Recorded before the records existed: as it was read before them.
        oom, r = self.oom(real("capped"))
        self.assertEqual(oom["verdict"], "allocator limit")
        self.assertIsNone(oom["cap"])
        self.assertIn("a cap such as torch.cuda.set_per_process_memory_fraction", oom["explanation"])
        w = r["what_if"][0]
        self.assertEqual((w["settings_from"], w["recorded_settings"], w["settings_changes"]), ("inferred", "", 0))
        self.assertFalse(w["replay"]["faithful"])
        self.assertIn("a cap the trace does not show? give it with --recorded-settings", w["replay"]["divergence"]["what"])
        w = report_json(real("capped"), "--recorded-settings", "per_process_memory_fraction:0.02")["what_if"][0]
        self.assertTrue(w["replay"]["faithful"], w["replay"])
        self.assertEqual(w["settings_option"], "per_process_memory_fraction:0.02")


class Reader(ReportTestCase):
    def write(self, lines):
        path = os.path.join(tempfile.mkdtemp(), "t.jsonl")
        with open(path, "w") as f:
            f.write("\n".join(json.dumps(l) for l in lines) + "\n")
        return path

    HEADER = {"type": "header", "format": "gpumemtrace", "version": 2, "library": "0.1.0", "pid": 7, "ppid": 1,
              "exe": "/usr/bin/python3", "cmdline": ["python3"], "host": "h", "start_time_ns": 0,
              "clock": "monotonic", "clock_start_ns": 0, "backend": "interpose", "stack_depth": 64,
              "on_full": "wait", "pytorch_cuda_alloc_conf": "expandable_segments:True"}
    SITE = {"type": "site", "id": 1, "tid": 7, "api": "torch.oom", "op": "block_oom", "kind": "block", "device": 0,
            "stack": 0}

    def test_a_record_keeps_the_event_lines_deltas(self):
        path = self.write([self.HEADER, {"type": "device", "device": 0, "name": "g", "total": 80 * GiB, "free": 0},
                           self.SITE, {"e": 1, "t": 1000, "a": "0x0", "s": 1024},
                           {"type": "allocator_settings", "seq": 2, "t": 900000, "tid": 7, "source": "in_force",
                            "device": -1, "conf": ""},
                           {"e": 1, "t": 10, "q": 3, "a": "0x0", "s": 2048}, {"type": "footer", "events": 2}])
        r = report_json(path)
        self.assertEqual(sorted(o["time_ns"] for o in r["ooms"]), [1000, 1010])
        self.assertEqual(r["processes"][0]["events"], 2)  # a record is not an event

    def test_malformed_records_are_errors(self):
        good = {"type": "allocator_settings", "seq": 2, "t": 5, "tid": 7, "source": "set_per_process_memory_fraction",
                "device": 0, "fraction": 0.5}
        for bad, message in [(dict(good, fraction=2), "field \"fraction\": expected 0 to 1"),
                             (dict(good, fraction="0.5"), "field \"fraction\": expected a number"),
                             ({k: v for k, v in good.items() if k != "seq"}, "allocator_settings record without \"seq\""),
                             (dict(good, seq=1), "allocator_settings seq 1 does not increase")]:
            with self.subTest(bad=bad):
                path = self.write([self.HEADER, self.SITE, {"e": 1, "t": 1000, "a": "0x0", "s": 1024}, bad])
                proc = run_report(path, check_rc=2)
                self.assertIn(path + ":4: " + message, proc.stderr)

    def test_unknown_record_types_are_skipped(self):
        # What a reader older than allocator_settings does with one (docs/trace-format.md, Conventions).
        path = self.write([self.HEADER, self.SITE, {"e": 1, "t": 1000, "a": "0x0", "s": 1024},
                           {"type": "from_the_future", "seq": 2, "anything": [1, {"x": 2}]},
                           {"e": 1, "t": 10, "q": 3, "a": "0x0", "s": 2048}, {"type": "footer", "events": 2}])
        self.assertEqual(len(report_json(path)["ooms"]), 2)


if __name__ == "__main__":
    unittest.main()
