# tests/report/browser.py — headless Chromium for the HTML report's tests.
"""Headless Chromium for the HTML report's tests: renders a page and returns its DOM after the
scripts ran (rendered_dom), or drives it over the DevTools protocol on a pipe (Page: hover, click,
read the DOM, take screenshots, collect console errors). Tests skip (never fail) when Chromium is
missing or cannot start."""
import os
import select
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


# --- driving the page: the DevTools protocol over a pipe --------------------------------------------
# Chromium's --remote-debugging-pipe reads protocol messages (JSON, each ended by a NUL byte) on its
# file descriptor 3 and writes the answers and events on 4: no port, no network, no extra package.

import base64
import json
import struct
import time
import zlib


class BrowserError(RuntimeError):
    pass


class Page:
    """One page in headless Chromium, driven over the DevTools protocol: load a file, evaluate
    JavaScript, move and click the mouse, take screenshots. Console errors and uncaught exceptions
    are collected in `errors`. Use as a context manager; `Page.open()` returns None where Chromium
    cannot run here (tests skip)."""

    def __init__(self, proc, to_browser, from_browser, timeout):
        self.proc, self._out, self._in, self.timeout = proc, to_browser, from_browser, timeout
        self._buffer = b""
        self._next_id = 0
        self.session = None
        self.errors = []
        self.events = []

    @classmethod
    def open(cls, width=1280, height=1000, timeout=60):
        binary = chromium()
        if not binary:
            return None
        profile = tempfile.mkdtemp(prefix="gpumem-chromium-")
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()

        def child_fds():
            # The browser reads commands on 3 and writes on 4 (kept open: pass_fds); move both out of
            # the way first, in case either is 3 or 4 already.
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        try:
            proc = subprocess.Popen([binary, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}",
                                     f"--window-size={width},{height}", "about:blank"],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    preexec_fn=child_fds, pass_fds=(3, 4))
        except OSError:
            shutil.rmtree(profile, ignore_errors=True)
            return None
        os.close(to_r)
        os.close(from_w)
        page = cls(proc, os.fdopen(to_w, "wb", buffering=0), os.fdopen(from_r, "rb", buffering=0), timeout)
        page._profile = profile
        try:
            target = page.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
            page.session = page.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
            for domain in ("Runtime.enable", "Page.enable", "Log.enable"):
                page.send(domain)
            page.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        except (BrowserError, OSError):
            page.close()
            return None
        return page

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except (BrowserError, OSError, ValueError):
            pass
        for f in (self._out, self._in):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(getattr(self, "_profile", ""), ignore_errors=True)

    # protocol
    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            if time.time() > deadline:
                raise BrowserError("no answer from Chromium in time")
            ready, _, _ = select.select([self._in], [], [], 0.2)
            if ready:
                chunk = os.read(self._in.fileno(), 1 << 20)
                if not chunk:
                    raise BrowserError("Chromium closed the pipe")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _note(self, message):
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append("exception: " + str(details.get("exception", {}).get("description") or details.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append("console.error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append("log: " + params["entry"].get("text", ""))
        elif method:
            self.events.append(message)

    def send(self, method, params=None, session=True):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        self._out.write(json.dumps(message).encode() + b"\0")
        deadline = time.time() + self.timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error'].get('message')}")
                return answer.get("result", {})
            self._note(answer)

    def wait_event(self, method, timeout=None):
        deadline = time.time() + (timeout or self.timeout)
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            message = self._read_message(deadline)
            if message.get("method") == method:
                return message
            self._note(message)

    # what tests use
    def load(self, path, finished="document.body && document.body.getAttribute('data-rendered')", timeout=None):
        """Opens `path` and waits until `finished` evaluates to something true; returns the seconds from
        navigation to then."""
        start = time.time()
        self.send("Page.navigate", {"url": "file://" + os.path.abspath(path)})
        self.wait_event("Page.loadEventFired")  # the new document, not the one it replaces
        deadline = start + (timeout or self.timeout)
        while time.time() < deadline:
            if self.evaluate(finished):
                return time.time() - start
            time.sleep(0.05)
        raise BrowserError(f"{path}: the page did not finish in time")

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('exception', {}).get('description')}")
        return result.get("result", {}).get("value")

    def resize(self, width, height):
        """The viewport's size in CSS pixels (the next load lays out at it)."""
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def screenshot_png(self, x, y, width, height):
        """PNG bytes of that rectangle of the page (CSS pixels of the viewport)."""
        scroll_x, scroll_y = self.evaluate("[window.scrollX, window.scrollY]")
        clip = {"x": x + scroll_x, "y": y + scroll_y, "width": width, "height": height, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png", "clip": clip,
                                                                      "captureBeyondViewport": True})["data"])

    def mouse(self, kind, x, y, button="none", clicks=0):
        self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": button, "clickCount": clicks})

    def hover(self, x, y):
        self.mouse("mouseMoved", x, y)

    def click(self, x, y):
        self.hover(x, y)
        self.mouse("mousePressed", x, y, "left", 1)
        self.mouse("mouseReleased", x, y, "left", 1)

    def scroll_into_view(self, selector):
        self.evaluate(f"document.querySelector({json.dumps(selector)}).scrollIntoView({{block: 'center'}})")

    def screenshot(self, x, y, width, height):
        """The page's pixels in that rectangle (CSS pixels of the viewport, as getBoundingClientRect()
        gives them) as an Image."""
        return decode_png(self.screenshot_png(x, y, width, height))


