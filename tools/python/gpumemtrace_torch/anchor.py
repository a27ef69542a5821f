# tools/python/gpumemtrace_torch/anchor.py — where the entries new since the last drain begin in a copy of one device's history ring.
"""Where the entries new since the last drain begin in a fresh copy of one device's history ring.

Why this is exact. PyTorch keeps one ring per device (c10/cuda/CUDACachingAllocator.cpp, RingBuffer):
entries are only ever appended at the end, under the device's allocator lock, and `_snapshot()`
copies the ring in order (RingBuffer::getEntries rotates from the oldest). So every copy is a window
of ONE sequence S of entries: copy k = S[a_k : b_k], and the new entries of copy k are S[b_(k-1) : b_k].
What is needed is the index e = b_(k-1) - a_k of the previous copy's end inside this copy. An entry's
action, address, size and stream never change; its `time_us` does: `_snapshot()` converts every
entry's clock reading again with a freshly fitted converter (c10/util/ApproximateClock.cpp,
makeConverter), so the same entry's time moves between copies (by microseconds, or by a wall-clock
step), and time is only a hint here.

The candidates for e are the positions where the previous copy's last TAIL entries recur (compared on
the fields that never change), walking back from the end of the copy. In a training loop such runs
recur every iteration (the caching allocator hands out the same address for the same size), so more
than one position can match; what decides:

1. Marks (a hard condition). Each `_snapshot()` appends a "snapshot" entry to every device's ring right
   after copying it (DeviceCachingAllocator::snapshot, record_trace(SNAPSHOT)). Wherever the previous
   copy held "snapshot" entries, at distances m_1 < m_2 < ... from its end, the true e has "snapshot"
   entries at e-1-m_i too. Our own drains take these copies at moments unrelated to the program's
   loop, so a position shifted by a few iterations almost never carries the marks.
2. Our snapshot follows the boundary: the "snapshot" entry our previous `_snapshot()` appended comes
   right after the entries of the previous copy; only entries other threads appended between the
   ring's copy and that record (nanoseconds apart, under two lock acquisitions) can sit between them:
   at most RACE entries. A match among the new entries has no such entry after it.
3. Time: the candidate's last entry must have (within TIME_SLACK_US) the time the previous copy gave it.
4. Counts: PyTorch's cumulative counters (counters.py) say how many entries were appended between the
   two copies, up to the entries appended while the counters were read; a candidate e means n - e were.
5. The number of "snapshot" entries after e equals the `_snapshot()` calls made since the last copy.
Candidates are ranked by these, in this order, and the best one wins; a tie after all of them needs
a key sequence that repeats with a period shorter than the counters' error, within the time slack,
with the drains' marks at matching places: then the nearest repeat in time is taken.

Cost: the walk reads the new entries and stops as soon as no earlier position can rank better (the
time, count or snapshot bound), so a drain reads what is new plus a bounded margin, not the ring.
When the ring was not full at either copy (shorter than its capacity), the copy is the whole
history: e is the previous copy's length, checked, with no walk at all.

No candidate: the previous copy's end is gone (the ring wrapped between two drains, or its history was
cleared). Then everything in the copy is new; entries were lost unless the counters show no more
entries were appended than the copy holds.
"""

SNAPSHOT = "snapshot"
TAIL = 8            # entries of the previous copy's end compared
MARKS = 4           # "snapshot" entries of the previous copy remembered (the newest)
RACE = 8            # entries another thread may append between a ring's copy and its "snapshot" record
COUNT_SLACK = 256   # how far the counters' estimate may be off (entries appended while they were read)
TIME_SLACK_US = 10000  # how far re-conversion may move an entry's time_us between two copies


def key(e):
    """The fields of an entry that never change between copies (an "oom" entry keeps the device's free
    bytes where the others keep their address)."""
    a = e.get("addr")
    if a is None:
        a = e.get("device_free")
    return (e.get("action"), a, e.get("size"), e.get("stream"))


class RingEnd:
    """What one copy of a device's ring ended with: enough to find the same place in the next copy."""
    __slots__ = ("tail", "marks", "last_time", "length")

    def __init__(self, tail, marks, last_time, length):
        self.tail = tail            # key() of the copy's last TAIL entries, oldest first
        self.marks = marks          # distances from the copy's end of its newest "snapshot" entries
        self.last_time = last_time  # time_us of its last entry, in that copy's conversion
        self.length = length        # entries in the copy


class Hints:
    """What the drain knows besides the copies. Every field may be None: unknown, then neutral."""
    __slots__ = ("appended", "snapshots", "marks_recorded", "capacity")

    def __init__(self, appended=None, snapshots=None, marks_recorded=False, capacity=None):
        self.appended = appended            # entries appended since the previous copy (counters.py)
        self.snapshots = snapshots          # _snapshot() calls since the previous copy, ours included
        self.marks_recorded = marks_recorded  # "snapshot" entries go into the ring (not skipped)
        self.capacity = capacity            # the ring's max_entries in force


