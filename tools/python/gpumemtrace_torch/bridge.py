# tools/python/gpumemtrace_torch/bridge.py — ctypes access to libgpumemtrace.so's PyTorch bridge.
"""ctypes access to libgpumemtrace.so's PyTorch bridge (interpose/hooks/torch_bridge.cpp).

The library is found in the global scope (it is LD_PRELOADed), never loaded by us: without the preload
there is nothing to report to and the hook stays off. A drain's entries go over in one call, as an
array of Entry structures whose frames lie in one array of Frame structures: the C side reads fields,
it parses no text. A frame's name is qualified with its class (qualname.py) as live Python frames
are. Which PyTorch actions become which events is the library's table
(trace/torch_actions.h); this side only asks which action names the library records, to skip packing
the others.
"""
import array
import ctypes
import struct

from .qualname import qualify

_u64 = ctypes.c_uint64


class Frame(ctypes.Structure):
    """GpumemtraceTorchFrame: one frame of PyTorch's recorded stack."""
    _fields_ = [("file", ctypes.c_char_p), ("function", ctypes.c_char_p), ("line", ctypes.c_int64)]


class Entry(ctypes.Structure):
    """GpumemtraceTorchEntry: one allocation-history entry (same field order and types as the C side,
    which checks both structures' sizes on every call)."""
    _fields_ = [("action", ctypes.c_char_p), ("addr", _u64), ("size", _u64), ("stream", _u64),
                ("segment", _u64), ("time_ns", _u64), ("free_bytes", _u64), ("pool", ctypes.c_char_p),
                ("frames", ctypes.c_void_p), ("frame_count", ctypes.c_uint32), ("device", ctypes.c_int32)]


# The two arrays are filled from flat buffers laid out exactly like the structures above: building
# ctypes Structures one by one costs several times more per frame (a drain packs a ring's worth).
_ENTRY_LAYOUT = struct.Struct("<Q6QQQIi")   # Entry: action, addr..free_bytes, pool, frames, count, device
_FRAME_WORDS = 3                            # Frame: file, function, line as int64 words
assert _ENTRY_LAYOUT.size == ctypes.sizeof(Entry) and ctypes.sizeof(Frame) == 8 * _FRAME_WORDS

_MASK = 0xFFFFFFFFFFFFFFFF
# Names met in frames and actions, encoded once and kept alive here (the arrays hold their addresses:
# a name must outlive every call that passes it). Bounded: past this many, the cache starts over, but
# only between calls.
_MAX_CACHED_NAMES = 1 << 16


