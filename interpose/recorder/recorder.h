// interpose/recorder/recorder.h — the narrow API between hooks and the recorder.
//
// A hook does three things: open a HookScope, call the real function, and (when the scope says so)
// hand the plain facts of what happened to record(). Everything else — starting the recorder on first
// use, timestamps, stacks, sequence numbers, the ring buffer, the writer thread — lives behind this
// header.
//
//   RESULT hook(args) {
//     HookScope scope;                                  // thread-local re-entry guard
//     RESULT r = real(args);
//     if (scope.recording()) record({Op::Alloc, Kind::Device, "cudaMalloc", ...});
//     return r;
//   }
//
// Thread-safety: every function here may be called from any thread at any time, including before
// main() and during exit. None of them allocates, locks or uses stdio after the recorder has started
// (the first call starts it; see recorder.cpp). They never change errno.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "interpose/python/python_stack.h"
#include "trace/format.h"

namespace gpumemtrace {

// Plain facts about one memory event, filled by a hook. Strings `api` and `driver_api` must be static;
// `label` is copied into the event: truncated to 47 bytes, except a scope's name (scope_begin /
// scope_end), kept whole up to kMaxScopeNameBytes (label_table.h).
struct EventFacts {
  format::Op op = format::Op::Alloc;
  format::Kind kind = format::Kind::Device;
  const char* api = nullptr;
  uint64_t addr = 0;
  uint64_t size = 0;
  int32_t device = -1;     // -1: unknown
  int32_t result = 0;      // CUDA error code the call returned
  bool has_result = true;
  const char* driver_api = nullptr;
  bool has_stream = false;
  uint64_t stream = 0;
  bool has_pool = false;
  uint64_t pool = 0;
  bool has_segment = false;
  uint64_t segment = 0;
  bool has_handle = false;
  uint64_t handle = 0;
  bool has_meminfo = false;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  const char* label = nullptr;      // mark label, scope name
  const char* pool_name = nullptr;  // block events: allocator pool name
  uint64_t range = 0;               // scope events of a cross-thread range: its id; 0 = none
  uint64_t time_ns = 0;             // CLOCK_MONOTONIC of the event; 0 = now (events reported late,
                                    // e.g. drained from PyTorch's history, carry their own time)
  // Events reported late carry the stack recorded when they happened: `frame_count` >= 0 frames
  // (innermost first) replace the stack of the reporting thread, which is not captured at all.
  const python::PythonFrameRef* frames = nullptr;
  int frame_count = -1;

  EventFacts& with_stream(uint64_t s) {
    has_stream = true;
    stream = s;
    return *this;
  }
  EventFacts& with_pool(uint64_t p) {
    has_pool = true;
    pool = p;
    return *this;
  }
  EventFacts& with_segment(uint64_t s) {
    has_segment = true;
    segment = s;
    return *this;
  }
  EventFacts& with_handle(uint64_t h) {
    has_handle = true;
    handle = h;
    return *this;
  }
};

// Keeps errno as the program's own call left it across the calls a hook adds (device queries,
// recording). record() keeps errno by itself; hooks that query CUDA use this around the queries.
class KeepErrno {
 public:
  KeepErrno() noexcept : saved_(errno) {}
  ~KeepErrno() { errno = saved_; }
  KeepErrno(const KeepErrno&) = delete;
  KeepErrno& operator=(const KeepErrno&) = delete;

 private:
  int saved_;
};

// Thread-local re-entry guard, opened first in every entry point (hooks, CUPTI callbacks, the custom
// allocator API). Only the outermost scope of a thread records: a CUDA runtime call that reaches the
// driver through our driver hooks yields ONE event (the runtime's), and calls the recorder itself makes
// (device queries, the writer thread) are never recorded.
//
// Invariant: scopes nest strictly (RAII); the thread-local state is trivially destructible, so a hook
// running during thread exit stays safe.
enum class HookLayer {
  Runtime,  // CUDA runtime hooks: stand aside entirely while CUPTI is the recording backend
  Other,    // driver hooks, CUPTI callbacks, the custom allocator API
};

class HookScope {
 public:
  explicit HookScope(HookLayer layer = HookLayer::Other) noexcept;
  ~HookScope() noexcept;
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

  // True when this is the outermost scope on this thread and the recorder is (or may become) active.
  bool recording() const noexcept { return recording_; }

  // Nested driver hooks call this: the outermost event of this thread reports `driver_api` as the
  // driver function that served it (EventFacts::driver_api is filled in by record() when null).
  static void note_driver_api(const char* driver_api) noexcept;

 private:
  bool recording_;
  bool counted_;  // false: a runtime hook under the CUPTI backend, invisible to nesting
};

// Records one event: timestamp, thread, native (and Python) stack, global sequence number. Starts the
// recorder on first use (reads the configuration, opens the output, starts the writer thread). Returns
// false when the event was not recorded (recorder disabled, ring full in drop mode — counted, or the
// recorder shut down). Call only when HookScope::recording() is true.
bool record(const EventFacts& facts) noexcept;

// Records a mark or scope event (kind none, no memory) carrying `label` (a mark's text, a scope's name;
// null: none), from `api` (static), with `range` (a cross-thread range's id; 0: none). Opens its own
// HookScope: the entry point for the custom API and NVTX callbacks.
void record_labelled(format::Op op, const char* label, const char* api, uint64_t range = 0) noexcept;

// True for exactly one call per device and process (a fork child starts over): the hook that gets
// true records the device's facts (record_device_info) and a start-of-run meminfo event.
bool first_event_on_device(int32_t device) noexcept;

// Records a "meminfo" event: the device's free and total bytes, as `api` reported them.
void record_meminfo(int32_t device, const char* api, uint64_t free_bytes, uint64_t total_bytes) noexcept;

// Device facts for the "device" line (name, total, free), e.g. from cudaGetDeviceProperties.
void record_device_info(int32_t device, const char* name, uint64_t total_bytes, uint64_t free_bytes) noexcept;

// Finishes the trace now (drained, footer, closed), waiting at most GPUMEMTRACE_EXIT_TIMEOUT_MS, for
// a process about to end or be replaced without running exit handlers (_exit, a fatal signal, exec).
// `when` ("at _exit") completes the warning printed when the writer did not finish in time.
// Async-signal-safe. Does nothing when the recorder is not active, or in a vfork child (it shares our
// memory, but the trace is its parent's).
void finish_trace(const char* when) noexcept;

// The exec hooks call these around the real exec: the trace is finished (drained, footer, closed)
// before the program image is replaced, so nothing recorded so far is lost; the new image writes its
// own trace. When exec fails, the next event starts a new trace file.
void recorder_before_exec() noexcept;
void recorder_exec_failed() noexcept;

// Makes everything recorded so far readable in the trace file now (drained, written, flushed), waiting
// at most `timeout_ms`. True when done in time. For a process about to die (SIGTERM handlers).
bool flush_now(int timeout_ms) noexcept;

// True once the recorder has been disabled (configuration, unwritable output, internal failure): hooks
// are then pure pass-throughs.
bool recorder_disabled() noexcept;

// Logs one line "gpumemtrace: <msg>" on stderr with write(2) (async-signal-safe, keeps errno).
void log_line(const char* msg) noexcept;

}  // namespace gpumemtrace