NO_HINTS = Hints()


def ring_end(trace, start, previous, new_marks):
    """The RingEnd of `trace`, whose new entries begin at `start` and hold "snapshot" entries at
    indices `new_marks` (newest first; locate() gives them), after `previous` (or None): its older
    marks are carried over, so only the new entries were ever read."""
    n = len(trace)
    marks = [n - 1 - i for i in new_marks[:MARKS]]
    if previous is not None and len(marks) < MARKS:
        d = n - start
        for m in previous.marks:
            if start - 1 - m < 0 or len(marks) == MARKS:
                break
            marks.append(d + m)
    last_time = trace[-1].get("time_us") if trace else None
    return RingEnd([key(e) for e in trace[-TAIL:]], tuple(marks), last_time, n)


def _matches(trace, e, prev):
    """Whether the previous copy may end just before index e: its tail (as far as it lies inside this
    copy) and its marks recur there."""
    tail = prev.tail
    for j in range(1, min(len(tail), e) + 1):
        if key(trace[e - j]) != tail[-j]:
            return False
    for m in prev.marks:
        i = e - 1 - m
        if i < 0:
            break
        if trace[i].get("action") != SNAPSHOT:
            return False
    return True


def _time(e):
    t = e.get("time_us")
    return int(t) if t is not None else None


def locate(trace, prev, hints=NO_HINTS):
    """(start, complete, marks): the index in `trace` (one device's copy) of the first entry the
    previous copy did not hold; False when entries may have been lost between the two copies (the
    previous copy's end is gone and the counters do not show that nothing else was appended); and
    the indices of the "snapshot" entries in trace[start:], newest first (at most MARKS)."""
    n = len(trace)
    appended = hints.appended
    # Entries appended that a copy without the previous one's end still holds: all of them unless
    # more were appended than it holds, leaving out the "snapshot" entries (a clear may have taken ours).
    all_here = appended is not None and appended - (hints.snapshots if hints.snapshots is not None else 1) <= n
    if prev is None or not prev.tail:
        return 0, appended is None or all_here, _marks_in(trace, 0)
    cap = hints.capacity
    if cap and prev.length < cap and prev.length <= n < cap and _matches(trace, prev.length, prev):
        return prev.length, True, _marks_in(trace, prev.length)  # never full: the copies are the whole history
    last = prev.tail[-1]
    last_action = last[0]
    t_last = prev.last_time
    wanted = hints.snapshots
    marks_recorded = hints.marks_recorded
    best = best_score = None
    snaps = []          # indices of the "snapshot" entries in trace[i:], newest first
    i = n
    while i >= 1:
        entry = trace[i - 1]
        action = entry.get("action")
        if action == last_action and key(entry) == last and _matches(trace, i, prev):
            d = n - i
            t = _time(entry)
            dt = abs(t - t_last) if t is not None and t_last is not None else 0
            count_err = abs(d - appended) if appended is not None else 0
            score = (marks_recorded and (not snaps or snaps[-1] - i > RACE),
                     dt > TIME_SLACK_US,
                     max(0, count_err - COUNT_SLACK),
                     abs(len(snaps) - wanted) if wanted is not None else 0,
                     count_err, dt, -i)
            if best_score is None or score < best_score:
                best, best_score = i, score
                checked = -1     # check the bound at once: a perfect candidate ends the walk here
        if action == SNAPSHOT:
            snaps.append(i - 1)
        i -= 1
        # The bound is checked every 64 entries (each check reads a time): at most 64 entries more.
        if best is not None and i >= 1 and (checked < 0 or checked - i >= 64):
            checked = i
            if _no_better_below(trace, i, n, len(snaps), best_score, hints, t_last):
                break
    if best is None:
        return 0, all_here, [j for j in snaps if j >= 0][:MARKS]
    return best, True, [j for j in snaps if j >= best][:MARKS]


def _marks_in(trace, start):
    out = []
    for i in range(len(trace) - 1, start - 1, -1):
        if trace[i].get("action") == SNAPSHOT:
            out.append(i)
            if len(out) == MARKS:
                break
    return out


def _no_better_below(trace, i, n, snaps, best, hints, t_last):
    """Whether no candidate e <= i can rank above `best`: a lower bound of their scores, from what
    only gets worse further back (times never increase, counts and "snapshot" entries only grow)."""
    t = _time(trace[i - 1])
    late = t is not None and t_last is not None and t < t_last - TIME_SLACK_US
    d = n - i
    if hints.appended is not None:
        err = max(0, d - hints.appended)
        bucket = max(0, err - COUNT_SLACK)
    else:
        err = bucket = 0
    snap_err = max(0, snaps - hints.snapshots) if hints.snapshots is not None else 0
    bound = (False, late, bucket, snap_err, err)
    return bound > best[:5] or (bound == best[:5] and best[5] == 0)
