// interpose/recorder/recorder.h — the narrow API between hooks and the recorder.
//
// A hook does three things: open a HookScope, call the real function, and (when the scope says so)
// hand what the call means to record_call(), built with the named constructors of namespace `event`.
// Everything else — starting the recorder on first use, the device's facts, timestamps, stacks,
// sequence numbers, the ring buffer, the writer thread — lives behind this header.
//
//   RESULT hook(args) {
//     HookScope scope;                                  // thread-local re-entry guard
//     RESULT r = real(args);
//     if (scope.recording()) record_call(describe_cudaMalloc(Outcome::returned(r), ...), queries);
//     return r;
//   }
// (the CUDA hooks get this from their tables: interpose/hooks/call_description.h)
//
// Thread-safety: every function here may be called from any thread at any time, including before
// main() and during exit. None of them allocates, locks or uses stdio after the recorder has started
// (the first call starts it; see lifecycle.cpp). They never change errno.
#pragma once

#include <signal.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

#include "interpose/python/python_stack.h"
#include "interpose/recorder/event_record.h"
#include "trace/format.h"

namespace gpumemtrace {

// Results every capture layer shares: cudaSuccess == CUDA_SUCCESS, cudaErrorMemoryAllocation ==
// CUDA_ERROR_OUT_OF_MEMORY (checked where the CUDA headers are included: runtime.cpp, driver_calls.h).
inline constexpr int32_t kCudaSuccess = 0;
inline constexpr int32_t kCudaOutOfMemory = 2;

// EventFacts::device before record_call() resolves it: the device of `context` when set, else the
// calling thread's current device.
inline constexpr int32_t kCurrentDevice = -2;

// Plain facts about one event, built with the named constructors of namespace `event` below (not
// field by field). Strings `api` and `driver_api` must be static; `label` and `pool_name` are copied
// into the event: truncated to 47 bytes, except a scope's name (scope_begin / scope_end) and an
// allocator settings text, kept whole
// up to kMaxScopeNameBytes (label_table.h). Each field means one thing, whatever the op.
struct EventFacts {
  format::Op op = format::Op::Alloc;
  format::Kind kind = format::Kind::Device;
  const char* api = nullptr;
  uint64_t addr = 0;
  uint64_t size = 0;
  bool size_overflow = false;  // the size computed from the arguments (width * rows) passed 2^64 - 1
  int32_t device = -1;     // -1: unknown; kCurrentDevice: resolved by record_call()
  const void* context = nullptr;  // kCurrentDevice: the device is this CUDA context's (not recorded)
  int32_t result = 0;      // CUDA error code the call returned
  bool has_result = true;
  bool empty = false;      // the call records nothing (a free of null, a failed query)
  const char* driver_api = nullptr;
  bool has_stream = false;
  uint64_t stream = 0;
  bool has_pool = false;
  uint64_t pool = 0;       // memory pool handle (stream-ordered allocations, trims)
  bool has_segment = false;
  uint64_t segment = 0;    // block events: the allocator segment holding the block
  bool has_handle = false;
  uint64_t handle = 0;     // physical memory: the allocation handle (cuMemCreate / cuMemRelease / cuMemMap)
  bool has_meminfo = false;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  const char* label = nullptr;      // mark label, scope name
  const char* pool_name = nullptr;  // block events: allocator pool name
  uint64_t range = 0;               // scope events of a cross-thread range: its id; 0 = none
  bool has_fraction = false;        // allocator settings: set_per_process_memory_fraction's fraction
  double fraction = 0.0;
  uint64_t time_ns = 0;             // CLOCK_MONOTONIC of the event; 0 = now (events reported late,
                                    // e.g. drained from PyTorch's history, carry their own time)
  uint64_t began_ns = 0;            // a span reported at its end (Op::Gc): CLOCK_MONOTONIC of its start
  // Events reported late carry the stack recorded when they happened: `frame_count` >= 0 frames
  // (innermost first) replace the stack of the reporting thread, which is not captured at all.
  const python::PythonFrameRef* frames = nullptr;
  int frame_count = -1;

  // Whatever ends memory (or all of a device's) is taken before the real call: afterwards the
  // address may already belong to another thread's allocation. Everything else after it returns.
  bool taken_before_call() const noexcept {
    return op == format::Op::Free || op == format::Op::Unmap || op == format::Op::Unreserve ||
           op == format::Op::Reset;
  }

