// cupti/cupti_events.cpp — see cupti_events.h.
#include "cupti/cupti_events.h"

namespace gpumemtrace::cupti {
namespace {

namespace f = format;

#define GPUMEMTRACE_CUPTI_RUNTIME_IDS(X)                                                              \
  X(cudaMalloc_v3020, "cudaMalloc") X(cudaFree_v3020, "cudaFree") X(cudaMallocPitch_v3020, "cudaMallocPitch") \
  X(cudaMalloc3D_v3020, "cudaMalloc3D") X(cudaMallocManaged_v6000, "cudaMallocManaged")               \
  X(cudaMallocHost_v3020, "cudaMallocHost") X(cudaHostAlloc_v3020, "cudaHostAlloc")                   \
  X(cudaFreeHost_v3020, "cudaFreeHost") X(cudaMallocAsync_v11020, "cudaMallocAsync")                  \
  X(cudaMallocAsync_ptsz_v11020, "cudaMallocAsync_ptsz") X(cudaFreeAsync_v11020, "cudaFreeAsync")     \
  X(cudaFreeAsync_ptsz_v11020, "cudaFreeAsync_ptsz")                                                  \
  X(cudaMallocFromPoolAsync_v11020, "cudaMallocFromPoolAsync")                                        \
  X(cudaMallocFromPoolAsync_ptsz_v11020, "cudaMallocFromPoolAsync_ptsz")                              \
  X(cudaMemPoolTrimTo_v11020, "cudaMemPoolTrimTo") X(cudaDeviceReset_v3020, "cudaDeviceReset")

// The driver functions of interpose/hooks/driver_hooks.def that have a CUPTI callback id.
#define GPUMEMTRACE_CUPTI_DRIVER_IDS(X)                                                                \
  X(cuMemAlloc_v2) X(cuMemAllocPitch_v2) X(cuMemFree_v2) X(cuMemAllocManaged) X(cuMemHostAlloc)        \
  X(cuMemAllocHost_v2) X(cuMemFreeHost) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz)                     \
  X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz)  \
  X(cuMemPoolTrimTo) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease)         \
  X(cuMemMap) X(cuMemUnmap) X(cuCtxDestroy_v2) X(cuDevicePrimaryCtxReset_v2)

template <typename P>
const P& params(const CUpti_CallbackData& cb) {
  return *static_cast<const P*>(cb.functionParams);
}

uint64_t u(const void* p) { return reinterpret_cast<uint64_t>(p); }

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

const char* driver_api_name(CUpti_CallbackId cbid) noexcept {
  switch (cbid) {
#define GPUMEMTRACE_CASE(name) \
  case CUPTI_DRIVER_TRACE_CBID_##name: return #name;
    GPUMEMTRACE_CUPTI_DRIVER_IDS(GPUMEMTRACE_CASE)
#undef GPUMEMTRACE_CASE
    default: return nullptr;
  }
}

int driver_callback_ids(CUpti_CallbackId* out, int capacity) noexcept {
  int n = 0;
#define GPUMEMTRACE_ID(name) \
  if (n < capacity) out[n++] = CUPTI_DRIVER_TRACE_CBID_##name;
  GPUMEMTRACE_CUPTI_DRIVER_IDS(GPUMEMTRACE_ID)
#undef GPUMEMTRACE_ID
  return n;
}

