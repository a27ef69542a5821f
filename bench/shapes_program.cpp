// bench/shapes_program.cpp — the native workloads of make bench-report-shapes, recorded by the recorder
// itself on the simulated runtime (bench/shapes_bench.py). Two shapes:
//
//   shapes_program live EVENTS LIVE   a C++ program that keeps LIVE allocations (thousands) alive:
//                                      after filling them, each step frees one chosen at random and
//                                      allocates another (cudaMalloc/cudaFree) from one of 64 call
//                                      sites of different depths, until EVENTS events.
//   shapes_program page EVENTS        the training run of the HTML report's 100M-event page
//                                      (tests/report/lod_trace.py, the same plan), as a caching
//                                      allocator reports it through include/gpumemtrace.h: a 64 GiB
//                                      segment from cudaMalloc, parameters and a planted leak kept,
//                                      per step a mark, 24 activations from 8 sites freed in reverse
//                                      and 8 temporaries freed at once, a history block every few
//                                      steps, a burst of 16 x 256 MiB at 60% of the run, and at 90%
//                                      a failed 56 GiB cudaMalloc and the allocator's OOM.
//                                      Needs GPUMEMTRACE_SIM_CAPACITY=80G.
// Deterministic (a fixed-seed generator): the same arguments give the same events.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "gpumemtrace.h"

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// xorshift64*: a fixed sequence, no libc state.
uint64_t g_rng = 0x9E3779B97F4A7C15ull;
uint64_t next_random() {
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return g_rng * 0x2545F4914F6CDD1Dull;
}

// Calls fn `depth` frames deeper: each site's stacks are as deep as a program's.
template <typename Fn>
__attribute__((noinline)) void descend(int depth, const Fn& fn) {
  if (depth > 0) {
    descend(depth - 1, fn);
    asm volatile("");  // not a tail call: every level stays a frame
  } else {
    fn();
  }
}

// ---- live: thousands of live allocations ----

// Site S: its own function, so 64 distinct stacks (and 8 depths among them).
template <int S>
__attribute__((noinline)) void* site_alloc(size_t size) {
  void* p = nullptr;
  descend(4 + S % 8, [&] {
    if (cudaMalloc(&p, size) != cudaSuccess) p = nullptr;
  });
  return p;
}

using SiteFn = void* (*)(size_t);
template <size_t... S>
constexpr std::array<SiteFn, sizeof...(S)> make_sites(std::index_sequence<S...>) {
  return {&site_alloc<static_cast<int>(S)>...};
}
constexpr auto kSites = make_sites(std::make_index_sequence<64>{});

__attribute__((noinline)) void release(void* p) { cudaFree(p); }

int run_live(long events, long live_count) {
  std::vector<void*> live(static_cast<size_t>(live_count), nullptr);
  long done = 0;
  auto allocate = [&](size_t slot) {
    const uint64_t r = next_random();
    const size_t size = 256 + (r % 4096) * 256;  // 256 B to 1 MiB
    live[slot] = kSites[(r >> 20) % kSites.size()](size);
    ++done;
  };
  for (size_t slot = 0; slot < live.size() && done < events; ++slot) allocate(slot);
  while (done + 2 <= events) {
    const size_t slot = next_random() % live.size();
    release(live[slot]);
    ++done;
    allocate(slot);
  }
  return 0;
}

// ---- page: tests/report/lod_trace.py's training run ----

constexpr int kActivations = 24;
constexpr int kTemporaries = 8;
constexpr int kEventsPerStep = 2 * kActivations + 2 * kTemporaries + 2;  // + history block + mark

template <int S>
__attribute__((noinline)) void block_alloc_at(const char* base, uint64_t offset, uint64_t size) {
  gpumemtrace_block_alloc(base + offset, size, base, 0, "default");
}
template <size_t... S>
constexpr std::array<void (*)(const char*, uint64_t, uint64_t), sizeof...(S)> make_layers(std::index_sequence<S...>) {
  return {&block_alloc_at<static_cast<int>(S)>...};
}
constexpr auto kLayers = make_layers(std::make_index_sequence<8>{});  // layer_0_forward ... layer_7_forward

