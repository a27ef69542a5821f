# tests/e2e/test_config_variables.py — unknown GPUMEMTRACE_* names warned about; every documented one known.
"""End-to-end tests of the recorder's check of GPUMEMTRACE_* names (interpose/recorder/config.h): a name
it does not know gets one warning at start-up, with the closest known name; every name the project
documents (docs/configuration.md) or reads is known."""
import os
import re
import unittest

from recorder_testlib import ROOT, Trace, program, run_traced, tempdir, trace_files

UNKNOWN = "(not a gpumemtrace variable"


def documented_variables():
    with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as f:
        return set(re.findall(r"^\| `(GPUMEMTRACE_[A-Z0-9_]+)`", f.read(), re.M))


def variables_read_by_the_code():
    """Names passed to getenv / os.environ.get / os.environ[...] / an _env_int helper in the sources,
    and the names of the recorder's own list (config.h)."""
    found = set()
    patterns = [r'getenv\("(GPUMEMTRACE_[A-Z0-9_]+)"\)', r'environ(?:\.get\(|\[)"(GPUMEMTRACE_[A-Z0-9_]+)"',
                r'_env_int\("(GPUMEMTRACE_[A-Z0-9_]+)"', r'X\(k\w+, "(GPUMEMTRACE_[A-Z0-9_]+)"\)']
    for top in ("interpose", "cupti", "tools", "tests", "bench", "report"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".cpp", ".cc", ".c", ".h", ".py", ".sh")):
                    with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                        text = f.read()
                    for p in patterns:
                        found.update(re.findall(p, text))
    return found


class UnknownVariables(unittest.TestCase):
    def test_misspelt_names_warn_once_each_with_the_closest_name(self):
        out = tempdir()
        proc = run_traced([program("scenarios"), "depth"], out,
                          env={"GPUMEMTRACE_STACK_DEPHT": "8", "GPUMEMTRACE_COLOUR": "blue", "GPUMEMTRACE_QUIET": "1"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # The same words as every other bad setting; GPUMEMTRACE_QUIET hides information, not warnings.
        self.assertEqual(sorted(proc.stderr.splitlines()), [
            "gpumemtrace: ignoring GPUMEMTRACE_COLOUR=blue (not a gpumemtrace variable)",
            "gpumemtrace: ignoring GPUMEMTRACE_STACK_DEPHT=8 (not a gpumemtrace variable; did you mean "
            "GPUMEMTRACE_STACK_DEPTH?)"])
        t = Trace(trace_files(out)[0])
        self.assertEqual([e["size"] for e in t.allocs()], [5005])
        self.assertEqual(t.header["stack_depth"], 64)  # the misspelt setting did not apply

    def test_a_bad_size_is_one_line_and_the_default(self):
        # issue 26, item 6: every size the recorder reads is refused with one line, never taken silently.
        expected = "(expected 0 (no cap) or a size >= 64K, e.g. 512M or 20G); using the default"
        for value in ("1 GiB", "lots", "100", "", "-5", "1e9", "16EiB"):
            with self.subTest(value=value):
                out = tempdir()
                proc = run_traced([program("scenarios"), "depth"], out, env={"GPUMEMTRACE_MAX_BYTES": value})
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stderr.splitlines(),
                                 [f"gpumemtrace: ignoring GPUMEMTRACE_MAX_BYTES={value} {expected}"])
                self.assertEqual([e["size"] for e in Trace(trace_files(out)[0]).allocs()], [5005])

    def test_values_are_shown_escaped(self):
        # An ESC sequence in the environment must not reach the terminal through our line.
        out = tempdir()
        proc = run_traced([program("scenarios"), "depth"], out,
                          env={"GPUMEMTRACE_RING_EVENTS": "1\x1b[2J", "GPUMEMTRACE_COL\x1bR": "\x1b]0;title\x07"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("\x1b", proc.stderr)
        self.assertEqual(sorted(proc.stderr.splitlines()), [
            "gpumemtrace: ignoring GPUMEMTRACE_COL\\x1bR=\\x1b]0;title\\x07 (not a gpumemtrace variable)",
            "gpumemtrace: ignoring GPUMEMTRACE_RING_EVENTS=1\\x1b[2J (expected a power of two in 256..4194304); "
            "using the default"])

    def test_every_documented_variable_is_known(self):
        names = documented_variables()
        self.assertIn("GPUMEMTRACE_STACK_DEPTH", names)
        self.assertIn("GPUMEMTRACE_LIBRARY", names)
        out = tempdir()
        env = {n: "" for n in names if n != "GPUMEMTRACE_OUTPUT"}  # values do not matter here
        proc = run_traced([program("scenarios"), "depth"], out, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual([l for l in proc.stderr.splitlines() if UNKNOWN in l], [])

    def test_every_variable_the_code_reads_is_documented(self):
        missing = variables_read_by_the_code() - documented_variables()
        self.assertEqual(missing, set(), "add them to docs/configuration.md (and config.h's list)")


if __name__ == "__main__":
    unittest.main()