bool driver_callback_facts(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, const char* runtime_api,
                           int32_t device, EventFacts* out) noexcept {
  const char* driver = driver_api_name(cbid);
  if (!driver || !cb.functionParams) return false;
  const bool enter = cb.callbackSite == CUPTI_API_ENTER;
  const CUresult r = !enter && cb.functionReturnValue ? *static_cast<const CUresult*>(cb.functionReturnValue)
                                                      : CUDA_SUCCESS;
  const bool ok = r == CUDA_SUCCESS;
  EventFacts e;
  e.api = runtime_api ? runtime_api : driver;
  e.driver_api = runtime_api ? driver : nullptr;
  e.device = device;
  e.result = static_cast<int32_t>(r);
  // Shapes: allocations at EXIT, frees (and everything that ends memory) at ENTER, without a result.
  auto alloc = [&](f::Kind kind, uint64_t addr, uint64_t size) {
    if (enter) return false;
    e.op = f::Op::Alloc;
    e.kind = kind;
    e.addr = ok ? addr : 0;
    e.size = size;
    return true;
  };
  auto ending = [&](f::Op op, f::Kind kind, uint64_t addr, uint64_t size) {
    if (!enter) return false;
    e.op = op;
    e.kind = kind;
    e.addr = addr;
    e.size = size;
    e.has_result = false;
    e.result = 0;
    return true;
  };
  bool record = false;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      const auto& p = params<cuMemAlloc_v2_params>(cb);
      record = alloc(f::Kind::Device, ok && p.dptr ? *p.dptr : 0, p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      const auto& p = params<cuMemAllocPitch_v2_params>(cb);
      const uint64_t size = ok && p.pPitch ? *p.pPitch * p.Height : p.WidthInBytes * p.Height;
      record = alloc(f::Kind::Device, ok && p.dptr ? *p.dptr : 0, size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      record = params<cuMemFree_v2_params>(cb).dptr &&
               ending(f::Op::Free, f::Kind::Device, params<cuMemFree_v2_params>(cb).dptr, 0);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      const auto& p = params<cuMemAllocManaged_params>(cb);
      record = alloc(f::Kind::Managed, ok && p.dptr ? *p.dptr : 0, p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
      const auto& p = params<cuMemHostAlloc_params>(cb);
      record = alloc(f::Kind::Host, ok && p.pp ? u(*p.pp) : 0, p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
      const auto& p = params<cuMemAllocHost_v2_params>(cb);
      record = alloc(f::Kind::Host, ok && p.pp ? u(*p.pp) : 0, p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      record = params<cuMemFreeHost_params>(cb).p &&
               ending(f::Op::Free, f::Kind::Host, u(params<cuMemFreeHost_params>(cb).p), 0);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      const auto& p = params<cuMemAllocAsync_params>(cb);  // the _ptsz params struct has the same layout
      record = alloc(f::Kind::Async, ok && p.dptr ? *p.dptr : 0, p.bytesize);
      e.has_stream = true;
      e.stream = u(p.hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      const auto& p = params<cuMemAllocFromPoolAsync_params>(cb);
      record = alloc(f::Kind::Async, ok && p.dptr ? *p.dptr : 0, p.bytesize);
      e.has_stream = true;
      e.stream = u(p.hStream);
      e.has_pool = true;
      e.pool = u(p.pool);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      const auto& p = params<cuMemFreeAsync_params>(cb);
      record = p.dptr && ending(f::Op::Free, f::Kind::Async, p.dptr, 0);
      e.has_stream = true;
      e.stream = u(p.hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo: {
      const auto& p = params<cuMemPoolTrimTo_params>(cb);
      if (!enter) {
        e.op = f::Op::Trim;
        e.kind = f::Kind::Async;
        e.size = p.minBytesToKeep;
        e.has_pool = true;
        e.pool = u(p.pool);
        record = true;
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      const auto& p = params<cuMemAddressReserve_params>(cb);
      if (!enter) {
        e.op = f::Op::Reserve;
        e.kind = f::Kind::Virtual;
        e.addr = ok && p.ptr ? *p.ptr : 0;
        e.size = p.size;
        record = true;
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
      const auto& p = params<cuMemAddressFree_params>(cb);
      record = ending(f::Op::Unreserve, f::Kind::Virtual, p.ptr, p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      const auto& p = params<cuMemCreate_params>(cb);
      if (p.prop && p.prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) e.device = p.prop->location.id;
      const uint64_t handle = ok && p.handle ? static_cast<uint64_t>(*p.handle) : 0;
      record = alloc(f::Kind::Physical, handle, p.size);
      e.has_handle = ok;
      e.handle = handle;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
      const auto& p = params<cuMemRelease_params>(cb);
      record = ending(f::Op::Free, f::Kind::Physical, static_cast<uint64_t>(p.handle), 0);
      e.has_handle = true;
      e.handle = static_cast<uint64_t>(p.handle);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const auto& p = params<cuMemMap_params>(cb);
      if (!enter) {
        e.op = f::Op::Map;
        e.kind = f::Kind::Physical;
        e.addr = p.ptr;
        e.size = p.size;
        e.has_handle = true;
        e.handle = static_cast<uint64_t>(p.handle);
        record = true;
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      const auto& p = params<cuMemUnmap_params>(cb);
      record = ending(f::Op::Unmap, f::Kind::Physical, p.ptr, p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2:
      record = ending(f::Op::Reset, f::Kind::None, 0, 0);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2:
      e.device = params<cuDevicePrimaryCtxReset_v2_params>(cb).dev;
      record = ending(f::Op::Reset, f::Kind::None, 0, 0);
      break;
    default:
      break;
  }
  if (record) *out = e;
  return record;
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
