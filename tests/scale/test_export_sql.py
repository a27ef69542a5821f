# tests/scale/test_export_sql.py — docs/scale.md's SQL, run by DuckDB over `--export events` of a 64-rank run.
"""The cross-rank questions of docs/scale.md, asked in SQL of DuckDB itself (@duckdb/node-api,
installed by `make deps` under tests/scale/duckdb/node_modules) over the exports of a generated
64-rank run (ranks.py), and each answer held against what gpumem-report says of the same traces:
its per-rank JSON reports, its `-j` report of the whole run, and `diff` of two ranks. The queries
are read from docs/scale.md, so the page shows what is tested."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
from reportlib import ROOT, run_report  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ranks import PEAK_RANK, leak_sites, site_of, write_run  # noqa: E402

DUCKDB_DIR = os.path.join(ROOT, "tests", "scale", "duckdb")
RANKS = 64


def queries():
    """name -> SQL of each `<!-- query: NAME -->` block of docs/scale.md, in page order."""
    with open(os.path.join(ROOT, "docs", "scale.md")) as f:
        text = f.read()
    return [{"name": m.group(1), "sql": m.group(2)}
            for m in re.finditer(r"<!-- query: (\w+) -->\n```sql\n(.*?)```", text, re.S)]


def run_sql(folder, statements):
    """DuckDB's rows for each statement, run in `folder` (where exports/ lies)."""
    proc = subprocess.run(["node", os.path.join(DUCKDB_DIR, "run_sql.mjs")], input=json.dumps(statements),
                          capture_output=True, text=True, cwd=folder, timeout=120,
                          env={**os.environ, "NODE_PATH": os.path.join(DUCKDB_DIR, "node_modules")})
    if proc.returncode != 0:
        raise AssertionError(f"DuckDB: {proc.stderr}")
    return json.loads(proc.stdout)


def duckdb_missing():
    if not shutil.which("node"):
        return "node is not installed (make deps)"
    if not os.path.isdir(os.path.join(DUCKDB_DIR, "node_modules", "@duckdb", "node-api")):
        return "@duckdb/node-api is not installed under tests/scale/duckdb (make deps)"
    return None


