// tests/sim/fake_libcuda.cpp — a simulated CUDA driver: build/sim/libcuda.so.1.
//
// The driver subset gpumemtrace's driver hooks need, plus what a program needs to get there: cuInit,
// cuDriverGetVersion, cuGetProcAddress[_v2] (base name + cudaVersion + flags -> variant, the _ptsz
// variants under CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), devices, primary and ordinary
// contexts, cuMemAlloc & co, stream-ordered pools (grow, trim), and virtual memory management.
//
// Like the real driver, cuGetProcAddress hands out INTERNAL entry points (not the exported symbols),
// so the hooks see different pointers for one function depending on the route.
//
// Device memory is a fake address space (bump allocator, 512-byte aligned; never dereferenceable) with
// a capacity per device, so out-of-memory can be provoked; host memory is real memory.
// Settings: tests/sim/sim_settings.h, and GPUMEMTRACE_SIM_NO_DEVICE=1 (cuInit fails with 100).
//
// CUPTI's driver-domain callbacks are simulated too: the memory functions gpumemtrace hooks call a
// dispatcher (registered by the simulated libcupti, tests/sim/fake_libcupti.cpp) at API_ENTER and
// API_EXIT with CUPTI's parameter struct, on every route (exported symbol or cuGetProcAddress), and
// outside the driver's lock, as the real driver does.
// Thread-safety: one mutex around all state (a test double, not a fast path).
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
// CUPTI's callback data, ids and parameter structs, without <cupti.h>: it redeclares types that the
// exact-name mode of <cuda.h> above already declares.
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <generated_cuda_meta.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "tests/sim/sim_settings.h"

extern "C" {
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
}

namespace {

constexpr uint64_t kAlign = 512;
constexpr uint64_t kGranularity = 2 << 20;
constexpr int kMaxDevices = 8;

struct FakeCtx {
  int device;
  bool primary;
};

struct FakePool {
  int device;
  uint64_t reserved = 0;  // bytes the pool holds (counted as device usage)
  uint64_t used = 0;      // bytes handed out
};

struct Allocation {
  uint64_t size;
  int device;
  enum Kind { Device, Managed, Host, Async } kind;
  FakePool* pool;
};

struct State {
  std::mutex mu;
  bool initialized = false;
  int devices = 1;
  uint64_t capacity = 1ull << 30;
  uint64_t used[kMaxDevices] = {};
  uint64_t next_addr[kMaxDevices] = {};
  uint64_t next_va = 0x7e0000000000ull;
  uint64_t next_handle = 0x1000;
  FakeCtx primary[kMaxDevices];
  int primary_refs[kMaxDevices] = {};
  FakePool default_pool[kMaxDevices];
  std::map<uint64_t, Allocation> allocs;
  std::map<uint64_t, uint64_t> reservations;                 // va -> size
  std::map<uint64_t, std::pair<uint64_t, int>> handles;      // handle -> (size, device)
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> mappings;  // va -> (size, handle)
  std::set<const FakeCtx*> contexts;                           // made by cuCtxCreate, not destroyed yet
};

// A bad GPUMEMTRACE_SIM_* value stops the program when the library is loaded (sim_settings.h).
__attribute__((constructor)) void check_sim_settings() { gpumemtrace::sim::check_settings(kMaxDevices); }

State& st() {
  static State* s = [] {
    auto* s = new State;
    s->devices = gpumemtrace::sim::device_count(kMaxDevices);
    s->capacity = gpumemtrace::sim::device_capacity();
    for (int d = 0; d < kMaxDevices; ++d) {
      s->next_addr[d] = 0x7f0000000000ull + (uint64_t(d) << 36);
      s->primary[d] = {d, true};
      s->default_pool[d].device = d;
    }
    return s;
  }();
  return *s;
}

thread_local FakeCtx* t_current = nullptr;

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
// A request no device holds, whatever its rounding: refused before any arithmetic can wrap (the real
// driver says out of memory for cuMemAlloc(&p, SIZE_MAX)).
bool too_large(uint64_t bytes, const State& s) { return bytes > s.capacity; }

// Precondition for the memory calls: initialized, a current context. Lock held by the caller.
CUresult check_ctx(State& s) {
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

CUresult device_alloc(State& s, CUdeviceptr* dptr, size_t bytesize, Allocation::Kind kind) {
  if (CUresult r = check_ctx(s)) return r;
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (too_large(bytesize, s)) return CUDA_ERROR_OUT_OF_MEMORY;
  const int d = t_current->device;
  const uint64_t size = round_up(bytesize, kAlign);
  if (kind != Allocation::Managed && s.used[d] + size > s.capacity) return CUDA_ERROR_OUT_OF_MEMORY;
  const uint64_t addr = s.next_addr[d];
  s.next_addr[d] += size;
  if (kind != Allocation::Managed) s.used[d] += size;
  s.allocs[addr] = {bytesize, d, kind, nullptr};
  *dptr = addr;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------------
// Implementations (what cuGetProcAddress hands out); the exported symbols below forward to them.

CUresult f_cuInit(unsigned int) {
  const char* no_dev = getenv("GPUMEMTRACE_SIM_NO_DEVICE");
  if (no_dev && strcmp(no_dev, "1") == 0) return CUDA_ERROR_NO_DEVICE;
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  s.initialized = true;
  return CUDA_SUCCESS;
}

CUresult f_cuDriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 13000;
  return CUDA_SUCCESS;
}

CUresult f_cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                               CUdriverProcAddressQueryResult* status);
CUresult f_cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  return f_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, nullptr);
}

