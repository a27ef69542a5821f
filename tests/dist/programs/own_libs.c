// tests/dist/programs/own_libs.c — a CUDA program with its own libzstd (linked) and libunwind (in a
// dlopen'ed plugin), both fakes of another version (fake_zstd.c, fake_unwind.c), run under the
// bundle's recorder by tests/dist/test_own_libs.py.
//
// Prints "zstd 99999" and "unwind 4242" when its calls reach its own libraries, and allocates from a
// function of its own, so that the trace shows whether the recorder's unwinder and writer worked.
// usage: own_libs PLUGIN.so
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

unsigned ZSTD_versionNumber(void);

__attribute__((noinline)) static int own_libs_allocate(void** p) { return cudaMalloc(p, 3 << 20); }

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: own_libs PLUGIN.so\n");
    return 2;
  }
  printf("zstd %u\n", ZSTD_versionNumber());
  void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  int (*step)(void) = plugin ? (int (*)(void))dlsym(plugin, "plugin_unwind_step") : NULL;
  if (!step) {
    fprintf(stderr, "own_libs: %s\n", dlerror());
    return 1;
  }
  printf("unwind %d\n", step());
  void* p = NULL;
  if (own_libs_allocate(&p) != cudaSuccess) return 1;  // kept: a leak the report must show, with its stack
  printf("zstd %u\n", ZSTD_versionNumber());
  return 0;
}
