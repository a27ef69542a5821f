// interpose/hooks/driver.cpp — CUDA driver API hooks.
//
// Reached three ways (driver_table.h): our exported cu* symbols (programs linked against libcuda),
// and the wrappers dlsym.cpp hands out for dlsym / cuGetProcAddress / cudaGetDriverEntryPoint.
//
// One event per allocation: a driver hook nested in a runtime hook (cudaMalloc -> cuMemAlloc_v2)
// finds its HookScope not recording and only names itself as the runtime event's driver_api. When it
// is outermost (static cudart, JAX, direct driver use) it records the event itself.
// Frees are recorded BEFORE the real call (the address may be reused right after), allocations after
// it returns, failed ones too (an out-of-memory error is followed by a meminfo event: how much was
// really free). Return values, out-parameters and errno are what the program would have seen: the
// driver calls we add (device of a context, free memory) run inside our scope, only when recording,
// and keep errno (DriverCall::record).
#include "cupti/backend.h"
#include "interpose/hooks/driver_cuda.h"
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

// First event on a device: its name and memory ("device" line) and a meminfo event, from one
// cuMemGetInfo.
void note_device(int32_t device) noexcept {
  if (!first_event_on_device(device)) return;
  auto get_name = reinterpret_cast<CUresult (*)(char*, int, CUdevice)>(query_function(Query::DeviceGetName));
  auto total_mem = reinterpret_cast<CUresult (*)(size_t*, CUdevice)>(query_function(Query::DeviceTotalMem));
  auto mem_info = reinterpret_cast<CUresult (*)(size_t*, size_t*)>(query_function(Query::MemGetInfo));
  char name[96] = {};
  if (!get_name || get_name(name, sizeof(name) - 1, device) != CUDA_SUCCESS) name[0] = '\0';
  size_t free_bytes = 0, total_bytes = 0;
  const bool have_info = mem_info && mem_info(&free_bytes, &total_bytes) == CUDA_SUCCESS;
  size_t device_total = 0;
  if (!total_mem || total_mem(&device_total, device) != CUDA_SUCCESS) device_total = total_bytes;
  record_device_info(device, name, device_total, free_bytes);
  if (have_info) record_meminfo(device, "cuMemGetInfo_v2", free_bytes, total_bytes);
}

// The common part of every hook: the re-entry scope, the facts, and recording them.
//   hook:  DriverCall call(fn);  r = real(...);  call.record(call.after(Op, Kind, r, addr, size));
class DriverCall {
 public:
  // Nested in a runtime hook: names itself as the driver call serving the runtime's event (record()
  // clears that note after each event, so the runtime's own later queries cannot overwrite it).
  explicit DriverCall(Fn fn) noexcept : api_(kFnInfo[static_cast<int>(fn)].symbol) {
    if (!scope_.recording()) HookScope::note_driver_api(api_);
  }
  DriverCall(const DriverCall&) = delete;
  DriverCall& operator=(const DriverCall&) = delete;

  // After the real call returned `r`. The device is the current context's unless set (resolved in
  // record(), only when recording).
  EventFacts after(f::Op op, f::Kind kind, CUresult r, uint64_t addr, uint64_t size) const noexcept {
    EventFacts e = facts(op, kind, addr, size);
    e.result = static_cast<int32_t>(r);
    return e;
  }
  // Before the real call (whatever ends memory: the address may be reused right after): no result.
  EventFacts before(f::Op op, f::Kind kind, uint64_t addr, uint64_t size = 0) const noexcept {
    EventFacts e = facts(op, kind, addr, size);
    e.has_result = false;
    return e;
  }

  // Records `e` when this is the outermost scope; a free of null is no event (a no-op in CUDA).
  // `ctx`: the device is that context's (context destruction). Keeps errno across the device queries.
  // After a successful event, the device's first sighting; after an out-of-memory error, how much
  // was really free (as the runtime hooks do).
  void record(EventFacts e, CUcontext ctx = nullptr) const noexcept {
    if (!scope_.recording() || (e.op == f::Op::Free && !e.addr)) return;
    KeepErrno keep;
    if (e.device == kCurrent) e.device = ctx ? device_of(ctx) : current_device();
    (void)gpumemtrace::record(e);
    if (e.result == CUDA_SUCCESS) note_device(e.device);
    if (e.result == CUDA_ERROR_OUT_OF_MEMORY) record_driver_meminfo(e.device);
  }

