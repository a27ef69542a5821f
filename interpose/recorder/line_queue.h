// interpose/recorder/line_queue.h — warning lines of a thread that cannot write to the program's
// stderr, waiting for one that can.
//
// The writer thread has a descriptor table of its own whose stderr is /dev/null (writer/private_fds.h):
// its lines wait in a LineQueue until a program thread writes them to the program's stderr (recorder.h,
// log_line). Fixed slots: no lock, no allocation, and print() is async-signal-safe (finish_trace runs
// in signal handlers). A line that finds every slot taken is not lost silently: it is counted, and the
// next print() ends with "gpumemtrace: N more warnings were dropped".
//
// Thread-safety: one producer at a time (push); any number of consumers, of which one prints at a time
// (a print() that finds another one running returns at once); forget() only where no other thread
// runs (a fork child).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace gpumemtrace {

// The longest line written to stderr, newline included; longer ones are cut.
inline constexpr size_t kLineBytes = 512;

// The parts and a newline in `buf`, truncated to kLineBytes; returns the length. Async-signal-safe.
size_t format_line(char (&buf)[kLineBytes], std::initializer_list<const char*> parts) noexcept;

class LineQueue {
 public:
  static constexpr uint32_t kSlots = 16;  // lines that can wait; more are counted and dropped

  constexpr LineQueue() = default;
  LineQueue(const LineQueue&) = delete;
  LineQueue& operator=(const LineQueue&) = delete;

  // Queues "gpumemtrace: <msg>", or counts it as dropped when kSlots lines are waiting.
  void push(const char* msg) noexcept;

  // True when lines are waiting. Two relaxed loads, for a hook's hot path. Dropped lines are not
  // looked at: a line is only dropped while kSlots are waiting, so a consumer is due anyway.
  bool waiting() const noexcept {
    return queued_.load(std::memory_order_relaxed) != printed_.load(std::memory_order_relaxed);
  }

  // Writes each waiting line, oldest first, with `write_text`, then, when lines were dropped since
  // the last print, one more line that says how many.
  void print(void (*write_text)(const char* text, size_t size)) noexcept;

  // Forgets the waiting lines and the count of dropped ones (in a fork child: the parent prints them).
  void forget() noexcept;

 private:
  char text_[kSlots][kLineBytes] = {};
  size_t size_[kSlots] = {};
  std::atomic<uint32_t> queued_{0};   // lines ever queued; stored by the producer
  std::atomic<uint32_t> printed_{0};  // lines ever printed (or forgotten); stored by the consumer
  std::atomic<uint32_t> dropped_{0};  // lines dropped since the last print that reported them
  std::atomic<bool> printing_{false};
};

}  // namespace gpumemtrace
