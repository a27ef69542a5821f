// util/monotonic_clock.h — nanoseconds from clock_gettime: the clock of every trace timestamp ("t").
// Header-only and inline: called on the recorder's hot path, where it must stay a vDSO call with no
// allocation, lock or stdio.
#pragma once

#include <time.h>

#include <cstdint>

namespace gpumemtrace::util {

// `id`'s current time in nanoseconds (CLOCK_REALTIME: since the epoch).
inline uint64_t clock_ns(clockid_t id) noexcept {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// CLOCK_MONOTONIC in nanoseconds: the recorder's event times, the writer's flush timer and the
// CUPTI backend's activity timestamps all read this one clock, so their times compare.
inline uint64_t monotonic_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }

}  // namespace gpumemtrace::util
