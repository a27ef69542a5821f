// interpose/hooks/driver.cpp — CUDA driver API hooks.
//
// Reached three ways (driver_table.h): our exported cu* symbols (programs linked against libcuda),
// and the wrappers dlsym.cpp hands out for dlsym / cuGetProcAddress / cudaGetDriverEntryPoint.
//
// One event per allocation: a driver hook nested in a runtime hook (cudaMalloc -> cuMemAlloc_v2)
// finds its HookScope not recording and only names itself as the runtime event's driver_api. When it
// is outermost (static cudart, JAX, direct driver use) it records the event itself.
// Frees are recorded BEFORE the real call (the address may be reused right after), allocations after
// it returns, failed ones too (followed by a meminfo event: how much was really free). Return values,
// out-parameters and errno are what the program would have seen: the driver calls we add (device of
// the current context, free memory) run inside our scope and restore errno.
#include <cerrno>

#include "cupti/backend.h"
#include "interpose/hooks/driver_cuda.h"
#include "interpose/hooks/driver_query.h"
#include "interpose/hooks/driver_table.h"
#include "interpose/recorder/recorder.h"

namespace gpumemtrace::driver {
namespace {

namespace f = format;

// Records the device's free/total bytes as the driver reports them (nothing when it cannot say).
void record_driver_meminfo(int32_t device) noexcept {
  auto fn = reinterpret_cast<CUresult (*)(size_t*, size_t*)>(query_function(Query::MemGetInfo));
  size_t free_bytes = 0, total_bytes = 0;
  if (fn && fn(&free_bytes, &total_bytes) == CUDA_SUCCESS)
    record_meminfo(device, "cuMemGetInfo_v2", free_bytes, total_bytes);
}

// First event on a device: its name and memory ("device" line) and a meminfo event.
void note_device(int32_t device) noexcept {
  if (!first_event_on_device(device)) return;
  auto get_name = reinterpret_cast<CUresult (*)(char*, int, CUdevice)>(query_function(Query::DeviceGetName));
  auto total_mem = reinterpret_cast<CUresult (*)(size_t*, CUdevice)>(query_function(Query::DeviceTotalMem));
  auto mem_info = reinterpret_cast<CUresult (*)(size_t*, size_t*)>(query_function(Query::MemGetInfo));
  char name[96] = {};
  size_t total = 0, free_bytes = 0, total2 = 0;
  if (!get_name || get_name(name, sizeof(name) - 1, device) != CUDA_SUCCESS) name[0] = '\0';
  if (!total_mem || total_mem(&total, device) != CUDA_SUCCESS) total = 0;
  if (!mem_info || mem_info(&free_bytes, &total2) != CUDA_SUCCESS) free_bytes = 0;
  record_device_info(device, name, total, free_bytes);
  record_driver_meminfo(device);
}

// The common part of every hook: the re-entry scope, and turning facts into an event.
class DriverCall {
 public:
  // Nested: names itself as the driver call serving the outer (runtime) event. cuMemGetInfo is left
  // out: the runtime hooks' own free-memory queries would otherwise overwrite cudaMalloc's driver_api.
  explicit DriverCall(Fn fn) noexcept : api_(kFnInfo[static_cast<int>(fn)].symbol) {
    if (!scope_.recording() && fn != Fn::cuMemGetInfo_v2) HookScope::note_driver_api(api_);
  }
  DriverCall(const DriverCall&) = delete;
  DriverCall& operator=(const DriverCall&) = delete;

  bool recording() const noexcept { return scope_.recording() && !recorder_disabled(); }

  // Facts with api, result and the current context's device filled in.
  EventFacts facts(f::Op op, f::Kind kind, CUresult r, int32_t device = kCurrent) const noexcept {
    EventFacts e;
    e.op = op;
    e.kind = kind;
    e.api = api_;
    e.result = static_cast<int32_t>(r);
    e.device = device == kCurrent ? current_device() : device;
    return e;
  }

  // Records `e` (a failed allocation is followed by a meminfo event). Keeps errno.
  void record(const EventFacts& e) const noexcept {
    const int saved = errno;
    if (e.result == CUDA_SUCCESS) note_device(e.device);
    (void)gpumemtrace::record(e);
    if (e.op == f::Op::Alloc && e.result != CUDA_SUCCESS) record_driver_meminfo(e.device);
    errno = saved;
  }