CUresult f_cuGetExportTable(const void**, const CUuuid*) { return CUDA_ERROR_NOT_SUPPORTED; }

CUresult f_cuGetErrorName(CUresult error, const char** p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *p = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *p = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_INVALID_VALUE: *p = "CUDA_ERROR_INVALID_VALUE"; break;
    default: *p = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}
CUresult f_cuGetErrorString(CUresult error, const char** p) { return f_cuGetErrorName(error, p); }

CUresult f_cuDeviceGetCount(int* n) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = s.devices;
  return CUDA_SUCCESS;
}

CUresult f_cuDeviceGet(CUdevice* dev, int ordinal) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dev || ordinal < 0 || ordinal >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult f_cuDeviceGetName(char* name, int len, CUdevice dev) {
  State& s = st();
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!name || len <= 0 || dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_VALUE;
  strncpy(name, "gpumemtrace simulated GPU", static_cast<size_t>(len));
  name[len - 1] = '\0';
  return CUDA_SUCCESS;
}

CUresult f_cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  State& s = st();
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!bytes || dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_VALUE;
  *bytes = s.capacity;
  return CUDA_SUCCESS;
}

CUresult f_cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pctx || dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_VALUE;
  ++s.primary_refs[dev];
  *pctx = reinterpret_cast<CUcontext>(&s.primary[dev]);
  return CUDA_SUCCESS;
}

// Ends every allocation of a device (primary context reset / last release, context destroy).
void drop_device_memory(State& s, int d) {
  for (auto it = s.allocs.begin(); it != s.allocs.end();) {
    if (it->second.device == d && it->second.kind != Allocation::Host) it = s.allocs.erase(it);
    else ++it;
  }
  s.used[d] = 0;
  s.default_pool[d].reserved = s.default_pool[d].used = 0;
}

CUresult f_cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (dev < 0 || dev >= s.devices || s.primary_refs[dev] == 0) return CUDA_ERROR_INVALID_VALUE;
  if (--s.primary_refs[dev] == 0) drop_device_memory(s, dev);
  return CUDA_SUCCESS;
}

CUresult f_cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  drop_device_memory(s, dev);
  return CUDA_SUCCESS;
}

CUresult f_cuCtxCreate_v2(CUcontext* pctx, unsigned int, CUdevice dev) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pctx || dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_VALUE;
  t_current = new FakeCtx{dev, false};
  s.contexts.insert(t_current);
  *pctx = reinterpret_cast<CUcontext>(t_current);
  return CUDA_SUCCESS;
}

