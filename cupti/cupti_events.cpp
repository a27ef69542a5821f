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
  X(cudaMemPoolTrimTo_v11020, "cudaMemPoolTrimTo") X(cudaDeviceReset_v3020, "cudaDeviceReset")        \
  X(cudaMemGetInfo_v3020, "cudaMemGetInfo")

template <typename P>
const P& params(const CUpti_CallbackData& cb) {
  return *static_cast<const P*>(cb.functionParams);
}

uint64_t u(const void* p) { return reinterpret_cast<uint64_t>(p); }

constexpr int32_t kAskDriver = -2;  // the event's device is not named by the call: ask device_of

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

bool driver_callback_facts(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, const char* runtime_api,
                           DeviceOfFn device_of, EventFacts* out) noexcept {
  const char* driver = driver_api_name(cbid);
  if (!driver || !cb.functionParams) return false;
  const bool enter = cb.callbackSite == CUPTI_API_ENTER;
  const CUresult r = !enter && cb.functionReturnValue ? *static_cast<const CUresult*>(cb.functionReturnValue)
                                                      : CUDA_SUCCESS;
  const bool ok = r == CUDA_SUCCESS;
  EventFacts e;
  e.api = runtime_api ? runtime_api : driver;
  e.driver_api = runtime_api ? driver : nullptr;
  e.result = static_cast<int32_t>(r);
  e.device = kAskDriver;
  CUcontext context = nullptr;  // kAskDriver: this context's device (null: the current context's)
  // Shapes: at EXIT with the result (allocations, trim, reserve, map: the caller passes the address
  // only when the call succeeded); at ENTER without a result, whatever ends memory (before it can be
  // reused). A free of null is a no-op in CUDA, not an event.
  auto exited = [&](f::Op op, f::Kind kind, uint64_t addr, uint64_t size) {
    e.op = op;
    e.kind = kind;
    e.addr = addr;
    e.size = size;
    return !enter;
  };
  auto ending = [&](f::Op op, f::Kind kind, uint64_t addr, uint64_t size = 0) {
    e.op = op;
    e.kind = kind;
    e.addr = addr;
    e.size = size;
    e.has_result = false;
    e.result = 0;
    return enter && (op != f::Op::Free || addr != 0);
  };
  auto out_ptr = [&](const CUdeviceptr* p) -> uint64_t { return !enter && ok && p ? *p : 0; };
  auto out_host = [&](void* const* p) -> uint64_t { return !enter && ok && p ? u(*p) : 0; };
  bool record = false;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      const auto& p = params<cuMemAlloc_v2_params>(cb);
      record = exited(f::Op::Alloc, f::Kind::Device, out_ptr(p.dptr), p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      const auto& p = params<cuMemAllocPitch_v2_params>(cb);
      const uint64_t size = !enter && ok && p.pPitch ? *p.pPitch * p.Height : p.WidthInBytes * p.Height;
      record = exited(f::Op::Alloc, f::Kind::Device, out_ptr(p.dptr), size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      record = ending(f::Op::Free, f::Kind::Device, params<cuMemFree_v2_params>(cb).dptr);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      const auto& p = params<cuMemAllocManaged_params>(cb);
      record = exited(f::Op::Alloc, f::Kind::Managed, out_ptr(p.dptr), p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
      const auto& p = params<cuMemHostAlloc_params>(cb);
      record = exited(f::Op::Alloc, f::Kind::Host, out_host(p.pp), p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
      const auto& p = params<cuMemAllocHost_v2_params>(cb);
      record = exited(f::Op::Alloc, f::Kind::Host, out_host(p.pp), p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      record = ending(f::Op::Free, f::Kind::Host, u(params<cuMemFreeHost_params>(cb).p));
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      const auto& p = params<cuMemAllocAsync_params>(cb);  // the _ptsz params struct has the same layout
      record = exited(f::Op::Alloc, f::Kind::Async, out_ptr(p.dptr), p.bytesize);
      e.with_stream(u(p.hStream));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      const auto& p = params<cuMemAllocFromPoolAsync_params>(cb);
      record = exited(f::Op::Alloc, f::Kind::Async, out_ptr(p.dptr), p.bytesize);
      e.with_stream(u(p.hStream)).with_pool(u(p.pool));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      const auto& p = params<cuMemFreeAsync_params>(cb);
      record = ending(f::Op::Free, f::Kind::Async, p.dptr);
      e.with_stream(u(p.hStream));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo: {
      const auto& p = params<cuMemPoolTrimTo_params>(cb);
      record = exited(f::Op::Trim, f::Kind::Async, 0, p.minBytesToKeep);
      e.with_pool(u(p.pool));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      const auto& p = params<cuMemAddressReserve_params>(cb);
      record = exited(f::Op::Reserve, f::Kind::Virtual, out_ptr(p.ptr), p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
      const auto& p = params<cuMemAddressFree_params>(cb);
      record = ending(f::Op::Unreserve, f::Kind::Virtual, p.ptr, p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      const auto& p = params<cuMemCreate_params>(cb);
      const uint64_t handle = out_ptr(p.handle);  // CUmemGenericAllocationHandle: an unsigned long long
      record = exited(f::Op::Alloc, f::Kind::Physical, handle, p.size);
      // The device the memory is on, from its properties (not the current context's); host memory: none.
      e.device = p.prop && p.prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? p.prop->location.id : -1;
      if (ok) e.with_handle(handle);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
      const auto& p = params<cuMemRelease_params>(cb);
      record = ending(f::Op::Free, f::Kind::Physical, p.handle);
      e.with_handle(p.handle);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const auto& p = params<cuMemMap_params>(cb);
      record = exited(f::Op::Map, f::Kind::Physical, p.ptr, p.size);
      e.with_handle(p.handle);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      const auto& p = params<cuMemUnmap_params>(cb);
      record = ending(f::Op::Unmap, f::Kind::Physical, p.ptr, p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2: {  // as the hooks record it: successful calls only
      const auto& p = params<cuMemGetInfo_v2_params>(cb);
      record = ok && p.free && p.total && exited(f::Op::MemInfo, f::Kind::None, 0, 0);
      if (record) {
        e.has_result = false;
        e.has_meminfo = true;
        e.free_bytes = *p.free;
        e.total_bytes = *p.total;
      }
      break;
    }
    // Context destruction / primary context reset: every allocation of the device ends here.
    case CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2:
      context = params<cuCtxDestroy_v2_params>(cb).ctx;  // both take (CUcontext ctx)
      record = context && ending(f::Op::Reset, f::Kind::None, 0);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset:
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2:
      e.device = params<cuDevicePrimaryCtxReset_v2_params>(cb).dev;  // both take (CUdevice dev)
      record = ending(f::Op::Reset, f::Kind::None, 0);
      break;
    default:
      break;
  }
  if (!record) return false;
  if (e.device == kAskDriver) e.device = device_of ? device_of(context) : -1;
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
