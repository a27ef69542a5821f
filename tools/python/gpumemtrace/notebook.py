# tools/python/gpumemtrace/notebook.py — the IPython magics: %%gpumemtrace (a cell as a scope, its report inline) and %gpumemtrace_report.
"""`%load_ext gpumemtrace` (docs/notebooks.md) registers:

    %%gpumemtrace [NAME]     runs the cell as a scope named NAME (default "cell N", N its In[] number)
                             and shows that cell's report under it: its peak, what it left allocated
                             (and where), each OOM inside it with its verdict, and a timeline of the
                             device's memory while it ran. An exception of the cell (an OOM) is raised
                             to the notebook as usual, after the report.
    %gpumemtrace_report      the whole session so far: every measured cell, then gpumem-report's own
                             text report of the kernel's trace.

Two sources, said in each report's first line:
- the recorder (a kernel from `gpumemtrace kernel install`, or any kernel under LD_PRELOAD): the
  cell is a gpumemtrace scope; after it the trace is flushed and read (gpumemtrace.read: the trace so
  far, as a cut trace) and the cell's figures are its scope's: `peak_bytes`, `leaked_bytes` (allocated
  inside the cell and still live when it ended), the OOM incidents whose time lies inside it.
- PyTorch alone (a kernel without the recorder, torch importable): its history is turned on
  (_record_memory_history) and the figures are its counters, around the cell: the peak of allocated
  bytes above what was allocated when the cell began, and the allocated bytes after minus before (a
  net change: what the cell freed of older tensors counts against what it kept). An OOM's verdict
  comes from gpumem-report reading torch.cuda.memory._snapshot(). How to get the recorder is said once.
Without either the magic runs the cell and says so.

Every figure shown is one the analyzer or PyTorch gave: nothing is estimated. Outputs are IPython
display bundles, text/html with a text/plain fallback (nbconvert to text, a terminal IPython).
"""
import ast
import html
import os
import sys

import gpumemtrace

__all__ = ["load_ipython_extension", "CellReport"]

HOW_TO_RECORD = ("gpumemtrace: this kernel runs without the recorder: run `gpumemtrace kernel install --user` "
                 "and pick the kernel \"Python 3 (gpumemtrace)\" to record every CUDA allocation with its stack")