CUresult f_cuCtxDestroy_v2(CUcontext ctx) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  auto* c = reinterpret_cast<FakeCtx*>(ctx);
  if (!s.contexts.count(c)) return CUDA_ERROR_INVALID_CONTEXT;  // a handle, checked as the driver does
  drop_device_memory(s, c->device);  // simplification: one context per device at a time
  if (t_current == c) t_current = nullptr;
  s.contexts.erase(c);
  delete c;
  return CUDA_SUCCESS;
}

CUresult f_cuCtxSetCurrent(CUcontext ctx) {
  t_current = reinterpret_cast<FakeCtx*>(ctx);
  return CUDA_SUCCESS;
}

CUresult f_cuCtxGetCurrent(CUcontext* pctx) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(t_current);
  return CUDA_SUCCESS;
}

CUresult f_cuCtxGetDevice(CUdevice* dev) {
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = t_current->device;
  return CUDA_SUCCESS;
}

CUresult f_cuCtxGetDevice_v2(CUdevice* dev, CUcontext ctx) {
  if (!ctx) return f_cuCtxGetDevice(dev);
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  State& s = st();
  const auto* c = reinterpret_cast<const FakeCtx*>(ctx);
  {
    std::lock_guard<std::mutex> l(s.mu);
    const bool primary = c >= s.primary && c < s.primary + kMaxDevices;
    if (!primary && !s.contexts.count(c)) return CUDA_ERROR_INVALID_CONTEXT;
  }
  *dev = c->device;
  return CUDA_SUCCESS;
}

CUresult f_cuCtxSynchronize() { return t_current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }

CUresult f_cuStreamCreate(CUstream* s, unsigned int) {
  static std::atomic<uintptr_t> next{0x5000};
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = reinterpret_cast<CUstream>(next.fetch_add(0x10));
  return CUDA_SUCCESS;
}
CUresult f_cuStreamDestroy_v2(CUstream) { return CUDA_SUCCESS; }
CUresult f_cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }

CUresult f_cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (CUresult r = check_ctx(s)) return r;
  if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
  *total = s.capacity;
  *free_bytes = s.capacity - s.used[t_current->device];
  return CUDA_SUCCESS;
}

CUresult f_cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  return device_alloc(s, dptr, bytesize, Allocation::Device);
}

CUresult f_cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned int elem) {
  if (!pitch || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (too_large(width, s)) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t p = round_up(width, 512);
  size_t bytes;
  if (__builtin_mul_overflow(p, height, &bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = device_alloc(s, dptr, bytes, Allocation::Device);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}

CUresult f_cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  return device_alloc(s, dptr, bytesize, Allocation::Managed);
}

CUresult free_kind(CUdeviceptr dptr, Allocation::Kind kind) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dptr == 0) return CUDA_SUCCESS;
  auto it = s.allocs.find(dptr);
  if (it == s.allocs.end() || it->second.kind != kind) return CUDA_ERROR_INVALID_VALUE;
  if (kind == Allocation::Device) s.used[it->second.device] -= round_up(it->second.size, kAlign);
  s.allocs.erase(it);
  return CUDA_SUCCESS;
}

CUresult f_cuMemFree_v2(CUdeviceptr dptr) {
  {
    State& s = st();
    std::lock_guard<std::mutex> l(s.mu);
    auto it = s.allocs.find(dptr);
    if (it != s.allocs.end() && it->second.kind == Allocation::Managed) {
      s.allocs.erase(it);
      return CUDA_SUCCESS;
    }
  }
  return free_kind(dptr, Allocation::Device);
}

