// interpose/writer/wait.h — the short sleeps and polls with which the program's threads wait for the
// writer thread (Writer::stop, flush, the exec checkpoint, dump). Internal to interpose/writer/.
// Thread-safety: plain functions; `done` is the caller's (an atomic load).
#pragma once

#include <time.h>

namespace gpumemtrace::writer_wait {

inline void sleep_us(long us) {
  timespec ts{0, us * 1000};
  nanosleep(&ts, nullptr);
}

// Polls `done` every 200 us for at most `timeout_ms`; false on time-out.
template <typename Done>
bool wait_until(Done&& done, int timeout_ms) {
  for (long waited_us = 0; !done(); waited_us += 200) {
    if (waited_us >= timeout_ms * 1000L) return false;
    sleep_us(200);
  }
  return true;
}

}  // namespace gpumemtrace::writer_wait