  EventFacts& with_stream(uint64_t s) noexcept {
    has_stream = true;
    stream = s;
    return *this;
  }
  EventFacts& with_pool(uint64_t p) noexcept {
    has_pool = true;
    pool = p;
    return *this;
  }
  EventFacts& with_segment(uint64_t s) noexcept {
    has_segment = true;
    segment = s;
    return *this;
  }
  EventFacts& with_handle(uint64_t h) noexcept {
    has_handle = true;
    handle = h;
    return *this;
  }
  EventFacts& on_device(int32_t d) noexcept {
    device = d;
    return *this;
  }
  // The device is `ctx`'s (context destruction), resolved by record_call().
  EventFacts& of_context(const void* ctx) noexcept {
    device = kCurrentDevice;
    context = ctx;
    return *this;
  }
};

// Named constructors, one per kind of event. Capture events (CUDA calls) start on kCurrentDevice;
// the call's description (interpose/hooks/call_description.h) adds the api and the result.
namespace event {

// A byte count computed from a call's arguments (width * rows, pitch * rows * depth): saturated at
// 2^64 - 1, and flagged, when the true product does not fit in 64 bits.
struct Bytes {
  uint64_t value = 0;
  bool overflow = false;
};
inline Bytes product(Bytes a, uint64_t b) noexcept {
  if (a.overflow) return b ? a : Bytes{};
  const unsigned __int128 p = static_cast<unsigned __int128>(a.value) * b;
  return p >> 64 ? Bytes{UINT64_MAX, true} : Bytes{static_cast<uint64_t>(p), false};
}
inline Bytes product(uint64_t a, uint64_t b) noexcept { return product(Bytes{a, false}, b); }

inline EventFacts with_op(format::Op op, format::Kind kind, uint64_t addr, uint64_t size, bool has_result) noexcept {
  EventFacts e;
  e.op = op;
  e.kind = kind;
  e.addr = addr;
  e.size = size;
  e.has_result = has_result;
  e.device = kCurrentDevice;
  return e;
}

// A call that records nothing.
inline EventFacts nothing() noexcept {
  EventFacts e;
  e.empty = true;
  return e;
}
// Memory obtained: `addr` 0 when the call failed; `size` what was asked for, or the footprint.
inline EventFacts allocation(format::Kind kind, uint64_t addr, uint64_t size) noexcept {
  return with_op(format::Op::Alloc, kind, addr, size, true);
}
inline EventFacts allocation(format::Kind kind, uint64_t addr, Bytes size) noexcept {
  EventFacts e = with_op(format::Op::Alloc, kind, addr, size.value, true);
  e.size_overflow = size.overflow;
  return e;
}
// Memory given back, before the call (no result). Freeing null is a no-op in CUDA (and a common way to
// initialise the context): no event.
inline EventFacts release(format::Kind kind, uint64_t addr, uint64_t size = 0) noexcept {
  EventFacts e = with_op(format::Op::Free, kind, addr, size, false);
  e.empty = addr == 0;
  return e;
}
// Physical memory created (cuMemCreate): addr = handle; on the device its properties name.
inline EventFacts physical_allocation(uint64_t handle, uint64_t size, int32_t device) noexcept {
  EventFacts e = allocation(format::Kind::Physical, handle, size).on_device(device);
  if (handle) e.with_handle(handle);
  return e;
}
inline EventFacts physical_release(uint64_t handle) noexcept {
  return release(format::Kind::Physical, handle).with_handle(handle);
}
// Which virtual range shows which physical allocation.
inline EventFacts map(uint64_t addr, uint64_t size, uint64_t handle) noexcept {
  return with_op(format::Op::Map, format::Kind::Physical, addr, size, true).with_handle(handle);
}
inline EventFacts unmap(uint64_t addr, uint64_t size) noexcept {
  return with_op(format::Op::Unmap, format::Kind::Physical, addr, size, false);
}
// Address space only.
inline EventFacts reserve(uint64_t addr, uint64_t size) noexcept {
  return with_op(format::Op::Reserve, format::Kind::Virtual, addr, size, true);
}
inline EventFacts unreserve(uint64_t addr, uint64_t size) noexcept {
  return with_op(format::Op::Unreserve, format::Kind::Virtual, addr, size, false);
}
// A pool trimmed down to `keep` bytes.
inline EventFacts trim(uint64_t pool, uint64_t keep) noexcept {
  return with_op(format::Op::Trim, format::Kind::Async, 0, keep, true).with_pool(pool);
}
// Every allocation of a device ends (device reset, context destruction), before the call.
inline EventFacts reset() noexcept { return with_op(format::Op::Reset, format::Kind::None, 0, 0, false); }
// A device's free and total bytes.
inline EventFacts meminfo(uint64_t free_bytes, uint64_t total_bytes) noexcept {
  EventFacts e = with_op(format::Op::MemInfo, format::Kind::None, 0, 0, false);
  e.has_meminfo = true;
  e.free_bytes = free_bytes;
  e.total_bytes = total_bytes;
  return e;
}
// A caching allocator's block (BlockAlloc / BlockFree / BlockOom) inside `segment` (0: not said).
inline EventFacts block(format::Op op, const char* api, uint64_t addr, uint64_t size, uint64_t segment,
                        int32_t device, const char* pool_name) noexcept {
  EventFacts e = with_op(op, format::Kind::Block, addr, size, false).on_device(device);
  e.api = api;
  if (segment) e.with_segment(segment);
  e.pool_name = pool_name;
  return e;
}
// A program's marker, or a scope's begin / end (op Mark, ScopeBegin, ScopeEnd): a text, no memory.
inline EventFacts mark(format::Op op, const char* api, const char* label) noexcept {
  EventFacts e = with_op(op, format::Kind::None, 0, 0, false).on_device(-1);
  e.api = api;
  e.label = label ? label : "";
  return e;
}

// PyTorch's caching-allocator settings (format::Op::AllocatorSettings: a record of its own in the
// trace, docs/trace-format.md): `source` one of format::kSettingsSource* (static), `conf` the
// settings text (copied like a scope's name: kept whole up to kMaxScopeNameBytes; null: none), on
// `device` (-1: every device). No memory, no stack.
inline EventFacts allocator_settings(const char* source, const char* conf, int32_t device) noexcept {
  EventFacts e = with_op(format::Op::AllocatorSettings, format::Kind::None, 0, 0, false).on_device(device);
  e.api = source;
  e.label = conf;
  return e;
}

// A garbage collection that freed objects (format::Op::Gc: a record of its own in the trace,
// docs/trace-format.md), reported when it ended (now, on the collecting thread): it began at
// `began_ns` (CLOCK_MONOTONIC). No memory, no stack.
inline EventFacts gc_window(uint64_t began_ns) noexcept {
  EventFacts e = with_op(format::Op::Gc, format::Kind::None, 0, 0, false).on_device(-1);
  e.api = format::kTypeGc;
  e.began_ns = began_ns;
  return e;
}

// The program paused or resumed stacks (format::Op::Pause / Resume: a "pause" or "resume" record of
// its own, interpose/recorder/pause.h). No memory, no stack.
inline EventFacts pause_marker(bool pause) noexcept {
  EventFacts e = with_op(pause ? format::Op::Pause : format::Op::Resume, format::Kind::None, 0, 0, false).on_device(-1);
  e.api = pause ? format::kTypePause : format::kTypeResume;
  return e;
}

}  // namespace event

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
// null: none), from `api` (static), with `range` (a cross-thread range's id; 0: none) and `result` (a
// scope_end's: nonzero when the work inside the scope failed). Opens its own HookScope: the entry
// point for the custom API and NVTX callbacks.
void record_labelled(format::Op op, const char* label, const char* api, uint64_t range = 0,
                     int32_t result = 0) noexcept;

// How one capture layer asks CUDA about devices: the runtime hooks through the runtime, the driver
// hooks and the CUPTI callbacks through the driver. Any member may be null (nothing known).
// Precondition of every query: it runs inside the caller's HookScope (never recorded itself).
struct DeviceQueries {
  const char* meminfo_api;                          // the "api" of the meminfo events it records
  int32_t (*current_device)(int32_t call_result);   // after a call that returned this; -1: unknown
  int32_t (*device_of_context)(const void* ctx);    // -1: unknown
  bool (*memory)(uint64_t* free_bytes, uint64_t* total_bytes);  // the current device's
  // The device's name ("" when unknown) and total bytes (0 when unknown).
  void (*describe_device)(int32_t device, char* name, size_t name_size, uint64_t* total_bytes);
};

// Resolves kCurrentDevice: the device of the event's context, else of the calling thread.
inline void resolve_device(EventFacts* e, const DeviceQueries& q) noexcept {
  if (e->device != kCurrentDevice) return;
  const int32_t outcome = e->has_result ? e->result : kCudaSuccess;
  if (e->context)
    e->device = q.device_of_context ? q.device_of_context(e->context) : -1;
  else
    e->device = q.current_device ? q.current_device(outcome) : -1;
}

// THE recording entry point of the runtime hooks, the driver hooks and the CUPTI callbacks, below all
// three: resolves the device, records the event, then enriches it the same way whatever the layer:
// after the first successful event on a device, its "device" line and a meminfo event; after an
// out-of-memory failure, a meminfo event (how much was really free). Nothing for an empty event, and
// nothing (no device query either) when the recorder cannot be made active. Keeps errno. Call only
// when HookScope::recording() is true. Resolves e's device in place (taking the facts by reference
// spares the hook a copy of them).
void record_call(EventFacts& e, const DeviceQueries& q) noexcept;

// Finishes the trace now (drained, footer, closed), waiting at most GPUMEMTRACE_EXIT_TIMEOUT_MS, for
// a process about to end or be replaced without running exit handlers (_exit, a fatal signal, exec).
// `when` ("at _exit") completes the warning printed when the writer did not finish in time; `end`
// goes into the footer. When another thread, or the code this call interrupted (a signal handler's
// case), is already finishing the trace, waits for that (at most as long) so that the footer is
// written before the caller ends the process; the footer then says how that first end began.
// Async-signal-safe. Does nothing when the recorder never started, or in a vfork child (it shares
// our memory, but the trace is its parent's).
void finish_trace(const char* when, const ProcessEnd& end) noexcept;

// The exec hooks call these around the real exec: the trace is finished (drained, footer, closed)
// before the program image is replaced, so nothing recorded so far is lost; the new image writes its
// own trace. When exec fails, the next event starts a new trace file.
void recorder_before_exec() noexcept;
void recorder_exec_failed() noexcept;

// Makes everything recorded so far readable in the trace file now (drained, written, flushed), waiting
// at most `timeout_ms`. True when done in time. For a process about to die (SIGTERM handlers).
// `durable`: and synced to the disk (a failed allocation's record, recorder.cpp).
bool flush_now(int timeout_ms, bool durable = false) noexcept;
// Pauses (`pause` true) or resumes stacks (pause.h; gpumemtrace_pause() / gpumemtrace_resume()) and
// records a "pause" or "resume" record, once the recorder runs (a pause made before it starts is
// recorded when it starts). 1: the state changed; 0: it already was so; -1: the recorder is off
// (disabled, stopped): nothing is recorded either way. Any thread; not for a hook's path.
int set_paused(bool pause) noexcept;

// Seals what was recorded so far into a new, self-contained trace at `path` (empty: beside the trace,
// its name with "-dump"), which ends with a footer "end": "dump"; the trace itself goes on
// (Writer::dump). Waits at most `timeout_ms`. 0: done, `*message` the path written; 1: failed,
// `*message` why; 2: nothing to dump yet (the recorder starts at the first CUDA memory call); -1:
// the recorder is off. Any thread; not for a hook's path, not async-signal-safe (it allocates).
int dump_trace(const char* path, int timeout_ms, std::string* message) noexcept;

// The absolute path of this process's trace; "" when it writes none (gpumemtrace_trace_path()).
const char* trace_path() noexcept;
// What the writer drained of the scope that ended last, if it is `name` (gpumemtrace_scope_live_bytes()).
int64_t scope_live_bytes(const char* name) noexcept;

// Before a library is unloaded (dlclose): the writer serializes every event recorded so far, naming
// their frames while the library is still mapped (at most kUnloadDrainMs). Nothing when the recorder
// is not active, on the writer's own thread, or in a vfork child.
inline constexpr int kUnloadDrainMs = 1000;
void drain_before_unload() noexcept;

// True once the recorder has been disabled (configuration, unwritable output, internal failure): hooks
// are then pure pass-throughs.
bool recorder_disabled() noexcept;

// True when release events (free, block_free, unmap, unreserve) carry stacks (GPUMEMTRACE_FREE_STACKS=1);
// false by default. Does not start the recorder (before it starts, the setting is read from the
// environment as start-up will read it). For the PyTorch hook, which then need not ask PyTorch to
// gather a stack at every free.
bool releases_keep_stacks() noexcept;

// The sigaction hook's answer for `sig` (interpose/hooks/signals.cpp). For a signal whose kernel action
// the recorder made its own (SIGTERM, SIGINT, SIGHUP, SIGABRT once it started: signal_flush.cpp),
// `old` gets the program's action and `act` becomes it; true, with the result in `*rc` (errno set
// when -1). False: not one of those; the caller asks the kernel through libc_sigaction.
bool program_sigaction(int sig, const struct sigaction* act, struct sigaction* old, int* rc) noexcept;
// glibc's sigaction itself. Uninstrumented, as recorder_owns_signal (util/runs_before_sanitizers.h).
int libc_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept;
// True when `sig` is one whose kernel action the recorder made its own (program_sigaction answers).
bool recorder_owns_signal(int sig) noexcept;

// Logs one line "gpumemtrace: <msg>" on stderr with write(2) (async-signal-safe, keeps errno). On the
// writer thread, the line is written by the next program thread that records, flushes or finishes
// the trace (the writer's own stderr is /dev/null: writer/private_fds.h); of more than 16 such lines
// waiting at once, the rest are dropped and counted in one line (line_queue.h).
void log_line(const char* msg) noexcept;

}  // namespace gpumemtrace