CUresult f_cuMemHostAlloc(void** pp, size_t bytesize, unsigned int) {
  State& s = st();
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytesize > (uint64_t{1} << 46)) return CUDA_ERROR_OUT_OF_MEMORY;  // no host holds it
  void* p = aligned_alloc(4096, round_up(bytesize, 4096));
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> l(s.mu);
  s.allocs[reinterpret_cast<uint64_t>(p)] = {bytesize, -1, Allocation::Host, nullptr};
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult f_cuMemAllocHost_v2(void** pp, size_t bytesize) { return f_cuMemHostAlloc(pp, bytesize, 0); }

CUresult f_cuMemFreeHost(void* p) {
  CUresult r = free_kind(reinterpret_cast<CUdeviceptr>(p), Allocation::Host);
  if (r == CUDA_SUCCESS) free(p);
  return r;
}

// ---- stream-ordered allocation ----
CUresult pool_alloc(CUdeviceptr* dptr, size_t bytesize, FakePool* pool) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (CUresult r = check_ctx(s)) return r;
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (too_large(bytesize, s)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!pool) pool = &s.default_pool[t_current->device];
  const int d = pool->device;
  const uint64_t size = round_up(bytesize, kAlign);
  if (pool->used + size > pool->reserved) {
    const uint64_t grow = round_up(pool->used + size - pool->reserved, kGranularity);
    if (s.used[d] + grow > s.capacity) return CUDA_ERROR_OUT_OF_MEMORY;
    pool->reserved += grow;
    s.used[d] += grow;
  }
  pool->used += size;
  const uint64_t addr = s.next_addr[d];
  s.next_addr[d] += size;
  s.allocs[addr] = {bytesize, d, Allocation::Async, pool};
  *dptr = addr;
  return CUDA_SUCCESS;
}

CUresult f_cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream) { return pool_alloc(dptr, bytesize, nullptr); }
CUresult f_cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return pool_alloc(dptr, bytesize, reinterpret_cast<FakePool*>(pool));
}

CUresult f_cuMemFreeAsync(CUdeviceptr dptr, CUstream) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  auto it = s.allocs.find(dptr);
  if (it == s.allocs.end() || it->second.kind != Allocation::Async) return CUDA_ERROR_INVALID_VALUE;
  it->second.pool->used -= round_up(it->second.size, kAlign);
  s.allocs.erase(it);
  return CUDA_SUCCESS;
}

CUresult f_cuMemPoolTrimTo(CUmemoryPool handle, size_t keep) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  auto* pool = reinterpret_cast<FakePool*>(handle);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (keep >= pool->reserved) return CUDA_SUCCESS;  // keeps all it has (and no rounding of keep can wrap)
  const uint64_t floor = pool->used > keep ? round_up(pool->used, kGranularity) : round_up(keep, kGranularity);
  if (pool->reserved > floor) {
    s.used[pool->device] -= pool->reserved - floor;
    pool->reserved = floor;
  }
  return CUDA_SUCCESS;
}

CUresult f_cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (!pool || !props || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  auto* p = new FakePool;
  p->device = props->location.id;
  *pool = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}

CUresult f_cuMemPoolDestroy(CUmemoryPool pool) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  auto* p = reinterpret_cast<FakePool*>(pool);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  s.used[p->device] -= p->reserved;
  delete p;
  return CUDA_SUCCESS;
}

CUresult f_cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  State& s = st();
  if (!pool || dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_VALUE;
  *pool = reinterpret_cast<CUmemoryPool>(&s.default_pool[dev]);
  return CUDA_SUCCESS;
}

// ---- virtual memory management ----
CUresult f_cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) {
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  *g = kGranularity;
  return CUDA_SUCCESS;
}

CUresult f_cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr, unsigned long long) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!ptr || size == 0 || size % kGranularity) return CUDA_ERROR_INVALID_VALUE;
  if (size > (uint64_t{1} << 44)) return CUDA_ERROR_OUT_OF_MEMORY;  // more address space than there is
  *ptr = s.next_va;
  s.reservations[s.next_va] = size;
  s.next_va += size;
  return CUDA_SUCCESS;
}

