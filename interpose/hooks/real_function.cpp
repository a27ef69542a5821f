// interpose/hooks/real_function.cpp
#include "interpose/hooks/real_function.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstring>

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

}  // namespace

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