class ExportedRunInSql(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gpumem-scale-")
        cls.run_dir = os.path.join(cls.dir, "run")
        cls.paths = write_run(cls.run_dir, RANKS)
        proc = run_report("--export", "events", os.path.join(cls.dir, "exports"), "-j", "2", cls.run_dir)
        cls.export_rc, cls.export_stderr = proc.returncode, proc.stderr

        def report(path):
            return json.loads(run_report("--format", "json", path, check_rc=0).stdout)
        with ThreadPoolExecutor(2) as pool:
            cls.reports = list(pool.map(report, cls.paths))  # rank order
        cls.whole = json.loads(run_report("--format", "json", "-j", "2", cls.run_dir, check_rc=0).stdout)
        # diff pairs processes by rank: rank 0's trace, relabelled as the planted rank, against that rank.
        base = os.path.join(cls.dir, "rank0-as-peak-rank.jsonl")
        with open(cls.paths[0]) as f, open(base, "w") as out:
            header = json.loads(f.readline())
            header["rank"] = PEAK_RANK
            out.write(json.dumps(header) + "\n" + f.read())
        cls.diff = json.loads(run_report("diff", "--format", "json", base, cls.paths[PEAK_RANK], check_rc=0).stdout)
        cls.missing = duckdb_missing()
        cls.rows = None if cls.missing or cls.export_rc != 0 else run_sql(cls.dir, queries())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, True)

    def setUp(self):
        self.assertEqual(self.export_rc, 0, self.export_stderr)
        if self.missing:
            self.skipTest(self.missing)

    def answer(self, name):
        return self.rows[name]

    def test_the_page_has_every_query(self):
        self.assertEqual([q["name"] for q in queries()],
                         ["views", "peak_by_rank", "at_peak", "ranks_differ", "leaks_on_every_rank", "roles_at_peak"])

    def test_which_rank_peaks_highest(self):
        rows = self.answer("peak_by_rank")
        self.assertEqual(len(rows), RANKS)
        # Each rank's peak is its own report's.
        for row in rows:
            device = self.reports[int(row["rank"])]["processes"][0]["devices"][0]
            self.assertEqual(int(row["peak_bytes"]), device["peak_bytes"], row)
        # The highest is the planted rank, as the whole run's report (-j) names it.
        top = rows[0]
        self.assertEqual(int(top["rank"]), PEAK_RANK)
        spread = self.whole["spread"]["peak_bytes"]
        self.assertEqual(int(top["pid"]), spread["max_pid"])
        self.assertEqual(int(top["peak_bytes"]), spread["max"])
        self.assertEqual(int(top["peak_bytes"]), self.whole["summary"]["peak_bytes"])
        self.assertGreater(spread["max"], spread["min"])

    def at_peak(self):
        """(rank, level) -> site -> bytes at the peak, as SQL says."""
        by_rank = {}
        for row in self.answer("at_peak"):
            by_rank.setdefault((int(row["rank"]), row["level"]), {})[row["site"]] = int(row["bytes"])
        return by_rank

    def culprits(self, report):
        """level -> site -> bytes at the peak, as a rank's own report says (reserved, and allocated)."""
        (peak,) = report["peaks"]
        out = {"reserved": {site_of(c["stack"]): c["bytes"] for c in peak["culprits"]}}
        self.assertEqual(sum(out["reserved"].values()) + peak["other_bytes"], peak["bytes"])
        if "allocated" in peak:
            out["allocated"] = {site_of(c["stack"]): c["bytes"] for c in peak["allocated"]["culprits"]}
        return out

    def test_what_each_rank_holds_at_its_peak(self):
        by_rank = self.at_peak()
        for rank, report in enumerate(self.reports):
            for level, sites in self.culprits(report).items():
                self.assertEqual(by_rank[(rank, level)], sites, f"rank {rank}, {level}")
        self.assertEqual(sorted(by_rank), sorted((r, level) for r in range(RANKS) for level in ("reserved", "allocated")))

    def test_where_the_ranks_differ(self):
        rows = {(row["level"], row["site"]): row for row in self.answer("ranks_differ")}
        # diff of rank 0 (relabelled) and the planted rank, at the block level it compares for processes
        # with blocks: each culprit's bytes on either side are SQL's, and SQL lists the ones that changed.
        by_rank = self.at_peak()
        (peak,) = self.diff["peaks"]
        changed = 0
        for c in peak["culprits"]:
            site = site_of(c["stack"])
            self.assertEqual(by_rank[(0, "allocated")].get(site, 0), c["base_bytes"], site)
            self.assertEqual(by_rank[(PEAK_RANK, "allocated")].get(site, 0), c["new_bytes"], site)
            if c["delta_bytes"]:
                changed += 1
                self.assertIn(("allocated", site), rows)
        self.assertGreater(changed, 0)
        gather = next(key for key in rows if "gather_logits" in key[1])
        self.assertEqual(gather[0], "reserved")
        self.assertEqual(int(rows[gather]["max_rank"]), PEAK_RANK)
        self.assertEqual(int(rows[gather]["max_bytes"]), 512 << 20)
        # Every site whose bytes at the peak differ between the per-rank reports, and no other.
        per_site = {}
        for rank, report in enumerate(self.reports):
            for level, sites in self.culprits(report).items():
                for site, value in sites.items():
                    per_site.setdefault((level, site), {})[rank] = value
        differ = {}
        for key, ranks in per_site.items():
            values = [ranks.get(r, 0) for r in range(RANKS)]
            if min(values) != max(values):
                differ[key] = (min(values), max(values))
        self.assertEqual({k: (int(r["min_bytes"]), int(r["max_bytes"])) for k, r in rows.items()}, differ)

    def test_a_site_that_leaks_on_every_rank(self):
        rows = {row["site"]: row for row in self.answer("leaks_on_every_rank")}
        leaks = [leak_sites(report) for report in self.reports]  # per rank, as each report lists them
        everywhere = set.intersection(*(set(s) for s in leaks))
        self.assertEqual(set(rows), everywhere)
        self.assertTrue(any("cache_embeddings" in site for site in rows))
        self.assertFalse(any("keep_rank_buffer" in site for site in rows))  # even ranks only
        for site, row in rows.items():
            self.assertEqual(int(row["ranks"]), RANKS)
            self.assertEqual(int(row["bytes"]), sum(s[site] for s in leaks), site)
        # The whole run's report counts every leak, those of one rank too.
        self.assertEqual(self.whole["summary"]["leaked_bytes"], sum(sum(s.values()) for s in leaks))

    def test_memory_by_role_across_ranks(self):
        rows = {row["role"]: row for row in self.answer("roles_at_peak")}
        totals, highest = {}, {}
        for report in self.reports:
            (peak,) = report["peaks"]
            for role, value in peak["roles"].items():
                if value:
                    totals[role] = totals.get(role, 0) + value
                    highest[role] = max(highest.get(role, 0), value)
        self.assertEqual({role: int(row["bytes"]) for role, row in rows.items()}, totals)
        self.assertEqual({role: int(row["max_bytes"]) for role, row in rows.items()}, highest)
        self.assertGreaterEqual(len(totals), 4)  # activations, parameters, optimizer state, allocator cache, other

    def test_export_says_what_it_wrote(self):
        events = sum(r["processes"][0]["events"] for r in self.reports)
        self.assertIn(f"exported {events} events", self.export_stderr)
        self.assertEqual(len(os.listdir(os.path.join(self.dir, "exports"))), 3 * RANKS)


class ExportErrors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpumem-export-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.paths = write_run(os.path.join(self.dir, "a"), 2)

    def test_two_traces_of_one_name_are_refused(self):
        other = os.path.join(self.dir, "b")
        os.makedirs(other)
        shutil.copy(self.paths[0], other)
        proc = run_report("--export", "events", os.path.join(self.dir, "out"), self.paths[0],
                          os.path.join(other, os.path.basename(self.paths[0])))
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
        self.assertIn("export them into different folders", proc.stderr)

    def test_usage_errors(self):
        for args, message in ((["--export", "rows", "out"], "--export: expected events DIR"),
                              (["--export", "events", "out", "--format", "json"], "--export writes tables")):
            proc = run_report(*args, self.paths[0])
            self.assertEqual(proc.returncode, 2, args)
            self.assertIn(message, proc.stderr)
            self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)

    def test_a_bad_trace_is_an_error_naming_it(self):
        bad = os.path.join(self.dir, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"type":"header"\n{"type":"event"}\n')
        proc = run_report("--export", "events", os.path.join(self.dir, "out"), bad)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("bad.jsonl", proc.stderr)


if __name__ == "__main__":
    unittest.main()
