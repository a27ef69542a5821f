// interpose/hooks/torch_bridge.cpp — the C entry points through which the PyTorch startup hook
// (tools/python/gpumemtrace_torch) puts PyTorch's caching-allocator events into the same trace.
//
// The hook drains torch.cuda.memory's allocation history (docs/pytorch.md explains why that route)
// and hands each drain's entries over in one call, as an array of GpumemtraceTorchEntry filled through
// ctypes (tools/python/gpumemtrace_torch/bridge.py mirrors the two structures below). An entry names
// PyTorch's action as PyTorch spells it ("alloc", "segment_map", ...); trace/torch_actions.h says what
// each becomes, and actions the live trace does not record (free_completed, snapshot, unknown ones)
// are skipped here. Each event gets the next sequence number like any other; its stack is exactly
// the Python stack PyTorch recorded for the allocation (EventFacts::frames): the draining thread's
// own stack is never captured, and an entry PyTorch recorded no frames for (an autograd-thread
// allocation) has no stack. These frames are PyTorch's record, not a read of the interpreter, so
// GPUMEMTRACE_PYTHON=0 does not remove them (docs/pytorch.md).
// Such events carry "delayed":true in the trace; after each drain the hook calls
// gpumemtrace_record_sync() so that readers can merge them into the timeline by time.
// The allocator's settings (in force when the history starts, and the program's later changes) come
// through gpumemtrace_record_torch_settings(), live, as "allocator_settings" records.
//
// Input is validated, never trusted: null pointers, a layout that is not this build's (the sizes
// the caller passes), counts out of range are refused; the arrays and every string are read only
// where the kernel confirmed the pages readable (program_strings.h: a name that runs into an unmapped
// page is cut there, an array that does is refused), never dereferenced blindly. No allocation, lock or stdio here beyond the recorder's own
// rules.
// Thread-safety: any thread, any time; the recorder's rules apply (record() never blocks except in
// GPUMEMTRACE_ON_FULL=wait mode). Never throws.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <cmath>

#include "interpose/recorder/program_strings.h"
#include "interpose/python/python_stack.h"
#include "interpose/recorder/event_record.h"
#include "interpose/recorder/label_table.h"
#include "interpose/recorder/recorder.h"
#include "trace/alloc_conf.h"
#include "trace/torch_actions.h"

namespace f = gpumemtrace::format;
namespace ta = gpumemtrace::torch_actions;
using gpumemtrace::EventFacts;
using gpumemtrace::HookScope;

extern "C" {

// One frame of PyTorch's recorded stack. Strings are NUL-terminated UTF-8 (read at most
// kMaxNameBytes); a null one leaves the frame out.
struct GpumemtraceTorchFrame {
  const char* file;
  const char* function;
  int64_t line;
};

// One allocation-history entry. `frames` points to `frame_count` frames, innermost first (null or 0:
// no stack); more than python::kMaxPythonFrames are cut (the innermost kept).
struct GpumemtraceTorchEntry {
  const char* action;        // PyTorch's action name; unknown or null: skipped
  uint64_t addr;             // oom: 0 (the device's free bytes go in free_bytes)
  uint64_t size;
  uint64_t stream;           // 0 = none
  uint64_t segment;          // containing segment of a block (0 = none)
  uint64_t time_ns;          // CLOCK_MONOTONIC of the event, converted by the caller; 0 = now
  uint64_t free_bytes;       // oom: the device's free bytes (0 = unknown)
  const char* pool;          // allocator pool name or null
  const GpumemtraceTorchFrame* frames;
  uint32_t frame_count;
  int32_t device;            // -1 = unknown
};

}  // extern "C"