class PageTests:
    """For a test class that drives report pages (mix in before unittest.TestCase): one Chromium for
    the whole class, each test loading its page afresh; the HTML files live in a temporary folder.
    `report_page(name, argv)` writes a page once (by the class's `write_page(out, argv)`), `load(name,
    width)` opens it at that width (skipping the test where Chromium cannot run) and checks it drew."""
    browser = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="gpumem-page-")
        cls.pages = {}
        cls.browser = None

    @classmethod
    def tearDownClass(cls):
        if cls.browser:
            cls.browser.close()
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def load(self, path, width=1280, height=1000):
        if not chromium():
            self.skipTest("chromium is not installed (make deps installs it)")
        if type(self).browser is None:
            type(self).browser = Page.open(width=width, height=height)
        page = type(self).browser
        if page is None:
            self.skipTest("chromium cannot start here")
        page.resize(width, height)
        page.errors = []
        page.load(path)
        self.assertEqual(page.evaluate("document.body.getAttribute('data-rendered')"), "true")
        return page

    def texts(self, page, selector):
        """The textContent of every element `selector` matches."""
        return page.evaluate(f"Array.from(document.querySelectorAll({json.dumps(selector)})).map((e) => e.textContent)")


class Image:
    def __init__(self, width, height, channels, rows):
        self.width, self.height, self.channels, self.rows = width, height, channels, rows

    def pixel(self, x, y):
        row, at = self.rows[y], x * self.channels
        return tuple(row[at:at + 3])

    def colours(self, x0=0, y0=0, x1=None, y1=None):
        """How many pixels of each (r, g, b) colour the rectangle holds."""
        counts = {}
        for y in range(y0, self.height if y1 is None else y1):
            for x in range(x0, self.width if x1 is None else x1):
                p = self.pixel(x, y)
                counts[p] = counts.get(p, 0) + 1
        return counts


def decode_png(data):
    """A PNG as Chromium writes screenshots (8 bits per channel, RGB or RGBA, not interlaced)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"PNG kind not handled: depth {depth}, colour type {colour}, interlace {interlace}")
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    rows, previous, pos = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[pos], bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            upper_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - upper_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - upper_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else upper_left)) & 255
        rows.append(bytes(line))
        previous = line
    return Image(width, height, channels, rows)
