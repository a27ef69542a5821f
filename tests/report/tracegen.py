# tests/report/tracegen.py — writes gpumemtrace traces shaped like the recorder's output.
"""Writes gpumemtrace traces (docs/trace-format.md, version 1) shaped like the recorder's output.

Used by the report tests and the benchmark: exact planted content, no program to run. Each
planted allocation site gets its own native frame (function, file, line) under a common `main`,
plus a frame inside libcudart that the text report must trim.

    t = Trace(path)
    s = t.stack("leak_here", line=12)          # stack: leak_here <- main (+ cudart frame)
    t.alloc(0x1000, 1 << 20, s)
    t.free(0x1000)
    t.close()                                   # writes the footer (omit: a killed process)
"""
import json

MiB = 1 << 20
KiB = 1 << 10


class Trace:
    def __init__(self, path, pid=4242, devices=((0, "Simulated GPU", 80 << 30),), app_file="/src/app.cu",
                 compact=True, exe="/usr/bin/app", cmdline=("app", "--train"), start_time_ns=1763791200000000000,
                 **header):
        """`header`: more header fields (rank=3, world_size=8, ...)."""
        self.f = open(path, "w")
        self.seq = 0
        self.t = 1_000_000_000
        self.next_frame = 1
        self.next_stack = 1
        self.stacks = {}
        self.app_file = app_file
        self.sep = (",", ":") if compact else None
        self._write({"type": "header", "format": "gpumemtrace", "version": 1, "library": "0.1.0", "pid": pid,
                     "ppid": 1, "exe": exe, "cmdline": list(cmdline), "host": "node1",
                     "start_time_ns": start_time_ns, "clock": "monotonic", "clock_start_ns": self.t,
                     "backend": "interpose", "stack_depth": 64, "on_full": "wait", **header})
        self._write({"type": "module", "id": 1, "path": exe, "base": "0x555500000000",
                     "size": 1 << 20, "build_id": "ab12"})
        self._write({"type": "module", "id": 2, "path": "/usr/local/cuda/lib64/libcudart.so.13",
                     "base": "0x7f0000000000", "size": 1 << 22, "build_id": "cd34"})
        self.cudart = self._frame({"ip": "0x7f0000001234", "module": 2, "offset": "0x1234",
                                   "function": "cudaMalloc"})
        self.main = self._frame({"ip": "0x555500000100", "module": 1, "offset": "0x100",
                                 "function": "main", "file": self.app_file, "line": 200})
        for device, name, total in devices:
            self._write({"type": "device", "device": device, "name": name, "total": total, "free": total})

    def module(self, mid, path):
        """Defines module `mid` (ids 1 and 2 are the program and libcudart) and returns its id."""
        self._write({"type": "module", "id": mid, "path": path, "base": "0x7e%010x" % (mid << 24),
                     "size": 1 << 20, "build_id": "ee%02d" % mid})
        return mid

    def native(self, mid, function="", file=None, line=None):
        """A native frame in module `mid`; no `function` = a stripped library (no symbol)."""
        offset = 0x1000 + 16 * self.next_frame
        fields = {"ip": "0x7e%010x" % ((mid << 24) + offset), "module": mid, "offset": "0x%x" % offset,
                  "function": function}
        if file:
            fields.update(file=file, line=line or 0)
        return self._frame(fields)

    def python(self, function, file, line):
        return self._frame({"lang": "python", "function": function, "file": file, "line": line})

    def raw_stack(self, frames):
        """A stack of these frame ids, innermost first."""
        sid = self.next_stack
        self.next_stack += 1
        self._write({"type": "stack", "id": sid, "frames": frames})
        return sid

    def _write(self, record):
        self.f.write(json.dumps(record, separators=self.sep) + "\n")

    def _frame(self, fields):
        fid = self.next_frame
        self.next_frame += 1
        self._write({"type": "frame", "id": fid, **fields})
        return fid

    def stack(self, function, line=10, inlined=None, python=None):
        """A stack whose innermost application frame is `function`; cached per (function, line)."""
        key = (function, line, bool(inlined), python)
        if key in self.stacks:
            return self.stacks[key]
        fields = {"ip": "0x5555%08x" % (0x1000 + self.next_frame * 16), "module": 1,
                  "offset": "0x%x" % (0x1000 + self.next_frame * 16), "function": function,
                  "file": self.app_file, "line": line}
        if inlined:
            fields["inlined"] = [{"function": inlined, "file": self.app_file, "line": line - 5}]
        frames = [self.cudart, self._frame(fields)]
        if python:
            frames.append(self._frame({"lang": "python", "function": python, "file": "train.py", "line": 42}))
        frames.append(self.main)
        sid = self.raw_stack(frames)
        self.stacks[key] = sid
        return sid

    def event(self, op, kind="device", addr=0, size=0, stack=0, device=0, api=None, dt=1000, **extra):
        self.seq += 1
        self.t += dt
        record = {"type": "event", "seq": self.seq, "t": self.t, "tid": 4243, "api": api or "cudaMalloc",
                  "op": op, "kind": kind, "addr": "0x%x" % addr, "size": size, "device": device,
                  "stack": stack}
        record.update(extra)
        self._write(record)

    def alloc(self, addr, size, stack, kind="device", **kw):
        self.event("alloc", kind, addr, size, stack, result=0, **kw)

    def failed_alloc(self, size, stack, result=2, **kw):
        self.event("alloc", "device", 0, size, stack, result=result, **kw)

    def free(self, addr, kind="device", stack=0, **kw):
        self.event("free", kind, addr, 0, stack, api=kw.pop("api", "cudaFree"), result=0, **kw)

    def block_alloc(self, addr, size, stack, segment=None, **kw):
        extra = {"segment": "0x%x" % segment} if segment is not None else {}
        self.event("block_alloc", "block", addr, size, stack, api="gpumemtrace_block_alloc", pool="default",
                   **extra, **kw)

    def block_free(self, addr, **kw):
        self.event("block_free", "block", addr, 0, 0, api="gpumemtrace_block_free", pool="default", **kw)

    def block_oom(self, size, stack, **kw):
        self.event("block_oom", "block", 0, size, stack, api="gpumemtrace_block_oom", pool="default", **kw)

    def meminfo(self, free, total, device=0):
        self.event("meminfo", "none", 0, 0, 0, device=device, api="cudaMemGetInfo", free=free, total=total)

    def mark(self, label):
        self.event("mark", "none", 0, 0, 0, device=-1, api="gpumemtrace_mark", label=label)

    def delayed(self, op, kind, addr, size, stack, t, api, **extra):
        """An event reported after the fact ("delayed":true) that happened at t (not the clock now)."""
        self.seq += 1
        record = {"type": "event", "seq": self.seq, "t": t, "tid": 4243, "api": api, "op": op, "kind": kind,
                  "addr": "0x%x" % addr, "size": size, "device": 0, "stack": stack, "delayed": True}
        record.update(extra)
        self._write(record)

    def sync(self, t=None):
        """A sync event: every delayed event with a time <= t is on an earlier line (t: now)."""
        self.seq += 1
        self._write({"type": "event", "seq": self.seq, "t": self.t if t is None else t, "tid": 4243,
                     "api": "torch.sync", "op": "sync", "kind": "none", "device": -1, "stack": 0})

    def scope(self, op, name, api="pytest"):
        """A scope_begin or scope_end (op) of the scope `name`."""
        self.event(op, "none", 0, 0, 0, device=-1, api=api, label=name)

    def gc(self, began, dt=1000):
        """A garbage collection that freed objects, from `began` to now (a "gc" record, written when it
        ended: every live event inside it is on an earlier line)."""
        self.seq += 1
        self.t += dt
        self._write({"type": "gc", "seq": self.seq, "t": began, "end_time": self.t, "tid": 4243})

    def capped(self, max_bytes=65536, dt=1000):
        """The trace reached its size cap: the next event (seq + 1, dt later) was not written."""
        self._write({"type": "capped", "seq": self.seq + 1, "t": self.t + dt, "size": 4096, "max_bytes": max_bytes})

    def live(self, addr, size, stack, seq, t, op="alloc", kind="device", api="cudaMalloc"):
        """A live record of a capped trace: an allocation still live at the end, made at (seq, t)."""
        self._write({"type": "live", "seq": seq, "t": t, "tid": 4243, "api": api, "op": op, "kind": kind,
                     "addr": "0x%x" % addr, "size": size, "device": 0, "stack": stack})

    def dropped(self, count):
        self._write({"type": "dropped", "count": count, "dropped_total": count})

    def close(self, footer=True, end_time=None, **fields):
        """Writes the footer (`end_time`: the default is 1 us after the last event; `fields`: more of it)."""
        if footer:
            self._write({"type": "footer", "events": self.seq, "dropped_total": 0,
                         "end_time": self.t + 1000 if end_time is None else end_time, **fields})
        self.f.close()