namespace {

// Bounds on what one call may ask for: a drain hands over at most a ring's worth in slices, so a
// count past this is a caller bug, refused whole rather than read past the end of its array.
constexpr uint64_t kMaxEntriesPerCall = 1u << 20;
constexpr size_t kMaxNameBytes = 4096;       // the code table keeps no more of a name
constexpr int32_t kMaxDevice = 1 << 16;

// The action of a name, looked up among the rows the live trace records; nullptr otherwise.
const ta::ActionInfo* live_action(const char* name, gpumemtrace::PageCache* pages) {
  if (!name) return nullptr;
  const ta::ActionInfo* a = ta::info(ta::parse(std::string_view(name, gpumemtrace::program_strnlen(name, 64, pages))));
  return a && (a->where & ta::kLive) && a->op ? a : nullptr;
}

int collect_frames(const GpumemtraceTorchEntry& e, gpumemtrace::python::PythonFrameRef* refs,
                   gpumemtrace::PageCache* pages) {
  if (!e.frames || e.frame_count == 0) return 0;
  uint32_t count = e.frame_count < gpumemtrace::python::kMaxPythonFrames
                       ? e.frame_count
                       : static_cast<uint32_t>(gpumemtrace::python::kMaxPythonFrames);
  // Only the frames on readable pages (the rest of a garbage array is left out).
  count = static_cast<uint32_t>(std::min<size_t>(
      count, gpumemtrace::program_readable_bytes(e.frames, count * sizeof(GpumemtraceTorchFrame), pages) /
                 sizeof(GpumemtraceTorchFrame)));
  int n = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const GpumemtraceTorchFrame& fr = e.frames[i];
    if (!fr.file || !fr.function) continue;
    if (gpumemtrace::python::make_external_frame(fr.file, gpumemtrace::program_strnlen(fr.file, kMaxNameBytes, pages),
                                                 fr.function,
                                                 gpumemtrace::program_strnlen(fr.function, kMaxNameBytes, pages),
                                                 fr.line, &refs[n]))
      ++n;
  }
  return n;
}

bool record_entry(const GpumemtraceTorchEntry& e, gpumemtrace::PageCache* pages) {
  const ta::ActionInfo* action = live_action(e.action, pages);
  if (!action || e.device < -1 || e.device >= kMaxDevice) return false;
  gpumemtrace::python::PythonFrameRef refs[gpumemtrace::python::kMaxPythonFrames];
  EventFacts facts;
  facts.op = *action->op;
  facts.kind = action->kind;
  facts.api = action->api;
  facts.frames = refs;
  facts.frame_count = collect_frames(e, refs, pages);
  facts.addr = e.addr;
  facts.size = e.size;
  facts.device = e.device;
  facts.has_result = false;
  facts.has_stream = e.stream != 0;
  facts.stream = e.stream;
  facts.has_segment = e.segment != 0;
  facts.segment = e.segment;
  if (facts.op == f::Op::BlockOom && e.free_bytes != 0) {
    facts.has_meminfo = true;
    facts.free_bytes = e.free_bytes;
  }
  char pool[gpumemtrace::kPoolNameBytes];
  facts.pool_name = gpumemtrace::copy_program_string(e.pool, pool, sizeof pool, pages);
  facts.time_ns = e.time_ns;  // PyTorch's own time (converted by the caller); 0 = now
  return gpumemtrace::record(facts);
}

}  // namespace

