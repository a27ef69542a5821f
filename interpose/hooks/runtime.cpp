// interpose/hooks/runtime.cpp — CUDA runtime API hooks (LD_PRELOAD symbol interposition).
//
// Each hook: open a HookScope, call the real function, hand the facts to the recorder. Frees are
// recorded BEFORE the real free (afterwards the address may already be reused by another thread);
// allocations AFTER the real call returns, failed ones included (an OOM is the most important event).
// Return values, out-parameters, errno and the CUDA error state are exactly what the program would
// have seen: the only runtime calls we add (cudaGetDevice, cudaMemGetInfo, device properties) are made
// after a successful call or an out-of-memory error, when they cannot fail.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "interpose/hooks/real_function.h"
#include "interpose/recorder/recorder.h"

using gpumemtrace::EventFacts;
using gpumemtrace::HookScope;
using gpumemtrace::KeepErrno;
namespace f = gpumemtrace::format;

// Per-thread default stream variants are only declared when compiling with per-thread streams.
extern "C" {
cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream);
}

namespace {

// The real functions, resolved on first use (see real_function.h for how, and why lazily), and
// whether every CUDA runtime we support has them.
constexpr bool Required = true, Optional = false;
#define RUNTIME_HOOK(name, required)                                                                   \
  gpumemtrace::RealFunction<decltype(&::name)> real_##name{#name, gpumemtrace::Library::CudaRuntime}; \
  constexpr bool kRequired_##name = required;
#include "interpose/hooks/runtime_hooks.def"
#undef RUNTIME_HOOK

// Helpers the hooks need but do not interpose.
gpumemtrace::RealFunction<decltype(&::cudaGetDevice)> real_get_device{"cudaGetDevice",
                                                                      gpumemtrace::Library::CudaRuntime};
gpumemtrace::RealFunction<cudaError_t (*)(cudaDeviceProp*, int)> real_get_properties{
    "cudaGetDeviceProperties_v2", gpumemtrace::Library::CudaRuntime};

// Returned when the real function cannot be found (cannot happen for a program that links it; kept
// so a broken installation fails loudly instead of crashing), with one line saying which.
cudaError_t missing_real_function(const char* name, bool required, std::atomic<bool>* logged) {
  if (!logged->exchange(true)) {
    char msg[160];
    snprintf(msg, sizeof(msg), "no real %s in this process (%s); returning cudaErrorSharedObjectSymbolNotFound",
             name, required ? "every supported CUDA runtime has it: a broken installation?"
                            : "optional: this CUDA runtime lacks it");
    gpumemtrace::log_line(msg);
  }
  return cudaErrorSharedObjectSymbolNotFound;
}

// A runtime call we add can only be trusted not to disturb the error state after these results.
bool safe_to_query(cudaError_t rc) { return rc == cudaSuccess || rc == cudaErrorMemoryAllocation; }

int32_t current_device(cudaError_t rc) {
  KeepErrno keep;
  int device = -1;
  if (safe_to_query(rc) && real_get_device && real_get_device()(&device) != cudaSuccess) device = -1;
  return device;
}

// Records the device's free/total bytes as the runtime reports them (nothing when it cannot say).
void record_runtime_meminfo(int32_t device) {
  size_t free_bytes = 0, total_bytes = 0;
  if (real_cudaMemGetInfo && real_cudaMemGetInfo()(&free_bytes, &total_bytes) == cudaSuccess)
    gpumemtrace::record_meminfo(device, "cudaMemGetInfo", free_bytes, total_bytes);
}

// First successful event on a device: its name and memory, and a meminfo event ("at start").
void note_device(int32_t device) {
  if (!gpumemtrace::first_event_on_device(device)) return;
  size_t free_bytes = 0, total_bytes = 0;
  if (!real_cudaMemGetInfo || real_cudaMemGetInfo()(&free_bytes, &total_bytes) != cudaSuccess) return;
  cudaDeviceProp props{};
  const bool named = real_get_properties && real_get_properties()(&props, device) == cudaSuccess;
  gpumemtrace::record_device_info(device, named ? props.name : "", total_bytes, free_bytes);
  gpumemtrace::record_meminfo(device, "cudaMemGetInfo", free_bytes, total_bytes);
}

// The facts of an allocation whose real call returned `rc` (built in place: hooks pass the result
// straight to record_alloc, so the struct is never copied).
EventFacts alloc_facts(const char* api, f::Kind kind, cudaError_t rc, uint64_t addr, uint64_t size) {
  EventFacts facts;
  facts.op = f::Op::Alloc;
  facts.kind = kind;
  facts.api = api;
  facts.addr = rc == cudaSuccess ? addr : 0;
  facts.size = size;
  facts.result = rc;
  facts.device = current_device(rc);
  return facts;
}

// The facts of a free, before the real call: its result is not known yet.
EventFacts free_facts(const char* api, f::Kind kind, const void* ptr) {
  EventFacts facts;
  facts.op = f::Op::Free;
  facts.kind = kind;
  facts.api = api;
  facts.addr = reinterpret_cast<uint64_t>(ptr);
  facts.has_result = false;
  facts.device = current_device(cudaSuccess);
  return facts;
}

// Records an allocation (after the real call). record() keeps errno; the queries added here too.
void record_alloc(const EventFacts& facts) {
  KeepErrno keep;
  gpumemtrace::record(facts);
  if (facts.result == cudaSuccess) note_device(facts.device);  // after: the event keeps its driver_api note
  if (facts.result == cudaErrorMemoryAllocation) record_runtime_meminfo(facts.device);  // how much was free
}

// Records a free (before the real call). Freeing null is a no-op in CUDA (and a common way to
// initialise the context), so it is not an event.
void record_free(const EventFacts& facts) {
  if (facts.addr) gpumemtrace::record(facts);
}

uint64_t handle(const void* p) { return reinterpret_cast<uint64_t>(p); }

uint64_t out_value(void* const* out) { return out ? reinterpret_cast<uint64_t>(*out) : 0; }

// Bytes of one element of a channel format (e.g. float4 = 16), for the array size estimate.
uint64_t element_bytes(const cudaChannelFormatDesc* d) {
  if (!d) return 0;
  return static_cast<uint64_t>(d->x + d->y + d->z + d->w) / 8;
}

}  // namespace

