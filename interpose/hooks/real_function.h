// interpose/hooks/real_function.h — the real CUDA functions behind our hooks, resolved on first use.
//
// Lazily, because the CUDA libraries are often loaded after us (dlopen by Python extensions), and
// not only through RTLD_NEXT: a library loaded with RTLD_LOCAL (PyTorch's libcudart, loaded as a
// dependency of a Python extension) is invisible to RTLD_NEXT even though its callers bind to our
// hooks. Then we find it among the loaded objects and ask it directly (resolve_real_symbol).
// Thread-safety: any thread; racing resolutions store the same pointer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "util/runs_before_sanitizers.h"

namespace gpumemtrace {

enum class Library { CudaRuntime, CudaDriver, Libc };

// GPUMEMTRACE_RUNS_BEFORE_SANITIZERS marks the code our dlsym runs before it answers (dlsym.cpp: route,
// the real dlsym, the driver-name check): util/runs_before_sanitizers.h.

// Whether every CUDA version gpumemtrace supports has a hooked function (runtime_hooks.def and
// driver_hooks.def): a missing Required one is a broken installation, said in one line; a missing
// Optional one is a newer API this CUDA lacks.
enum class Need : uint8_t { Optional, Required };

// The path of a loaded object whose file name starts with `soname_prefix` (e.g. "libcudart.so"),
// copied into `path`; false when none is loaded. Walks the loaded objects: start-up paths only.
bool find_loaded_library(const char* soname_prefix, char* path, size_t path_size);

// Finds `name` in the next definition after this library, or in a loaded copy of `library`.
// Null when there is none. Takes the loader's lock (dlsym): first call per function only.
void* resolve_real_symbol(const char* name, Library library);

template <typename Fn>
class RealFunction {
 public:
  constexpr RealFunction(const char* name, Library library) : name_(name), library_(library) {}

  // The real function, or null when it does not exist in this process.
  Fn operator()() {
    void* p = ptr_.load(std::memory_order_acquire);
    if (!p) {
      p = resolve_real_symbol(name_, library_);
      ptr_.store(p, std::memory_order_release);
    }
    return reinterpret_cast<Fn>(p);
  }
  explicit operator bool() { return (*this)() != nullptr; }

 private:
  const char* name_;
  Library library_;
  std::atomic<void*> ptr_{nullptr};
};

}  // namespace gpumemtrace
