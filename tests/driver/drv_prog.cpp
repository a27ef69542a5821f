// tests/driver/drv_prog.cpp — reaches the CUDA driver one way and runs a memory scenario.
//
// Built three times (tests/driver/module.mk), one per route a real program takes to the driver:
//   ROUTE_DIRECT    linked against libcuda.so.1, calls cu* symbols            (drv_direct)
//   ROUTE_DLSYM     dlopen("libcuda.so.1") + dlsym of each symbol (JAX)       (drv_dlsym)
//   ROUTE_PROCADDR  dlopen + dlsym("cuGetProcAddress_v2") + cuGetProcAddress  (drv_procaddr; the
//                   CUDA runtime's way, static or shared). "--ptsz" asks for per-thread variants.
// Usage: drv_X SCENARIO [--ptsz]; SCENARIO = basic | oom | vmm | async | ctx | errors | extreme.
// Prints one line per call: "<what> rc=<CUresult> [addr=0x..] [size=N]" so that a run under
// LD_PRELOAD can be compared line by line with a run without (transparency) and with the trace.
// Allocation sizes are distinctive and every scenario step is a named, non-inlined function, so that
// the trace's stacks can be checked.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
CUresult cuMemAllocAsync_ptsz(CUdeviceptr*, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
}

#define NOINLINE __attribute__((noinline))

namespace {

struct Driver {
  CUresult (*Init)(unsigned int);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*DevicePrimaryCtxReset)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxCreate)(CUcontext*, unsigned int, CUdevice);
  CUresult (*CtxDestroy)(CUcontext);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemAllocPitch)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemAllocManaged)(CUdeviceptr*, size_t, unsigned int);
  CUresult (*MemHostAlloc)(void**, size_t, unsigned int);
  CUresult (*MemAllocHost)(void**, size_t);
  CUresult (*MemFreeHost)(void*);
  CUresult (*MemGetInfo)(size_t*, size_t*);
  CUresult (*MemAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*MemAllocFromPoolAsync)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
  CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*MemPoolCreate)(CUmemoryPool*, const CUmemPoolProps*);
  CUresult (*MemPoolDestroy)(CUmemoryPool);
  CUresult (*MemPoolTrimTo)(CUmemoryPool, size_t);
  CUresult (*StreamCreate)(CUstream*, unsigned int);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*MemGetAllocationGranularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags);
  CUresult (*MemAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*MemAddressFree)(CUdeviceptr, size_t);
  CUresult (*MemCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
  CUresult (*MemRelease)(CUmemGenericAllocationHandle);
  CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*MemUnmap)(CUdeviceptr, size_t);
  CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
};

Driver d;
bool g_ptsz = false;

template <typename T>
void must(T* fn, const char* name) {
  if (!fn) {
    printf("missing %s\n", name);
    exit(3);
  }
}

#if defined(ROUTE_DIRECT)
const char* kRoute = "direct";
void load() {
  d = Driver{cuInit, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxReset_v2, cuCtxSetCurrent, cuCtxCreate_v2,
             cuCtxDestroy_v2, cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemFree_v2, cuMemAllocManaged, cuMemHostAlloc,
             cuMemAllocHost_v2, cuMemFreeHost, cuMemGetInfo_v2,
             g_ptsz ? cuMemAllocAsync_ptsz : cuMemAllocAsync,
             g_ptsz ? cuMemAllocFromPoolAsync_ptsz : cuMemAllocFromPoolAsync,
             g_ptsz ? cuMemFreeAsync_ptsz : cuMemFreeAsync, cuMemPoolCreate, cuMemPoolDestroy, cuMemPoolTrimTo,
             cuStreamCreate, cuStreamSynchronize, cuMemGetAllocationGranularity, cuMemAddressReserve,
             cuMemAddressFree, cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap, cuMemSetAccess};
}
#else
void* g_lib = nullptr;
#if defined(ROUTE_DLSYM)
const char* kRoute = "dlsym";
template <typename T>
void get(T*& fn, const char* symbol, const char* = nullptr, int = 0) {
  fn = reinterpret_cast<T*>(dlsym(g_lib, symbol));
  must(fn, symbol);
}
#elif defined(ROUTE_PROCADDR)
const char* kRoute = "procaddr";
CUresult (*g_get_proc)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*) = nullptr;
template <typename T>
void get(T*& fn, const char* /*symbol*/, const char* proc, int version) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  const cuuint64_t flags = g_ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
  CUresult r = g_get_proc(proc, &p, version, flags, &status);
  if (r != CUDA_SUCCESS) {
    printf("cuGetProcAddress(%s) rc=%d status=%d\n", proc, r, status);
    exit(3);
  }
  fn = reinterpret_cast<T*>(p);
}
#endif
void load() {
  g_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!g_lib) {
    printf("dlopen failed: %s\n", dlerror());
    exit(3);
  }
