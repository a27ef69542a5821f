# tests/dist/test_minimal_root.py — the unpacked bundle in a root that holds glibc and nothing else.
"""The release bundle needs nothing but glibc (issue 18, "proof that nothing else is needed"):

- root `glibc`: Debian's libc6 package unpacked (dpkg -x) and the bundle. The analyzer reads a
  trace and gives the right report; the launcher starts; ld.so resolves the preload library.
- root `program`: the same plus libgcc-s1 and libstdc++6, which the traced C++ program (the demo,
  examples/train_loop) needs for itself, and the simulated CUDA runtime in the root's system
  library folder. `gpumemtrace ci --fail-on-leak -- /work/train_loop` there records, symbolizes
  and reports the demo's planted leak and accumulation, with no environment variable at all.

Each root is entered with unshare (a mount and PID namespace with its own /proc, which the launcher
reads to find itself) and chroot. The Debian packages come from $(THIRD_PARTY)/root-debs (make
dist-deps), else from `apt-get download`; the tests skip, saying why, where neither works or where
namespaces are refused (an unprivileged container).
"""
import glob
import os
import shutil
import subprocess
import tempfile
import unittest

from dist_testlib import CUDART, DEMO, DEMO_LEAKS, THIRD_PARTY, VERSION, BundleTestCase, run

PACKAGES = ("libc6", "libgcc-s1", "libstdc++6")


def root_debs(workdir):
    """{package: .deb path} from make dist-deps' cache, else downloaded now; raises SkipTest."""
    for folder in (os.path.join(THIRD_PARTY, "root-debs"), workdir):
        found = {p: sorted(glob.glob(os.path.join(folder, f"{p}_*.deb"))) for p in PACKAGES}
        if all(found.values()):
            return {p: files[-1] for p, files in found.items()}
        if folder == workdir:
            break
        p = run(["apt-get", "download", *PACKAGES], cwd=workdir, timeout=300)
        if p.returncode != 0:
            raise unittest.SkipTest("cannot obtain Debian's libc6, libgcc-s1, libstdc++6 (make dist-deps caches "
                                    f"them; apt-get download: {p.stderr.strip().splitlines()[-1:]})")
    raise unittest.SkipTest("apt-get download gave no .deb files")


