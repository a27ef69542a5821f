# tests/dist/test_bundle_elf.py — the release tarball: its layout, size, and every ELF file's needs.
"""The bundle holds what docs/install.md and the GPU checks' contract promise, is under 30 MB, and
every ELF file in it needs glibc 2.34 or older and nothing else (packaging/elfcheck.py); the preload
library exports only the hooks and the public C API. The checker itself is shown to fail on files
that break the rules (the build tree's, linked against this machine's shared libraries)."""
import os
import shutil
import subprocess
import tempfile
import unittest

from dist_testlib import BUILD, BUNDLE_NAME, ROOT, TARBALL, BundleTestCase, elfcheck, run

GLIBC_ONLY = {"libc.so.6", "ld-linux-x86-64.so.2", "libm.so.6", "libdl.so.2", "libpthread.so.0"}
ELF_FILES = ("bin/gpumemtrace", "bin/gpumem-report", "lib/libgpumemtrace.so")


class BundleLayout(BundleTestCase):
    def test_contract_layout(self):
        for rel in (*ELF_FILES, "python/gpumemtrace/__init__.py", "python/gpumemtrace/__main__.py",
                    "python/gpumemtrace_torch/__init__.py", "python/gpumemtrace_pytest.py",
                    "python/sitecustomize.py", "include/gpumemtrace.h", "share/doc/gpumemtrace/README.md",
                    "share/doc/gpumemtrace/docs/install.md", "share/doc/gpumemtrace/third-party/VERSIONS"):
            self.assertTrue(os.path.isfile(self.path(rel)), rel)
        for rel in ELF_FILES[:2]:
            self.assertTrue(os.access(self.path(rel), os.X_OK), rel)
        # Licenses of everything linked in.
        licenses = os.listdir(self.path("share", "doc", "gpumemtrace", "third-party"))
        for name in ("elfutils", "libunwind", "simdjson", "libzstd", "zlib"):
            self.assertIn(f"{name}.copyright", licenses)

    def test_under_30_mb(self):
        size = os.path.getsize(TARBALL)
        print(f"\n  {os.path.basename(TARBALL)}: {size / 1e6:.1f} MB")
        self.assertLess(size, 30e6)

    def test_no_cuda_library_and_no_cache(self):
        for base, dirs, files in os.walk(self.bundle):
            self.assertNotIn("__pycache__", dirs, base)
            for name in files:
                self.assertIsNone(elfcheck.CUDA_LIBRARY.match(name), os.path.join(base, name))

    def test_tarball_is_reproducible(self):
        # The same folder packs to the same bytes (fixed times, owners and order).
        out = tempfile.mkdtemp(prefix="gpumem-dist-tar-")
        self.addCleanup(shutil.rmtree, out, True)
        packed = []
        for i in range(2):
            path = os.path.join(out, f"{i}.tar.gz")
            p = run(["python3", os.path.join(ROOT, "packaging", "bundle.py"), "tarball", self.bundle, path])
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(path, "rb") as f:
                packed.append(f.read())
        self.assertEqual(packed[0], packed[1])


class BundleElf(BundleTestCase):
    def test_every_elf_file_within_the_baseline(self):
        lines, violations = elfcheck.check_tree(self.bundle, "2.34", "3.4.29", preload="lib/libgpumemtrace.so")
        print("\n  " + "\n  ".join(lines))
        self.assertEqual(violations, [])
        self.assertEqual(len([line for line in lines if "NEEDED" in line]), 3, lines)

    def test_needs_glibc_alone(self):
        # Stronger than the baseline: libstdc++, libgcc_s and everything else are linked in.
        for rel in ELF_FILES:
            info = elfcheck.inspect(self.path(rel))
            self.assertLessEqual(set(info["needed"]), GLIBC_ONLY, rel)
            self.assertEqual(info["rpath"], [], rel)
            self.assertFalse(any(v.startswith(("GLIBCXX_", "CXXABI_", "GCC_")) for v in info["versions"]), rel)

    def test_preload_is_never_unloaded(self):
        # -z nodelete (interpose/module.mk): a dlclose after an injection's dlopen leaves it in place.
        dynamic = run(["readelf", "-d", self.path("lib", "libgpumemtrace.so")]).stdout
        self.assertRegex(dynamic, r"FLAGS_1\)\s+Flags:.*NODELETE")

    def test_preload_exports_hooks_and_api_only(self):
        exports = set(elfcheck.inspect(self.path("lib", "libgpumemtrace.so"))["exports"])
        for needed in ("cudaMalloc", "cudaFree", "cuMemAlloc_v2", "cuGetProcAddress_v2", "dlsym",
                       "gpumemtrace_report_scope", "gpumemtrace_flush", "InitializeInjection"):
            self.assertIn(needed, exports)
        # C++: only the project's own two test entry points (packaging/libgpumemtrace.map).
        self.assertEqual(sorted(s for s in exports if s.startswith("_Z")),
                         ["_ZN11gpumemtrace39route_log_lines_through_program_threadsEv", "_ZN11gpumemtrace8log_lineEPKc"])
        exports -= {"_ZN11gpumemtrace39route_log_lines_through_program_threadsEv", "_ZN11gpumemtrace8log_lineEPKc"}
        leaked = sorted(s for s in exports if s.startswith(
            ("_Z", "__cxa", "__gxx", "_U", "unw_", "ZSTD_", "ZDICT_", "dwarf_", "dwfl_", "dwelf_", "elf_", "elf32",
             "elf64", "gelf_", "ebl_", "inflate", "deflate", "simdjson", "__wrap")))
        self.assertEqual(leaked, [])


class CheckerFails(unittest.TestCase):
    """elfcheck.py is not a rubber stamp: files that need more than glibc, or a newer glibc than
    the baseline, are refused."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpumem-elfcheck-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_build_tree_report_needs_unshipped_libraries(self):
        report = os.path.join(BUILD, "gpumem-report")
        if not os.path.isfile(report):
            self.skipTest(f"{report} not built")
        shutil.copy(report, os.path.join(self.tmp, "gpumem-report"))
        _, violations = elfcheck.check_tree(self.tmp)
        self.assertTrue(any("libsimdjson.so" in v and "neither glibc's nor shipped" in v for v in violations),
                        violations)
        p = run(["python3", os.path.join(ROOT, "packaging", "elfcheck.py"), self.tmp])
        self.assertEqual(p.returncode, 1)
        self.assertIn("FAILED", p.stderr)

    def test_baseline_below_what_a_file_needs(self):
        if not os.path.isfile(TARBALL):
            self.skipTest("dist not built")
        subprocess.run(["tar", "xzf", TARBALL, "-C", self.tmp], check=True)
        _, violations = elfcheck.check_tree(os.path.join(self.tmp, BUNDLE_NAME), glibc_max="2.17")
        self.assertTrue(any("above the baseline 2.17" in v for v in violations), violations)

    def test_stray_export_is_refused(self):
        lib = os.path.join(BUILD, "libgpumemtrace.so")
        if not os.path.isfile(lib):
            self.skipTest(f"{lib} not built")
        shutil.copy(lib, os.path.join(self.tmp, "libgpumemtrace.so"))
        narrow = os.path.join(self.tmp, "narrow.map")
        with open(narrow, "w") as f:
            f.write("{ global: cuda*; local: *; };\n")
        _, violations = elfcheck.check_tree(self.tmp, preload="libgpumemtrace.so", map_file=narrow)
        self.assertTrue(any("symbols its version script does not name" in v for v in violations), violations)


if __name__ == "__main__":
    unittest.main()