  // The program's own free-memory query, as the runtime's cudaMemGetInfo hook records it.
  void record_meminfo(uint64_t free_bytes, uint64_t total_bytes) const noexcept {
    if (!scope_.recording()) return;
    KeepErrno keep;
    gpumemtrace::record_meminfo(current_device(), api_, free_bytes, total_bytes);
  }

 private:
  static constexpr int32_t kCurrent = -2;  // not yet resolved: record() asks the driver

  EventFacts facts(f::Op op, f::Kind kind, uint64_t addr, uint64_t size) const noexcept {
    EventFacts e;
    e.op = op;
    e.kind = kind;
    e.api = api_;
    e.addr = addr;
    e.size = size;
    e.device = kCurrent;
    return e;
  }

  HookScope scope_;
  const char* api_;
};

// What an out-parameter holds after a successful call; 0 after a failed one (garbage, or null).
uint64_t out(CUresult r, const unsigned long long* p) { return r == CUDA_SUCCESS && p ? *p : 0; }  // CUdeviceptr, handle
uint64_t out(CUresult r, void* const* p) { return r == CUDA_SUCCESS && p ? reinterpret_cast<uint64_t>(*p) : 0; }

uint64_t value(const void* p) { return reinterpret_cast<uint64_t>(p); }

// ---- the hooks: one per row of driver_hooks.def (twins with one signature share a body) ----
#define GPUMEMTRACE_UNPACK(...) __VA_ARGS__
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args) \
  using Pfn_##symbol = CUresult (*) params;
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
#define GPUMEMTRACE_SAME_HOOK(twin, body) constexpr auto& hook_##twin = hook_##body;

CUresult hook_cuMemAlloc_v2(Fn fn, Pfn_cuMemAlloc_v2 real, CUdeviceptr* dptr, size_t bytesize) {
  DriverCall call(fn);
  const CUresult r = real(dptr, bytesize);
  call.record(call.after(f::Op::Alloc, f::Kind::Device, r, out(r, dptr), bytesize));
  return r;
}

CUresult hook_cuMemAllocPitch_v2(Fn fn, Pfn_cuMemAllocPitch_v2 real, CUdeviceptr* dptr, size_t* pPitch,
                                 size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes) {
  DriverCall call(fn);
  const CUresult r = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  // The real footprint is pitch * height; on failure only the requested width * height is known.
  const uint64_t bytes = r == CUDA_SUCCESS && pPitch ? *pPitch * Height : WidthInBytes * Height;
  call.record(call.after(f::Op::Alloc, f::Kind::Device, r, out(r, dptr), bytes));
  return r;
}

CUresult hook_cuMemFree_v2(Fn fn, Pfn_cuMemFree_v2 real, CUdeviceptr dptr) {
  DriverCall call(fn);
  call.record(call.before(f::Op::Free, f::Kind::Device, dptr));
  return real(dptr);
}

CUresult hook_cuMemAllocManaged(Fn fn, Pfn_cuMemAllocManaged real, CUdeviceptr* dptr, size_t bytesize,
                                unsigned int flags) {
  DriverCall call(fn);
  const CUresult r = real(dptr, bytesize, flags);
  call.record(call.after(f::Op::Alloc, f::Kind::Managed, r, out(r, dptr), bytesize));
  return r;
}

CUresult hook_cuMemHostAlloc(Fn fn, Pfn_cuMemHostAlloc real, void** pp, size_t bytesize, unsigned int Flags) {
  DriverCall call(fn);
  const CUresult r = real(pp, bytesize, Flags);
  call.record(call.after(f::Op::Alloc, f::Kind::Host, r, out(r, pp), bytesize));
  return r;
}

CUresult hook_cuMemAllocHost_v2(Fn fn, Pfn_cuMemAllocHost_v2 real, void** pp, size_t bytesize) {
  DriverCall call(fn);
  const CUresult r = real(pp, bytesize);
  call.record(call.after(f::Op::Alloc, f::Kind::Host, r, out(r, pp), bytesize));
  return r;
}

