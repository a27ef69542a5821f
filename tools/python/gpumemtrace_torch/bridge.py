"""ctypes access to libgpumemtrace.so's gpumemtrace_record_external() (interpose/hooks/torch_bridge.cpp).

The library is found in the global scope (it is LD_PRELOADed), never loaded by us: without the preload
there is nothing to report to and the hook stays off.
"""
import ctypes

_SEP_FIELD = "\x1f"
_SEP_FRAME = "\x1e"


class Bridge:
    def __init__(self, fn, mark, flush, sync):
        self._fn = fn
        self._mark = mark
        self._flush = flush
        self._sync = sync

    def flush(self):
        """Before the process dies of a signal: get the recorded events to the file (waits at most
        2 s). True when done."""
        return self._flush() == 0

    def record(self, op, api, addr=0, size=0, device=-1, stream=0, segment=0, time_ns=0, free_bytes=0,
               pool=None, frames=None):
        text = None
        if frames:
            text = _SEP_FRAME.join(
                "%s%s%s%s%d" % (f[0].replace(_SEP_FIELD, " ").replace(_SEP_FRAME, " "), _SEP_FIELD,
                                f[1].replace(_SEP_FIELD, " ").replace(_SEP_FRAME, " "), _SEP_FIELD, f[2])
                for f in frames).encode("utf-8", "replace")
        return self._fn(op.encode(), api.encode(), addr & 0xFFFFFFFFFFFFFFFF, size, device,
                        stream & 0xFFFFFFFFFFFFFFFF, segment & 0xFFFFFFFFFFFFFFFF, time_ns,
                        free_bytes, pool.encode() if pool else None, text)

    def sync(self, time_ns):
        """A `sync` event: every event reported later has a time above time_ns (CLOCK_MONOTONIC)."""
        if time_ns > 0:
            self._sync(time_ns)

    def mark(self, label):
        self._mark(label.encode("utf-8", "replace"))


def load():
    """The bridge, or None when libgpumemtrace.so is not in this process."""
    try:
        glob = ctypes.CDLL(None)
        fn = glob.gpumemtrace_record_external
    except (OSError, AttributeError):
        return None
    u64 = ctypes.c_uint64
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, u64, u64, ctypes.c_int, u64, u64, u64, u64,
                   ctypes.c_char_p, ctypes.c_char_p]
    fn.restype = ctypes.c_int
    # The library exports these with gpumemtrace_record_external (one build): no fallbacks.
    mark = glob.gpumemtrace_report_mark
    mark.argtypes = [ctypes.c_char_p]
    mark.restype = None
    flush = glob.gpumemtrace_flush
    flush.argtypes = []
    flush.restype = ctypes.c_int
    sync = glob.gpumemtrace_record_sync
    sync.argtypes = [u64]
    sync.restype = ctypes.c_int
    return Bridge(fn, mark, flush, sync)
