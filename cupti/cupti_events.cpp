// cupti/cupti_events.cpp — see cupti_events.h.
#include "cupti/cupti_events.h"

#include "interpose/hooks/driver_calls.h"

namespace gpumemtrace::cupti {
namespace {

#define GPUMEMTRACE_CUPTI_RUNTIME_IDS(X)                                                              \
  X(cudaMalloc_v3020, "cudaMalloc") X(cudaFree_v3020, "cudaFree") X(cudaMallocPitch_v3020, "cudaMallocPitch") \
  X(cudaMalloc3D_v3020, "cudaMalloc3D") X(cudaMallocManaged_v6000, "cudaMallocManaged")               \
  X(cudaMallocHost_v3020, "cudaMallocHost") X(cudaHostAlloc_v3020, "cudaHostAlloc")                   \
  X(cudaFreeHost_v3020, "cudaFreeHost") X(cudaMallocAsync_v11020, "cudaMallocAsync")                  \
  X(cudaMallocAsync_ptsz_v11020, "cudaMallocAsync_ptsz") X(cudaFreeAsync_v11020, "cudaFreeAsync")     \
  X(cudaFreeAsync_ptsz_v11020, "cudaFreeAsync_ptsz")                                                  \
  X(cudaMallocFromPoolAsync_v11020, "cudaMallocFromPoolAsync")                                        \
  X(cudaMallocFromPoolAsync_ptsz_v11020, "cudaMallocFromPoolAsync_ptsz")                              \
  X(cudaMemPoolTrimTo_v11020, "cudaMemPoolTrimTo") X(cudaDeviceReset_v3020, "cudaDeviceReset")        \
  X(cudaMemGetInfo_v3020, "cudaMemGetInfo")

// p.a, p.b, ... for a row's argument names (a, b, ...): at most five, as in driver_hooks.def.
#define GPUMEMTRACE_UNPACK(...) __VA_ARGS__
#define GPUMEMTRACE_FIELDS_1(p, a) p.a
#define GPUMEMTRACE_FIELDS_2(p, a, b) p.a, p.b
#define GPUMEMTRACE_FIELDS_3(p, a, b, c) p.a, p.b, p.c
#define GPUMEMTRACE_FIELDS_4(p, a, b, c, d) p.a, p.b, p.c, p.d
#define GPUMEMTRACE_FIELDS_5(p, a, b, c, d, e) p.a, p.b, p.c, p.d, p.e
#define GPUMEMTRACE_FIELDS_PICK(_1, _2, _3, _4, _5, name, ...) name
#define GPUMEMTRACE_FIELDS_OF(p, ...)                                                                 \
  GPUMEMTRACE_FIELDS_PICK(__VA_ARGS__, GPUMEMTRACE_FIELDS_5, GPUMEMTRACE_FIELDS_4, GPUMEMTRACE_FIELDS_3, \
                          GPUMEMTRACE_FIELDS_2, GPUMEMTRACE_FIELDS_1, )(p, __VA_ARGS__)

}  // namespace

const char* runtime_api_name(CUpti_CallbackId cbid) noexcept {
  switch (cbid) {
#define GPUMEMTRACE_CASE(id, name) \
  case CUPTI_RUNTIME_TRACE_CBID_##id: return name;
    GPUMEMTRACE_CUPTI_RUNTIME_IDS(GPUMEMTRACE_CASE)
#undef GPUMEMTRACE_CASE
    default: return nullptr;
  }
}

// Every hooked driver function has a callback id of the same name (a missing one fails to compile).
const char* driver_api_name(CUpti_CallbackId cbid) noexcept {
  switch (cbid) {
#define GPUMEMTRACE_DRIVER_RESOLVER(...)
#define GPUMEMTRACE_DRIVER_HOOK(symbol, ...) \
  case CUPTI_DRIVER_TRACE_CBID_##symbol: return #symbol;
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
#undef GPUMEMTRACE_DRIVER_RESOLVER
    default: return nullptr;
  }
}

int driver_callback_ids(CUpti_CallbackId* out, int capacity) noexcept {
  int n = 0;
#define GPUMEMTRACE_DRIVER_RESOLVER(...)
#define GPUMEMTRACE_DRIVER_HOOK(symbol, ...) \
  if (n < capacity) out[n++] = CUPTI_DRIVER_TRACE_CBID_##symbol;
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
#undef GPUMEMTRACE_DRIVER_RESOLVER
  return n;
}

int runtime_callback_ids(CUpti_CallbackId* out, int capacity) noexcept {
  int n = 0;
#define GPUMEMTRACE_ID(id, name) \
  if (n < capacity) out[n++] = CUPTI_RUNTIME_TRACE_CBID_##id;
  GPUMEMTRACE_CUPTI_RUNTIME_IDS(GPUMEMTRACE_ID)
#undef GPUMEMTRACE_ID
  return n;
}

bool driver_callback_event(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, const char* runtime_api,
                           EventFacts* out) noexcept {
  if (!cb.functionParams) return false;
  const bool enter = cb.callbackSite == CUPTI_API_ENTER;
  const CUresult r = !enter && cb.functionReturnValue ? *static_cast<const CUresult*>(cb.functionReturnValue)
                                                      : CUDA_SUCCESS;
  const capture::Outcome o = enter ? capture::Outcome::pending() : capture::Outcome::returned(r);
  EventFacts e;
  switch (cbid) {
    // The parameter struct's fields are named like the hook's parameters (driver_hooks.def).
#define GPUMEMTRACE_DRIVER_RESOLVER(...)
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args, meaning)            \
  case CUPTI_DRIVER_TRACE_CBID_##symbol: {                                                          \
    const auto& p = *static_cast<const symbol##_params*>(cb.functionParams);                        \
    e = capture::describe_##symbol(o, GPUMEMTRACE_FIELDS_OF(p, GPUMEMTRACE_UNPACK args));          \
    break;                                                                                          \
  }
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
#undef GPUMEMTRACE_DRIVER_RESOLVER
    default:
      return false;
  }
  // Each event at its moment, as the hooks take it: whatever ends memory at ENTER, the rest at EXIT.
  if (e.empty || e.taken_before_call() != enter) return false;
  if (runtime_api) {
    e.driver_api = e.api;
    e.api = runtime_api;
  }
  *out = e;
  return true;
}

void count_activity(const CUpti_Activity* record, ActivityCounts* c) noexcept {
  if (!record || !c) return;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
      if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) {
        ++c->allocations;
        c->allocated_bytes += m->bytes;
      } else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        ++c->releases;
        c->released_bytes += m->bytes;
      }
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
      const auto* p = reinterpret_cast<const CUpti_ActivityMemoryPool3*>(record);
      if (p->memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED) ++c->pool_trims;
      else if (p->memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED) ++c->pools_created;
      break;
    }
    default:
      ++c->other;
      break;
  }
}

size_t count_buffer(uint8_t* buffer, size_t valid_size, NextRecordFn next, ActivityCounts* counts) noexcept {
  size_t n = 0;
  CUpti_Activity* record = nullptr;
  while (buffer && next && next(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    count_activity(record, counts);
    ++n;
  }
  return n;
}

}  // namespace gpumemtrace::cupti