CUresult hook_cuMemFreeHost(Fn fn, Pfn_cuMemFreeHost real, void* p) {
  DriverCall call(fn);
  call.record(call.before(f::Op::Free, f::Kind::Host, value(p)));
  return real(p);
}

// Stream-ordered allocations (kind async): the memory comes from, and returns to, a pool.
CUresult hook_cuMemAllocAsync(Fn fn, Pfn_cuMemAllocAsync real, CUdeviceptr* dptr, size_t bytesize,
                              CUstream hStream) {
  DriverCall call(fn);
  const CUresult r = real(dptr, bytesize, hStream);
  call.record(call.after(f::Op::Alloc, f::Kind::Async, r, out(r, dptr), bytesize).with_stream(value(hStream)));
  return r;
}
GPUMEMTRACE_SAME_HOOK(cuMemAllocAsync_ptsz, cuMemAllocAsync)

CUresult hook_cuMemAllocFromPoolAsync(Fn fn, Pfn_cuMemAllocFromPoolAsync real, CUdeviceptr* dptr, size_t bytesize,
                                      CUmemoryPool pool, CUstream hStream) {
  DriverCall call(fn);
  const CUresult r = real(dptr, bytesize, pool, hStream);
  call.record(call.after(f::Op::Alloc, f::Kind::Async, r, out(r, dptr), bytesize)
                  .with_stream(value(hStream))
                  .with_pool(value(pool)));
  return r;
}
GPUMEMTRACE_SAME_HOOK(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync)

CUresult hook_cuMemFreeAsync(Fn fn, Pfn_cuMemFreeAsync real, CUdeviceptr dptr, CUstream hStream) {
  DriverCall call(fn);
  call.record(call.before(f::Op::Free, f::Kind::Async, dptr).with_stream(value(hStream)));
  return real(dptr, hStream);
}
GPUMEMTRACE_SAME_HOOK(cuMemFreeAsync_ptsz, cuMemFreeAsync)

CUresult hook_cuMemPoolTrimTo(Fn fn, Pfn_cuMemPoolTrimTo real, CUmemoryPool pool, size_t minBytesToKeep) {
  DriverCall call(fn);
  const CUresult r = real(pool, minBytesToKeep);
  call.record(call.after(f::Op::Trim, f::Kind::Async, r, 0, minBytesToKeep).with_pool(value(pool)));
  return r;
}

// Virtual memory management: reserve (address space only), create (physical memory: counts toward
// the device's usage; addr = the handle), map / unmap (which range shows which handle).
CUresult hook_cuMemAddressReserve(Fn fn, Pfn_cuMemAddressReserve real, CUdeviceptr* ptr, size_t size,
                                  size_t alignment, CUdeviceptr addr, unsigned long long flags) {
  DriverCall call(fn);
  const CUresult r = real(ptr, size, alignment, addr, flags);
  call.record(call.after(f::Op::Reserve, f::Kind::Virtual, r, out(r, ptr), size));
  return r;
}

CUresult hook_cuMemAddressFree(Fn fn, Pfn_cuMemAddressFree real, CUdeviceptr ptr, size_t size) {
  DriverCall call(fn);
  call.record(call.before(f::Op::Unreserve, f::Kind::Virtual, ptr, size));
  return real(ptr, size);
}

CUresult hook_cuMemCreate(Fn fn, Pfn_cuMemCreate real, CUmemGenericAllocationHandle* handle, size_t size,
                          const CUmemAllocationProp* prop, unsigned long long flags) {
  DriverCall call(fn);
  const CUresult r = real(handle, size, prop, flags);
  EventFacts e = call.after(f::Op::Alloc, f::Kind::Physical, r, out(r, handle), size);
  // The device the memory is on, from its properties (not the current context's); host memory: none.
  e.device = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
  if (r == CUDA_SUCCESS) e.with_handle(e.addr);
  call.record(e);
  return r;
}

CUresult hook_cuMemRelease(Fn fn, Pfn_cuMemRelease real, CUmemGenericAllocationHandle handle) {
  DriverCall call(fn);
  call.record(call.before(f::Op::Free, f::Kind::Physical, handle).with_handle(handle));
  return real(handle);
}