CUresult f_cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  auto it = s.reservations.find(ptr);
  if (it == s.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  s.reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult f_cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                       unsigned long long) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!handle || !prop || size == 0 || size % kGranularity || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      prop->location.id < 0 || prop->location.id >= s.devices)
    return CUDA_ERROR_INVALID_VALUE;
  const int d = prop->location.id;
  if (too_large(size, s) || s.used[d] + size > s.capacity) return CUDA_ERROR_OUT_OF_MEMORY;
  s.used[d] += size;
  *handle = s.next_handle;
  s.handles[s.next_handle] = {size, d};
  s.next_handle += 0x10;
  return CUDA_SUCCESS;
}

CUresult f_cuMemRelease(CUmemGenericAllocationHandle handle) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  auto it = s.handles.find(handle);
  if (it == s.handles.end()) return CUDA_ERROR_INVALID_VALUE;
  s.used[it->second.second] -= it->second.first;
  s.handles.erase(it);
  return CUDA_SUCCESS;
}

CUresult f_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                    unsigned long long) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  auto h = s.handles.find(handle);
  uint64_t end;
  if (h == s.handles.end() || __builtin_add_overflow(offset, size, &end) || end > h->second.first)
    return CUDA_ERROR_INVALID_VALUE;
  auto r = s.reservations.upper_bound(ptr);
  if (r == s.reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --r;
  if (__builtin_add_overflow(ptr, size, &end) || end > r->first + r->second) return CUDA_ERROR_INVALID_VALUE;
  s.mappings[ptr] = {size, handle};
  return CUDA_SUCCESS;
}

CUresult f_cuMemUnmap(CUdeviceptr ptr, size_t size) {
  State& s = st();
  std::lock_guard<std::mutex> l(s.mu);
  auto it = s.mappings.find(ptr);
  if (it == s.mappings.end() || it->second.first != size) return CUDA_ERROR_INVALID_VALUE;
  s.mappings.erase(it);
  return CUDA_SUCCESS;
}

CUresult f_cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) { return CUDA_SUCCESS; }

// The _ptsz entries reuse the same implementation (the fake has no default-stream semantics) through
// distinct functions so that the pointers differ, as in the real driver.
CUresult f_cuMemAllocAsync_ptsz(CUdeviceptr* d, size_t b, CUstream s) { return pool_alloc(d, b, nullptr); }
CUresult f_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* d, size_t b, CUmemoryPool p, CUstream s) {
  return f_cuMemAllocFromPoolAsync(d, b, p, s);
}
CUresult f_cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s) { return f_cuMemFreeAsync(d, s); }

// ---------------------------------------------------------------------------------------------------
// CUPTI callbacks: t_<symbol> runs f_<symbol> between the ENTER and EXIT callbacks of its id.
using ApiCallback = void (*)(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data);
std::atomic<ApiCallback> g_api_callback{nullptr};

template <typename Params, typename Impl>
CUresult with_callbacks(CUpti_CallbackId cbid, const char* name, Params params, Impl impl) {
  const ApiCallback callback = g_api_callback.load(std::memory_order_acquire);
  if (!callback) return impl();
  CUresult result = CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.functionName = name;
  data.functionParams = &params;
  data.functionReturnValue = &result;
  data.callbackSite = CUPTI_API_ENTER;
  callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  result = impl();
  data.callbackSite = CUPTI_API_EXIT;
  callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  return result;
}

