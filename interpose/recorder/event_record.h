// interpose/recorder/event_record.h — one event as it travels through the ring buffer, from a hook's
// thread to the writer thread. Plain, fixed-size, trivially copyable: the producer path copies it into
// a preallocated ring slot without allocating.
#pragma once

#include <cstddef>
#include <cstdint>

#include "interpose/python/python_stack.h"
#include "trace/format.h"

namespace gpumemtrace {

// Compile-time bounds of a ring slot. GPUMEMTRACE_STACK_DEPTH may ask for fewer native frames.
inline constexpr int kMaxNativeFrames = 64;
inline constexpr int kLabelBytes = 48;  // mark label or scope name, NUL-terminated, truncated
                                        // (a longer scope name is interned: label_table.h)
inline constexpr int kPoolNameBytes = 48;  // block events' allocator pool name, NUL-terminated, truncated

enum EventFlags : uint16_t {
  kHasStream = 1 << 0,
  kHasPool = 1 << 1,
  kHasSegment = 1 << 2,
  kHasHandle = 1 << 3,
  kHasResult = 1 << 4,
  kHasMemInfo = 1 << 5,
  kHasLabel = 1 << 6,
  kHasPoolName = 1 << 7,   // pool_name holds the allocator pool's name (block events)
  kDelayed = 1 << 8,       // recorded after the fact with its own time (EventFacts::time_ns != 0)
  kLabelInterned = 1 << 9, // kHasLabel, text too long for the slot: interned_label points to it
  kHasRange = 1 << 10,     // a scope event of a cross-thread range: `range` is its id
  kSizeOverflow = 1 << 11, // `size` is saturated: the size the arguments say passed 2^64 - 1
  kHasFraction = 1 << 12,  // allocator settings: `fraction` is set_per_process_memory_fraction's
  kHasBegan = 1 << 13,     // a span (format::Op::Gc): `began_ns` is when it began; time_ns when it ended
};

struct EventRecord {
  // The label text of a kHasLabel event, wherever it is kept.
  const char* label_text() const { return (flags & kLabelInterned) ? interned_label : label; }

  uint64_t seq = 0;        // global sequence number (assigned by the ring, from 1)
  uint64_t time_ns = 0;    // CLOCK_MONOTONIC
  uint32_t tid = 0;
  format::Op op = format::Op::Alloc;
  format::Kind kind = format::Kind::Device;
  uint16_t flags = 0;      // EventFlags
  int16_t native_depth = 0;
  int16_t python_depth = 0;
  int32_t device = -1;
  int32_t result = 0;
  uint32_t interned_stack = 0;       // != 0: the native frames are this StackTable id, not native[]
  const char* api = nullptr;         // static string: the hooked function's name
  const char* driver_api = nullptr;  // static string or null: driver call seen underneath
  uint64_t addr = 0;
  uint64_t size = 0;
  // Layout: the fields above are what every event writes (with the ring slot's turn, 80 bytes: two
  // cache lines the writer thread has to fetch per event); a stack sent inline follows them. The
  // fields below are written, and read, only under their flag.
  uintptr_t native[kMaxNativeFrames];                 // innermost first, own frames skipped
  uint64_t stream = 0;     // kHasStream
  uint64_t pool = 0;       // kHasPool
  uint64_t segment = 0;    // kHasSegment: block events' containing segment
  uint64_t handle = 0;     // kHasHandle: physical memory's allocation handle
  uint64_t free_bytes = 0; // kHasMemInfo
  uint64_t total_bytes = 0;
  uint64_t range = 0;      // kHasRange
  double fraction = 0.0;   // kHasFraction
  uint64_t began_ns = 0;   // kHasBegan: CLOCK_MONOTONIC
  union {
    char label[kLabelBytes] = {};      // the text itself, unless kLabelInterned
    const char* interned_label;        // kLabelInterned: a name from intern_label(), never freed
  };
  char pool_name[kPoolNameBytes] = {};  // kHasPoolName
  python::PythonFrameRef python[python::kMaxPythonFrames];  // innermost first
};

// How the process is ending, handed by whoever finishes the trace (exit, _exit, a signal, exec) to the
// writer, which writes it into the footer (trace/format.h, End). Plain data: built in signal handlers.
struct ProcessEnd {
  format::End how = format::End::Unknown;
  int exit_status = -1;  // Exit, QuickExit: the status the parent sees (0-255); -1 unknown
  int signal = 0;        // Signal: its number

  static ProcessEnd exited(format::End how, int status) { return ProcessEnd{how, status < 0 ? -1 : status & 0xff, 0}; }
  static ProcessEnd killed(int sig) { return ProcessEnd{format::End::Signal, -1, sig}; }
  static ProcessEnd exec() { return ProcessEnd{format::End::Exec, -1, 0}; }
};

}  // namespace gpumemtrace