// One line for "resolve or fail": every hook starts with it.
#define REAL_OR_FAIL(name)                                                 \
  auto real = real_##name();                                               \
  if (!real) {                                                             \
    static std::atomic<bool> logged{false};                                \
    return missing_real_function(#name, kRequired_##name, &logged);        \
  }

extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMalloc);
  const cudaError_t rc = real(devPtr, size);
  if (scope.recording()) record_alloc(alloc_facts("cudaMalloc", f::Kind::Device, rc, out_value(devPtr), size));
  return rc;
}

cudaError_t cudaFree(void* devPtr) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaFree);
  if (scope.recording()) record_free(free_facts("cudaFree", f::Kind::Device, devPtr));
  return real(devPtr);
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t stream) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMallocAsync);
  const cudaError_t rc = real(devPtr, size, stream);
  if (scope.recording()) record_alloc(alloc_facts("cudaMallocAsync", f::Kind::Async, rc, out_value(devPtr), size).with_stream(handle(stream)));
  return rc;
}

cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t stream) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMallocAsync_ptsz);
  const cudaError_t rc = real(devPtr, size, stream);
  if (scope.recording())
    record_alloc(alloc_facts("cudaMallocAsync_ptsz", f::Kind::Async, rc, out_value(devPtr), size).with_stream(handle(stream)));
  return rc;
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t stream) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaFreeAsync);
  if (scope.recording()) record_free(free_facts("cudaFreeAsync", f::Kind::Async, devPtr).with_stream(handle(stream)));
  return real(devPtr, stream);
}

cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t stream) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaFreeAsync_ptsz);
  if (scope.recording()) record_free(free_facts("cudaFreeAsync_ptsz", f::Kind::Async, devPtr).with_stream(handle(stream)));
  return real(devPtr, stream);
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMallocFromPoolAsync);
  const cudaError_t rc = real(ptr, size, pool, stream);
  if (scope.recording())
    record_alloc(alloc_facts("cudaMallocFromPoolAsync", f::Kind::Async, rc, out_value(ptr), size).with_pool(handle(pool)).with_stream(handle(stream)));
  return rc;
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMallocFromPoolAsync_ptsz);
  const cudaError_t rc = real(ptr, size, pool, stream);
  if (scope.recording())
    record_alloc(alloc_facts("cudaMallocFromPoolAsync_ptsz", f::Kind::Async, rc, out_value(ptr), size)
                     .with_pool(handle(pool))
                     .with_stream(handle(stream)));
  return rc;
}

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMallocManaged);
  const cudaError_t rc = real(devPtr, size, flags);
  if (scope.recording()) record_alloc(alloc_facts("cudaMallocManaged", f::Kind::Managed, rc, out_value(devPtr), size));
  return rc;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMallocHost);
  const cudaError_t rc = real(ptr, size);
  if (scope.recording()) record_alloc(alloc_facts("cudaMallocHost", f::Kind::Host, rc, out_value(ptr), size));
  return rc;
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaHostAlloc);
  const cudaError_t rc = real(pHost, size, flags);
  if (scope.recording()) record_alloc(alloc_facts("cudaHostAlloc", f::Kind::Host, rc, out_value(pHost), size));
  return rc;
}

cudaError_t cudaFreeHost(void* ptr) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaFreeHost);
  if (scope.recording()) record_free(free_facts("cudaFreeHost", f::Kind::Host, ptr));
  return real(ptr);
}

cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMallocPitch);
  const cudaError_t rc = real(devPtr, pitch, width, height);
  // The real footprint is pitch * height; on failure only the requested width * height is known.
  const uint64_t bytes = rc == cudaSuccess && pitch ? *pitch * height : width * height;
  if (scope.recording()) record_alloc(alloc_facts("cudaMallocPitch", f::Kind::Device, rc, out_value(devPtr), bytes));
  return rc;
}

cudaError_t cudaMalloc3D(cudaPitchedPtr* pitchedDevPtr, cudaExtent extent) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMalloc3D);
  const cudaError_t rc = real(pitchedDevPtr, extent);
  const bool ok = rc == cudaSuccess && pitchedDevPtr;
  const uint64_t rows = extent.height * (extent.depth ? extent.depth : 1);
  const uint64_t bytes = (ok ? pitchedDevPtr->pitch : extent.width) * rows;
  if (scope.recording())
    record_alloc(alloc_facts("cudaMalloc3D", f::Kind::Device, rc, ok ? reinterpret_cast<uint64_t>(pitchedDevPtr->ptr) : 0,
                 bytes));
  return rc;
}

cudaError_t cudaMallocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width, size_t height,
                            unsigned int flags) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMallocArray);
  const cudaError_t rc = real(array, desc, width, height, flags);
  // Arrays have an opaque layout: width * height * element size is a lower bound of the footprint.
  const uint64_t bytes = element_bytes(desc) * width * (height ? height : 1);
  if (scope.recording())
    record_alloc(alloc_facts("cudaMallocArray", f::Kind::Array, rc, array ? reinterpret_cast<uint64_t>(*array) : 0, bytes));
  return rc;
}

cudaError_t cudaFreeArray(cudaArray_t array) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaFreeArray);
  if (scope.recording()) record_free(free_facts("cudaFreeArray", f::Kind::Array, array));
  return real(array);
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMemPoolTrimTo);
  const cudaError_t rc = real(memPool, minBytesToKeep);
  if (scope.recording()) {
    EventFacts facts;
    facts.op = f::Op::Trim;
    facts.kind = f::Kind::Async;
    facts.api = "cudaMemPoolTrimTo";
    facts.size = minBytesToKeep;
    facts.has_pool = true;
    facts.pool = reinterpret_cast<uint64_t>(memPool);
    facts.result = rc;
    facts.device = current_device(rc);
    gpumemtrace::record(facts);
  }
  return rc;
}

cudaError_t cudaDeviceReset(void) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaDeviceReset);
  if (scope.recording()) {  // before the reset: every allocation of the device ends here
    EventFacts facts;
    facts.op = f::Op::Reset;
    facts.kind = f::Kind::None;
    facts.api = "cudaDeviceReset";
    facts.has_result = false;
    facts.device = current_device(cudaSuccess);
    gpumemtrace::record(facts);
  }
  return real();
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  HookScope scope(gpumemtrace::HookLayer::Runtime);
  REAL_OR_FAIL(cudaMemGetInfo);
  const cudaError_t rc = real(free, total);
  if (scope.recording() && rc == cudaSuccess && free && total)
    gpumemtrace::record_meminfo(current_device(rc), "cudaMemGetInfo", *free, *total);
  return rc;
}

}  // extern "C"
