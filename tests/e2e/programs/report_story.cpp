// tests/e2e/programs/report_story.cpp — gpumem-report end-to-end: crashed runs as a new user writes
// them, from the patterns of real OOM reports; each ends in an out-of-memory error it does not
// survive (exit status 1), the memory it held still live.
//   report_story holes   (GPUMEMTRACE_SIM_CAPACITY=1G) 64 cudaMalloc of 16 MiB fill the device; every
//                        other one is freed (512 MiB free, in 16 MiB holes); then 128 MiB: no hole fits.
//   report_story pool    (GPUMEMTRACE_SIM_CAPACITY=1G) a custom pool takes 64 MiB chunks from cudaMalloc
//                        and hands out 48 MiB blocks (one per chunk); the 22nd block asks for a chunk
//                        the device cannot give: one failed request, through two layers.
//   report_story helper  (GPUMEMTRACE_SIM_CAPACITY=256M) a step loop whose helper keeps a 2 MiB
//                        buffer per call (a leak) until a step's 16 MiB workspace no longer fits.
#include <cuda_runtime_api.h>
#include <gpumemtrace.h>

#include <cstdio>
#include <cstring>
#include <vector>

constexpr size_t kMiB = 1 << 20;

int run_holes() {
  std::vector<void*> tiles(64, nullptr);
  for (void*& tile : tiles) cudaMalloc(&tile, 16 * kMiB);
  for (size_t i = 0; i < tiles.size(); i += 2) cudaFree(tiles[i]);
  void* big = nullptr;
  const cudaError_t rc = cudaMalloc(&big, 128 * kMiB);  // LINE_HOLES_OOM
  std::printf("holes: %s\n", cudaGetErrorString(rc));
  return rc == cudaSuccess ? 0 : 1;
}

// A pool over 64 MiB chunks: one block of up to 64 MiB per chunk (enough to show its two layers).
struct ChunkPool {
  static constexpr size_t kChunk = 64 * kMiB;
  std::vector<void*> chunks;
  void* allocate(size_t size) {
    void* chunk = nullptr;
    if (cudaMalloc(&chunk, kChunk) != cudaSuccess) {  // LINE_POOL_CHUNK
      gpumemtrace_block_oom(size, 0, "chunk_pool");
      return nullptr;
    }
    chunks.push_back(chunk);
    gpumemtrace_block_alloc(chunk, size, chunk, 0, "chunk_pool");
    return chunk;
  }
};

void* load_shard(ChunkPool& pool) { return pool.allocate(48 * kMiB); }  // LINE_POOL_SHARD

int run_pool() {
  ChunkPool pool;
  for (int shard = 0;; ++shard) {
    if (!load_shard(pool)) {
      std::printf("pool: out of memory at shard %d\n", shard);
      return 1;
    }
  }
}

// The helper's bug: the buffer it returns is never freed by its caller.
void* normalize(size_t size) {
  void* buffer = nullptr;
  return cudaMalloc(&buffer, size) == cudaSuccess ? buffer : nullptr;  // LINE_HELPER_LEAK
}

int step(int i) {
  void* features = normalize(2 * kMiB);
  void* workspace = nullptr;
  if (!features || cudaMalloc(&workspace, 16 * kMiB) != cudaSuccess) {  // LINE_HELPER_OOM
    std::printf("helper: out of memory at step %d\n", i);
    return 1;
  }
  cudaFree(workspace);
  return 0;
}

int run_helper() {
  for (int i = 0;; ++i) {
    if (step(i)) return 1;
  }
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (!std::strcmp(mode, "holes")) return run_holes();
  if (!std::strcmp(mode, "pool")) return run_pool();
  if (!std::strcmp(mode, "helper")) return run_helper();
  std::fprintf(stderr, "usage: report_story holes | pool | helper\n");
  return 2;
}
