// tests/e2e/programs/flight_server.cpp — a server that creeps, for the flight recorder
// (GPUMEMTRACE_KEEP; tests/e2e/test_flight_recorder.py). Time-scaled: one request is a simulated
// minute, so 2880 requests are 48 hours.
//   flight_server REQUESTS DUMP_DIR [DUMP_AT,...] [OOM_AT] [PACE_US]
// Holds its weights (cudaMalloc) and a pool segment from which requests take blocks
// (gpumemtrace_block_alloc), all inside a "serve" scope that stays open. Each request opens a scope,
// takes a workspace (cudaMalloc) and two blocks, and gives them back. The creep: every 60th request
// (a simulated hour) keeps 1 MiB of CUDA memory and (until 64 hours) a 256 KiB block for good. At each request of
// DUMP_AT (comma-separated), in the middle of the request, it asks for a dump into DUMP_DIR and prints
//   dump PATH cuda=BYTES blocks=BYTES
// with its own count of what it holds at that moment. At request OOM_AT it asks for 1 PiB (the
// simulated runtime fails it). It prints "done cuda=BYTES blocks=BYTES" before it exits 0.
#include <cuda_runtime_api.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gpumemtrace.h"

namespace {

constexpr size_t kMiB = 1 << 20;
constexpr size_t kKiB = 1 << 10;

size_t g_cuda = 0, g_blocks = 0;  // what the program holds, by its own count

void* cuda_alloc(size_t size) {
  void* p = nullptr;
  if (cudaMalloc(&p, size) != cudaSuccess) return nullptr;
  g_cuda += size;
  return p;
}

void cuda_free(void* p, size_t size) {
  cudaFree(p);
  g_cuda -= size;
}

// The pool's blocks: a bump pointer over the segment, a slot per live request block.
struct Pool {
  char* segment = nullptr;
  size_t size = 0, next = 0;
  void* take(size_t bytes) {
    if (next + bytes > size) next = size / 2;  // request blocks cycle in the upper half
    void* p = segment + next;
    next += bytes;
    gpumemtrace_block_alloc(p, bytes, segment, 0, "server_pool");
    g_blocks += bytes;
    return p;
  }
  void give(void* p, size_t bytes) {
    gpumemtrace_block_free(p, bytes, segment, 0, "server_pool");
    g_blocks -= bytes;
  }
};

void dump(const std::string& dir, int request) {
  char message[512];
  const std::string path = dir + "/window-" + std::to_string(request) + ".jsonl";
  const int rc = gpumemtrace_dump(path.c_str(), 60000, message, sizeof message);
  printf("dump %s cuda=%zu blocks=%zu rc=%d\n", rc == 0 ? message : path.c_str(), g_cuda, g_blocks, rc);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 3) {
    fprintf(stderr, "usage: flight_server REQUESTS DUMP_DIR [DUMP_AT,...] [OOM_AT] [PACE_US]\n");
    return 2;
  }
  const int requests = atoi(argv[1]);
  const std::string dir = argv[2];
  std::set<int> dump_at;
  if (argc > 3) {
    std::string list = argv[3];
    for (size_t at = 0; at < list.size();) {
      size_t comma = list.find(',', at);
      if (comma == std::string::npos) comma = list.size();
      if (comma > at) dump_at.insert(atoi(list.substr(at, comma - at).c_str()));
      at = comma + 1;
    }
  }
  const int oom_at = argc > 4 ? atoi(argv[4]) : -1;
  const long pace_us = argc > 5 ? atol(argv[5]) : 0;

  gpumemtrace_scope_begin("serve");
  void* weights = cuda_alloc(64 * kMiB);
  Pool pool;
  pool.size = 32 * kMiB;
  pool.segment = static_cast<char*>(cuda_alloc(pool.size));
  std::vector<void*> kept;
  for (int r = 1; r <= requests; ++r) {
    gpumemtrace_scope_begin("request");
    const size_t workspace_size = (1 + r % 3) * kMiB;
    void* workspace = cuda_alloc(workspace_size);
    void* a = pool.take(64 * kKiB);
    void* b = pool.take(128 * kKiB);
    if (dump_at.count(r)) dump(dir, r);
    if (r == oom_at) {
      void* huge = nullptr;
      printf("oom rc=%d\n", static_cast<int>(cudaMalloc(&huge, size_t{1} << 50)));
    }
    pool.give(b, 128 * kKiB);
    pool.give(a, 64 * kKiB);
    cuda_free(workspace, workspace_size);
    gpumemtrace_scope_end("request");
    if (r % 60 == 0) {  // the creep: an hour's worth of memory nobody gives back
      kept.push_back(cuda_alloc(kMiB));
      const size_t block = 256 * kKiB;
      if (kept.size() * block <= pool.size / 2) {  // the lower half of the pool, until it is full
        void* p = pool.segment + (kept.size() - 1) * block;
        gpumemtrace_block_alloc(p, block, pool.segment, 0, "server_pool");
        g_blocks += block;
      }
    }
    if (pace_us) {
      timespec pause{0, pace_us * 1000};
      nanosleep(&pause, nullptr);
    }
  }
  (void)weights;
  printf("done cuda=%zu blocks=%zu\n", g_cuda, g_blocks);
  return 0;
}