__attribute__((noinline)) void load_weights(const char* base) {
  for (uint64_t i = 0; i < 32; ++i) gpumemtrace_block_alloc(base + i * 64 * kMiB, 64 * kMiB, base, 0, "default");
}
__attribute__((noinline)) void cache_embeddings(const char* base) {
  gpumemtrace_block_alloc(base + 3 * kGiB, 16 * kMiB, base, 0, "default");
}
__attribute__((noinline)) void append_history(const char* base, uint64_t offset) {
  gpumemtrace_block_alloc(base + offset, 64 * 1024, base, 0, "default");
}
__attribute__((noinline)) void add_temporary(const char* base, uint64_t offset) {
  gpumemtrace_block_alloc(base + offset, 256 * 1024, base, 0, "default");
}
__attribute__((noinline)) void attention_scores(const char* base, uint64_t offset) {
  gpumemtrace_block_alloc(base + offset, 256 * kMiB, base, 0, "default");
}
__attribute__((noinline)) void allocate_logits() {
  void* p = nullptr;
  if (cudaMalloc(&p, 56 * kGiB) == cudaSuccess) cudaFree(p);  // fails: the device is full
  gpumemtrace_block_oom(56 * kGiB, 0, "default");
}
__attribute__((noinline)) void free_block(const char* base, uint64_t offset) {
  gpumemtrace_block_free(base + offset, 0, base, 0, "default");
}

int run_page(long events) {
  void* segment = nullptr;
  gpumemtrace_mark("load");
  if (cudaMalloc(&segment, 64 * kGiB) != cudaSuccess) {
    fprintf(stderr, "shapes_program: cudaMalloc(64 GiB) failed (GPUMEMTRACE_SIM_CAPACITY=80G?)\n");
    return 1;
  }
  const char* base = static_cast<const char*>(segment);
  load_weights(base);
  cache_embeddings(base);
  const long steps = std::max(10L, (events - 36) / kEventsPerStep);
  const long peak_step = static_cast<long>(steps * 0.6), oom_step = static_cast<long>(steps * 0.9);
  const long history_every = std::max(1L, (steps + 9999) / 10000);
  const uint64_t history_at = 56 * kGiB, work = 8 * kGiB;
  uint64_t kept = 0;
  char label[32];
  std::vector<uint64_t> live;
  for (long step = 0; step < steps; ++step) {
    snprintf(label, sizeof label, "step %ld", step);
    gpumemtrace_mark(label);
    live.clear();
    uint64_t at = work;
    for (int i = 0; i < kActivations; ++i) {
      const uint64_t size = static_cast<uint64_t>(i % 8 + 1) * kMiB;
      kLayers[i % 8](base, at, size);
      live.push_back(at);
      at += size;
      if (i % 3 == 0) {  // a temporary: freed at once
        add_temporary(base, at);
        free_block(base, at);
      }
    }
    if (step == peak_step) {
      for (uint64_t i = 0; i < 16; ++i) {
        attention_scores(base, 20 * kGiB + i * 256 * kMiB);
        live.push_back(20 * kGiB + i * 256 * kMiB);
      }
    }
    for (auto it = live.rbegin(); it != live.rend(); ++it) free_block(base, *it);
    if (step % history_every == 0) append_history(base, history_at + kept++ * 64 * 1024);
    if (step == oom_step) allocate_logits();
  }
  for (uint64_t i = 0; i < 32; ++i) free_block(base, i * 64 * kMiB);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "live") == 0) return run_live(atol(argv[2]), atol(argv[3]));
  if (argc == 3 && strcmp(argv[1], "page") == 0) return run_page(atol(argv[2]));
  fprintf(stderr, "usage: shapes_program live EVENTS LIVE | page EVENTS\n");
  return 2;
}