def enter_command(root):
    """The command prefix that runs a program inside `root`; raises SkipTest where namespaces are refused."""
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    tools = [shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") for t in ("unshare", "chroot")]
    if None in tools:
        raise unittest.SkipTest("unshare or chroot is not installed (util-linux, coreutils)")
    prefix = [tools[0], *user, "--mount", "--pid", "--fork", f"--mount-proc={root}/proc", tools[1], root]
    p = run([*prefix, "/lib64/ld-linux-x86-64.so.2", "--version"], timeout=60, env={})
    if p.returncode != 0:
        raise unittest.SkipTest(f"cannot enter a minimal root here (unshare/chroot refused: {p.stderr.strip()[:200]})")
    return prefix


def make_root(path, debs):
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", deb, path], check=True)
    for d in ("proc", "work", "opt", "tmp"):
        os.makedirs(os.path.join(path, d), exist_ok=True)


class MinimalRoot(BundleTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for path in (DEMO, CUDART):
            if not os.path.isfile(path):
                raise unittest.SkipTest(f"{path} not built (make dist-test builds it)")
        debs = root_debs(cls.tmp)
        cls.glibc_root = os.path.join(cls.tmp, "root-glibc")
        cls.program_root = os.path.join(cls.tmp, "root-program")
        make_root(cls.glibc_root, [debs["libc6"]])
        make_root(cls.program_root, debs.values())
        cls.enter = {root: enter_command(root) for root in (cls.glibc_root, cls.program_root)}
        for root in (cls.glibc_root, cls.program_root):
            shutil.copytree(cls.bundle, os.path.join(root, "opt", "gpumemtrace"), symlinks=True)
        # The traced side: the demo, and the simulated runtime where its program finds a system library.
        shutil.copy(DEMO, os.path.join(cls.program_root, "work", "train_loop"))
        libdir = os.path.join(cls.program_root, "usr", "lib", "x86_64-linux-gnu")
        shutil.copy(CUDART, os.path.join(libdir, "libcudart.so.13"))
        cls.demo = None  # the demo run: made once, read by several tests

    def inside(self, root, args, timeout=300):
        # No LD_LIBRARY_PATH, no PATH, no GPUMEMTRACE_*: HOME alone.
        return run([*self.enter[root], *args], timeout=timeout, env={"HOME": "/work"})

    def demo_run(self):
        if MinimalRoot.demo is None:
            MinimalRoot.demo = self.inside(self.program_root, [
                "/opt/gpumemtrace/bin/gpumemtrace", "ci", "--fail-on-leak", "-o", "/work/traces", "--",
                "/work/train_loop", "50"])
        return MinimalRoot.demo

    def test_roots_hold_glibc_alone(self):
        # The glibc root really lacks the C++ runtime: the bundle cannot be borrowing it.
        libs = os.listdir(os.path.join(self.glibc_root, "lib", "x86_64-linux-gnu"))
        self.assertIn("libc.so.6", libs)
        for absent in ("libstdc++.so.6", "libgcc_s.so.1", "libzstd.so.1", "libunwind.so.8", "libdw.so.1",
                       "libsimdjson.so.14"):
            self.assertFalse(glob.glob(os.path.join(self.glibc_root, "**", absent), recursive=True), absent)

    def test_demo_traced_and_reported_in_the_program_root(self):
        p = self.demo_run()
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 1, out)  # the gate's verdict: the planted leak is there
        for name in DEMO_LEAKS:
            self.assertIn(name, out)
        self.assertIn("leaks: 74.0 MiB in 51 allocations", out)
        self.assertNotIn("cannot open shared object", out)
        self.assertNotIn("not found", out)

    def test_report_in_the_glibc_root(self):
        self.assertEqual(self.demo_run().returncode, 1, self.demo_run().stderr)
        traces = os.listdir(os.path.join(self.program_root, "work", "traces"))
        self.assertEqual(len(traces), 1, traces)
        shutil.copy(os.path.join(self.program_root, "work", "traces", traces[0]),
                    os.path.join(self.glibc_root, "work", traces[0]))
        p = self.inside(self.glibc_root, ["/opt/gpumemtrace/bin/gpumem-report", "--fail-on-leak",
                                          "/work/" + traces[0]])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        for name in DEMO_LEAKS:
            self.assertIn(name, p.stdout)
        self.assertIn("leaks: 74.0 MiB in 51 allocations", p.stdout)

    def test_launcher_and_library_start_in_the_glibc_root(self):
        p = self.inside(self.glibc_root, ["/opt/gpumemtrace/bin/gpumemtrace", "--version"])
        self.assertEqual((p.returncode, p.stdout.strip()), (0, f"gpumemtrace {VERSION}"), p.stderr)
        # ld.so itself lists what the preload library needs: found in the root, every version met.
        p = self.inside(self.glibc_root, ["/lib64/ld-linux-x86-64.so.2", "--list",
                                          "/opt/gpumemtrace/lib/libgpumemtrace.so"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6", p.stdout)
        self.assertNotIn("not found", p.stdout + p.stderr)

    def test_a_bad_option_is_one_line_and_status_2(self):
        # An exception thrown and caught inside the bundled analyzer: libgcc's unwinder finds its
        # tables through packaging/glibc_compat.c's _dl_find_object.
        p = self.inside(self.glibc_root, ["/opt/gpumemtrace/bin/gpumem-report", "--no-such-option", "/work"])
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("no-such-option", p.stderr)


if __name__ == "__main__":
    unittest.main()
