// tests/e2e/inlined/templates.cpp — inlined C++ at -O2 -g (tests/module.mk): a class template's
// member template, a lambda, a `static inline` helper, a function in an anonymous namespace, and a
// call into a shared library of our own (inlined_lib.cpp) whose inlined frames are named from that
// library's file. tests/e2e/test_inlined_frames.py compares every frame with eu-addr2line -i.
//   7 MiB:  model::Pool<float>::reserve<2> <- model::Pool<float>::grow <- warm_cache
//           <- model::make_cache::{lambda#1}::operator() <- model::make_cache (a real frame) <- main
//   9 MiB:  checked_alloc <- (anonymous namespace)::upload_weights (a real frame with internal linkage,
//           its symbol a clone: `upload_weights(int) [clone .constprop.0]`)
//           <- main
//   11 MiB: (in libinlined_lib.so) lib_reserve <- lib_workspace <- lib_alloc_workspace <- main
#include <cuda_runtime_api.h>

#include <cstddef>

#include "tests/e2e/inlined/inlined_lib.h"

namespace model {

constexpr size_t kMiB = size_t{1} << 20;

template <typename T>
struct Pool {
  template <int Scale>
  T* reserve(size_t count) {
    void* p = nullptr;
    if (cudaMalloc(&p, count * sizeof(T) * Scale) != cudaSuccess) return nullptr;
    ++blocks;
    return static_cast<T*>(p);
  }
  T* grow(size_t count) {
    T* p = reserve<2>(count);
    total += count;
    return p;
  }
  size_t blocks = 0;
  size_t total = 0;
};

static inline float* warm_cache(Pool<float>& pool, size_t count) {
  float* p = pool.grow(count);
  pool.total += p != nullptr;
  return p;
}

__attribute__((noinline)) float* make_cache(Pool<float>& pool, size_t megabytes) {
  auto fill = [&pool](size_t count) {
    float* p = warm_cache(pool, count);
    pool.blocks += p != nullptr;
    return p;
  };
  float* p = fill(megabytes * kMiB / (2 * sizeof(float)));
  pool.total += p != nullptr;
  return p;
}

}  // namespace model

static size_t g_checked;

static inline void* checked_alloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
  g_checked += bytes;
  return p;
}

namespace {

__attribute__((noinline)) void* upload_weights(int megabytes) {
  void* p = checked_alloc(static_cast<size_t>(megabytes) << 20);
  g_checked += p != nullptr;
  return p;
}

}  // namespace

int main(int argc, char**) {
  model::Pool<float> pool;
  float* cache = model::make_cache(pool, 6 + static_cast<size_t>(argc));  // 7 MiB: leaks
  void* weights = upload_weights(9);  // 9 MiB: leaks; a constant: GCC makes a clone (.constprop)
  void* workspace = lib_alloc_workspace(10 + argc);                        // 11 MiB: leaks
  return cache && weights && workspace && pool.blocks > 0 ? 0 : 1;
}
