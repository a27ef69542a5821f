// interpose/recorder/line_queue.cpp — see line_queue.h.
#include "interpose/recorder/line_queue.h"

#include <charconv>

namespace gpumemtrace {

size_t format_line(char (&buf)[kLineBytes], std::initializer_list<const char*> parts) noexcept {
  size_t n = 0;
  for (const char* s : parts)
    for (; *s && n < kLineBytes - 1; ++s) buf[n++] = *s;
  buf[n++] = '\n';
  return n;
}

void LineQueue::push(const char* msg) noexcept {
  const uint32_t queued = queued_.load(std::memory_order_relaxed);
  if (queued - printed_.load(std::memory_order_acquire) >= kSlots) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint32_t slot = queued % kSlots;
  size_[slot] = format_line(text_[slot], {"gpumemtrace: ", msg});
  queued_.store(queued + 1, std::memory_order_release);
}

void LineQueue::print(void (*write_text)(const char*, size_t)) noexcept {
  if (!waiting() && dropped_.load(std::memory_order_relaxed) == 0) return;
  if (printing_.exchange(true, std::memory_order_acquire)) return;
  for (uint32_t printed = printed_.load(std::memory_order_relaxed);
       printed != queued_.load(std::memory_order_acquire); ++printed) {
    const uint32_t slot = printed % kSlots;
    write_text(text_[slot], size_[slot]);
    printed_.store(printed + 1, std::memory_order_release);
  }
  // After the lines that filled the queue, which were queued before the ones dropped.
  if (const uint32_t dropped = dropped_.exchange(0, std::memory_order_relaxed)) {
    char count[16];
    *std::to_chars(count, count + sizeof(count) - 1, dropped).ptr = '\0';
    char line[kLineBytes];
    write_text(line, format_line(line, {"gpumemtrace: ", count,
                                        dropped == 1 ? " more warning was dropped" : " more warnings were dropped",
                                        " (the writer thread's queue of lines for stderr was full)"}));
  }
  printing_.store(false, std::memory_order_release);
}

void LineQueue::forget() noexcept {
  printed_.store(queued_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  dropped_.store(0, std::memory_order_relaxed);
  printing_.store(false, std::memory_order_relaxed);
}

}  // namespace gpumemtrace
