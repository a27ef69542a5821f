# tests/testenv.py — what every suite puts in front of the recorder in LD_PRELOAD (the sanitizer runtime).
"""A recorder built with a sanitizer (make asan, make tsan) needs the sanitizer's runtime loaded first
in a program that was not built with it: tests/run_tests.py --sanitizer names that runtime in
GPUMEMTRACE_TEST_PRELOAD, and the suites' helpers build their LD_PRELOAD with recorder_preload().
Unset (make test): the recorder alone.
"""
import os

TEST_PRELOAD_VARIABLE = "GPUMEMTRACE_TEST_PRELOAD"


def sanitizer_runtime():
    """The sanitizer runtime to preload ahead of the recorder, or None."""
    return os.environ.get(TEST_PRELOAD_VARIABLE) or None


def fork_deadlocks_under_sanitizer():
    """True under a sanitizer: GCC 12's runtimes do not hold their allocator's locks across fork, so a
    child forked while another thread (the recorder's writer) is inside malloc finds that lock taken
    forever and hangs in its first allocation of that size (ThreadSanitizer says as much: "starting new
    threads after multi-threaded fork is not supported"). Tests that fork once the recorder runs skip
    themselves then."""
    return sanitizer_runtime() is not None


FORK_UNDER_SANITIZER = "GCC's sanitizer runtimes do not lock their allocator across fork (tests/testenv.py)"


def signal_handlers_wait_for_waitpid():
    """True under ThreadSanitizer: its runtime runs an asynchronous signal's handler only when the thread
    next leaves one of the calls it treats as blocking, and waitpid is not one of them: a program
    waiting in waitpid with SA_RESTART (the launcher forwarding signals to its command) never runs the
    handler while it waits."""
    return under_tsan()


SIGNALS_UNDER_TSAN = "ThreadSanitizer runs a signal's handler only after waitpid returns (tests/testenv.py)"


def under_tsan():
    """True when the recorder under test is ThreadSanitizer's build."""
    runtime = sanitizer_runtime()
    return runtime is not None and os.path.basename(runtime).startswith("libtsan")


PROBE_UNDER_TSAN = ("make tsan's recorder does not probe a seccomp filter: ThreadSanitizer cannot follow the probe's "
                    "CLONE_VM child (interpose/recorder/thread_check.cpp)")


def recorder_preload(lib, *more):
    """The LD_PRELOAD value that loads `lib` (and `more`, after it) into a test's program."""
    return ":".join(p for p in (sanitizer_runtime(), lib, *more) if p)