#define UNPACK(...) __VA_ARGS__
#define TRACED(symbol, params, args)                                                                      \
  CUresult t_##symbol params {                                                                            \
    return with_callbacks(CUPTI_DRIVER_TRACE_CBID_##symbol, #symbol, symbol##_params{UNPACK args},        \
                          [&] { return f_##symbol args; });                                               \
  }
#define TRACED_FUNCTIONS(X)                                                                               \
  X(cuMemGetInfo_v2, (size_t* f, size_t* t), (f, t))                                                     \
  X(cuMemAlloc_v2, (CUdeviceptr* d, size_t b), (d, b))                                                    \
  X(cuMemAllocPitch_v2, (CUdeviceptr* d, size_t* p, size_t w, size_t h, unsigned int e), (d, p, w, h, e)) \
  X(cuMemFree_v2, (CUdeviceptr d), (d))                                                                   \
  X(cuMemAllocManaged, (CUdeviceptr* d, size_t b, unsigned int f), (d, b, f))                             \
  X(cuMemHostAlloc, (void** p, size_t b, unsigned int f), (p, b, f))                                      \
  X(cuMemAllocHost_v2, (void** p, size_t b), (p, b))                                                      \
  X(cuMemFreeHost, (void* p), (p))                                                                        \
  X(cuMemAllocAsync, (CUdeviceptr* d, size_t b, CUstream s), (d, b, s))                                   \
  X(cuMemAllocAsync_ptsz, (CUdeviceptr* d, size_t b, CUstream s), (d, b, s))                              \
  X(cuMemAllocFromPoolAsync, (CUdeviceptr* d, size_t b, CUmemoryPool p, CUstream s), (d, b, p, s))        \
  X(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr* d, size_t b, CUmemoryPool p, CUstream s), (d, b, p, s))   \
  X(cuMemFreeAsync, (CUdeviceptr d, CUstream s), (d, s))                                                  \
  X(cuMemFreeAsync_ptsz, (CUdeviceptr d, CUstream s), (d, s))                                             \
  X(cuMemPoolTrimTo, (CUmemoryPool p, size_t k), (p, k))                                                  \
  X(cuMemAddressReserve, (CUdeviceptr* p, size_t s, size_t a, CUdeviceptr h, unsigned long long f),       \
    (p, s, a, h, f))                                                                                      \
  X(cuMemAddressFree, (CUdeviceptr p, size_t s), (p, s))                                                  \
  X(cuMemCreate, (CUmemGenericAllocationHandle* h, size_t s, const CUmemAllocationProp* p,                \
    unsigned long long f), (h, s, p, f))                                                                  \
  X(cuMemRelease, (CUmemGenericAllocationHandle h), (h))                                                  \
  X(cuMemMap, (CUdeviceptr p, size_t s, size_t o, CUmemGenericAllocationHandle h, unsigned long long f),   \
    (p, s, o, h, f))                                                                                      \
  X(cuMemUnmap, (CUdeviceptr p, size_t s), (p, s))                                                        \
  X(cuCtxDestroy_v2, (CUcontext c), (c))                                                                  \
  X(cuDevicePrimaryCtxReset_v2, (CUdevice d), (d))
TRACED_FUNCTIONS(TRACED)

// ---------------------------------------------------------------------------------------------------
// cuGetProcAddress: base name + version -> the newest variant not newer than the request.
enum class Flavor { Any, Legacy, PerThread };
struct ProcRow {
  const char* name;
  int since;
  Flavor flavor;
  void* fn;
};

#define ROW(name, since, flavor, fn) {name, since, Flavor::flavor, reinterpret_cast<void*>(&fn)}

