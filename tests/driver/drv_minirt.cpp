// tests/driver/drv_minirt.cpp — a miniature CUDA runtime (libdrvminirt.so) that, like the real one,
// reaches the driver only through dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2") +
// cuGetProcAddress. With drv_layered it checks "one event per allocation": cudaMalloc (runtime hook)
// and the cuMemAlloc_v2 it makes (driver hook) must give ONE event carrying both names.
// (The simulated libcudart in tests/sim does not call a driver, and the real one cannot run without
// a GPU.) Exports unversioned cuda* symbols, which the runtime hooks interpose like the real ones.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>

#include <mutex>

namespace {

struct Api {
  CUresult (*Init)(unsigned int);
  CUresult (*Retain)(CUcontext*, CUdevice);
  CUresult (*SetCurrent)(CUcontext);
  CUresult (*Alloc)(CUdeviceptr*, size_t);
  CUresult (*Free)(CUdeviceptr);
  CUresult (*AllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*FreeAsync)(CUdeviceptr, CUstream);
  CUresult (*GetInfo)(size_t*, size_t*);
  bool ok = false;
};

Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
    auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
    if (!get_proc) return;
    auto get = [&](const char* name, int version, auto& fn) {
      void* p = nullptr;
      get_proc(name, &p, version, 0, nullptr);
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
      return p != nullptr;
    };
    a.ok = get("cuInit", 13000, a.Init) && get("cuDevicePrimaryCtxRetain", 13000, a.Retain) &&
           get("cuCtxSetCurrent", 13000, a.SetCurrent) && get("cuMemAlloc", 13000, a.Alloc) &&
           get("cuMemFree", 13000, a.Free) && get("cuMemAllocAsync", 13000, a.AllocAsync) &&
           get("cuMemFreeAsync", 13000, a.FreeAsync) && get("cuMemGetInfo", 13000, a.GetInfo);
    CUcontext ctx = nullptr;
    a.ok = a.ok && a.Init(0) == CUDA_SUCCESS && a.Retain(&ctx, 0) == CUDA_SUCCESS &&
           a.SetCurrent(ctx) == CUDA_SUCCESS;
  });
  return a;
}

// cudaError_t values for what the driver said.
int to_runtime(CUresult r) { return r == CUDA_SUCCESS ? 0 : r == CUDA_ERROR_OUT_OF_MEMORY ? 2 : 1; }

}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT int cudaMalloc(void** p, size_t size) {
  if (!api().ok) return 3;
  CUdeviceptr d = 0;
  CUresult r = api().Alloc(&d, size);
  *p = reinterpret_cast<void*>(d);
  return to_runtime(r);
}
EXPORT int cudaFree(void* p) { return api().ok ? to_runtime(api().Free(reinterpret_cast<CUdeviceptr>(p))) : 3; }
EXPORT int cudaMallocAsync(void** p, size_t size, void* stream) {
  if (!api().ok) return 3;
  CUdeviceptr d = 0;
  CUresult r = api().AllocAsync(&d, size, static_cast<CUstream>(stream));
  *p = reinterpret_cast<void*>(d);
  return to_runtime(r);
}
EXPORT int cudaFreeAsync(void* p, void* stream) {
  return api().ok ? to_runtime(api().FreeAsync(reinterpret_cast<CUdeviceptr>(p), static_cast<CUstream>(stream))) : 3;
}
EXPORT int cudaGetDevice(int* d) {
  *d = 0;
  return 0;
}
EXPORT int cudaMemGetInfo(size_t* f, size_t* t) { return api().ok ? to_runtime(api().GetInfo(f, t)) : 3; }