extern "C" {

// Records the events of `count` history entries. entry_size / frame_size: the caller's sizeof of the
// two structures, which must be this build's (a Python hook of another build gets -1, nothing
// recorded). Returns the number of events recorded, or -1 when the call is refused (layout, null
// array with a count, count out of range).
__attribute__((visibility("default"))) int64_t gpumemtrace_record_torch(const GpumemtraceTorchEntry* entries,
                                                                        uint64_t count, uint32_t entry_size,
                                                                        uint32_t frame_size) {
  if (entry_size != sizeof(GpumemtraceTorchEntry) || frame_size != sizeof(GpumemtraceTorchFrame)) return -1;
  if (count > kMaxEntriesPerCall || (count != 0 && !entries)) return -1;
  gpumemtrace::PageCache pages;
  if (count && gpumemtrace::program_readable_bytes(entries, count * sizeof(GpumemtraceTorchEntry), &pages) <
                   count * sizeof(GpumemtraceTorchEntry))
    return -1;  // the array runs into memory that cannot be read
  HookScope scope;
  if (!scope.recording()) return 0;
  int64_t recorded = 0;
  for (uint64_t i = 0; i < count; ++i) recorded += record_entry(entries[i], &pages) ? 1 : 0;
  return recorded;
}

// The name of the index-th PyTorch action that gpumemtrace_record_torch() records (the others are
// skipped there, so the hook need not pack them); null past the last. Static strings.
__attribute__((visibility("default"))) const char* gpumemtrace_torch_live_action(uint32_t index) {
  for (const ta::ActionInfo& a : ta::kActions) {
    if (!(a.where & ta::kLive) || !a.op) continue;
    if (index-- == 0) return a.name;
  }
  return nullptr;
}

// 1 when block_free events keep a stack (GPUMEMTRACE_FREE_STACKS=1), else 0 (the default): the hook
// then turns PyTorch's history on with context="alloc", so PyTorch gathers no stack at a free.
__attribute__((visibility("default"))) int gpumemtrace_torch_free_stacks(void) {
  return gpumemtrace::releases_keep_stacks() ? 1 : 0;
}

// Records a `sync` event at time_ns (CLOCK_MONOTONIC, > 0): the caller promises that every event it
// reports later through gpumemtrace_record_torch() has a time above time_ns (docs/trace-format.md:
// readers merge the delayed events into the timeline by time up to each sync). Returns 1 when
// recorded.
__attribute__((visibility("default"))) int gpumemtrace_record_sync(uint64_t time_ns) {
  if (time_ns == 0) return 0;
  HookScope scope;
  if (!scope.recording()) return 0;
  EventFacts facts;
  facts.op = f::Op::Sync;
  facts.kind = f::Kind::None;
  facts.api = "torch.sync";
  facts.device = -1;
  facts.has_result = false;
  facts.time_ns = time_ns;
  return gpumemtrace::record(facts) ? 1 : 0;
}

// Records PyTorch's caching-allocator settings: an "allocator_settings" record (docs/trace-format.md),
// live (now, on the calling thread). `source`: format::kSettingsSourceInForce,
// kSettingsSourceSetAllocatorSettings or kSettingsSourceMemoryFraction; anything else is refused.
// In force / set: `conf` the settings text (null: ""), of which only the allocator's own options are
// kept (trace/alloc_conf.h: a variable may hold anything, a trace is shared), `fraction` negative,
// `device` -1. Memory fraction: `conf` null, `fraction` in [0, 1], `device` >= 0.
// Returns 1 when recorded, 0 when not (the recorder is off), -1 when refused.
__attribute__((visibility("default"))) int gpumemtrace_record_torch_settings(const char* source, const char* conf,
                                                                            int32_t device, double fraction) {
  if (!source) return -1;
  gpumemtrace::PageCache pages;
  const std::string_view name(source, gpumemtrace::program_strnlen(source, 64, &pages));
  const char* stable = nullptr;  // the static spelling: EventFacts::api must outlive the call
  for (const char* s : {f::kSettingsSourceInForce, f::kSettingsSourceSetAllocatorSettings,
                        f::kSettingsSourceMemoryFraction}) {
    if (name == s) stable = s;
  }
  if (!stable) return -1;
  const bool is_fraction = stable == f::kSettingsSourceMemoryFraction;
  if (is_fraction && (conf || !std::isfinite(fraction) || fraction < 0.0 || fraction > 1.0 || device < 0 ||
                      device >= kMaxDevice)) {
    return -1;
  }
  if (!is_fraction && (device != -1 || fraction >= 0.0)) return -1;
  char kept[gpumemtrace::kMaxScopeNameBytes + 1];
  kept[0] = '\0';
  if (conf) {
    gpumemtrace::alloc_conf::sanitize(std::string_view(conf, gpumemtrace::program_strnlen(conf, 1u << 16, &pages)), kept,
                                      sizeof(kept));
  }
  HookScope scope;
  if (!scope.recording()) return 0;
  EventFacts facts = gpumemtrace::event::allocator_settings(stable, is_fraction ? nullptr : kept, device);
  facts.has_fraction = is_fraction;
  facts.fraction = is_fraction ? fraction : 0.0;
  return gpumemtrace::record(facts) ? 1 : 0;
}

}  // extern "C"
