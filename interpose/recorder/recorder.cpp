// interpose/recorder/recorder.cpp — the event path: from a hook's facts to a ring slot.
//
// One hook call, top to bottom (recorder.h says what a hook does before and after):
//   HookScope        the thread-local re-entry guard: only a thread's outermost scope records
//   record_call()    asks ensure_active() (lifecycle.h) ONCE; with the state it returns, resolves
//                    the call's device, then push_event() for the call's event and, after the first
//                    success on a device, its "device" line and a meminfo event (note_device); after an
//                    out-of-memory failure, a meminfo event, and the file written through
//   push_event()     clock_gettime (vDSO), the native stack (unwind.cpp: frame pointers checked
//                    against DWARF, else libunwind), the Python frame reader, the stack's id
//                    (stack_table.h), one CAS on the ring, the slot filled in place (fill_record)
// record() and record_labelled() (the custom API, NVTX, the PyTorch bridge) take the same path for
// one event. Everything below an entry point assumes an active recorder: it was asked once, by that
// entry point. No malloc, no lock, no stdio on this path; errno is kept by the entry points.
#include "interpose/recorder/recorder.h"

#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "interpose/python/python_stack.h"
#include "interpose/recorder/capture_backend.h"
#include "interpose/recorder/label_table.h"
#include "interpose/recorder/lifecycle.h"
#include "interpose/recorder/pause.h"
#include "interpose/recorder/recorder_state.h"
#include "interpose/recorder/unwind.h"
#include "interpose/writer/writer.h"
#include "util/monotonic_clock.h"

