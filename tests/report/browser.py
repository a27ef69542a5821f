# tests/report/browser.py — headless Chromium for the HTML report's tests.
"""Headless Chromium for the HTML report's tests: renders a page and returns its DOM after the
scripts ran. Tests skip (never fail) when Chromium is missing or cannot start."""
import os
import shutil
import subprocess
import tempfile

# Flags for a machine with no network and no display: nothing is fetched in the background, and a
# fresh profile each time.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--hide-scrollbars"]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(page, *extra, timeout=60, budget_ms=10000):
    """Runs Chromium on `page` (a file path) with `extra` flags, letting the page's scripts run for
    `budget_ms` of virtual time; returns its stdout, or None when it cannot run here."""
    binary = chromium()
    if not binary:
        return None
    with tempfile.TemporaryDirectory() as profile:
        try:
            proc = subprocess.run([binary, *FLAGS, f"--virtual-time-budget={budget_ms}",
                                   f"--user-data-dir={profile}", *extra,
                                   "file://" + os.path.abspath(page)],
                                  capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            return None
    if proc.returncode != 0 or not proc.stdout.strip() and "--dump-dom" in extra:
        return None
    return proc.stdout


# Attempts at a DOM whose scripts finished: the report draws in requestAnimationFrame callbacks, and
# headless Chromium may dump the DOM when its virtual-time budget runs out, before it produced a frame
# (seen once in many runs, on a loaded machine). A page that never finishes fails every attempt.
RENDER_ATTEMPTS = 3


def rendered_dom(page, width=1280, height=1600, budget_ms=10000, timeout=60, finished='data-rendered="'):
    """The DOM after the page's scripts ran: the first of RENDER_ATTEMPTS dumps that contains
    `finished` (the report sets data-rendered="true", or "error"), else the last one; None when
    Chromium cannot run here."""
    dom = None
    for _ in range(RENDER_ATTEMPTS):
        dom = run_chromium(page, "--dump-dom", f"--window-size={width},{height}", budget_ms=budget_ms,
                           timeout=timeout)
        if dom is None or finished in dom:
            break
    return dom


def screenshot(page, png, width=1280, height=1400):
    return run_chromium(page, f"--screenshot={os.path.abspath(png)}", f"--window-size={width},{height}")