def size(n):
    """Bytes as the reports write them: 12.0 MiB, 512 B."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= factor:
            return "%.1f %s" % (n / factor, unit)
    return "%d B" % n


class CellReport:
    """One measured cell. peak: bytes (None: not measured); left: bytes the cell left allocated
    (source "recorder": allocated inside it and live at its end, in left_count allocations; "torch":
    allocated after minus before, may be negative); ooms: (verdict, requested bytes, explanation);
    holders: (bytes, where) of what it left, largest first; timeline: (time_ns, bytes) of the device's
    memory while it ran."""

    def __init__(self, name, source):
        self.name, self.source = name, source
        self.peak = None
        self.left = 0
        self.left_count = None
        self.ooms = []
        self.holders = []
        self.timeline = []
        self.error = None   # the cell's exception, as "Type: message"
        self.note = None    # why a figure is missing

    def left_figure(self):
        """What the recorder says the cell left: "8.0 MiB in 1 allocation", or "nothing"."""
        if not self.left_count:
            return "nothing"
        return "%s in %d allocation%s" % (size(self.left), self.left_count, "" if self.left_count == 1 else "s")

    def left_text(self):
        return "left nothing allocated" if not self.left_count else "left allocated " + self.left_figure()

    def lines(self):
        """The plain-text report."""
        if self.source is None:
            return ["gpumemtrace: %s: not measured (%s)" % (self.name, self.note)]
        what = "recorder" if self.source == "recorder" else "PyTorch's counters"
        head = "gpumemtrace: %s (%s): peak %s" % (self.name, what, size(self.peak or 0))
        if self.source == "recorder":
            head += ", " + self.left_text()
        else:
            head += ", allocated %s%s since the cell began" % ("+" if self.left >= 0 else "-", size(abs(self.left)))
        out = [head]
        for verdict, requested, explanation in self.ooms:
            out.append("  OOM: %s requested, verdict %s: %s" % (size(requested), verdict, explanation))
        for held, where in self.holders:
            out.append("  left %s, allocated at %s" % (size(held), where))
        if self.error:
            out.append("  the cell raised %s" % self.error)
        if self.note:
            out.append("  " + self.note)
        return out

    def html(self):
        rows = [("peak", size(self.peak or 0))]
        if self.source == "recorder":
            rows.append(("left allocated", self.left_figure()))
        elif self.source == "torch":
            rows.append(("allocated since the cell began", ("+" if self.left >= 0 else "-") + size(abs(self.left))))
        rows += [("OOM: " + verdict, "%s requested: %s" % (size(requested), explanation))
                 for verdict, requested, explanation in self.ooms]
        rows += [("left " + size(held), "allocated at " + where) for held, where in self.holders]
        if self.error:
            rows.append(("raised", self.error))
        if self.note:
            rows.append(("note", self.note))
        what = "recorder" if self.source == "recorder" else "PyTorch's counters"
        body = "".join("<tr><th style='text-align:left;padding-right:1em'>%s</th><td style='text-align:left'>%s</td></tr>"
                       % (html.escape(k), html.escape(v)) for k, v in rows)
        return ("<div class='gpumemtrace-cell'><b>gpumemtrace: %s</b> <small>(%s)</small><table>%s</table>%s</div>"
                % (html.escape(self.name), what, body, timeline_svg(self.timeline)))


def timeline_svg(points, width=480, height=72):
    """An inline SVG step chart of (time_ns, bytes), its largest value labelled; "" for fewer than 2."""
    if len(points) < 2:
        return ""
    t0, t1 = points[0][0], points[-1][0]
    top = max(b for _, b in points) or 1
    span = max(t1 - t0, 1)

    def xy(t, b):
        return "%.1f,%.1f" % (width * (t - t0) / span, height - 2 - (height - 14) * b / top)

    steps = [xy(*points[0])]
    for (_, before), (t, b) in zip(points, points[1:]):
        steps += [xy(t, before), xy(t, b)]
    return ("<svg class='gpumemtrace-timeline' width='%d' height='%d' role='img'><title>device memory while the "
            "cell ran</title><polyline fill='none' stroke='#3367d6' stroke-width='1.5' points='%s'/>"
            "<text x='2' y='10' font-size='10'>%s</text></svg>" % (width, height, " ".join(steps), size(top)))


def where(stack, cell_file):
    """The cell's own line in `stack` (a list of report.Frame), else the first Python frame, else the
    innermost function."""
    python = [f for f in stack if f.lang == "python"]
    for f in python:
        if f.file == cell_file:
            return "this cell, line %s" % f.line
    if python:
        return "%s (%s:%s)" % (python[0].function, python[0].file, python[0].line)
    return stack[0].function if stack else "(no stack recorded)"


class RecorderSource:
    """The cell as a scope of this process's trace (the recorder is preloaded)."""
    name = "recorder"

    path = None   # the trace's, known once the recorder opened it (the first CUDA call, or a scope)

    def begin(self, cell):
        drain_torch()
        gpumemtrace.scope_begin(cell.name)

    def end(self, cell, cell_file):
        drain_torch()
        gpumemtrace.scope_end(cell.name)
        report = self.session()
        pid = os.getpid()
        scope = report and next((s for s in reversed(report.scopes) if s.name == cell.name and s.pid == pid), None)
        if not scope:  # the trace starts at the first CUDA call: a cell before it did none
            cell.peak, cell.left_count = 0, 0
            return
        cell.peak, cell.left, cell.left_count = scope.peak_bytes, scope.leaked_bytes, scope.leaked_count
        cell.holders = [(h.bytes, where(h.stack, cell_file)) for h in scope.leaks[:3]]
        cell.ooms = [(o.verdict, o.requested, o.explanation) for o in report.ooms
                     if o.pid == pid and scope.begin_time_ns <= o.time_ns <= scope.end_time_ns]
        cell.timeline = window(report, pid, scope.begin_time_ns, scope.end_time_ns)

    def session(self):
        """The report of the trace so far (flushed first); None before anything was recorded."""
        gpumemtrace.flush()
        self.path = gpumemtrace.trace_path()
        return gpumemtrace.read(self.path) if self.path else None

    def text(self):
        """gpumem-report's own text report of the trace so far."""
        gpumemtrace.flush()
        self.path = gpumemtrace.trace_path()
        return analyzer_text(self.path) if self.path else "gpumemtrace: no trace yet (nothing recorded)"