#if defined(ROUTE_PROCADDR)
  g_get_proc = reinterpret_cast<decltype(g_get_proc)>(dlsym(g_lib, "cuGetProcAddress_v2"));
  must(g_get_proc, "cuGetProcAddress_v2");
#endif
  get(d.Init, "cuInit", "cuInit", 2000);
  get(d.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000);
  get(d.DevicePrimaryCtxReset, "cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxReset", 11000);
  get(d.CtxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent", 4000);
  get(d.CtxCreate, "cuCtxCreate_v2", "cuCtxCreate", 3020);
  get(d.CtxDestroy, "cuCtxDestroy_v2", "cuCtxDestroy", 4000);
  get(d.MemAlloc, "cuMemAlloc_v2", "cuMemAlloc", 3020);
  get(d.MemAllocPitch, "cuMemAllocPitch_v2", "cuMemAllocPitch", 3020);
  get(d.MemFree, "cuMemFree_v2", "cuMemFree", 3020);
  get(d.MemAllocManaged, "cuMemAllocManaged", "cuMemAllocManaged", 6000);
  get(d.MemHostAlloc, "cuMemHostAlloc", "cuMemHostAlloc", 2020);
  get(d.MemAllocHost, "cuMemAllocHost_v2", "cuMemAllocHost", 3020);
  get(d.MemFreeHost, "cuMemFreeHost", "cuMemFreeHost", 2000);
  get(d.MemGetInfo, "cuMemGetInfo_v2", "cuMemGetInfo", 3020);
  get(d.MemAllocAsync, g_ptsz ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync", "cuMemAllocAsync", 11020);
  get(d.MemAllocFromPoolAsync, g_ptsz ? "cuMemAllocFromPoolAsync_ptsz" : "cuMemAllocFromPoolAsync",
      "cuMemAllocFromPoolAsync", 11020);
  get(d.MemFreeAsync, g_ptsz ? "cuMemFreeAsync_ptsz" : "cuMemFreeAsync", "cuMemFreeAsync", 11020);
  get(d.MemPoolCreate, "cuMemPoolCreate", "cuMemPoolCreate", 11020);
  get(d.MemPoolDestroy, "cuMemPoolDestroy", "cuMemPoolDestroy", 11020);
  get(d.MemPoolTrimTo, "cuMemPoolTrimTo", "cuMemPoolTrimTo", 11020);
  get(d.StreamCreate, "cuStreamCreate", "cuStreamCreate", 2000);
  get(d.StreamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize", 2000);
  get(d.MemGetAllocationGranularity, "cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity", 10020);
  get(d.MemAddressReserve, "cuMemAddressReserve", "cuMemAddressReserve", 10020);
  get(d.MemAddressFree, "cuMemAddressFree", "cuMemAddressFree", 10020);
  get(d.MemCreate, "cuMemCreate", "cuMemCreate", 10020);
  get(d.MemRelease, "cuMemRelease", "cuMemRelease", 10020);
  get(d.MemMap, "cuMemMap", "cuMemMap", 10020);
  get(d.MemUnmap, "cuMemUnmap", "cuMemUnmap", 10020);
  get(d.MemSetAccess, "cuMemSetAccess", "cuMemSetAccess", 10020);
}
#endif

void report(const char* what, CUresult r, unsigned long long addr = 0, unsigned long long size = 0) {
  printf("%s rc=%d addr=0x%llx size=%llu\n", what, static_cast<int>(r), addr, size);
}

NOINLINE void setup_context() {
  CUcontext ctx = nullptr;
  report("cuInit", d.Init(0));
  report("retain", d.DevicePrimaryCtxRetain(&ctx, 0));
  report("set_current", d.CtxSetCurrent(ctx));
}

// ---- basic: one of each allocation kind, then free them ----
NOINLINE CUdeviceptr alloc_weights() {
  CUdeviceptr p = 0;
  {
    CUresult r_ = d.MemAlloc(&p, 3145735);
    report("alloc_weights", r_, p, 3145735);
  }
  return p;
}
NOINLINE CUdeviceptr alloc_image() {
  CUdeviceptr p = 0;
  size_t pitch = 0;
  CUresult r = d.MemAllocPitch(&p, &pitch, 1000, 10, 4);
  report("alloc_image", r, p, pitch * 10);
  return p;
}
NOINLINE CUdeviceptr alloc_unified() {
  CUdeviceptr p = 0;
  {
    CUresult r_ = d.MemAllocManaged(&p, 777777, CU_MEM_ATTACH_GLOBAL);
    report("alloc_unified", r_, p, 777777);
  }
  return p;
}
NOINLINE void* alloc_pinned() {
  void* p = nullptr;
  {
    CUresult r_ = d.MemHostAlloc(&p, 65547, 0);
    report("alloc_pinned", r_, reinterpret_cast<unsigned long long>(p), 65547);
  }
  return p;
}
NOINLINE void* alloc_staging() {
  void* p = nullptr;
  {
    CUresult r_ = d.MemAllocHost(&p, 4099);
    report("alloc_staging", r_, reinterpret_cast<unsigned long long>(p), 4099);
  }
  return p;
}
NOINLINE void free_all(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, void* h1, void* h2) {
  report("free_weights", d.MemFree(a), a);
  report("free_image", d.MemFree(b), b);
  report("free_unified", d.MemFree(c), c);
  report("free_pinned", d.MemFreeHost(h1), reinterpret_cast<unsigned long long>(h1));
  report("free_staging", d.MemFreeHost(h2), reinterpret_cast<unsigned long long>(h2));
}
void scenario_basic() {
  CUdeviceptr a = alloc_weights(), b = alloc_image(), c = alloc_unified();
  void* h1 = alloc_pinned();
  void* h2 = alloc_staging();
  size_t free_bytes = 0, total = 0;
  CUresult r = d.MemGetInfo(&free_bytes, &total);
  printf("meminfo rc=%d free=%zu total=%zu\n", r, free_bytes, total);
  free_all(a, b, c, h1, h2);
}

// ---- oom: more than the device has ----
NOINLINE void alloc_too_much() {
  CUdeviceptr p = 0;
  {
    CUresult r_ = d.MemAlloc(&p, 64ull << 30);
    report("alloc_too_much", r_, p, 64ull << 30);
  }
}
void scenario_oom() {
  CUdeviceptr keep = alloc_weights();
  alloc_too_much();
  report("free_weights", d.MemFree(keep), keep);
}

// ---- vmm: PyTorch's expandable segments (reserve, create, map, set access, unmap, release) ----
NOINLINE CUmemGenericAllocationHandle create_chunk(size_t size, const CUmemAllocationProp& prop) {
  CUmemGenericAllocationHandle h = 0;
  {
    CUresult r_ = d.MemCreate(&h, size, &prop, 0);
    report("create_chunk", r_, h, size);
  }
  return h;
}
NOINLINE void grow_segment(CUdeviceptr base, size_t offset, size_t size, CUmemGenericAllocationHandle h) {
  report("map_chunk", d.MemMap(base + offset, size, 0, h, 0), base + offset, size);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  {
    CUresult r_ = d.MemSetAccess(base + offset, size, &access, 1);
    report("set_access", r_, base + offset, size);
  }
}
NOINLINE void shrink_segment(CUdeviceptr base, size_t offset, size_t size, CUmemGenericAllocationHandle h) {
  report("unmap_chunk", d.MemUnmap(base + offset, size), base + offset, size);
  report("release_chunk", d.MemRelease(h), h);
}
void scenario_vmm() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  {
    CUresult r_ = d.MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    report("granularity", r_, 0, gran);
  }
  const size_t reserve = 16 * gran;
  CUdeviceptr base = 0;
  {
    CUresult r_ = d.MemAddressReserve(&base, reserve, 0, 0, 0);
    report("reserve_segment", r_, base, reserve);
  }
  CUmemGenericAllocationHandle h1 = create_chunk(2 * gran, prop);
  grow_segment(base, 0, 2 * gran, h1);
  CUmemGenericAllocationHandle h2 = create_chunk(3 * gran, prop);
  grow_segment(base, 2 * gran, 3 * gran, h2);
  shrink_segment(base, 2 * gran, 3 * gran, h2);
  shrink_segment(base, 0, 2 * gran, h1);
  report("unreserve_segment", d.MemAddressFree(base, reserve), base, reserve);
}

// ---- async: stream-ordered allocation from the default pool and an explicit pool, then a trim ----
NOINLINE CUdeviceptr alloc_async_default(CUstream s) {
  CUdeviceptr p = 0;
  {
    CUresult r_ = d.MemAllocAsync(&p, 1048579, s);
    report("alloc_async_default", r_, p, 1048579);
  }
  return p;
}
NOINLINE CUdeviceptr alloc_async_pool(CUmemoryPool pool, CUstream s) {
  CUdeviceptr p = 0;
  {
    CUresult r_ = d.MemAllocFromPoolAsync(&p, 2097157, pool, s);
    report("alloc_async_pool", r_, p, 2097157);
  }
  return p;
}
NOINLINE void trim_pool(CUmemoryPool pool) { report("trim_pool", d.MemPoolTrimTo(pool, 0), reinterpret_cast<unsigned long long>(pool), 0); }
void scenario_async() {
  CUstream s = nullptr;
  {
    CUresult r_ = d.StreamCreate(&s, 0);
    report("stream", r_, reinterpret_cast<unsigned long long>(s));
  }
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  {
    CUresult r_ = d.MemPoolCreate(&pool, &props);
    report("pool", r_, reinterpret_cast<unsigned long long>(pool));
  }
  CUdeviceptr a = alloc_async_default(s);
  CUdeviceptr b = alloc_async_pool(pool, s);
  report("free_async_default", d.MemFreeAsync(a, s), a);
  report("free_async_pool", d.MemFreeAsync(b, s), b);
  report("sync", d.StreamSynchronize(s));
  trim_pool(pool);
  report("pool_destroy", d.MemPoolDestroy(pool));
}

// ---- ctx: a context's destruction and a primary context reset end their allocations ----
NOINLINE void own_context() {
  CUcontext ctx = nullptr;
  report("ctx_create", d.CtxCreate(&ctx, 0, 0));
  CUdeviceptr p = 0;
  {
    CUresult r_ = d.MemAlloc(&p, 524309);
    report("alloc_in_ctx", r_, p, 524309);
  }
  report("ctx_destroy", d.CtxDestroy(ctx));
}
NOINLINE void reset_primary() {
  CUcontext ctx = nullptr;
  report("retain", d.DevicePrimaryCtxRetain(&ctx, 0));
  report("set_current", d.CtxSetCurrent(ctx));
  CUdeviceptr p = 0;
  {
    CUresult r_ = d.MemAlloc(&p, 262147);
    report("alloc_before_reset", r_, p, 262147);
  }
  report("primary_reset", d.DevicePrimaryCtxReset(0));
}
void scenario_ctx() {
  report("cuInit", d.Init(0));
  own_context();
  reset_primary();
}

// ---- errors: error codes must reach the program unchanged ----
void scenario_errors() {
  CUdeviceptr p = 0;
  {
    CUresult r_ = d.MemAlloc(&p, 4096);
    report("alloc_before_init", r_, p, 4096);
  }
  setup_context();
  report("free_bogus", d.MemFree(0xdead000), 0xdead000);
  {
    CUresult r_ = d.MemAlloc(&p, 0);
    report("alloc_zero", r_, p, 0);
  }
  report("free_host_bogus", d.MemFreeHost(reinterpret_cast<void*>(0x1234)), 0x1234);
  report("unmap_bogus", d.MemUnmap(0x7e0000000000ull, 4096), 0x7e0000000000ull, 4096);
  report("release_bogus", d.MemRelease(0x42), 0x42);
}

// ---- extreme: every hooked driver call with arguments past the trace format's limits ----
// (tests/e2e/test_extreme_args.py: the trace must read, and the report name each failed request.)
void scenario_extreme() {
  const size_t kMax = SIZE_MAX;
  const size_t k2pow53 = size_t{1} << 53;
  CUdeviceptr p = 0;
  report("alloc_max", d.MemAlloc(&p, kMax), p, kMax);
  report("alloc_2pow53", d.MemAlloc(&p, k2pow53), p, k2pow53);
  size_t pitch = 0;
  report("pitch_overflowing", d.MemAllocPitch(&p, &pitch, size_t{1} << 40, size_t{1} << 40, 4), p, 0);
  report("pitch_max_width", d.MemAllocPitch(&p, &pitch, kMax, 3, 4), p, 0);
  report("managed_max", d.MemAllocManaged(&p, kMax, 1), p, kMax);
  void* h = nullptr;
  report("host_alloc_max", d.MemHostAlloc(&h, kMax, 0), 0, kMax);
  report("alloc_host_max", d.MemAllocHost(&h, kMax), 0, kMax);
  CUstream stream = nullptr;
  d.StreamCreate(&stream, 0);
  report("async_max", d.MemAllocAsync(&p, kMax, stream), p, kMax);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  d.MemPoolCreate(&pool, &props);
  report("pool_async_max", d.MemAllocFromPoolAsync(&p, kMax, pool, stream), p, kMax);
  report("trim_max", d.MemPoolTrimTo(pool, kMax), 0, kMax);
  report("free_async_garbage", d.MemFreeAsync(UINT64_MAX, stream), UINT64_MAX);
  report("reserve_max", d.MemAddressReserve(&p, kMax & ~((size_t{2} << 20) - 1), 0, 0, 0), p, 0);
  report("address_free_wrapping", d.MemAddressFree(UINT64_MAX - 4095, kMax), UINT64_MAX - 4095, kMax);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = -7;  // not a device
  CUmemGenericAllocationHandle handle = 0;
  report("create_bad_device", d.MemCreate(&handle, size_t{2} << 20, &prop, 0), handle, size_t{2} << 20);
  prop.location.id = 0;
  report("create_huge", d.MemCreate(&handle, kMax & ~((size_t{2} << 20) - 1), &prop, 0), handle, 0);
  report("map_wrapping", d.MemMap(UINT64_MAX - 4095, kMax, 0, 0x42, 0), UINT64_MAX - 4095, kMax);
  report("unmap_wrapping", d.MemUnmap(UINT64_MAX - 4095, kMax), UINT64_MAX - 4095, kMax);
  report("release_garbage", d.MemRelease(UINT64_MAX), UINT64_MAX);
  report("free_garbage", d.MemFree(UINT64_MAX), UINT64_MAX);
  report("free_host_garbage", d.MemFreeHost(reinterpret_cast<void*>(UINTPTR_MAX)), UINTPTR_MAX);
  size_t free_bytes = 0, total = 0;
  report("get_info", d.MemGetInfo(&free_bytes, &total), 0, free_bytes);
  report("ctx_reset_bad_device", d.DevicePrimaryCtxReset(-7));
  report("ctx_destroy_garbage", d.CtxDestroy(reinterpret_cast<CUcontext>(0x8)));
  d.MemPoolDestroy(pool);  // the program's own: not left for make asan's leak check to find
}

}  // namespace

int main(int argc, char** argv) {
  const char* scenario = argc > 1 ? argv[1] : "basic";
  g_ptsz = argc > 2 && strcmp(argv[2], "--ptsz") == 0;
  load();
  printf("route %s scenario %s%s\n", kRoute, scenario, g_ptsz ? " ptsz" : "");
  if (strcmp(scenario, "errors") == 0) {
    scenario_errors();
    return 0;
  }
  if (strcmp(scenario, "ctx") == 0) {
    scenario_ctx();
    return 0;
  }
  setup_context();
  if (strcmp(scenario, "basic") == 0) scenario_basic();
  else if (strcmp(scenario, "oom") == 0) scenario_oom();
  else if (strcmp(scenario, "vmm") == 0) scenario_vmm();
  else if (strcmp(scenario, "async") == 0) scenario_async();
  else if (strcmp(scenario, "extreme") == 0) scenario_extreme();
  else {
    printf("unknown scenario %s\n", scenario);
    return 2;
  }
  return 0;
}
