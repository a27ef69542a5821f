// interpose/recorder/pause.h — stacks paused and resumed by the program (gpumemtrace_pause() and
// gpumemtrace_resume(); Python's gpumemtrace.stop() and start()).
//
// While paused, every event is still recorded, without its stack: what is live, the peaks and the
// OOM verdicts stay exact (as PyTorch's snapshot still shows the blocks allocated while its history
// was off, without their frames), and the unwind, most of an event's cost, is skipped. The trace
// holds a "pause" and a "resume" record around such events (trace/format.h), so that the report can
// say why they have no stack.
// Thread-safety: any thread; the hot path reads `since_ns` once per event (relaxed: an event racing
// a pause or a resume may fall on either side of it).
#pragma once

#include <atomic>
#include <cstdint>

namespace gpumemtrace::pause {

// CLOCK_MONOTONIC of the pause under way; 0: not paused. Process-wide, inherited by a fork child
// (the pause is the program's state, not the trace's).
inline std::atomic<uint64_t> since_ns{0};

// True when an event that happened at `time_ns` (0: now) is recorded without a stack: a pause is under
// way and the event did not happen before it began (one reported late, such as PyTorch's history,
// keeps the stack of its moment when that came before the pause).
inline bool stackless(uint64_t time_ns) noexcept {
  const uint64_t since = since_ns.load(std::memory_order_relaxed);
  return since != 0 && (time_ns == 0 || time_ns >= since);
}

}  // namespace gpumemtrace::pause
