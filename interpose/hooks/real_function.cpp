// interpose/hooks/real_function.cpp
#include "interpose/hooks/real_function.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>

namespace gpumemtrace {
namespace {

struct Search {
  const char* soname_prefix;
  char path[4096];
};

int find_library(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const char* base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, s->soname_prefix, strlen(s->soname_prefix)) != 0) return 0;
  strncpy(s->path, name, sizeof(s->path) - 1);
  s->path[sizeof(s->path) - 1] = '\0';
  return 1;
}

}  // namespace

void* resolve_real_symbol(const char* name, Library library) {
  if (void* p = dlsym(RTLD_NEXT, name)) return p;
  if (library == Library::Libc) return nullptr;
  Search search{library == Library::CudaRuntime ? "libcudart.so" : "libcuda.so", {}};
  if (!dl_iterate_phdr(find_library, &search)) return nullptr;
  void* handle = dlopen(search.path, RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return nullptr;
  void* p = dlsym(handle, name);
  dlclose(handle);  // RTLD_NOLOAD took a reference; the library stays loaded by its owner
  return p;
}

}  // namespace gpumemtrace