class Bridge:
    def __init__(self, record, live_action, mark, flush, sync, free_stacks=True, settings=None):
        self._record = record
        self._settings = settings  # gpumemtrace_record_torch_settings, or None (an older library)
        # Whether block_free events keep a stack (GPUMEMTRACE_FREE_STACKS=1; the library decides).
        self.free_stacks = free_stacks
        self._mark = mark
        self._flush = flush
        self._sync = sync
        self.live_actions = frozenset(_names(live_action))
        self._addresses = {}       # str -> (bytes, address of its buffer)
        self.layout_mismatch = False

    def flush(self):
        """Before the process dies of a signal: get the recorded events to the file (waits at most
        2 s). True when done."""
        return self._flush() == 0

    def _address(self, text):
        """Address of a NUL-terminated UTF-8 copy of `text`, valid until the cache starts over."""
        hit = self._addresses.get(text)
        if hit is None:
            b = str(text).encode("utf-8", "replace")
            hit = self._addresses[text] = (b, ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value)
        return hit[1]

    def record(self, entries):
        """Records history entries, each a tuple (action, addr, size, device, stream, segment, time_ns,
        free_bytes, frames) with PyTorch's action name and its frame dicts ({"filename", "name",
        "line"}, innermost first). Entries whose action the library does not record are skipped here.
        Returns the number of events recorded (-1: the library refused the call, a build mismatch)."""
        entries = [e for e in entries if e[0] in self.live_actions]
        if not entries:
            return 0
        if len(self._addresses) >= _MAX_CACHED_NAMES:
            self._addresses.clear()
        address = self._address
        # Each distinct stack is laid out once in the flat frame buffer and every entry with that stack
        # points at the same range (the C side only reads it). PyTorch gives each allocation a list of
        # its own but shares one frame dict per code line, so a stack is known by its dicts' ids: they
        # stay valid for this call, which holds the entries. Repeated stacks (a training loop's) then
        # cost a tuple of ids each, not a copy of every frame.
        words = []                 # the frames, flat
        frame_words = {}           # id(frame dict) -> its words
        stack_at = {}              # ids of a stack's frame dicts -> (first frame, frame count)
        ranges = []                # per entry
        for e in entries:
            frames = e[8]
            if not frames:
                ranges.append(None)
                continue
            key = tuple(map(id, frames))
            where = stack_at.get(key)
            if where is None:
                where = stack_at[key] = (len(words) // _FRAME_WORDS, len(frames))
                for f in frames:
                    w = frame_words.get(id(f))
                    if w is None:
                        file, line = f.get("filename", "?"), int(f.get("line", 0) or 0)
                        w = frame_words[id(f)] = (address(file), address(qualify(file, line, f.get("name", "?"))),
                                                  line)
                    words.extend(w)
            ranges.append(where)
        frame_buffer = array.array("q", words)
        base = frame_buffer.buffer_info()[0]
        entry_buffer = bytearray(_ENTRY_LAYOUT.size * len(entries))
        offset = 0
        pack_into, size_of_entry, frame_bytes = _ENTRY_LAYOUT.pack_into, _ENTRY_LAYOUT.size, 8 * _FRAME_WORDS
        action_address = {a: address(a) for a in self.live_actions}
        for (action, addr, size, device, stream, segment, time_ns, free_bytes, _), where in zip(entries, ranges):
            pack_into(entry_buffer, offset, action_address[action], addr & _MASK, size & _MASK, stream & _MASK,
                      segment & _MASK, time_ns & _MASK, free_bytes & _MASK, 0,
                      base + where[0] * frame_bytes if where else 0, where[1] if where else 0, device)
            offset += size_of_entry
        array_of_entries = (Entry * len(entries)).from_buffer(entry_buffer)
        n = self._record(array_of_entries, len(entries), ctypes.sizeof(Entry), ctypes.sizeof(Frame))
        del array_of_entries       # releases the export of entry_buffer; frame_buffer lived until here
        if n < 0:
            self.layout_mismatch = True
        return n

    def sync(self, time_ns):
        """A `sync` event: every event reported later has a time above time_ns (CLOCK_MONOTONIC)."""
        if time_ns > 0:
            self._sync(time_ns)

    def mark(self, label):
        self._mark(label.encode("utf-8", "replace"))

    @property
    def records_settings(self):
        return self._settings is not None

    def settings(self, source, conf=None, device=-1, fraction=-1.0):
        """An "allocator_settings" record, now (docs/trace-format.md): `source` "in_force",
        "_set_allocator_settings" (with `conf`) or "set_per_process_memory_fraction" (with `device` and
        `fraction`). The library keeps only the allocator's own options of `conf`. Returns 1 when
        recorded, 0 when not, -1 when refused, None when the library cannot record settings."""
        if self._settings is None:
            return None
        text = None if conf is None else str(conf).encode("utf-8", "replace")
        return self._settings(source.encode(), text, int(device), float(fraction))


def _names(live_action):
    i = 0
    while True:
        name = live_action(i)
        if name is None:
            return
        yield name.decode()
        i += 1


def load():
    """The bridge, or None when libgpumemtrace.so is not in this process."""
    try:
        glob = ctypes.CDLL(None)
        record = glob.gpumemtrace_record_torch
    except (OSError, AttributeError):
        return None
    record.argtypes = [ctypes.POINTER(Entry), _u64, ctypes.c_uint32, ctypes.c_uint32]
    record.restype = ctypes.c_int64
    # The library exports these with gpumemtrace_record_torch (one build): no fallbacks.
    live_action = glob.gpumemtrace_torch_live_action
    live_action.argtypes = [ctypes.c_uint32]
    live_action.restype = ctypes.c_char_p
    mark = glob.gpumemtrace_report_mark
    mark.argtypes = [ctypes.c_char_p]
    mark.restype = None
    flush = glob.gpumemtrace_flush
    flush.argtypes = []
    flush.restype = ctypes.c_int
    sync = glob.gpumemtrace_record_sync
    sync.argtypes = [_u64]
    sync.restype = ctypes.c_int
    # Newer than the rest: a library without it keeps the stacks it is given (context="all").
    free_stacks = getattr(glob, "gpumemtrace_torch_free_stacks", None)
    if free_stacks is not None:
        free_stacks.argtypes = []
        free_stacks.restype = ctypes.c_int
    # Newer still: a library without it records no allocator settings.
    settings = getattr(glob, "gpumemtrace_record_torch_settings", None)
    if settings is not None:
        settings.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_double]
        settings.restype = ctypes.c_int
    return Bridge(record, live_action, mark, flush, sync,
                  free_stacks=free_stacks is None or free_stacks() != 0, settings=settings)
