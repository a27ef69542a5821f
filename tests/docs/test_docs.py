# tests/docs/test_docs.py — the docs' claims hold (tests/docs/check_docs.py), and each check fails on a false one.
"""Runs every check of tests/docs/check_docs.py on README.md and docs/*.md, then plants a false claim
of each kind in a copy of the docs and sees the check that must catch it fail. The checks that run
commands skip under a sanitizer (the docs' commands preload the recorder alone)."""
import os
import re
import shutil
import tempfile
import unittest

from check_docs import ROOT, Docs, run_checks
from docs_sandbox import Sandbox, build_dir, commands_can_run

SANDBOX = None


def setUpModule():
    global SANDBOX
    if commands_can_run(build_dir()) is None:
        SANDBOX = Sandbox()


def tearDownModule():
    if SANDBOX:
        SANDBOX.close()


def check(name, docs=None):
    """The problems `name` finds (skips the test where the check cannot run here)."""
    problems = run_checks([name], docs=docs, sandbox=SANDBOX)[name]
    if problems is None:
        raise unittest.SkipTest(commands_can_run(build_dir()))
    return problems


class TheDocsAreTrue(unittest.TestCase):
    def assert_no_problem(self, name):
        problems = check(name)
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_commands(self):
        self.assert_no_problem("commands")

    def test_variables(self):
        self.assert_no_problem("variables")

    def test_options(self):
        self.assert_no_problem("options")

    def test_exit_statuses(self):
        self.assert_no_problem("exits")

    def test_facts(self):
        self.assert_no_problem("facts")

    def test_json_keys(self):
        self.assert_no_problem("json")

    def test_trace_format_fields(self):
        self.assert_no_problem("trace")

    def test_make_targets(self):
        self.assert_no_problem("make")

    def test_links(self):
        self.assert_no_problem("links")

    def test_paths(self):
        self.assert_no_problem("paths")

    def test_some_blocks_are_checked(self):
        """The marks are there: the README's report, its command lines, the docs' examples."""
        marked = [(name, mark) for name, _, mark, _ in Docs().blocks() if mark]
        self.assertGreaterEqual(len(marked), 10, marked)
        self.assertIn("README.md", {name for name, _ in marked})


