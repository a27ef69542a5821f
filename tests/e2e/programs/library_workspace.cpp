// tests/e2e/programs/library_workspace.cpp — gpumem-report end-to-end: memory a CUDA library keeps.
//   library_workspace LIB [leak]   dlopens LIB (the fake cuBLAS, libfake_cublas.so), creates a handle
//   (8 MiB workspace, never freed: held by cuBLAS, not a leak), does clean work; with "leak",
//   plant_leak() also keeps 3 MiB of its own (a leak).
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

__attribute__((noinline)) void plant_leak() {
  void* p = nullptr;
  cudaMalloc(&p, 3u << 20);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  auto create = reinterpret_cast<int (*)(void**)>(dlsym(lib, "cublasCreate_v2"));
  void* handle = nullptr;
  if (!create || create(&handle) != 0) return 2;
  for (int i = 0; i < 4; ++i) {
    void* p = nullptr;
    cudaMalloc(&p, 1u << 20);
    cudaFree(p);
  }
  if (argc > 2 && strcmp(argv[2], "leak") == 0) plant_leak();
  printf("handle %p\n", handle);
  return 0;
}
