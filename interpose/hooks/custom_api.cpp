// interpose/hooks/custom_api.cpp — the library side of include/gpumemtrace.h: a caching allocator's
// own sub-allocations and the program's phase markers, recorded like any other event (same ring,
// same sequence, stacks of the caller).
#include <cstddef>
#include <cstdint>

#include "interpose/recorder/recorder.h"

using gpumemtrace::EventFacts;
using gpumemtrace::HookScope;
namespace f = gpumemtrace::format;

namespace {

void report_block(f::Op op, const char* api, const void* ptr, size_t size, const void* segment, int device,
                  const char* pool) {
  HookScope scope;
  if (!scope.recording()) return;
  EventFacts facts;
  facts.op = op;
  facts.kind = f::Kind::Block;
  facts.api = api;
  facts.addr = reinterpret_cast<uint64_t>(ptr);
  facts.size = size;
  facts.device = device;
  facts.has_result = false;
  facts.has_segment = segment != nullptr;
  facts.segment = reinterpret_cast<uint64_t>(segment);
  facts.pool_name = pool;
  gpumemtrace::record(facts);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void gpumemtrace_report_block_alloc(const void* ptr, size_t size,
                                                                           const void* segment, int device,
                                                                           const char* pool) {
  report_block(f::Op::BlockAlloc, "gpumemtrace_block_alloc", ptr, size, segment, device, pool);
}

__attribute__((visibility("default"))) void gpumemtrace_report_block_free(const void* ptr, size_t size,
                                                                          const void* segment, int device,
                                                                          const char* pool) {
  report_block(f::Op::BlockFree, "gpumemtrace_block_free", ptr, size, segment, device, pool);
}

__attribute__((visibility("default"))) void gpumemtrace_report_block_oom(size_t size, int device, const char* pool) {
  report_block(f::Op::BlockOom, "gpumemtrace_block_oom", nullptr, size, nullptr, device, pool);
}

__attribute__((visibility("default"))) void gpumemtrace_report_mark(const char* label) {
  HookScope scope;
  if (!scope.recording()) return;
  EventFacts facts;
  facts.op = f::Op::Mark;
  facts.kind = f::Kind::None;
  facts.api = "gpumemtrace_mark";
  facts.has_result = false;
  facts.label = label ? label : "";
  gpumemtrace::record(facts);
}

}  // extern "C"
