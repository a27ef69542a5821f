# tests/python/fake_torch/torch/cuda/_clock.py — the stand-in's c10::ApproximateClockToUnixTimeConverter: time_us fitted again at every snapshot.
"""As c10/util/ApproximateClock.cpp (pytorch/pytorch at 45918c74bf1d): entries keep a fast clock reading
(getApproximateTime, the TSC); the allocator measures (wall, fast) pairs once when it is created and
again in makeConverter(), which _snapshot() calls every time, fits the slope between the two and
converts every entry of the copy with it (NativeCachingAllocator::snapshot: tsc_to_ns(t) / 1000). So
the same entry's time_us differs between two copies: by the newest measurement's error, scaled by
how far the entry is from the first measurement, and by a wall-clock step once one happened.

Knobs: FAKE_TORCH_CLOCK_JITTER_US (default 3): each makeConverter()'s wall reading is off by up to
that many microseconds either way (the measurement error of a real fit, made visible);
FAKE_TORCH_CLOCK_STEP_US=N@K: the wall clock steps by N microseconds (NTP) before the K-th converter.
"""
import os
import random
import threading
import time

_rng = random.Random(int(os.environ.get("FAKE_TORCH_CLOCK_SEED", "7")))
_lock = threading.Lock()


def approximate_time():
    """getApproximateTime(): a fast monotonic reading (ns here)."""
    return time.perf_counter_ns()


def _step():
    text = os.environ.get("FAKE_TORCH_CLOCK_STEP_US", "")
    try:
        us, after = text.split("@")
        return int(us) * 1000, int(after)
    except ValueError:
        return 0, None


class Converter:
    def __init__(self):
        self.start = self.measure(0)
        self.made = 0
        self.jitter_ns = int(float(os.environ.get("FAKE_TORCH_CLOCK_JITTER_US", "3")) * 1000)

    def measure(self, made):
        step_ns, after = _step()
        fast = approximate_time()
        wall = time.time_ns() + (step_ns if after is not None and made >= after else 0)
        return wall, fast

    def make_converter(self):
        """makeConverter(): a function fast reading -> time_us for one copy."""
        with _lock:
            self.made += 1
            wall, fast = self.measure(self.made)
            wall += _rng.randint(-self.jitter_ns, self.jitter_ns)
        w0, f0 = self.start
        scale = (wall - w0) / max(1, fast - f0)
        return lambda t: (w0 + int((t - f0) * scale)) // 1000