  // The usual shapes.
  void allocated(f::Kind kind, CUresult r, uint64_t addr, uint64_t size) const noexcept {
    if (!recording()) return;
    const int saved = errno;
    EventFacts e = facts(f::Op::Alloc, kind, r);
    e.addr = r == CUDA_SUCCESS ? addr : 0;
    e.size = size;
    record(e);
    errno = saved;
  }
  void freeing(f::Kind kind, uint64_t addr) const noexcept {  // before the real call: no result yet
    if (!recording() || addr == 0) return;
    const int saved = errno;
    EventFacts e = facts(f::Op::Free, kind, CUDA_SUCCESS);
    e.addr = addr;
    e.has_result = false;
    record(e);
    errno = saved;
  }

  static constexpr int32_t kCurrent = -2;

 private:
  HookScope scope_;
  const char* api_;
};

uint64_t stream_value(CUstream s) { return reinterpret_cast<uint64_t>(s); }
uint64_t pool_value(CUmemoryPool p) { return reinterpret_cast<uint64_t>(p); }

// ---- the hooks: one per row of driver_hooks.def, a few lines each ----
#define GPUMEMTRACE_UNPACK(...) __VA_ARGS__
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args) \
  using Pfn_##symbol = CUresult (*) params;
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK

CUresult hook_cuMemAlloc_v2(Pfn_cuMemAlloc_v2 real, CUdeviceptr* dptr, size_t bytesize) {
  DriverCall call(Fn::cuMemAlloc_v2);
  CUresult r = real(dptr, bytesize);
  call.allocated(f::Kind::Device, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize);
  return r;
}

CUresult hook_cuMemAllocPitch_v2(Pfn_cuMemAllocPitch_v2 real, CUdeviceptr* dptr, size_t* pPitch,
                                 size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes) {
  DriverCall call(Fn::cuMemAllocPitch_v2);
  CUresult r = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  const bool ok = r == CUDA_SUCCESS;
  call.allocated(f::Kind::Device, r, ok ? *dptr : 0, ok ? *pPitch * Height : WidthInBytes * Height);
  return r;
}

CUresult hook_cuMemFree_v2(Pfn_cuMemFree_v2 real, CUdeviceptr dptr) {
  DriverCall call(Fn::cuMemFree_v2);
  call.freeing(f::Kind::Device, dptr);
  return real(dptr);
}

CUresult hook_cuMemAllocManaged(Pfn_cuMemAllocManaged real, CUdeviceptr* dptr, size_t bytesize,
                                unsigned int flags) {
  DriverCall call(Fn::cuMemAllocManaged);
  CUresult r = real(dptr, bytesize, flags);
  call.allocated(f::Kind::Managed, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize);
  return r;
}

CUresult hook_cuMemHostAlloc(Pfn_cuMemHostAlloc real, void** pp, size_t bytesize, unsigned int Flags) {
  DriverCall call(Fn::cuMemHostAlloc);
  CUresult r = real(pp, bytesize, Flags);
  call.allocated(f::Kind::Host, r, r == CUDA_SUCCESS ? reinterpret_cast<uint64_t>(*pp) : 0, bytesize);
  return r;
}

CUresult hook_cuMemAllocHost_v2(Pfn_cuMemAllocHost_v2 real, void** pp, size_t bytesize) {
  DriverCall call(Fn::cuMemAllocHost_v2);
  CUresult r = real(pp, bytesize);
  call.allocated(f::Kind::Host, r, r == CUDA_SUCCESS ? reinterpret_cast<uint64_t>(*pp) : 0, bytesize);
  return r;
}

CUresult hook_cuMemFreeHost(Pfn_cuMemFreeHost real, void* p) {
  DriverCall call(Fn::cuMemFreeHost);
  call.freeing(f::Kind::Host, reinterpret_cast<uint64_t>(p));
  return real(p);
}

// Stream-ordered allocations (kind async): the memory comes from, and returns to, a pool.
CUresult async_alloc(Fn fn, CUresult r, CUdeviceptr* dptr, size_t bytesize, CUstream stream,
                     const CUmemoryPool* pool, const DriverCall& call) {
  if (!call.recording()) return r;
  const int saved = errno;
  EventFacts e = call.facts(f::Op::Alloc, f::Kind::Async, r);
  e.addr = r == CUDA_SUCCESS ? *dptr : 0;
  e.size = bytesize;
  e.has_stream = true;
  e.stream = stream_value(stream);
  if (pool) {
    e.has_pool = true;
    e.pool = pool_value(*pool);
  }
  call.record(e);
  errno = saved;
  return r;
}

void async_free(CUdeviceptr dptr, CUstream stream, const DriverCall& call) {
  if (!call.recording() || dptr == 0) return;
  const int saved = errno;
  EventFacts e = call.facts(f::Op::Free, f::Kind::Async, CUDA_SUCCESS);
  e.addr = dptr;
  e.has_result = false;
  e.has_stream = true;
  e.stream = stream_value(stream);
  call.record(e);
  errno = saved;
}

CUresult hook_cuMemAllocAsync(Pfn_cuMemAllocAsync real, CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  DriverCall call(Fn::cuMemAllocAsync);
  return async_alloc(Fn::cuMemAllocAsync, real(dptr, bytesize, hStream), dptr, bytesize, hStream, nullptr, call);
}

CUresult hook_cuMemAllocAsync_ptsz(Pfn_cuMemAllocAsync_ptsz real, CUdeviceptr* dptr, size_t bytesize,
                                   CUstream hStream) {
  DriverCall call(Fn::cuMemAllocAsync_ptsz);
  return async_alloc(Fn::cuMemAllocAsync_ptsz, real(dptr, bytesize, hStream), dptr, bytesize, hStream, nullptr,
                     call);
}

CUresult hook_cuMemAllocFromPoolAsync(Pfn_cuMemAllocFromPoolAsync real, CUdeviceptr* dptr, size_t bytesize,
                                      CUmemoryPool pool, CUstream hStream) {
  DriverCall call(Fn::cuMemAllocFromPoolAsync);
  return async_alloc(Fn::cuMemAllocFromPoolAsync, real(dptr, bytesize, pool, hStream), dptr, bytesize, hStream,
                     &pool, call);
}

CUresult hook_cuMemAllocFromPoolAsync_ptsz(Pfn_cuMemAllocFromPoolAsync_ptsz real, CUdeviceptr* dptr,
                                           size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  DriverCall call(Fn::cuMemAllocFromPoolAsync_ptsz);
  return async_alloc(Fn::cuMemAllocFromPoolAsync_ptsz, real(dptr, bytesize, pool, hStream), dptr, bytesize,
                     hStream, &pool, call);
}

CUresult hook_cuMemFreeAsync(Pfn_cuMemFreeAsync real, CUdeviceptr dptr, CUstream hStream) {
  DriverCall call(Fn::cuMemFreeAsync);
  async_free(dptr, hStream, call);
  return real(dptr, hStream);
}

CUresult hook_cuMemFreeAsync_ptsz(Pfn_cuMemFreeAsync_ptsz real, CUdeviceptr dptr, CUstream hStream) {
  DriverCall call(Fn::cuMemFreeAsync_ptsz);
  async_free(dptr, hStream, call);
  return real(dptr, hStream);
}

CUresult hook_cuMemPoolTrimTo(Pfn_cuMemPoolTrimTo real, CUmemoryPool pool, size_t minBytesToKeep) {
  DriverCall call(Fn::cuMemPoolTrimTo);
  CUresult r = real(pool, minBytesToKeep);
  if (call.recording()) {
    EventFacts e = call.facts(f::Op::Trim, f::Kind::Async, r);
    e.size = minBytesToKeep;
    e.has_pool = true;
    e.pool = pool_value(pool);
    call.record(e);
  }
  return r;
}

// Virtual memory management: reserve (address space only), create (physical memory: counts toward
// the device's usage; addr = the handle), map / unmap (which range shows which handle).
CUresult hook_cuMemAddressReserve(Pfn_cuMemAddressReserve real, CUdeviceptr* ptr, size_t size, size_t alignment,
                                  CUdeviceptr addr, unsigned long long flags) {
  DriverCall call(Fn::cuMemAddressReserve);
  CUresult r = real(ptr, size, alignment, addr, flags);
  if (call.recording()) {
    EventFacts e = call.facts(f::Op::Reserve, f::Kind::Virtual, r);
    e.addr = r == CUDA_SUCCESS ? *ptr : 0;
    e.size = size;
    call.record(e);
  }
  return r;
}

CUresult hook_cuMemAddressFree(Pfn_cuMemAddressFree real, CUdeviceptr ptr, size_t size) {
  DriverCall call(Fn::cuMemAddressFree);
  if (call.recording()) {
    EventFacts e = call.facts(f::Op::Unreserve, f::Kind::Virtual, CUDA_SUCCESS);
    e.addr = ptr;
    e.size = size;
    e.has_result = false;
    call.record(e);
  }
  return real(ptr, size);
}

CUresult hook_cuMemCreate(Pfn_cuMemCreate real, CUmemGenericAllocationHandle* handle, size_t size,
                          const CUmemAllocationProp* prop, unsigned long long flags) {
  DriverCall call(Fn::cuMemCreate);
  CUresult r = real(handle, size, prop, flags);
  if (call.recording()) {
    const bool on_device = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    EventFacts e = call.facts(f::Op::Alloc, f::Kind::Physical, r, on_device ? prop->location.id : -1);
    e.addr = r == CUDA_SUCCESS ? static_cast<uint64_t>(*handle) : 0;
    e.size = size;
    e.has_handle = r == CUDA_SUCCESS;
    e.handle = e.addr;
    call.record(e);
  }
  return r;
}

CUresult hook_cuMemRelease(Pfn_cuMemRelease real, CUmemGenericAllocationHandle handle) {
  DriverCall call(Fn::cuMemRelease);
  if (call.recording()) {
    EventFacts e = call.facts(f::Op::Free, f::Kind::Physical, CUDA_SUCCESS);
    e.addr = static_cast<uint64_t>(handle);
    e.has_handle = true;
    e.handle = e.addr;
    e.has_result = false;
    call.record(e);
  }
  return real(handle);
}

CUresult hook_cuMemMap(Pfn_cuMemMap real, CUdeviceptr ptr, size_t size, size_t offset,
                       CUmemGenericAllocationHandle handle, unsigned long long flags) {
  DriverCall call(Fn::cuMemMap);
  CUresult r = real(ptr, size, offset, handle, flags);
  if (call.recording()) {
    EventFacts e = call.facts(f::Op::Map, f::Kind::Physical, r);
    e.addr = ptr;
    e.size = size;
    e.has_handle = true;
    e.handle = static_cast<uint64_t>(handle);
    call.record(e);
  }
  return r;
}

CUresult hook_cuMemUnmap(Pfn_cuMemUnmap real, CUdeviceptr ptr, size_t size) {
  DriverCall call(Fn::cuMemUnmap);
  if (call.recording()) {
    EventFacts e = call.facts(f::Op::Unmap, f::Kind::Physical, CUDA_SUCCESS);
    e.addr = ptr;
    e.size = size;
    e.has_result = false;
    call.record(e);
  }
  return real(ptr, size);
}

CUresult hook_cuMemGetInfo_v2(Pfn_cuMemGetInfo_v2 real, size_t* free_bytes, size_t* total_bytes) {
  DriverCall call(Fn::cuMemGetInfo_v2);
  CUresult r = real(free_bytes, total_bytes);
  if (call.recording()) {
    EventFacts e = call.facts(f::Op::MemInfo, f::Kind::None, r);
    e.has_meminfo = r == CUDA_SUCCESS;
    e.free_bytes = e.has_meminfo ? *free_bytes : 0;
    e.total_bytes = e.has_meminfo ? *total_bytes : 0;
    call.record(e);
  }
  return r;
}

// Context destruction / primary context reset end every allocation the context owns: recorded
// before the real call, as a reset of the context's device (docs/capture.md: limitations).
void record_reset(const DriverCall& call, int32_t device) {
  if (!call.recording()) return;
  const int saved = errno;
  EventFacts e = call.facts(f::Op::Reset, f::Kind::None, CUDA_SUCCESS, device);
  e.has_result = false;
  call.record(e);
  errno = saved;
}

int32_t device_of(CUcontext ctx) {
  // cuCtxGetDevice_v2 (CUDA 13) names the context; older drivers: the current context's device.
  auto fn = reinterpret_cast<CUresult (*)(CUdevice*, CUcontext)>(query_function(Query::CtxGetDeviceOf));
  CUdevice d = -1;
  if (fn && fn(&d, ctx) == CUDA_SUCCESS) return d;
  return current_device();
}

CUresult hook_cuCtxDestroy(Pfn_cuCtxDestroy real, CUcontext ctx) {
  DriverCall call(Fn::cuCtxDestroy);
  if (ctx) record_reset(call, device_of(ctx));
  return real(ctx);
}

CUresult hook_cuCtxDestroy_v2(Pfn_cuCtxDestroy_v2 real, CUcontext ctx) {
  DriverCall call(Fn::cuCtxDestroy_v2);
  if (ctx) record_reset(call, device_of(ctx));
  return real(ctx);
}

CUresult hook_cuDevicePrimaryCtxReset(Pfn_cuDevicePrimaryCtxReset real, CUdevice dev) {
  DriverCall call(Fn::cuDevicePrimaryCtxReset);
  record_reset(call, dev);
  return real(dev);
}

CUresult hook_cuDevicePrimaryCtxReset_v2(Pfn_cuDevicePrimaryCtxReset_v2 real, CUdevice dev) {
  DriverCall call(Fn::cuDevicePrimaryCtxReset_v2);
  record_reset(call, dev);
  return real(dev);
}

// The resolvers: every pointer they hand out for a hooked function becomes our wrapper. No HookScope:
// resolving records nothing, and the driver may call back into hooked functions while resolving.
CUresult hook_cuGetProcAddress(Pfn_cuGetProcAddress real, const char* symbol, void** pfn, int cudaVersion,
                               cuuint64_t flags) {
  backend::on_driver_contact();
  CUresult r = real(symbol, pfn, cudaVersion, flags);
  stats().procaddr_calls.fetch_add(1, std::memory_order_relaxed);
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = wrap(find_proc(symbol, cudaVersion, flags), *pfn);
  return r;
}

CUresult hook_cuGetProcAddress_v2(Pfn_cuGetProcAddress_v2 real, const char* symbol, void** pfn, int cudaVersion,
                                  cuuint64_t flags, CUdriverProcAddressQueryResult* symbolStatus) {
  backend::on_driver_contact();
  CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  stats().procaddr_calls.fetch_add(1, std::memory_order_relaxed);
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = wrap(find_proc(symbol, cudaVersion, flags), *pfn);
  return r;
}

// ---- wrappers handed out for driver pointers (slots) and our exported symbols ----
// While CUPTI records, the real function runs untouched (cupti/backend.h). The resolvers are always
// wrapped: a pointer handed out now may be called after a backend fallback.
inline bool passthrough(Fn fn) noexcept {
  return !backend::interpose_recording() && fn != Fn::cuGetProcAddress && fn != Fn::cuGetProcAddress_v2;
}

CUresult no_real_function(Fn fn) {
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) log_line("driver hooks: a cu* function was called but no CUDA driver is loaded");
  return CUDA_ERROR_NOT_INITIALIZED;
}

