# tools/python/gpumemtrace/report.py — gpumem-report's JSON report as typed Python objects (dataclasses).
"""The report of a run as Python objects, for scripts and notebooks (docs/python-api.md):

    import gpumemtrace
    report = gpumemtrace.read("gpumemtrace.python3.11.4242.jsonl.zst")
    for leak in report.leaks:
        print(leak.bytes, leak.stack[0].function if leak.stack else "(no stack)")
    print(report.summary.peak_bytes, report.processes[0].end)

Each class is one object of `gpumem-report --format json` (docs/report.md, "JSON output"), each field
one of its keys, of the JSON value's type: numbers stay exact integers (bytes, times in ns), a
`null` is None, a list a list. A key this version of the classes does not know is kept in the
object's `extra` dict (so nothing the analyzer said is lost); a key the analyzer left out (an older
one) gets the field's default.

read() runs the native analyzer (gpumem-report, beside this package: gpumemtrace._native) with
--format json and converts its output; the conversion alone is `from_json(text_or_dict)`.
Importing this module loads dataclasses, json, subprocess and typing: gpumemtrace imports it only
when read() is called.
"""
import dataclasses
import json
import os
import subprocess
import sys
import typing
from dataclasses import dataclass, field
from typing import Dict, List, Optional

__all__ = ["read", "from_json", "ReportError", "Report"]


class ReportError(RuntimeError):
    """gpumem-report could not read the traces (its message), or was not found."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status  # gpumem-report's exit status (docs/report.md, "Exit codes"); None: not run


def _record(cls):
    """A dataclass whose keys the JSON may extend: `extra` keeps those it does not declare."""
    cls.__annotations__["extra"] = Dict[str, object]
    cls.extra = field(default_factory=dict, repr=False, compare=False)
    return dataclass(cls)


# ---- stacks ----

@_record
class Frame:
    """One frame, innermost first in a stack; Python frames have lang "python", an inlined level of a
    native frame inlined=True (docs/report.md, `stack`)."""
    function: str = ""
    file: Optional[str] = None
    line: Optional[int] = None
    module: Optional[str] = None
    lang: Optional[str] = None
    inlined: bool = False


Stack = List[Frame]


@_record
class Holding:
    """Memory held at one call site: leaks of a scope, culprits of a peak, holders at an OOM."""
    bytes: int = 0
    count: int = 0
    stack: Stack = field(default_factory=list)
    share: Optional[float] = None  # peaks' culprits: of the peak


# ---- summary and processes ----

@_record
class Summary:
    processes: int = 0
    events: int = 0
    allocations: int = 0
    frees: int = 0
    failed_allocations: int = 0
    block_ooms: int = 0
    dropped_events: int = 0
    leaked_bytes: int = 0
    leaked_count: int = 0
    cached_bytes: int = 0
    library_bytes: int = 0
    alive_at_exit_bytes: int = 0
    ooms: int = 0
    failed_calls: int = 0
    scopes: int = 0
    leaking_scopes: int = 0
    peak_bytes: int = 0
    complete: bool = True
    incomplete: bool = False
    cut: bool = False
    live_when_cut_bytes: int = 0
    killed_by_signal: int = 0
    live_when_killed_bytes: int = 0
    ended_in_oom: int = 0
    live_when_crashed_bytes: int = 0


@_record
class TimelinePoint:
    time_ns: int = 0
    reserved: int = 0
    allocated: int = 0
    roles: Optional[Dict[str, int]] = None


@_record
class InitialState:
    """A PyTorch snapshot's state before its history (devices[].initial)."""
    segments: int = 0
    blocks: int = 0
    reserved_bytes: int = 0
    allocated_bytes: int = 0


@_record
class AfterCap:
    live_bytes: int = 0
    allocated_bytes: int = 0


@_record
class DeviceSummary:
    device: int = -1
    name: str = ""
    total: int = 0
    events: int = 0
    allocations: int = 0
    frees: int = 0
    failed_allocations: int = 0
    block_allocations: int = 0
    block_frees: int = 0
    block_ooms: int = 0
    unmatched_frees: int = 0
    duration_ns: int = 0
    peak_bytes: int = 0
    peak_allocated_bytes: int = 0
    leaked_bytes: int = 0
    cached_bytes: int = 0
    library_bytes: int = 0
    alive_at_exit_bytes: int = 0
    ooms: int = 0
    initial: Optional[InitialState] = None
    after_cap: Optional[AfterCap] = None
    timeline: List[TimelinePoint] = field(default_factory=list)


@_record
class PinnedHost:
    allocations: int = 0
    frees: int = 0
    peak_bytes: int = 0
    peak_time_ns: int = 0
    live_bytes: int = 0


@_record
class Mark:
    seq: int = 0
    time_ns: int = 0
    label: str = ""


