// interpose/recorder/recorder_state.h — what the recorder shares with the writer thread.
// Internal to interpose/; hooks use recorder.h only.
#pragma once

#include <atomic>
#include <cstdint>

#include "interpose/recorder/config.h"
#include "interpose/recorder/event_record.h"
#include "interpose/recorder/ring.h"
#include "interpose/recorder/stack_table.h"

namespace gpumemtrace {

using EventRing = Ring<EventRecord>;

// Device facts published by the event path (recorder.cpp) and written by the writer as "device" lines.
// A fixed table: publishing takes no lock and no allocation.
struct DeviceInfoSlot {
  std::atomic<int> state{0};  // 0 empty, 1 being filled, 2 published, 3 written
  int32_t device = -1;
  char name[96] = {};
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};
inline constexpr int kMaxDevices = 64;

struct RecorderShared {
  Config config;
  EventRing* ring = nullptr;
  StackTable stacks;  // native stacks interned by the recording threads (stack_table.h); unused if init failed
  std::atomic<uint64_t> dropped{0};   // events lost (drop mode, or after the writer stopped)
  DeviceInfoSlot devices[kMaxDevices];
  std::atomic<bool> device_seen[kMaxDevices] = {};  // set by a device's first event (recorder.cpp)
};

// Turns every hook into a pass-through from now on (an internal failure, e.g. the trace can no longer
// be written). Events already in the ring are still drained.
void stop_recording() noexcept;

// Marks the calling thread as internal to the recorder: nothing it does is ever recorded.
// Used by the writer thread.
void mark_thread_internal() noexcept;

// Held by the writer thread while it walks the loaded objects (dl_iterate_phdr), and by fork() from
// its prepare handler to its end. Why: dl_iterate_phdr holds the loader's lock, and glibc (2.36)
// does not reset that lock in a fork child: a fork in the middle of our walk left the child blocked
// forever on its first unwind. Never taken on the hook's hot path.
void lock_loader_walks() noexcept;
void unlock_loader_walks() noexcept;

// Makes SIGTERM, SIGINT, SIGHUP and SIGABRT finish the trace before the program's own action takes
// effect (signal_flush.cpp). Called on each start of the recorder; installs once per signal.
void install_signal_flush() noexcept;
// In a fork child (the atfork handler): the signal slots copied are this process's own from now on.
void signal_flush_on_fork_child() noexcept;

// Info line (suppressed by GPUMEMTRACE_QUIET); log_line() in recorder.h is for warnings.
void log_info(const char* msg) noexcept;

// From now on, log_line() on the calling thread queues its line, and a program thread writes it to the
// program's stderr (the next event recorded, a flush, the trace's end). For the writer thread in a
// descriptor table of its own, whose stderr is /dev/null.
void route_log_lines_through_program_threads() noexcept;

}  // namespace gpumemtrace
