// tests/gpu/driver_static_cudart.cu — nvcc's default (static cudart): only the driver hooks can see
// these allocations. Built and run by tests/gpu/driver_checks.py. Prints what it did, one line each.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

__attribute__((noinline)) void static_runtime_allocs() {
  void* a = nullptr;
  void* b = nullptr;
  void* h = nullptr;
  printf("cudaMalloc %d\n", cudaMalloc(&a, 3145735));
  printf("cudaMallocAsync %d\n", cudaMallocAsync(&b, 1048579, 0));
  printf("cudaMallocHost %d\n", cudaMallocHost(&h, 65547));
  cudaFreeAsync(b, 0);
  cudaStreamSynchronize(0);
  cudaFree(a);
  cudaFreeHost(h);
}

__attribute__((noinline)) void vmm_through_entry_point() {
  // PyTorch's expandable segments obtain the VMM functions this way.
  void *reserve_p = nullptr, *create_p = nullptr, *map_p = nullptr, *unmap_p = nullptr, *release_p = nullptr,
       *free_p = nullptr, *access_p = nullptr;
  cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPointByVersion("cuMemAddressReserve", &reserve_p, 12000, cudaEnableDefault, &q);
  cudaGetDriverEntryPointByVersion("cuMemCreate", &create_p, 12000, cudaEnableDefault, &q);
  cudaGetDriverEntryPointByVersion("cuMemMap", &map_p, 12000, cudaEnableDefault, &q);
  cudaGetDriverEntryPointByVersion("cuMemSetAccess", &access_p, 12000, cudaEnableDefault, &q);
  cudaGetDriverEntryPointByVersion("cuMemUnmap", &unmap_p, 12000, cudaEnableDefault, &q);
  cudaGetDriverEntryPointByVersion("cuMemRelease", &release_p, 12000, cudaEnableDefault, &q);
  cudaGetDriverEntryPointByVersion("cuMemAddressFree", &free_p, 12000, cudaEnableDefault, &q);
  if (!reserve_p || !create_p || !map_p || !access_p || !unmap_p || !release_p || !free_p) {
    printf("entry points missing\n");
    return;
  }
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  const size_t size = 2 << 20;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle h = 0;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  printf("reserve %d\n", reinterpret_cast<decltype(&cuMemAddressReserve)>(reserve_p)(&va, 8 * size, 0, 0, 0));
  printf("create %d\n", reinterpret_cast<decltype(&cuMemCreate)>(create_p)(&h, size, &prop, 0));
  printf("map %d\n", reinterpret_cast<decltype(&cuMemMap)>(map_p)(va, size, 0, h, 0));
  printf("access %d\n", reinterpret_cast<decltype(&cuMemSetAccess)>(access_p)(va, size, &access, 1));
  printf("unmap %d\n", reinterpret_cast<decltype(&cuMemUnmap)>(unmap_p)(va, size));
  printf("release %d\n", reinterpret_cast<decltype(&cuMemRelease)>(release_p)(h));
  printf("unreserve %d\n", reinterpret_cast<decltype(&cuMemAddressFree)>(free_p)(va, 8 * size));
}

int main() {
  static_runtime_allocs();
  vmm_through_entry_point();
  return 0;
}