@_record
class SnapshotInfo:
    history_events: int = 0
    initial_events: int = 0
    inconsistent: bool = False


@_record
class Process:
    file: str = ""
    pid: int = 0
    ppid: int = 0
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    world_size: Optional[int] = None
    exe: str = ""
    cmdline: List[str] = field(default_factory=list)
    host: str = ""
    complete: bool = False
    killed: bool = False
    end: Optional[str] = None  # "exit", "_exit", "signal", "exec", "dump", or None
    exit_status: Optional[int] = None
    signal: Optional[str] = None
    truncated: bool = False
    incomplete: bool = False
    cut: bool = False
    cut_at_ns: int = 0
    events: int = 0
    snapshot: Optional[SnapshotInfo] = None
    dropped_events: int = 0
    duration_ns: int = 0
    start_time_ns: int = 0  # the header's clocks: a time_ns is start_time_ns + (time_ns - clock_start_ns)
    clock_start_ns: int = 0
    leaked_bytes: int = 0
    ended_in_oom: bool = False
    story: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    devices: List[DeviceSummary] = field(default_factory=list)
    pinned_host: Optional[PinnedHost] = None
    marks: List[Mark] = field(default_factory=list)
    marks_total: int = 0


# ---- the sections ----

@_record
class Leak:
    """An entry of leaks[] (or held_at_exit[], with `reason`): memory live at the end, grouped by stack."""
    pid: int = 0
    file: str = ""
    device: int = -1
    level: str = ""
    kind: str = ""
    bytes: int = 0
    count: int = 0
    suppressed: bool = False
    stack: Stack = field(default_factory=list)
    live_when_cut: bool = False
    live_when_killed: bool = False
    live_when_crashed: bool = False
    reason: Optional[str] = None   # held_at_exit[]: "library" or "alive_at_exit"
    library: Optional[str] = None  # held_at_exit[] of reason "library": its name


@_record
class Scope:
    pid: int = 0
    file: str = ""
    name: str = ""
    api: str = ""
    closed: bool = False
    checked: bool = False
    own_leak_limit: bool = False
    over_own_limits: List[str] = field(default_factory=list)
    begin_time_ns: int = 0
    end_time_ns: int = 0
    leaked_bytes: int = 0
    leaked_count: int = 0
    peak_bytes: int = 0
    leaks: List[Holding] = field(default_factory=list)
    held_until_gc_bytes: int = 0
    held_until_gc_count: int = 0
    held_until_gc: List[Holding] = field(default_factory=list)
    advice: Optional[str] = None


@_record
class Fragmentation:
    reserved: int = 0
    allocated: int = 0
    free_in_reserved: int = 0
    largest_free_block: int = 0
    ratio: float = 0.0


@_record
class AllocatedPeak:
    bytes: int = 0
    time_ns: int = 0
    seq: int = 0
    phase: str = ""
    culprits: List[Holding] = field(default_factory=list)
    other_bytes: int = 0


@_record
class Peak:
    pid: int = 0
    file: str = ""
    device: int = -1
    bytes: int = 0
    time_ns: int = 0
    seq: int = 0
    phase: str = ""
    other_bytes: int = 0
    culprits: List[Holding] = field(default_factory=list)
    allocated: Optional[AllocatedPeak] = None
    fragmentation: Optional[Fragmentation] = None
    roles: Optional[Dict[str, int]] = None
    roles_time_ns: Optional[int] = None
    advice: Optional[str] = None


@_record
class Attempt:
    seq: int = 0
    time_ns: int = 0
    op: str = ""
    api: str = ""
    result: int = 0
    size: int = 0


@_record
class Cap:
    fraction: float = 0.0
    bytes: Optional[int] = None
    source: str = ""


@_record
class OomCause:
    growth: int = 0  # its index in Report.growth
    stack: Stack = field(default_factory=list)
    grew_bytes: int = 0
    steps: int = 0
    held_bytes: int = 0
    share: float = 0.0
    share_of: str = ""


@_record
class StaleReading:
    free: int = 0
    reserved: int = 0


@_record
class AddressGaps:
    span: int = 0
    inside: int = 0
    largest: int = 0


@_record
class Oom:
    pid: int = 0
    file: str = ""
    device: int = -1
    seq: int = 0
    time_ns: int = 0
    op: str = ""
    api: str = ""
    result: int = 0
    requested: int = 0
    stack: Stack = field(default_factory=list)
    live_bytes: int = 0
    allocated_bytes: int = 0
    top_holders: List[Holding] = field(default_factory=list)
    device_free: Optional[int] = None
    device_total: Optional[int] = None
    verdict: str = ""
    explanation: str = ""
    phase: str = ""
    attempts: List[Attempt] = field(default_factory=list)
    attempts_total: int = 0
    roles: Optional[Dict[str, int]] = None
    cap: Optional[Cap] = None
    advice: Optional[str] = None
    crash: bool = False
    cause: Optional[OomCause] = None
    stale_reading: Optional[StaleReading] = None
    address_gaps: Optional[AddressGaps] = None
    fragmentation: Optional[Fragmentation] = None


