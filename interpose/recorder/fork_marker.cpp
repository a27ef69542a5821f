// interpose/recorder/fork_marker.cpp — see fork_marker.h.
#include "interpose/recorder/fork_marker.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18  // Linux 4.14; the same number on every architecture
#endif

namespace gpumemtrace {
namespace {

// The page's first word: 1 in the address space that armed it, 0 in a copy the kernel made by fork.
std::atomic<std::atomic<int>*> g_marker{nullptr};
// Where the kernel refused MADV_WIPEONFORK: the pid that armed it (0: not armed).
std::atomic<pid_t> g_armed_pid{0};
std::atomic<bool> g_wipe_refused{false};

}  // namespace

void arm_fork_marker() noexcept {
  const int saved_errno = errno;
  std::atomic<int>* marker = g_marker.load(std::memory_order_acquire);
  if (!marker && !g_wipe_refused.load(std::memory_order_relaxed)) {
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page != MAP_FAILED && madvise(page, 4096, MADV_WIPEONFORK) == 0) {
      // Two threads may arm at once (the first hooks of a program's threads): one page wins, the
      // other is given back, so every thread reads the same marker.
      std::atomic<int>* expected = nullptr;
      if (g_marker.compare_exchange_strong(expected, static_cast<std::atomic<int>*>(page),
                                           std::memory_order_acq_rel, std::memory_order_acquire)) {
        marker = static_cast<std::atomic<int>*>(page);
      } else {
        munmap(page, 4096);
        marker = expected;
      }
    } else {
      if (page != MAP_FAILED) munmap(page, 4096);
      g_wipe_refused.store(true, std::memory_order_relaxed);
    }
  }
  if (marker) marker->store(1, std::memory_order_release);
  g_armed_pid.store(getpid(), std::memory_order_relaxed);
  errno = saved_errno;
}

bool copied_without_fork_handler() noexcept {
  // Acquire: the page was mapped by the thread that published it (free on x86; ThreadSanitizer
  // needs the edge to see the mapping before the read).
  if (std::atomic<int>* marker = g_marker.load(std::memory_order_acquire))
    return marker->load(std::memory_order_relaxed) == 0;
  const pid_t armed = g_armed_pid.load(std::memory_order_relaxed);
  if (armed == 0) return false;
  // No wipe-on-fork page: a CLONE_VM child (vfork) has a pid of its own too, and is taken for a copy
  // (its hooks pass through; the recorder's state, which it shares, is left alone: lifecycle.cpp).
  const int saved_errno = errno;
  const bool other = getpid() != armed;
  errno = saved_errno;
  return other;
}

}  // namespace gpumemtrace