class FalseClaimsAreCaught(unittest.TestCase):
    """Each check on a copy of the docs with one false claim planted."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gpumem-docs-planted-")
        self.addCleanup(shutil.rmtree, self.root, True)
        shutil.copy(os.path.join(ROOT, "README.md"), self.root)
        shutil.copytree(os.path.join(ROOT, "docs"), os.path.join(self.root, "docs"))

    def plant(self, name, old, new, count=1):
        path = os.path.join(self.root, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.assertIn(old, text, f"{name} no longer has the text this test changes")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, count))

    def append(self, name, text):
        with open(os.path.join(self.root, name), "a", encoding="utf-8") as f:
            f.write("\n" + text + "\n")

    def caught(self, check_name, *expected):
        problems = check(check_name, Docs(self.root))
        for e in expected:
            self.assertTrue(any(re.search(e, p) for p in problems), f"no problem matches /{e}/ in:\n" + "\n".join(problems))

    def test_a_wrong_figure_in_shown_output(self):
        self.plant("README.md", "leaks: 74.0 MiB in 51 allocations", "leaks: 75.0 MiB in 51 allocations")
        self.caught("commands", r"README.md:\d+: the block is not what .* prints")

    def test_a_command_that_fails(self):
        self.append("docs/report.md", "<!-- check: run -->\n```sh\ngpumem-report --top x trace.jsonl\n```")
        self.append("docs/launcher.md", "<!-- check: each -->\n```sh\ngpumemtrace run -- no-such-command-gpumem\n```")
        self.caught("commands", r"docs/report.md:\d+: the block exits 2, not 0", r"docs/launcher.md:\d+: .* exits 127")

    def test_a_misspelt_mark(self):
        self.append("docs/report.md", "<!-- check: outptu: gpumem-report trace.jsonl -->\n```\nleaks\n```")
        self.caught("commands", "unknown check mark")

    def test_variables_documented_read_and_named(self):
        self.plant("docs/configuration.md", "| `GPUMEMTRACE_FLUSH_MS` |", "| `GPUMEMTRACE_FLUSH_MSEC` |")
        self.plant("README.md", "`GPUMEMTRACE_SYMBOLIZE=0`", "`GPUMEMTRACE_SYMBOLISE=0`")
        self.caught("variables", "GPUMEMTRACE_FLUSH_MS is read by the code but not in a table",
                    "GPUMEMTRACE_FLUSH_MSEC is documented but no code reads it",
                    r"README.md:\d+: GPUMEMTRACE_SYMBOLISE is not a variable")

    def test_options_in_tables_and_text(self):
        self.plant("docs/report.md", "| `--no-progress` |", "| `--no-progress-line` |")
        self.plant("docs/launcher.md", "| `-q`, `--quiet` |", "| `-q`, `--silent` |")
        self.plant("docs/launcher.md", "| `--sort KEY` |", "| `--order KEY` |")  # gpumemtrace top's table
        self.plant("README.md", "--fail-on-leak=1MiB --fail-on-growth", "--fail-on-leaks=1MiB --fail-on-growth")
        self.caught("options", "--no-progress .* is not in the option table", "--no-progress-line is not an option",
                    "--silent is not an option of gpumemtrace", r"README.md:\d+: --fail-on-leaks is an option of neither",
                    r"--sort \(`gpumemtrace top --help`\) is not in the option table",
                    "--order is not an option of gpumemtrace top")

    def test_a_wrong_exit_status(self):
        self.plant("docs/launcher.md", "127 means CMD could not be found", "126 means CMD could not be found")
        self.plant("docs/report.md", "**3** a gate (`--fail-on-leak`", "**2** a gate (`--fail-on-leak`")
        self.caught("exits", r"docs/launcher.md:\d+: says .*126.* for the launcher: a command not found; it is 127",
                    r"docs/report.md:\d+: says .* for a gate on a cut trace; it is 3")

    def test_a_wrong_count(self):
        self.plant("docs/install.md", "`-Wl,--exclude-libs,ALL`): 98 symbols", "`-Wl,--exclude-libs,ALL`): 79 symbols")
        self.caught("facts", r"docs/install.md:\d+: says 79; `nm -D .*` says \d+")

    def test_json_keys_both_ways(self):
        self.plant("docs/report.md", '"ppid": 4200, ', '"parent": 4200, ')
        self.append("docs/report.md", "The total is `summary.no_such_total`, per device `devices[].no_such_key`.")
        self.caught("json", "the JSON example has `processes\\[\\].parent`, which no real report has",
                    "the reports have `processes\\[\\].ppid`, which it does not name",
                    "`summary.no_such_total` is in no real report", "`devices\\[\\].no_such_key` is in no real report")

    def test_trace_format_fields_both_ways(self):
        self.plant("docs/trace-format.md", '"host":"node7",', '"host":"node7","hostname":"node7",')
        self.plant("docs/trace-format.md", "not_written", "not_recorded", count=-1)
        self.caught("trace", "a `header` record with `hostname`: no real trace has one",
                    "real `footer` records have `not_written`, which it does not name")

    def test_make_targets_and_variables(self):
        self.plant("README.md", "make asan    #", "make asan-all    #")
        self.append("docs/performance.md", "`make bench-recorder BENCH_RECORDER_ARG=--reps`")
        self.caught("make", r"README.md:\d+: .*no target asan-all", "the Makefile has no variable BENCH_RECORDER_ARG")

    def test_links_to_files_and_headings(self):
        self.append("docs/report.md", "[gone](nowhere.md), [no heading](what-if.md#no-such-heading), [ok](what-if.md#time-to-oom)")
        self.caught("links", "docs/nowhere.md does not exist", "what-if.md has no heading #no-such-heading")
        self.assertFalse(any("time-to-oom" in p for p in check("links", Docs(self.root))))

    def test_repository_paths(self):
        self.append("docs/report.md", "`tests/report/test_report_no_such_thing.py`, `build/no_such_program`, `no_such_bench.py`")
        self.caught("paths", "tests/report/test_report_no_such_thing.py does not exist", "build/no_such_program does not exist",
                    "no_such_bench.py: no file of that name")


if __name__ == "__main__":
    unittest.main()