const ProcRow kProcs[] = {
    ROW("cuInit", 2000, Any, f_cuInit),
    ROW("cuDriverGetVersion", 2020, Any, f_cuDriverGetVersion),
    ROW("cuGetProcAddress", 11030, Any, f_cuGetProcAddress),
    ROW("cuGetProcAddress", 12000, Any, f_cuGetProcAddress_v2),
    ROW("cuGetExportTable", 3000, Any, f_cuGetExportTable),
    ROW("cuGetErrorName", 6000, Any, f_cuGetErrorName),
    ROW("cuGetErrorString", 6000, Any, f_cuGetErrorString),
    ROW("cuDeviceGetCount", 2000, Any, f_cuDeviceGetCount),
    ROW("cuDeviceGet", 2000, Any, f_cuDeviceGet),
    ROW("cuDeviceGetName", 2000, Any, f_cuDeviceGetName),
    ROW("cuDeviceTotalMem", 3020, Any, f_cuDeviceTotalMem_v2),
    ROW("cuDevicePrimaryCtxRetain", 7000, Any, f_cuDevicePrimaryCtxRetain),
    ROW("cuDevicePrimaryCtxRelease", 11000, Any, f_cuDevicePrimaryCtxRelease_v2),
    ROW("cuDevicePrimaryCtxReset", 11000, Any, t_cuDevicePrimaryCtxReset_v2),
    ROW("cuCtxCreate", 3020, Any, f_cuCtxCreate_v2),
    ROW("cuCtxDestroy", 4000, Any, t_cuCtxDestroy_v2),
    ROW("cuCtxSetCurrent", 4000, Any, f_cuCtxSetCurrent),
    ROW("cuCtxGetCurrent", 4000, Any, f_cuCtxGetCurrent),
    ROW("cuCtxGetDevice", 2000, Any, f_cuCtxGetDevice),
    ROW("cuCtxGetDevice", 13000, Any, f_cuCtxGetDevice_v2),
    ROW("cuCtxSynchronize", 2000, Any, f_cuCtxSynchronize),
    ROW("cuStreamCreate", 2000, Any, f_cuStreamCreate),
    ROW("cuStreamDestroy", 4000, Any, f_cuStreamDestroy_v2),
    ROW("cuStreamSynchronize", 2000, Any, f_cuStreamSynchronize),
    ROW("cuMemGetInfo", 3020, Any, t_cuMemGetInfo_v2),
    ROW("cuMemAlloc", 3020, Any, t_cuMemAlloc_v2),
    ROW("cuMemAllocPitch", 3020, Any, t_cuMemAllocPitch_v2),
    ROW("cuMemFree", 3020, Any, t_cuMemFree_v2),
    ROW("cuMemAllocManaged", 6000, Any, t_cuMemAllocManaged),
    ROW("cuMemHostAlloc", 2020, Any, t_cuMemHostAlloc),
    ROW("cuMemAllocHost", 3020, Any, t_cuMemAllocHost_v2),
    ROW("cuMemFreeHost", 2000, Any, t_cuMemFreeHost),
    ROW("cuMemAllocAsync", 11020, Legacy, t_cuMemAllocAsync),
    ROW("cuMemAllocAsync", 11020, PerThread, t_cuMemAllocAsync_ptsz),
    ROW("cuMemAllocFromPoolAsync", 11020, Legacy, t_cuMemAllocFromPoolAsync),
    ROW("cuMemAllocFromPoolAsync", 11020, PerThread, t_cuMemAllocFromPoolAsync_ptsz),
    ROW("cuMemFreeAsync", 11020, Legacy, t_cuMemFreeAsync),
    ROW("cuMemFreeAsync", 11020, PerThread, t_cuMemFreeAsync_ptsz),
    ROW("cuMemPoolTrimTo", 11020, Any, t_cuMemPoolTrimTo),
    ROW("cuMemPoolCreate", 11020, Any, f_cuMemPoolCreate),
    ROW("cuMemPoolDestroy", 11020, Any, f_cuMemPoolDestroy),
    ROW("cuDeviceGetDefaultMemPool", 11020, Any, f_cuDeviceGetDefaultMemPool),
    ROW("cuMemGetAllocationGranularity", 10020, Any, f_cuMemGetAllocationGranularity),
    ROW("cuMemAddressReserve", 10020, Any, t_cuMemAddressReserve),
    ROW("cuMemAddressFree", 10020, Any, t_cuMemAddressFree),
    ROW("cuMemCreate", 10020, Any, t_cuMemCreate),
    ROW("cuMemRelease", 10020, Any, t_cuMemRelease),
    ROW("cuMemMap", 10020, Any, t_cuMemMap),
    ROW("cuMemUnmap", 10020, Any, t_cuMemUnmap),
    ROW("cuMemSetAccess", 10020, Any, f_cuMemSetAccess),
};