@_record
class FailedCall:
    pid: int = 0
    file: str = ""
    device: int = -1
    api: str = ""
    result: int = 0
    error: str = ""
    size: int = 0
    count: int = 0
    first_time_ns: int = 0
    stack: Stack = field(default_factory=list)


@_record
class Growth:
    pid: int = 0
    file: str = ""
    device: int = -1
    level: str = ""
    bytes: int = 0
    count: int = 0
    first_bytes: int = 0
    peak_bytes: int = 0
    final_bytes: int = 0
    rises: int = 0
    windows_rising: int = 0
    windows_total: int = 0
    stack: Stack = field(default_factory=list)
    advice: Optional[str] = None


@_record
class FragmentationAtOom(Fragmentation):
    seq: int = 0
    time_ns: int = 0


@_record
class DeviceFragmentation:
    pid: int = 0
    file: str = ""
    device: int = -1
    timeline: List[TimelinePoint] = field(default_factory=list)
    at_peak: Optional[Fragmentation] = None
    peak_time_ns: int = 0
    at_ooms: List[FragmentationAtOom] = field(default_factory=list)


@_record
class Site:
    bytes: int = 0
    count: int = 0
    temporary_bytes: int = 0
    temporary_count: int = 0
    peak_bytes: int = 0
    stack: Stack = field(default_factory=list)


@_record
class TopSites:
    pid: int = 0
    file: str = ""
    device: int = -1
    level: str = ""
    sites: int = 0
    temporary_ns: int = 0
    at_peak: List[Site] = field(default_factory=list)
    by_bytes: List[Site] = field(default_factory=list)
    by_count: List[Site] = field(default_factory=list)
    temporary: List[Site] = field(default_factory=list)


@_record
class TimeToOom:
    pid: int = 0
    file: str = ""
    device: int = -1
    level: str = ""
    estimate: bool = True
    bytes_per_step: int = 0
    steps: int = 0
    bytes_per_second: float = 0.0
    seconds_per_step: float = 0.0
    free_bytes: int = 0
    free_known: bool = False
    steps_left: float = 0.0
    seconds_left: Optional[float] = None
    stack: Stack = field(default_factory=list)


@_record
class WhatIfSample:
    time_ns: int = 0
    reserved: int = 0


@_record
class WhatIfRow:
    settings: str = ""
    recorded: bool = False
    automatic: bool = False
    reserved_peak: int = 0
    allocated_peak: int = 0
    at_peak: Optional[Fragmentation] = None
    cache_flushes: int = 0
    retries: int = 0
    new_ooms: int = 0
    ooms_still_happen: List[bool] = field(default_factory=list)
    timeline: List[WhatIfSample] = field(default_factory=list)
    # A batch what-if's row (docs/what-if.md, "Another batch size"); a setting's row has batch None.
    batch: Optional[int] = None
    estimate: bool = False
    reserved_range: Optional[List[int]] = None


@_record
class WhatIfOom:
    seq: int = 0
    requested: int = 0


@_record
class Divergence:
    seq: int = 0
    time_ns: int = 0
    what: str = ""


@_record
class Replay:
    faithful: bool = False
    segment_ops_compared: int = 0
    blocks_compared: int = 0
    divergence: Optional[Divergence] = None


@_record
class Headroom:
    estimate: bool = True
    activation_bytes: int = 0
    factor_recorded: float = 0.0
    factor_best: float = 0.0
    best_settings: str = ""


@_record
class WhatIf:
    pid: int = 0
    file: str = ""
    device: int = -1
    recorded_settings: str = ""
    settings_from: str = ""
    settings_option: Optional[str] = None
    settings_changes: int = 0
    unmodeled_options: List[str] = field(default_factory=list)
    capacity: int = 0
    ooms: List[WhatIfOom] = field(default_factory=list)
    rows: List[WhatIfRow] = field(default_factory=list)
    replay: Optional[Replay] = None
    headroom: Optional[Headroom] = None
    advice: Optional[str] = None


@_record
class Extremes:
    """min / max / mean over processes, with the pid of the extremes."""
    min: int = 0
    min_pid: int = 0
    max: int = 0
    max_pid: int = 0
    mean: float = 0.0


@_record
class Spread:
    peak_bytes: Optional[Extremes] = None
    leaked_bytes: Optional[Extremes] = None


