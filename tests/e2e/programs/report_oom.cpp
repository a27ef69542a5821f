// tests/e2e/programs/report_oom.cpp — gpumem-report end-to-end: planted OOMs.
//   report_oom capacity       (run with GPUMEMTRACE_SIM_CAPACITY=64M) holds 48 MiB of activations,
//                             then plant_capacity_oom() asks cudaMalloc for 32 MiB: it can never fit.
//   report_oom fragmentation  (run with GPUMEMTRACE_SIM_CAPACITY=110M) a small caching allocator
//                             takes one 100 MiB segment from cudaMalloc, hands out ten 10 MiB blocks
//                             and gets every other one back: 50 MiB free inside the segment, in
//                             holes of 10 MiB. plant_fragmentation_oom() then asks it for 20 MiB: no
//                             hole fits, a new segment does not fit on the device (10 MiB free), so
//                             the allocator reports an OOM through gpumemtrace_block_oom, although
//                             60 MiB are free in total.
#include <cuda_runtime_api.h>
#include <gpumemtrace.h>

#include <cstdio>
#include <cstring>
#include <vector>

constexpr size_t kMiB = 1 << 20;

int plant_capacity_oom() {
  void* p = nullptr;
  cudaError_t rc = cudaMalloc(&p, 32 * kMiB);
  if (rc == cudaSuccess) cudaFree(p);
  return rc;
}

int run_capacity() {
  void* activations = nullptr;
  cudaMalloc(&activations, 48 * kMiB);
  int rc = plant_capacity_oom();
  cudaFree(activations);
  printf("capacity rc=%d\n", rc);
  return rc == cudaSuccess ? 1 : 0;
}

// A first-fit caching allocator over segments from cudaMalloc (blocks are never split or merged
// beyond what the test needs: fixed positions, 10 MiB each).
struct CachingAllocator {
  struct Segment {
    char* base = nullptr;
    size_t size = 0;
    std::vector<std::pair<size_t, size_t>> used;  // offset, size
  };
  std::vector<Segment> segments;

  bool grow(size_t size) {
    void* p = nullptr;
    if (cudaMalloc(&p, size) != cudaSuccess) return false;
    segments.push_back(Segment{static_cast<char*>(p), size, {}});
    return true;
  }
  void* find_hole(Segment& s, size_t size) {
    size_t cursor = 0;
    for (size_t i = 0; i <= s.used.size(); ++i) {
      size_t next = i < s.used.size() ? s.used[i].first : s.size;
      if (next - cursor >= size) {
        s.used.insert(s.used.begin() + static_cast<long>(i), {cursor, size});
        gpumemtrace_block_alloc(s.base + cursor, size, s.base, 0, "toy_pool");
        return s.base + cursor;
      }
      if (i < s.used.size()) cursor = s.used[i].first + s.used[i].second;
    }
    return nullptr;
  }
  void* allocate(size_t size) {
    for (Segment& s : segments) {
      if (void* p = find_hole(s, size)) return p;
    }
    // No hole fits: a new segment from CUDA, else (like PyTorch) give back fully free segments and
    // report the OOM.
    if (grow(size)) return find_hole(segments.back(), size);
    empty_cache();
    gpumemtrace_block_oom(size, 0, "toy_pool");
    return nullptr;
  }
  void release(void* ptr) {
    for (Segment& s : segments) {
      char* p = static_cast<char*>(ptr);
      if (p < s.base || p >= s.base + s.size) continue;
      for (size_t i = 0; i < s.used.size(); ++i) {
        if (s.base + s.used[i].first != p) continue;
        gpumemtrace_block_free(p, s.used[i].second, s.base, 0, "toy_pool");
        s.used.erase(s.used.begin() + static_cast<long>(i));
        return;
      }
    }
  }
  void empty_cache() {
    for (size_t i = segments.size(); i-- > 0;) {
      if (!segments[i].used.empty()) continue;
      cudaFree(segments[i].base);
      segments.erase(segments.begin() + static_cast<long>(i));
    }
  }
};

void* plant_fragmentation_oom(CachingAllocator& allocator) { return allocator.allocate(20 * kMiB); }

int run_fragmentation() {
  CachingAllocator allocator;
  allocator.grow(100 * kMiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(allocator.allocate(10 * kMiB));
  for (int i = 0; i < 10; i += 2) allocator.release(blocks[i]);
  void* p = plant_fragmentation_oom(allocator);
  printf("fragmentation %s\n", p ? "allocated" : "oom");
  for (int i = 1; i < 10; i += 2) allocator.release(blocks[i]);
  allocator.empty_cache();
  return p ? 1 : 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "capacity")) return run_capacity();
  if (!strcmp(mode, "fragmentation")) return run_fragmentation();
  fprintf(stderr, "usage: report_oom capacity | fragmentation\n");
  return 2;
}
