# tests/python/torch_ring_sim.py — PyTorch's history ring as c10 keeps it, with time_us converted again at every copy, for the drain tests.
"""One device's allocation-history ring as PyTorch keeps it (c10/cuda/CUDACachingAllocator.cpp:
RingBuffer appends at the end and overwrites the oldest once full; DeviceCachingAllocator::snapshot
appends a "snapshot" entry after the copy), with each copy's `time_us` converted again by a freshly
fitted clock (c10/util/ApproximateClock.cpp, makeConverter: the slope is refitted from the first
measurement to the newest, so an entry's time moves by up to the newest measurement's error, in
either direction, and by a wall-clock step once one happened). No torch and no library needed.

Every entry carries "uid" (not a field PyTorch has, never looked at by the hook's drain), so a test
can check that each one was forwarded exactly once.
"""
import random

T0_US = 1_763_791_200_000_000


class Ring:
    def __init__(self, capacity, seed=1, jitter_us=4, tick_us=(1, 3)):
        self.capacity = capacity
        self.slots = []        # the ring, PyTorch's vector
        self.next = 0          # alloc_trace_next
        self.appended = 0      # entries ever appended (snapshot entries included)
        self.snapshots = 0     # snapshot entries ever appended
        self.tick = 0          # the fast clock (microseconds since the first measurement)
        self.step_us = 0       # the wall clock's step so far (an NTP correction)
        self.jitter_us = jitter_us
        self.tick_us = tick_us
        self.rng = random.Random(seed)
        self.uid = 0

    def append(self, action, addr, size, stream=0, frames=None):
        self.tick += self.rng.randint(*self.tick_us)
        self.uid += 1
        e = {"action": action, "addr": addr, "size": size, "stream": stream, "tick": self.tick, "uid": self.uid}
        if action == "oom":
            e["device_free"] = e.pop("addr")
        if frames is not None:
            e["frames"] = frames
        if action == "snapshot":
            self.snapshots += 1
        self.appended += 1
        if len(self.slots) < self.capacity:
            self.slots.append(e)
        else:
            self.slots[self.next] = e
            self.next = (self.next + 1) % self.capacity
        return e

    def clock_step(self, us):
        """The wall clock steps (NTP): every later fit includes the step in its newest measurement."""
        self.step_us += us

    def copy(self):
        """What _snapshot() returns for this device: the ring oldest first, converted with a new fit:
        time = t0 + tick * scale, scale fitted to the newest measurement, which carries this copy's
        error (jitter) and the clock step."""
        now = max(self.tick, 1)
        error = self.rng.uniform(-self.jitter_us, self.jitter_us) + self.step_us
        scale = (now + error) / now
        out = []
        for e in self.slots[self.next:] + self.slots[:self.next]:
            c = {k: v for k, v in e.items() if k != "tick"}
            c["time_us"] = T0_US + int(e["tick"] * scale)
            out.append(c)
        return out

    def snapshot(self, race_before=0, race_after=0, racer=None):
        """_snapshot() for this device: `race_before` entries appended by another thread between the
        counter read and the copy, the copy, then `race_after` entries between the copy and the
        "snapshot" record (a different lock acquisition). `racer(ring)` appends one entry."""
        for _ in range(race_before):
            racer(self)
        out = self.copy()
        for _ in range(race_after):
            racer(self)
        self.append("snapshot", 0, self.rng.randint(0, 1 << 20))
        return out


class Recorder:
    """Stands in for bridge.Bridge: keeps what would go to the library."""
    live_actions = frozenset({"alloc", "free_requested", "segment_alloc", "segment_free", "segment_map",
                              "segment_unmap", "oom"})

    def __init__(self):
        self.events, self.marks, self.syncs = [], [], []

    def record(self, entries):
        self.events.extend(entries)
        return len(entries)

    def mark(self, label):
        self.marks.append(label)

    def sync(self, time_ns):
        self.syncs.append(time_ns)


def training_step(ring, blocks=4, base=0x7f0000000000):
    """One iteration of a training loop: the caching allocator hands out the same addresses for the
    same sizes every time, so the keys repeat exactly, iteration after iteration."""
    addrs = [base + i * 0x100000 for i in range(blocks)]
    for i, a in enumerate(addrs):
        ring.append("alloc", a, 4096 << i)
    for i, a in reversed(list(enumerate(addrs))):
        ring.append("free_requested", a, 4096 << i)