@_record
class ProcessGroup:
    exe: str = ""
    rank: Optional[int] = None
    processes: int = 0
    first_pid: int = 0
    first_file: str = ""
    events: int = 0
    peak_bytes: Optional[Extremes] = None
    leaked_bytes: int = 0
    leaked_count: int = 0
    ooms: int = 0
    failed_allocations: int = 0
    cut: int = 0
    killed_by_signal: int = 0
    incomplete: int = 0
    groups: Optional[int] = None  # `other`: how many groups it sums


@_record
class ProcessGroups:
    processes: int = 0
    groups: List[ProcessGroup] = field(default_factory=list)
    other: Optional[ProcessGroup] = None


@_record
class Report:
    """The whole report: `summary` over every process, `processes` one each, then the sections."""
    summary: Summary = field(default_factory=Summary)
    processes: List[Process] = field(default_factory=list)
    leaks: List[Leak] = field(default_factory=list)
    held_at_exit: List[Leak] = field(default_factory=list)
    scopes: List[Scope] = field(default_factory=list)
    peaks: List[Peak] = field(default_factory=list)
    ooms: List[Oom] = field(default_factory=list)
    failed_calls: List[FailedCall] = field(default_factory=list)
    growth: List[Growth] = field(default_factory=list)
    fragmentation: List[DeviceFragmentation] = field(default_factory=list)
    top_sites: List[TopSites] = field(default_factory=list)
    time_to_oom: List[TimeToOom] = field(default_factory=list)
    what_if: List[WhatIf] = field(default_factory=list)
    spread: Optional[Spread] = None
    process_groups: Optional[ProcessGroups] = None


# ---- conversion ----

_hints = {}  # class -> {field name: type}, resolved once


def _convert(kind, value):
    """`value` (parsed JSON) as `kind` (an annotation of the classes above)."""
    if value is None:
        return None
    origin = typing.get_origin(kind)
    if origin is typing.Union:  # Optional[X]
        inner = [a for a in typing.get_args(kind) if a is not type(None)]
        return _convert(inner[0], value)
    if origin is list:
        (item,) = typing.get_args(kind)
        return [_convert(item, v) for v in value] if isinstance(value, list) else value
    if origin is dict:
        _, item = typing.get_args(kind)
        return {k: _convert(item, v) for k, v in value.items()} if isinstance(value, dict) else value
    if dataclasses.is_dataclass(kind):
        return _object(kind, value) if isinstance(value, dict) else value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value  # int, str, bool, object: as JSON has them


def _object(cls, data):
    hints = _hints.get(cls)
    if hints is None:
        hints = _hints[cls] = {f.name: t for f, t in ((f, typing.get_type_hints(cls)[f.name])
                                                      for f in dataclasses.fields(cls)) if f.name != "extra"}
    known = {k: _convert(hints[k], v) for k, v in data.items() if k in hints}
    obj = cls(**known)
    obj.extra = {k: v for k, v in data.items() if k not in hints}
    return obj


def from_json(report):
    """A Report from gpumem-report's JSON output (text, bytes or the parsed dict)."""
    if isinstance(report, (str, bytes, bytearray)):
        report = json.loads(report)
    if not isinstance(report, dict):
        raise ReportError("not a gpumem-report JSON report (its top level is not an object)")
    return _object(Report, report)


def read(*traces, what_if=(), suppressions=None, report=None):
    """gpumem-report --format json over `traces` (paths: trace files, PyTorch snapshots, folders),
    as a Report. `what_if`: a settings string or a list of them (--what-if); `suppressions`: a file
    (--suppressions); `report`: the analyzer's path (default: the one beside this package). Raises
    ReportError with the analyzer's message when it cannot read them (exit status 2 and above: its
    gates, which read() does not set, never fail)."""
    if not traces:
        raise ReportError("gpumemtrace.read(): no trace given")
    if report is None:
        from gpumemtrace import _native
        report = _native.program(_native.REPORT)
        if report is None:
            raise ReportError("gpumem-report was not found (looked in %s; in a source tree, run make)"
                              % ", ".join(_native.candidate_dirs()))
    args = [report, "--format", "json", "--no-progress"]
    for settings in ([what_if] if isinstance(what_if, str) else what_if):
        args += ["--what-if", settings]
    if suppressions is not None:
        args += ["--suppressions", os.fspath(suppressions)]
    args += ["--"] + [os.fspath(t) for t in traces]
    try:
        done = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    except OSError as e:
        raise ReportError("cannot run %s: %s" % (report, e.strerror)) from None
    if done.returncode >= 2 or not done.stdout.strip():
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ReportError(lines[-1] if lines else "gpumem-report exited with status %d" % done.returncode,
                          done.returncode)
    return from_json(done.stdout)


if __name__ == "__main__":  # python -m gpumemtrace.report TRACE...: the Report, printed
    print(read(*sys.argv[1:]))
