# tests/tracefile.py — reads gpumemtrace traces for the tests and benchmarks: plain or zstd
# (.zst), format version 1 or 2 (docs/trace-format.md), cut short or whole. Version 2 event lines
# come back in their version 1 form, so a test reads both alike. Also writes either version from
# such records (fixtures, bench/trace_size_bench.py).
#
#   records, truncated = read_records(path)   # dicts, v1 form; the "site" records left out
#   for record in iter_records(path): ...     # the same, one at a time (bounded memory)
#   lines = encode(records, version=2)        # text lines (no newline) as the recorder writes them
import json
import subprocess

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

# Ops without a memory range carry no addr and no size; trim carries a size only (trace/format.h,
# op_has_size / op_has_addr).
NO_RANGE_OPS = frozenset(("mark", "meminfo", "reset", "sync", "scope_begin", "scope_end"))

# The fields a version 2 site holds, in the order the recorder writes them.
SITE_FIELDS = ("tid", "api", "driver_api", "op", "kind", "device", "stack", "delayed")
# The fields that keep their names on a version 2 event line, in the recorder's order.
OPTIONAL_FIELDS = ("stream", "pool", "segment", "handle", "free", "total", "label", "range")
# A version 1 event's fields in the recorder's order (interpose/writer/serializer.cpp, version 1).
V1_EVENT_FIELDS = ("type", "seq", "t", "tid", "api", "driver_api", "op", "kind", "addr", "size", "device",
                   *OPTIONAL_FIELDS, "stack", "result", "delayed")


def read_bytes(path):
    """The trace's text as bytes; a .zst file (or one starting with zstd's magic) is decoded with the
    zstd tool. A frame cut short (a killed writer) gives what could be decoded."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(ZSTD_MAGIC):
        return data
    proc = subprocess.run(["zstd", "-dcq"], input=data, capture_output=True)
    if proc.returncode != 0 and not proc.stdout:
        raise ValueError(f"{path}: zstd: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def read_text(path):
    return read_bytes(path).decode("utf-8")


def parse_lines(text):
    """(raw records, truncated): each line's JSON; a last line that is cut short (no newline, or not
    JSON) ends the list and sets truncated."""
    lines = text.split("\n")
    truncated = bool(lines and lines[-1])
    if not truncated:
        lines.pop()
    out = []
    for i, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except ValueError:
            if i == len(lines) - 1:  # a killed process may cut its last line short
                truncated = True
                break
            raise
    return out, truncated


class Decoder:
    """Turns a trace's records, in file order, into their version 1 form (see decode())."""

    def __init__(self):
        self.version = 1
        self.sites = []  # version 2: site id - 1 -> the site record
        self.seq = 0
        self.t = 0

    def decode(self, r):
        """The record in version 1 form, or None for a site record (kept in self.sites)."""
        kind = r.get("type")
        if kind == "header":
            self.version = r.get("version", 1)
            return r
        if kind == "site":
            if r["id"] != len(self.sites) + 1:
                raise ValueError(f"site id {r['id']} out of order")
            self.sites.append(r)
            return None
        if kind is not None or self.version < 2 or "e" not in r:
            return r
        if not 0 < r["e"] <= len(self.sites):
            raise ValueError(f"event line refers to undefined site {r['e']}: {r}")
        site = self.sites[r["e"] - 1]
        self.seq = r.get("q", self.seq + 1)
        self.t += r["t"]
        e = {"type": "event", "seq": self.seq, "t": self.t}
        for name in V1_EVENT_FIELDS[3:]:
            if name in site and name != "delayed":
                e[name] = site[name]
            elif name == "addr" and site["op"] not in NO_RANGE_OPS and site["op"] != "trim":
                e[name] = r["a"]
            elif name == "size" and site["op"] not in NO_RANGE_OPS:
                e[name] = r.get("s", 0)
            elif name == "result" and "r" in r:
                e[name] = r["r"]
            elif name in OPTIONAL_FIELDS and name in r:
                e[name] = r[name]
        if site.get("delayed"):
            e["delayed"] = True
        if r.get("initial"):  # a flight recorder's checkpoint (docs/trace-format.md)
            e["initial"] = True
        return e


def decode(records):
    """Version 1 form of every record (site records left out). Events of a version 2 trace get their
    site's fields and their absolute seq and t; "result" only where it is not 0 (version 2 leaves 0
    out, so "no result" and "result 0" read alike: use e.get("result", 0))."""
    d = Decoder()
    return [v for v in map(d.decode, records) if v is not None]


def read_records(path):
    """(records in version 1 form, truncated) of the trace at path (.jsonl or .zst, v1 or v2)."""
    raw, truncated = parse_lines(read_text(path))
    return decode(raw), truncated


def iter_records(path):
    """The records of the trace at path in version 1 form, one at a time, in bounded memory (for
    traces too big to hold as dicts: a benchmark's millions of events). A last line cut short ends
    the iteration."""
    with open(path, "rb") as f:
        compressed = f.read(len(ZSTD_MAGIC)) == ZSTD_MAGIC
    proc = subprocess.Popen(["zstd", "-dcq", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) \
        if compressed else None
    stream = proc.stdout if proc else open(path, "rb")
    try:
        decoder = Decoder()
        for line in stream:
            if not line.endswith(b"\n"):
                return
            try:
                record = decoder.decode(json.loads(line))
            except ValueError:
                return
            if record is not None:
                yield record
    finally:
        stream.close()
        if proc:
            proc.kill()
            proc.wait()


def _dumps(record):
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def encode(records, version=2):
    """Text lines of `records` (version 1 form, as decode() gives them) in `version`'s form: version 2
    interns sites (defined just before their first event) and delta-codes t and seq, as the recorder
    does; version 1 writes each event whole, with "result" where it is not 0 and on live
    allocations (where the version 1 recorder wrote it: calls that return an error code; close, not
    exact, for a trace that came from version 2, which leaves 0 out)."""
    out = []
    sites = {}
    seq = t = 0
    for r in records:
        if r.get("type") == "header":
            r = dict(r, version=version)
        if r.get("type") != "event":
            out.append(_dumps(r))
            continue
        if version == 1:
            keep_result = r.get("result") or (r["op"] == "alloc" and not r.get("delayed"))
            out.append(_dumps({k: r[k] for k in V1_EVENT_FIELDS if k in r and (k != "result" or keep_result)}))
            continue
        key = tuple(r.get(k) for k in SITE_FIELDS)
        if key not in sites:
            sites[key] = len(sites) + 1
            site = {"type": "site", "id": sites[key]}
            site.update((k, r[k]) for k in SITE_FIELDS if k in r and not (k == "delayed" and not r[k]))
            out.append(_dumps(site))
        e = {"e": sites[key], "t": r["t"] - t}
        if r["seq"] != seq + 1:
            e["q"] = r["seq"]
        seq, t = r["seq"], r["t"]
        if "addr" in r:
            e["a"] = r["addr"]
        if r.get("size"):
            e["s"] = r["size"]
        e.update((k, r[k]) for k in OPTIONAL_FIELDS if k in r)
        if r.get("result"):
            e["r"] = r["result"]
        out.append(_dumps(e))
    return out