#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args)                          \
  template <int Slot>                                                                                      \
  CUresult slot_##symbol params {                                                                          \
    auto real = reinterpret_cast<Pfn_##symbol>(g_real[static_cast<int>(Fn::symbol)][Slot].load(           \
        std::memory_order_acquire));                                                                       \
    if (passthrough(Fn::symbol)) return real args;                                                         \
    return hook_##symbol(real, GPUMEMTRACE_UNPACK args);                                                   \
  }
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK

static_assert(kSlots == 4, "kSlotWrappers lists four slots per function");

}  // namespace

void* const kSlotWrappers[kFnCount][kSlots] = {
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args)               \
  {reinterpret_cast<void*>(&slot_##symbol<0>), reinterpret_cast<void*>(&slot_##symbol<1>), \
   reinterpret_cast<void*>(&slot_##symbol<2>), reinterpret_cast<void*>(&slot_##symbol<3>)},
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
};

}  // namespace gpumemtrace::driver

// Exported: programs linked against libcuda.so.1 bind their cu* calls here (we are preloaded).
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args)                  \
  extern "C" __attribute__((visibility("default"))) CUresult symbol params {                     \
    using namespace gpumemtrace::driver;                                                          \
    if (Fn::symbol != Fn::cuGetProcAddress && Fn::symbol != Fn::cuGetProcAddress_v2)              \
      gpumemtrace::backend::on_driver_contact();                                                  \
    auto real = reinterpret_cast<Pfn_##symbol>(export_real(Fn::symbol));                          \
    if (!real) return no_real_function(Fn::symbol);                                               \
    if (Fn::symbol == Fn::cuGetProcAddress || Fn::symbol == Fn::cuGetProcAddress_v2)              \
      note_real_resolver(static_cast<int>(Fn::symbol), reinterpret_cast<void*>(real));            \
    if (passthrough(Fn::symbol)) return real args;                                                \
    return hook_##symbol(real, GPUMEMTRACE_UNPACK args);                                          \
  }
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