namespace gpumemtrace {
namespace {

// Hook-path thread state: trivially destructible, initial-exec (no allocation on first access).
// depth: HookScope nesting; internal: the writer thread; tid: cached gettid() (reset in a fork child).
__thread int t_depth __attribute__((tls_model("initial-exec"))) = 0;
__thread bool t_internal __attribute__((tls_model("initial-exec"))) = false;
__thread uint32_t t_tid __attribute__((tls_model("initial-exec"))) = 0;
__thread const char* t_driver_api __attribute__((tls_model("initial-exec"))) = nullptr;
// The StackTable id of this thread's last interned stack (0: none): a repeated stack costs a compare.
__thread uint32_t t_last_stack __attribute__((tls_model("initial-exec"))) = 0;

uint32_t thread_id() {
  if (t_tid == 0) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_tid;
}

// ---- one event: facts -> ring slot ----

std::atomic<bool> g_warned_label_table{false};

// The interned copy of a scope name too long for a slot's inline label (label_table.h); null when it
// fits, or when the table is full: then it is truncated like any label, and that is said once.
const char* long_scope_name(const char* name) {
  const size_t length = strnlen(name, kMaxScopeNameBytes + 1);
  if (length < static_cast<size_t>(kLabelBytes)) return nullptr;
  const size_t kept = length > kMaxScopeNameBytes ? utf8_cut(name, kMaxScopeNameBytes) : length;
  const char* interned = intern_label(name, kept);
  if (!interned && !g_warned_label_table.exchange(true, std::memory_order_relaxed))
    log_line("too many distinct long scope names; further ones are truncated to 47 bytes");
  return interned;
}

// Copies `text` into `out` (`size` bytes), truncated and NUL-terminated. Byte by byte: no libc call
// on the hot path.
void copy_truncated(char* out, const char* text, size_t size) {
  size_t i = 0;
  for (; text[i] && i < size - 1; ++i) out[i] = text[i];
  out[i] = '\0';
}

// The StackTable id of a native stack (0: it goes inline), for an event without Python frames (those
// are interned by the writer together with the native ones).
uint32_t intern_native_stack(StackTable& table, const uintptr_t* native, int native_depth) {
  const uint32_t last = t_last_stack;
  if (last && table.holds(last, native, native_depth)) return last;
  const uint32_t id = table.intern(native, native_depth);
  if (id) t_last_stack = id;
  return id;
}

// `interned`: the event's label, already interned (long_scope_name), or null. `stack`: the native
// frames' StackTable id, or 0 to copy them into the record.
void fill_record(EventRecord& r, uint64_t seq, const EventFacts& f, uint64_t t, const char* interned,
                 uint32_t stack, const uintptr_t* native, int native_depth, const python::PythonFrameRef* py,
                 int python_depth) {
  r.seq = seq;
  r.time_ns = t;
  r.tid = thread_id();
  r.op = f.op;
  r.kind = f.kind;
  r.device = f.device;
  r.result = f.result;
  r.api = f.api;
  r.driver_api = f.driver_api ? f.driver_api : t_driver_api;
  r.addr = f.addr;
  r.size = f.size;
  // Optional fields only under their flag: the slot's lines that hold them stay untouched otherwise.
  uint16_t flags = 0;
  auto optional = [&](bool present, EventFlags flag, uint64_t* field, uint64_t value) {
    if (!present) return;
    flags |= flag;
    *field = value;
  };
  optional(f.has_stream, kHasStream, &r.stream, f.stream);
  optional(f.has_pool, kHasPool, &r.pool, f.pool);
  optional(f.has_segment, kHasSegment, &r.segment, f.segment);
  optional(f.has_handle, kHasHandle, &r.handle, f.handle);
  optional(f.has_meminfo, kHasMemInfo, &r.free_bytes, f.free_bytes);
  optional(f.has_meminfo, kHasMemInfo, &r.total_bytes, f.total_bytes);
  optional(f.range != 0, kHasRange, &r.range, f.range);
  optional(f.began_ns != 0, kHasBegan, &r.began_ns, f.began_ns);
  if (f.has_fraction) {
    flags |= kHasFraction;
    r.fraction = f.fraction;
  }
  if (f.has_result) flags |= kHasResult;
  if (f.size_overflow) flags |= kSizeOverflow;
  if (interned) {
    flags |= kHasLabel | kLabelInterned;
    r.interned_label = interned;
  } else if (f.label) {
    flags |= kHasLabel;
    copy_truncated(r.label, f.label, kLabelBytes);
  }
  if (f.pool_name) {
    flags |= kHasPoolName;
    copy_truncated(r.pool_name, f.pool_name, kPoolNameBytes);
  }
  if (f.time_ns && f.op != format::Op::Sync) flags |= kDelayed;  // sync's t is a promise, not a moment
  r.flags = flags;
  r.native_depth = static_cast<int16_t>(native_depth);
  r.interned_stack = stack;
  // A release has no stack, and most events no Python frames: no copy (nor memcpy call) for none.
  if (!stack && native_depth) memcpy(r.native, native, sizeof(uintptr_t) * native_depth);
  r.python_depth = static_cast<int16_t>(python_depth);
  if (python_depth) memcpy(r.python, py, sizeof(python::PythonFrameRef) * python_depth);
}

// One event into the ring: its time, its stacks, its slot. Returns false when it was dropped (ring
// full in drop mode, or the writer gone: counted). Precondition: `rec` is what ensure_active()
// returned in this hook call. Changes errno (the entry points keep it).
bool push_event(RecorderShared& rec, const EventFacts& facts) {
  const uint64_t t = facts.time_ns ? facts.time_ns : util::monotonic_ns();
  const Config& cfg = rec.config;
  // Releases get no stack unless asked for (like heaptrack's frees): no analysis uses where memory
  // was given back, and skipping the unwind halves the cost of an allocate/free pair. A sync marker
  // is bookkeeping of the PyTorch hook's drain thread: its stack says nothing; nor does a gc record's
  // (the pytest plugin's callback, wherever the collection happened to start).
  const bool releases = facts.op == format::Op::Free || facts.op == format::Op::BlockFree ||
                        facts.op == format::Op::Unmap || facts.op == format::Op::Unreserve;
  // Pause and resume records are bookkeeping too. While the program has paused stacks (pause.h),
  // every event goes without.
  const bool stackless = facts.op == format::Op::Sync || facts.op == format::Op::AllocatorSettings ||
                         facts.op == format::Op::Gc || facts.op == format::Op::Pause ||
                         facts.op == format::Op::Resume || (releases && !cfg.free_stacks) ||
                         pause::stackless(facts.time_ns);
  const int depth = stackless ? 0 : cfg.stack_depth;
  uintptr_t native[kMaxNativeFrames];
  python::PythonFrameRef captured[python::kMaxPythonFrames];
  int native_depth = 0, python_depth = 0;
  const python::PythonFrameRef* py = captured;
  if (facts.frame_count >= 0) {  // reported late, with its own stack: the reporter's is not wanted
    py = facts.frames;
    python_depth = depth > 0 ? std::min(facts.frame_count, python::kMaxPythonFrames) : 0;
  } else if (depth > 0) {
    native_depth = capture_native_stack(native, depth);
    if (cfg.python_frames) python_depth = python::capture_python_stack(captured, python::kMaxPythonFrames);
  }

  // Interned before a ring slot is claimed: the writer waits on a claimed slot until it is filled.
  // A scope's name and an allocator settings text are kept whole (label_table.h); marks are cut.
  const bool whole = facts.op == format::Op::ScopeBegin || facts.op == format::Op::ScopeEnd ||
                     facts.op == format::Op::AllocatorSettings;
  const char* interned = whole && facts.label ? long_scope_name(facts.label) : nullptr;
  const uint32_t stack = native_depth > 0 && python_depth == 0 && cfg.intern_stacks
                             ? intern_native_stack(rec.stacks, native, native_depth) : 0;

  EventRing& ring = *rec.ring;
  auto fill = [&](EventRecord& r, uint64_t seq) {
    fill_record(r, seq, facts, t, interned, stack, native, native_depth, py, python_depth);
  };
  bool pushed = ring.try_push(fill);
  if (!pushed && cfg.on_full == OnFull::Wait) {
    // Wait for room: a lost free would become a false leak. Bounded by the writer being alive; a
    // writer that stopped (exit) or died turns waiting into counted drops.
    for (unsigned spins = 0; !pushed; ++spins) {
      Writer* w = current_writer();
      if (!w || !w->alive()) break;
      // A writer that no longer exists (its process is gone: a CLONE_VM child outliving its parent)
      // drains nothing: checked now and then, never waited on.
      if (spins % 1024 == 1023 && !w->thread_exists()) break;
      if (spins < 64) {
        sched_yield();
      } else {
        timespec pause{0, 50000};  // 50 us
        nanosleep(&pause, nullptr);
      }
      pushed = ring.try_push(fill);
    }
  }
  if (!pushed) rec.dropped.fetch_add(1, std::memory_order_relaxed);
  // The noted driver call served this event only (not, say, the meminfo recorded after an OOM).
  t_driver_api = nullptr;
  if (g_writer_lines.waiting()) print_queued_lines();
  return pushed;
}

// ---- a CUDA call's enrichment: the device's facts, once; free memory after an OOM ----

// True for exactly one call per device and process (a fork child starts over: lifecycle.cpp).
bool first_event_on_device(RecorderShared& rec, int32_t device) {
  if (device < 0 || device >= kMaxDevices) return false;
  // A plain load first: the exchange (a locked instruction) runs once per device, not per event.
  std::atomic<bool>& seen = rec.device_seen[device];
  return !seen.load(std::memory_order_relaxed) && !seen.exchange(true, std::memory_order_relaxed);
}

// Publishes a device's facts (name, total, free) for the writer's "device" line: the first publisher
// of a device wins. Precondition: 0 <= device < kMaxDevices.
void publish_device_info(RecorderShared& rec, int32_t device, const char* name, uint64_t total_bytes,
                         uint64_t free_bytes) {
  DeviceInfoSlot& slot = rec.devices[device];
  int expected = 0;
  if (!slot.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  slot.device = device;
  size_t i = 0;
  for (; name && name[i] && i < sizeof(slot.name) - 1; ++i) slot.name[i] = name[i];
  slot.name[i] = '\0';
  slot.total_bytes = total_bytes;
  slot.free_bytes = free_bytes;
  slot.state.store(2, std::memory_order_release);
}

// A "meminfo" event: the device's free and total bytes, as `api` reported them.
void push_meminfo(RecorderShared& rec, int32_t device, const char* api, uint64_t free_bytes, uint64_t total_bytes) {
  EventFacts m = event::meminfo(free_bytes, total_bytes).on_device(device);
  m.api = api;
  (void)push_event(rec, m);
}

// First sighting of a device: its "device" line (name, total, free) and a meminfo event ("at start").
// The device facts are published before the meminfo event is recorded, so the writer has them first.
void note_device(RecorderShared& rec, int32_t device, const DeviceQueries& q) {
  if (!first_event_on_device(rec, device)) return;
  uint64_t free_bytes = 0, total_bytes = 0;
  const bool have_memory = q.memory && q.memory(&free_bytes, &total_bytes);
  char name[96] = {};
  uint64_t device_total = 0;
  if (q.describe_device) q.describe_device(device, name, sizeof(name), &device_total);
  if (!device_total) device_total = total_bytes;
  if (!have_memory && !device_total) return;  // nothing to say about it
  publish_device_info(rec, device, name, device_total, free_bytes);
  if (have_memory) push_meminfo(rec, device, q.meminfo_api, free_bytes, total_bytes);
}

}  // namespace

void forget_thread_id() noexcept { t_tid = 0; }

bool thread_is_internal() noexcept { return t_internal; }

// ---- the entry points ----

HookScope::HookScope(HookLayer layer) noexcept {
  // Under the CUPTI backend a runtime hook must not open a scope: the CUPTI callback fired inside
  // the real call would find itself nested and record nothing.
  counted_ = layer != HookLayer::Runtime || backend::interpose_recording();
  if (!counted_) {
    recording_ = false;
    return;
  }
  recording_ = t_depth++ == 0 && !t_internal;
  if (recording_) {
    t_driver_api = nullptr;
    const int st = g_state.load(std::memory_order_relaxed);
    recording_ = st != kDisabled && st != kStopped;
  }
}

HookScope::~HookScope() noexcept {
  if (counted_) --t_depth;
}

void HookScope::note_driver_api(const char* driver_api) noexcept {
  if (t_depth > 1) t_driver_api = driver_api;
}

void mark_thread_internal() noexcept { t_internal = true; }

bool record(const EventFacts& facts) noexcept {
  KeepErrno keep;
  RecorderShared* const rec = ensure_active();  // the one check of this call
  if (!rec) return false;
  const bool pushed = push_event(*rec, facts);
  // An allocator's OOM reported through the custom API or PyTorch's history: in the file now (a
  // failed CUDA call is written through by record_call, after its meminfo).
  if (facts.op == format::Op::BlockOom) write_through();
  return pushed;
}

void record_labelled(format::Op op, const char* label, const char* api, uint64_t range, int32_t result) noexcept {
  HookScope scope;
  if (!scope.recording()) return;
  EventFacts facts = event::mark(op, api, label);
  facts.range = range;
  facts.result = result;
  facts.has_result = result != 0;
  record(facts);
}

void record_call(EventFacts& e, const DeviceQueries& q) noexcept {
  if (e.empty) return;
  KeepErrno keep;
  // The one check of this call: a recorder that is not active adds no query either.
  RecorderShared* const rec = ensure_active();
  if (!rec) return;
  resolve_device(&e, q);
  (void)push_event(*rec, e);
  if (e.op == format::Op::MemInfo) return;  // the program's own query: nothing to add
  const int32_t outcome = e.has_result ? e.result : kCudaSuccess;
  if (outcome == kCudaSuccess) return note_device(*rec, e.device, q);
  uint64_t free_bytes = 0, total_bytes = 0;
  if (outcome == kCudaOutOfMemory && q.memory && q.memory(&free_bytes, &total_bytes))
    push_meminfo(*rec, e.device, q.meminfo_api, free_bytes, total_bytes);  // how much was really free
  // A failed allocation is often the program's last act (CUDA_CHECK -> abort(), or a crash in its
  // error path): it and everything before it are in the file before the call returns.
  if (e.op == format::Op::Alloc || e.op == format::Op::Reserve || e.op == format::Op::Map) write_through();
}

}  // namespace gpumemtrace