CUresult f_cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                               CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const ProcRow* best = nullptr;
  bool known = false;
  for (const ProcRow& row : kProcs) {
    if (strcmp(row.name, symbol) != 0) continue;
    known = true;
    if (row.since > cudaVersion) continue;
    if ((row.flavor == Flavor::Legacy && per_thread) || (row.flavor == Flavor::PerThread && !per_thread)) continue;
    if (!best || row.since > best->since) best = &row;
  }
  if (!best) {
    if (status) *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  *pfn = best->fn;
  return CUDA_SUCCESS;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Exported symbols (what programs linked against libcuda.so.1 and dlsym see).
#define EXPORT(ret, name, params, args) \
  extern "C" __attribute__((visibility("default"))) ret name params { return f_##name args; }
#define EXPORT_TRACED(name, params, args) \
  extern "C" __attribute__((visibility("default"))) CUresult name params { return t_##name args; }
TRACED_FUNCTIONS(EXPORT_TRACED)

// For the simulated libcupti: where the driver-domain callbacks go (null: nowhere).
extern "C" __attribute__((visibility("default"))) void gpumemtrace_sim_set_api_callback(ApiCallback callback) {
  g_api_callback.store(callback, std::memory_order_release);
}

EXPORT(CUresult, cuInit, (unsigned int f), (f))
EXPORT(CUresult, cuDriverGetVersion, (int* v), (v))
EXPORT(CUresult, cuGetProcAddress, (const char* s, void** p, int v, cuuint64_t f), (s, p, v, f))
EXPORT(CUresult, cuGetProcAddress_v2,
       (const char* s, void** p, int v, cuuint64_t f, CUdriverProcAddressQueryResult* q), (s, p, v, f, q))
EXPORT(CUresult, cuGetExportTable, (const void** t, const CUuuid* id), (t, id))
EXPORT(CUresult, cuGetErrorName, (CUresult e, const char** p), (e, p))
EXPORT(CUresult, cuGetErrorString, (CUresult e, const char** p), (e, p))
EXPORT(CUresult, cuDeviceGetCount, (int* n), (n))
EXPORT(CUresult, cuDeviceGet, (CUdevice* d, int o), (d, o))
EXPORT(CUresult, cuDeviceGetName, (char* n, int l, CUdevice d), (n, l, d))
EXPORT(CUresult, cuDeviceTotalMem_v2, (size_t* b, CUdevice d), (b, d))
EXPORT(CUresult, cuDevicePrimaryCtxRetain, (CUcontext* c, CUdevice d), (c, d))
EXPORT(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice d), (d))
EXPORT(CUresult, cuCtxCreate_v2, (CUcontext* c, unsigned int f, CUdevice d), (c, f, d))
EXPORT(CUresult, cuCtxSetCurrent, (CUcontext c), (c))
EXPORT(CUresult, cuCtxGetCurrent, (CUcontext* c), (c))
EXPORT(CUresult, cuCtxGetDevice, (CUdevice* d), (d))
EXPORT(CUresult, cuCtxGetDevice_v2, (CUdevice* d, CUcontext c), (d, c))
EXPORT(CUresult, cuCtxSynchronize, (void), ())
EXPORT(CUresult, cuStreamCreate, (CUstream* s, unsigned int f), (s, f))
EXPORT(CUresult, cuStreamDestroy_v2, (CUstream s), (s))
EXPORT(CUresult, cuStreamSynchronize, (CUstream s), (s))
EXPORT(CUresult, cuMemPoolCreate, (CUmemoryPool* p, const CUmemPoolProps* q), (p, q))
EXPORT(CUresult, cuMemPoolDestroy, (CUmemoryPool p), (p))
EXPORT(CUresult, cuDeviceGetDefaultMemPool, (CUmemoryPool* p, CUdevice d), (p, d))
EXPORT(CUresult, cuMemGetAllocationGranularity,
       (size_t* g, const CUmemAllocationProp* p, CUmemAllocationGranularity_flags f), (g, p, f))
EXPORT(CUresult, cuMemSetAccess, (CUdeviceptr p, size_t s, const CUmemAccessDesc* d, size_t c), (p, s, d, c))