CUresult hook_cuMemMap(Fn fn, Pfn_cuMemMap real, CUdeviceptr ptr, size_t size, size_t offset,
                       CUmemGenericAllocationHandle handle, unsigned long long flags) {
  DriverCall call(fn);
  const CUresult r = real(ptr, size, offset, handle, flags);
  call.record(call.after(f::Op::Map, f::Kind::Physical, r, ptr, size).with_handle(handle));
  return r;
}

CUresult hook_cuMemUnmap(Fn fn, Pfn_cuMemUnmap real, CUdeviceptr ptr, size_t size) {
  DriverCall call(fn);
  call.record(call.before(f::Op::Unmap, f::Kind::Physical, ptr, size));
  return real(ptr, size);
}

CUresult hook_cuMemGetInfo_v2(Fn fn, Pfn_cuMemGetInfo_v2 real, size_t* free_bytes, size_t* total_bytes) {
  DriverCall call(fn);
  const CUresult r = real(free_bytes, total_bytes);
  if (r == CUDA_SUCCESS && free_bytes && total_bytes) call.record_meminfo(*free_bytes, *total_bytes);
  return r;
}

// Context destruction / primary context reset end every allocation the context owns: recorded
// before the real call, as a reset of the context's device (docs/capture.md: limitations).
CUresult hook_cuCtxDestroy(Fn fn, Pfn_cuCtxDestroy real, CUcontext ctx) {
  DriverCall call(fn);
  if (ctx) call.record(call.before(f::Op::Reset, f::Kind::None, 0), ctx);
  return real(ctx);
}
GPUMEMTRACE_SAME_HOOK(cuCtxDestroy_v2, cuCtxDestroy)

CUresult hook_cuDevicePrimaryCtxReset(Fn fn, Pfn_cuDevicePrimaryCtxReset real, CUdevice dev) {
  DriverCall call(fn);
  EventFacts e = call.before(f::Op::Reset, f::Kind::None, 0);
  e.device = dev;
  call.record(e);
  return real(dev);
}
GPUMEMTRACE_SAME_HOOK(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset)

// The resolvers: every pointer they hand out for a hooked function becomes our wrapper. No HookScope:
// resolving records nothing, and the driver may call back into hooked functions while resolving.
CUresult resolved(CUresult r, const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  stats().procaddr_calls.fetch_add(1, std::memory_order_relaxed);
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = wrap(find_proc(symbol, cudaVersion, flags), *pfn);
  return r;
}

CUresult hook_cuGetProcAddress(Fn, Pfn_cuGetProcAddress real, const char* symbol, void** pfn, int cudaVersion,
                               cuuint64_t flags) {
  backend::on_driver_contact();
  return resolved(real(symbol, pfn, cudaVersion, flags), symbol, pfn, cudaVersion, flags);
}

CUresult hook_cuGetProcAddress_v2(Fn, Pfn_cuGetProcAddress_v2 real, const char* symbol, void** pfn,
                                  int cudaVersion, cuuint64_t flags, CUdriverProcAddressQueryResult* symbolStatus) {
  backend::on_driver_contact();
  return resolved(real(symbol, pfn, cudaVersion, flags, symbolStatus), symbol, pfn, cudaVersion, flags);
}

// ---- wrappers handed out for driver pointers (slots) and our exported symbols ----
// While CUPTI records, the real function runs untouched (cupti/backend.h). The resolvers are always
// wrapped: a pointer handed out now may be called after a backend fallback.
inline bool passthrough(Fn fn) noexcept { return !is_resolver(fn) && !backend::interpose_recording(); }

CUresult no_real_function() {
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
    return hook_##symbol(Fn::symbol, real, GPUMEMTRACE_UNPACK args);                                       \
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
// export_real remembers the real resolvers (for the hooks' own queries) when it first finds them.
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args)                  \
  extern "C" __attribute__((visibility("default"))) CUresult symbol params {                     \
    using namespace gpumemtrace::driver;                                                          \
    if (!is_resolver(Fn::symbol)) gpumemtrace::backend::on_driver_contact();                      \
    auto real = reinterpret_cast<Pfn_##symbol>(export_real(Fn::symbol));                          \
    if (!real) return no_real_function();                                                         \
    if (passthrough(Fn::symbol)) return real args;                                                \
    return hook_##symbol(Fn::symbol, real, GPUMEMTRACE_UNPACK args);                              \
  }
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