def analyzer_text(path):
    """gpumem-report's text report of `path` (its error, when it has one), or why it cannot run."""
    import subprocess
    from gpumemtrace import _native
    program = _native.program(_native.REPORT)
    if program is None:
        return "gpumem-report is not beside this package (%s)" % ", ".join(_native.candidate_dirs())
    proc = subprocess.run([program, "--no-progress", path], capture_output=True, text=True)
    return proc.stdout + proc.stderr


def drain_torch():
    """Gets PyTorch's history of tensors so far into the trace (the recorder's torch hook,
    gpumemtrace_torch, drains it at CUDA calls): a tensor the cell freed is then freed inside it.
    Nothing is synchronised or collected: that would change the program."""
    hook = sys.modules.get("gpumemtrace_torch")
    if hook is not None:
        hook.drain_now()


def window(report, pid, begin, end):
    """(time_ns, bytes) of the busiest device's memory from `begin` to `end`: its timeline's points
    inside, after the last point before (the level when the cell began). Allocated bytes (tensors)
    where the trace has them, else reserved (CUDA allocations)."""
    process = next((p for p in report.processes if p.pid == pid), None)
    if process is None or not process.devices:
        return []
    device = max(process.devices, key=lambda d: d.peak_bytes)
    level = "allocated" if any(p.allocated for p in device.timeline) else "reserved"
    before = [p for p in device.timeline if p.time_ns < begin]
    inside = [p for p in device.timeline if begin <= p.time_ns <= end]
    points = [(begin, getattr(before[-1], level) if before else 0)]
    points += [(p.time_ns, getattr(p, level)) for p in inside]
    points.append((end, points[-1][1]))
    return points


class TorchSource:
    """PyTorch's own history and counters (a kernel without the recorder)."""
    name = "torch"
    MAX_ENTRIES = 100000   # the history ring: bounded, as a notebook may run for days

    def __init__(self, torch):
        self.torch = torch
        self.recording = False

    def _start(self):
        if not self.recording and self.torch.cuda.is_available():
            self.torch.cuda.memory._record_memory_history(max_entries=self.MAX_ENTRIES)
            self.recording = True

    def _stats(self):
        stats = self.torch.cuda.memory_stats() if self.recording else {}
        return stats.get("allocated_bytes.all.current", 0), stats.get("num_ooms", 0)

    def begin(self, cell):
        self._start()
        self.before, self.ooms_before = self._stats()
        if self.recording:
            self.torch.cuda.reset_peak_memory_stats()

    def end(self, cell, cell_file):
        self._start()  # the cell may have initialised CUDA
        if not self.recording:
            cell.peak, cell.note = 0, "PyTorch has no CUDA device here"
            return
        now, ooms = self._stats()
        peak = self.torch.cuda.memory_stats().get("allocated_bytes.all.peak", 0)
        cell.peak = max(0, peak - self.before)
        cell.left = now - self.before
        if ooms > self.ooms_before:
            report = self.session()
            cell.ooms = [(o.verdict, o.requested, o.explanation) for o in report.ooms[-(ooms - self.ooms_before):]]

    def snapshot(self):
        """torch.cuda.memory._snapshot() pickled into a private temporary file (gpumem-report reads it)."""
        import pickle
        import tempfile
        fd, path = tempfile.mkstemp(prefix="gpumemtrace-notebook-", suffix=".pickle")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(self.torch.cuda.memory._snapshot(), f)
        return path

    def session(self):
        path = self.snapshot()
        try:
            return gpumemtrace.read(path)
        finally:
            os.unlink(path)

    def text(self):
        path = self.snapshot()
        try:
            return analyzer_text(path)
        finally:
            os.unlink(path)


