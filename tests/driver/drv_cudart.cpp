// tests/driver/drv_cudart.cpp — the real CUDA runtime (libcudart.so.13 from the toolkit, or
// libcudart_static.a) against the fake driver (tests/sim/fake_libcuda.cpp).
//
// The real runtime needs the driver's private export tables, which the fake cannot provide, so its
// calls fail; what matters is that under LD_PRELOAD nothing crashes, the runtime's dlsym and
// cuGetProcAddress traffic goes through our hooks (GPUMEMTRACE_DRIVER_STATS=1), and every error code
// the program sees is the same as without the preload. Prints one line per call.
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
  int version = -1;
  printf("cudaDriverGetVersion rc=%d\n", static_cast<int>(cudaDriverGetVersion(&version)));
  printf("driver_version %d\n", version);
  int count = -1;
  printf("cudaGetDeviceCount rc=%d\n", static_cast<int>(cudaGetDeviceCount(&count)));
  void* p = nullptr;
  printf("cudaMalloc rc=%d\n", static_cast<int>(cudaMalloc(&p, 1 << 20)));
  printf("cudaFree rc=%d\n", static_cast<int>(cudaFree(p)));
  void* h = nullptr;
  printf("cudaMallocHost rc=%d\n", static_cast<int>(cudaMallocHost(&h, 4096)));
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  printf("cudaGetDriverEntryPointByVersion rc=%d\n",
         static_cast<int>(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &q)));
  printf("cudaGetLastError rc=%d\n", static_cast<int>(cudaGetLastError()));
  return 0;
}
