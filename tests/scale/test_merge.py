# tests/scale/test_merge.py — `gpumem-report merge` of per-process JSON reports, and the launcher's --report-per-process.
"""`gpumem-report merge REPORT...` gives the cross-rank view of a job from its per-process JSON reports
without reading a trace: it must say what the reports say (the highest peak, the first OOM by
wall-clock time, the sites that leak on every rank) and what gpumem-report -j says of the traces
themselves; a file that is not a report is one line and exit 2. `gpumemtrace run --report-per-process`
writes those reports beside the traces, each with its rank."""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
from reportlib import REPORT, ROOT, run_report  # noqa: E402
from testenv import sanitizer_runtime  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ranks import OOM_RANKS, PEAK_RANK, leak_sites, write_run  # noqa: E402

GiB = 1 << 30
RANKS = 64


def first_oom(reports):
    """(wall-clock ns, rank) of the earliest OOM among one-process reports."""
    times = []
    for r in reports:
        p = r["processes"][0]
        for oom in r["ooms"]:
            times.append((p["start_time_ns"] + oom["time_ns"] - p["clock_start_ns"], p["rank"]))
    return min(times)


class MergeOfARun(unittest.TestCase):
    """The 64 ranks of ranks.py: their reports merged, against the reports and -j on the traces."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gpumem-merge-")
        run = os.path.join(cls.dir, "run")
        cls.paths = write_run(run, RANKS)

        def report(path):
            out = path[:-len(".jsonl")] + ".report.json"
            run_report("--format", "json", "-o", out, path, check_rc=0)
            with open(out) as f:
                return json.load(f)
        with ThreadPoolExecutor(2) as pool:
            cls.reports = list(pool.map(report, cls.paths))
        cls.whole = json.loads(run_report("--format", "json", "-j", "2", run, check_rc=0).stdout)
        cls.merged = json.loads(run_report("merge", "--format", "json", run, check_rc=0).stdout)
        cls.text = run_report("merge", run, check_rc=0).stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, True)

    def test_counts(self):
        self.assertEqual(self.merged["processes"], RANKS)
        self.assertEqual(self.merged["ranks"], RANKS)
        self.assertEqual(self.merged["hosts"], RANKS // 8)
        self.assertEqual(self.merged["warnings"], [])

    def test_the_highest_peak_is_the_one_j_names(self):
        spread = self.whole["spread"]["peak_bytes"]
        peak = self.merged["peak"]
        self.assertEqual(peak["max"]["rank"], PEAK_RANK)
        self.assertEqual(peak["max"]["pid"], spread["max_pid"])
        self.assertEqual(peak["max"]["bytes"], spread["max"])
        self.assertEqual(peak["min"]["bytes"], spread["min"])
        self.assertEqual(peak["min"]["pid"], spread["min_pid"])
        self.assertAlmostEqual(peak["mean_bytes"], spread["mean"])
        peaks = sorted(r["processes"][0]["devices"][0]["peak_bytes"] for r in self.reports)
        self.assertEqual(peak["median_bytes"], peaks[RANKS // 2])
        self.assertEqual([p["peak_bytes"] for p in self.merged["processes_by_peak"]], peaks[::-1])
        self.assertIn(f"highest 2.0 GiB on rank {PEAK_RANK} (node4, pid {20000 + PEAK_RANK})", self.text)

    def test_the_first_oom(self):
        ooms = self.merged["ooms"]
        self.assertEqual([o["rank"] for o in ooms], list(OOM_RANKS))
        self.assertEqual(self.merged["processes_with_ooms"], len(OOM_RANKS))
        self.assertEqual((ooms[0]["wall_time_ns"], ooms[0]["rank"]), first_oom(self.reports))
        self.assertEqual(len(self.whole["ooms"]), len(OOM_RANKS))
        self.assertIn(f"the first on rank {OOM_RANKS[0]} (node5, pid {20000 + OOM_RANKS[0]})", self.text)

    def test_leaks_on_every_rank(self):
        per_rank = [leak_sites(r) for r in self.reports]
        everywhere = set.intersection(*(set(s) for s in per_rank))
        merged = {l["site"]: l for l in self.merged["leaks"]}
        self.assertEqual({s for s, l in merged.items() if l["every_process"]}, everywhere)
        self.assertTrue(any("cache_embeddings" in s for s in everywhere))
        for site, leak in merged.items():
            holders = [s[site] for s in per_rank if site in s]
            self.assertEqual((leak["processes"], leak["bytes"], leak["min_bytes"], leak["max_bytes"]),
                             (len(holders), sum(holders), min(holders), max(holders)), site)
        self.assertEqual(merged[next(s for s in merged if "keep_rank_buffer" in s)]["processes"], RANKS // 2)
        self.assertEqual(sum(l["bytes"] for l in merged.values()), self.whole["summary"]["leaked_bytes"])
        self.assertIn("leaks: 4 sites, 3 of them on every process", self.text)


class MergeOfThousands(unittest.TestCase):
    """1000 per-process reports, made from the reports of a few traces with their ranks, hosts, peaks
    and clocks changed: merged in one run, the answers are the ones worked out here from the files."""

    def test_a_thousand_reports(self):
        tmp = tempfile.mkdtemp(prefix="gpumem-merge-1000-")
        self.addCleanup(shutil.rmtree, tmp, True)
        paths = write_run(os.path.join(tmp, "traces"), 8)  # rank 5 (OOM_RANKS) fails an allocation
        templates = [json.loads(run_report("--format", "json", p, check_rc=0).stdout) for p in paths]
        out = os.path.join(tmp, "reports")
        os.makedirs(out)
        reports = []
        for k in range(1000):
            r = copy.deepcopy(templates[k % 8])
            p = r["processes"][0]
            old = (p["file"], p["pid"])
            p.update(rank=k, pid=300000 + k, host=f"node{k // 8}", file=f"/runs/job/rank{k}.jsonl.zst")
            p["start_time_ns"] += (1000 - k) * 1000  # later ranks started earlier
            p["devices"][0]["peak_bytes"] = (1 + k % 5) * GiB + (3 * GiB if k == 777 else 0)
            for entry in r["leaks"] + r["ooms"] + r["peaks"]:
                if (entry["file"], entry["pid"]) == old:
                    entry.update(file=p["file"], pid=p["pid"])
            reports.append(r)
            with open(os.path.join(out, f"rank{k:04d}.report.json"), "w") as f:
                json.dump(r, f)
        merged = json.loads(run_report("merge", "--format", "json", out, check_rc=0).stdout)
        self.assertEqual((merged["processes"], merged["ranks"], merged["hosts"]), (1000, 1000, 125))
        self.assertEqual(merged["peak"]["max"]["rank"], 777)
        self.assertEqual(merged["peak"]["max"]["bytes"], 6 * GiB)
        # The copies of rank 5 fail: the one that started last fails first by wall-clock time.
        wall, rank = first_oom(reports)
        self.assertEqual((merged["ooms"][0]["wall_time_ns"], merged["ooms"][0]["rank"]), (wall, rank))
        self.assertEqual(merged["ooms"][0]["rank"], 997)
        self.assertEqual(merged["processes_with_ooms"], 125)
        every = {l["site"] for l in merged["leaks"] if l["every_process"]}
        self.assertEqual(every, set.intersection(*(set(leak_sites(r)) for r in reports)))


class MergeErrors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpumem-merge-bad-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        (self.trace,) = write_run(os.path.join(self.dir, "run"), 1)
        self.good = os.path.join(self.dir, "good.report.json")
        run_report("--format", "json", "-o", self.good, self.trace, check_rc=0)

    def bad(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_bad_files_are_one_line_and_exit_2(self):
        diff = run_report("diff", "--format", "json", self.trace, self.trace, check_rc=0).stdout
        cases = [(self.bad("cut.json", '{"summary": {'), "not a gpumem-report JSON report: "),
                 (self.bad("diff.json", diff), "not a gpumem-report JSON report (no \"processes\""),
                 (self.trace, "not a gpumem-report JSON report: "),
                 (os.path.join(self.dir, "missing.json"), "cannot read"),
                 (os.path.join(self.dir, "run"), "no *.report.json file in this folder")]
        for path, message in cases:
            proc = run_report("merge", self.good, path)
            self.assertEqual(proc.returncode, 2, path)
            self.assertEqual(proc.stdout, "")
            lines = proc.stderr.splitlines()
            self.assertEqual(len(lines), 1, proc.stderr)
            self.assertTrue(lines[0].startswith(f"gpumem-report: error: {path}: "), lines[0])
            self.assertIn(message, lines[0])

    def test_usage(self):
        for args in (["merge"], ["merge", "--fail-on-leak", self.good], ["merge", "--format", "html", self.good]):
            proc = run_report(*args)
            self.assertEqual(proc.returncode, 2, args)
            self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)


class ReportPerProcess(unittest.TestCase):
    """Two tasks of a job, each started by its own launcher (as srun starts them) into one folder:
    each process's report lands beside its trace with its rank, and merge reads them."""

    def test_each_task_writes_its_report_and_merge_reads_them(self):
        build = os.path.dirname(REPORT)
        launcher, cudart = os.path.join(build, "gpumemtrace"), os.path.join(build, "sim", "libcudart.so.13")
        prog = os.path.join(ROOT, "tests", "launcher", "launcher_prog.py")
        if not os.access(launcher, os.X_OK) or not os.path.exists(cudart):
            self.skipTest("the launcher or the simulated runtime is not built")
        tmp = tempfile.mkdtemp(prefix="gpumem-per-process-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEMTRACE_", "RANK", "SLURM_"))}
        env.pop("LD_PRELOAD", None)
        if sanitizer_runtime():  # make asan/tsan: loaded from the start, the launcher puts the recorder in front
            env["LD_PRELOAD"] = sanitizer_runtime()
        for variable, rank in (("RANK", "0"), ("SLURM_PROCID", "1")):
            proc = subprocess.run([launcher, "run", "-q", "-o", "job", "--report-per-process", "--",
                                   sys.executable, prog, "leak", cudart], cwd=tmp, env={**env, variable: rank},
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stderr)
        names = sorted(os.listdir(os.path.join(tmp, "job")))
        traces = [n for n in names if n.endswith(".jsonl.zst")]
        reports = [n for n in names if n.endswith(".report.json")]
        self.assertEqual(len(traces), 2, names)
        self.assertEqual(reports, [t[:-len(".jsonl.zst")] + ".report.json" for t in traces])
        ranks = set()
        for name in reports:
            with open(os.path.join(tmp, "job", name)) as f:
                report = json.load(f)
            (process,) = report["processes"]
            self.assertEqual(os.path.basename(process["file"]), name[:-len(".report.json")] + ".jsonl.zst")
            ranks.add(process["rank"])
        self.assertEqual(ranks, {0, 1})
        merged = json.loads(run_report("merge", "--format", "json", os.path.join(tmp, "job"), check_rc=0).stdout)
        self.assertEqual(merged["ranks"], 2)
        (leak,) = merged["leaks"]
        self.assertTrue(leak["every_process"])
        self.assertEqual(leak["min_bytes"], 3 << 20)
        self.assertIn("leak_buffer", leak["site"])


if __name__ == "__main__":
    unittest.main()