def run_cell(shell, cell):
    """Runs `cell` in the user's namespace as IPython's %%time does (its transforms, %magics and !cmd
    lines included); returns (the value of a last bare expression or None, the cell's file name in
    its tracebacks and stacks)."""
    __tracebackhide__ = True  # IPython leaves this frame out of the cell's traceback
    transformed = shell.transform_cell(cell)
    tree = shell.transform_ast(shell.compile.ast_parse(transformed))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    filename = shell.compile.cache(transformed, shell.execution_count, raw_code=cell)
    exec(shell.compile(tree, filename, "exec"), shell.user_global_ns, shell.user_ns)
    value = eval(shell.compile(last, filename, "eval"), shell.user_global_ns, shell.user_ns) if last else None
    return value, filename


def display(text_lines, html_text):
    from IPython.display import display as show
    show({"text/plain": "\n".join(text_lines), "text/html": html_text}, raw=True)


def _load_magics():
    from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

    @magics_class
    class GpumemtraceMagics(Magics):
        def __init__(self, shell):
            super().__init__(shell)
            self.source = None
            self.cells = []
            self.said_how = False

        def _source(self):
            """The recorder when it is in this process, else PyTorch where it can be imported, else None;
            chosen at the first magic (the recorder cannot come later: it is preloaded or not)."""
            if self.source is None:
                if gpumemtrace.active():
                    self.source = RecorderSource()
                else:
                    torch = None
                    import importlib.util
                    if "torch" in sys.modules or importlib.util.find_spec("torch") is not None:
                        import torch
                    self.source = TorchSource(torch) if torch is not None else False
            if not isinstance(self.source, RecorderSource) and not self.said_how:
                self.said_how = True
                print(HOW_TO_RECORD + ("; meanwhile PyTorch's own counters and history are used" if self.source
                                       else "; PyTorch is not installed either, so nothing is measured"))
            return self.source

        @cell_magic
        def gpumemtrace(self, line, cell):
            """Runs the cell as a gpumemtrace scope and shows its report: peak, what it left allocated,
            its OOMs with their verdicts, a timeline (docs/notebooks.md)."""
            __tracebackhide__ = True  # the cell's traceback shows the cell, not the magic
            source = self._source()
            report = CellReport(line.strip() or "cell %d" % self.shell.execution_count,
                                source.name if source else None)
            if not source:
                report.note = "no recorder and no PyTorch in this kernel"
            error = value = None
            cell_file = None
            if source:
                source.begin(report)
            try:
                value, cell_file = run_cell(self.shell, cell)
            except BaseException as e:  # an OOM, a KeyboardInterrupt: reported, then raised as it was
                error = e
                report.error = "%s: %s" % (type(e).__name__, e)
            finally:
                if source:
                    try:
                        source.end(report, cell_file)
                    except Exception as e:  # the report failed, not the cell: say so, never hide the cell's own
                        report.note = "no report: %s: %s" % (type(e).__name__, e)
            self.cells.append(report)
            display(report.lines(), report.html())
            if error is not None:
                raise error
            return value

        @line_magic
        def gpumemtrace_report(self, line):
            """The whole session so far: each measured cell, then gpumem-report's text report."""
            source = self._source()
            lines = ["gpumemtrace: the session so far, %d measured cell%s" % (len(self.cells),
                                                                             "" if len(self.cells) == 1 else "s")]
            for cell in self.cells:
                lines += cell.lines()
            full = source.text() if source else ""
            if isinstance(source, RecorderSource):
                lines.append("trace: %s (gpumem-report --format html %s: the interactive report)" % (source.path,
                                                                                                   source.path))
            page = ("<div class='gpumemtrace-session'><pre>%s</pre><details><summary>gpumem-report</summary>"
                    "<pre>%s</pre></details></div>" % (html.escape("\n".join(lines)), html.escape(full)))
            display(lines + ([""] + full.splitlines() if full else []), page)

    return GpumemtraceMagics


def load_ipython_extension(ipython):
    ipython.register_magics(_load_magics())
