// interpose/hooks/real_function.cpp — finding the real CUDA functions (dlsym, the loaded libraries).
#include "interpose/hooks/real_function.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "interpose/hooks/dlsym.h"

namespace gpumemtrace {
namespace {

struct Search {
  const char* soname_prefix;
  char* path;
  size_t path_size;
};

int find_library(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const char* base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, s->soname_prefix, strlen(s->soname_prefix)) != 0) return 0;
  snprintf(s->path, s->path_size, "%s", name);
  return 1;
}

// Read and written with __atomic builtins, not std::atomic: find_real_dlsym runs uninstrumented, and
// std::atomic's inline members would bring instrumented code into it.
void* g_real_dlsym = nullptr;

}  // namespace

namespace driver {

GPUMEMTRACE_RUNS_BEFORE_SANITIZERS DlsymFn find_real_dlsym() noexcept {
  void* p = __atomic_load_n(&g_real_dlsym, __ATOMIC_ACQUIRE);
  if (!p) {
    // GLIBC_2.2.5: x86-64's base version (libdl before 2.34, compat symbol in libc after);
    // GLIBC_2.34: libc's default since the libdl merge; GLIBC_2.17: aarch64's base version.
    // A plain array: an initializer_list's inline members would be instrumented code.
    static const char* const kVersions[] = {"GLIBC_2.2.5", "GLIBC_2.34", "GLIBC_2.17"};
    for (size_t i = 0; i < sizeof(kVersions) / sizeof(kVersions[0]) && !p; ++i)
      p = dlvsym(RTLD_NEXT, "dlsym", kVersions[i]);
    if (p) __atomic_store_n(&g_real_dlsym, p, __ATOMIC_RELEASE);
  }
  return reinterpret_cast<DlsymFn>(p);
}

void* real_dlsym(void* handle, const char* symbol) noexcept {
  DlsymFn real = find_real_dlsym();
  return real ? real(handle, symbol) : nullptr;
}

}  // namespace driver

bool find_loaded_library(const char* soname_prefix, char* path, size_t path_size) {
  Search search{soname_prefix, path, path_size};
  return dl_iterate_phdr(find_library, &search) != 0;
}

// Lookups use the real dlsym: ours (dlsym.cpp) answers hooked driver names with our own wrappers.
// RTLD_NEXT means the same through it (it is called from this library too).
void* resolve_real_symbol(const char* name, Library library) {
  if (void* p = driver::real_dlsym(RTLD_NEXT, name)) return p;
  if (library == Library::Libc) return nullptr;
  char path[4096];
  if (!find_loaded_library(library == Library::CudaRuntime ? "libcudart.so" : "libcuda.so", path, sizeof(path)))
    return nullptr;
  void* handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return nullptr;
  void* p = driver::real_dlsym(handle, name);
  dlclose(handle);  // RTLD_NOLOAD took a reference; the library stays loaded by its owner
  return p;
}

}  // namespace gpumemtrace
