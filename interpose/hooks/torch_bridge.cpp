// interpose/hooks/torch_bridge.cpp — the C entry point through which the PyTorch startup hook
// (tools/python/gpumemtrace_torch) puts PyTorch's caching-allocator events into the same trace.
//
// The hook drains torch.cuda.memory's allocation history (docs/pytorch.md explains why that route)
// and calls gpumemtrace_record_external() once per event, through ctypes, from a Python thread. The
// event gets the next sequence number like any other; its stack is exactly the Python stack PyTorch
// recorded for the allocation (passed as text; EventFacts::frames): the draining thread's own stack is
// never captured, and an event PyTorch recorded no frames for (an autograd-thread allocation) has no
// stack. These frames are PyTorch's record, not a read of the interpreter, so GPUMEMTRACE_PYTHON=0
// does not remove them (docs/pytorch.md).
// Such events carry "delayed":true in the trace; after each drain the hook calls
// gpumemtrace_record_sync() so that readers can merge them into the timeline by time.
//
// Thread-safety: any thread, any time; the recorder's rules apply (record() never blocks except in
// GPUMEMTRACE_ON_FULL=wait mode). Never throws; bad arguments are ignored (returns 0).
#include <cstdint>
#include <cstring>

#include "interpose/python/python_stack.h"
#include "interpose/recorder/recorder.h"

namespace f = gpumemtrace::format;
using gpumemtrace::EventFacts;
using gpumemtrace::HookScope;

namespace {

// `api` must be static for the recorder (it stores the pointer): map the caller's text onto ours.
const char* static_api(const char* api) {
  static const char* const kApis[] = {"torch.alloc",         "torch.free_requested", "torch.oom",
                                      "torch.segment_alloc", "torch.segment_free",   "torch.segment_map",
                                      "torch.segment_unmap"};
  if (api)
    for (const char* a : kApis)
      if (strcmp(api, a) == 0) return a;
  return "torch.external";
}

}  // namespace

extern "C" {

// Records one event reported after the fact. op: an op name of trace/format.h ("block_alloc",
// "block_free", "block_oom", "alloc", "free", "map", "unmap"; marks go through gpumemtrace_report_mark,
// syncs through gpumemtrace_record_sync, scopes through gpumemtrace_report_scope);
// api: "torch.<PyTorch action>";
// segment: containing segment of a block (0 = none); time_ns: CLOCK_MONOTONIC of the event (0 = now);
// free_bytes: device free bytes for block_oom (0 = unknown); pool: allocator pool name or null;
// frames: "file\x1ffunction\x1fline" records separated by '\x1e', innermost first (null = none).
// Returns 1 when recorded.
__attribute__((visibility("default"))) int gpumemtrace_record_external(
    const char* op, const char* api, uint64_t addr, uint64_t size, int device, uint64_t stream,
    uint64_t segment, uint64_t time_ns, uint64_t free_bytes, const char* pool, const char* frames) {
  f::Op parsed;
  if (!op || !f::parse_op(op, &parsed) || parsed == f::Op::Sync || parsed == f::Op::Mark ||
      parsed == f::Op::ScopeBegin || parsed == f::Op::ScopeEnd)
    return 0;
  HookScope scope;
  if (!scope.recording()) return 0;
  gpumemtrace::python::PythonFrameRef refs[gpumemtrace::python::kMaxPythonFrames];
  EventFacts facts;
  facts.frames = refs;
  facts.frame_count =
      gpumemtrace::python::make_external_frames(frames, refs, gpumemtrace::python::kMaxPythonFrames);
  facts.op = parsed;
  switch (parsed) {
    case f::Op::BlockAlloc:
    case f::Op::BlockFree:
    case f::Op::BlockOom:
      facts.kind = f::Kind::Block;
      break;
    case f::Op::Map:
    case f::Op::Unmap:
      facts.kind = f::Kind::Physical;
      break;
    default:
      facts.kind = f::Kind::Device;
  }
  facts.api = static_api(api);
  facts.addr = addr;
  facts.size = size;
  facts.device = device;
  facts.has_result = false;
  facts.has_stream = stream != 0;
  facts.stream = stream;
  facts.has_segment = segment != 0;
  facts.segment = segment;
  if (parsed == f::Op::BlockOom && free_bytes != 0) {
    facts.has_meminfo = true;
    facts.free_bytes = free_bytes;
  }
  facts.pool_name = pool;
  facts.time_ns = time_ns;  // PyTorch's own time (converted by the caller); 0 = now
  return gpumemtrace::record(facts) ? 1 : 0;
}

// Records a `sync` event at time_ns (CLOCK_MONOTONIC, > 0): the caller promises that every event it
// reports later through gpumemtrace_record_external() has a time above time_ns (docs/trace-format.md:
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

}  // extern "C"
