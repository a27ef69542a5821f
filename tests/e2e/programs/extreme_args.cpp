// tests/e2e/programs/extreme_args.cpp — calls every CUDA runtime entry point the recorder hooks, and
// every function of include/gpumemtrace.h and the PyTorch bridge, with arguments at and past the trace
// format's limits: sizes of 2^53 - 1, 2^53, 2^64 - 1, width x height products that pass 2^64, a pitch
// that cannot be, devices below -1, ranges that run past the end of the address space, garbage
// pointers. Each call is legal C: the runtime refuses what it cannot do, and the program goes on.
// tests/e2e/test_extreme_args.py requires a trace gpumem-report reads, and a report that names each
// failed request with the size the program asked for.
//
// Usage: extreme_args runtime    (prints "done" at the end)
//        extreme_args strings    (C API strings that run into an unmapped page)
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "gpumemtrace.h"

// The per-thread default stream variants, declared by the CUDA headers only for code built with
// --default-stream per-thread.
extern "C" {
cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream);
}

#define NOINLINE __attribute__((noinline))

namespace {

constexpr size_t kMax = SIZE_MAX;
constexpr size_t k2pow53 = size_t{1} << 53;

void say(const char* what, cudaError_t rc) { std::printf("%s rc=%d\n", what, static_cast<int>(rc)); }

NOINLINE void ask_for_everything() {
  void* p = nullptr;
  say("cudaMalloc max", cudaMalloc(&p, kMax));
  say("cudaMalloc 2^53", cudaMalloc(&p, k2pow53));
  say("cudaMalloc 2^53-1", cudaMalloc(&p, k2pow53 - 1));
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  say("cudaMallocAsync max", cudaMallocAsync(&p, kMax, stream));
  say("cudaMallocAsync_ptsz max", cudaMallocAsync_ptsz(&p, kMax, stream));
  cudaMemPool_t pool = nullptr;
  cudaDeviceGetDefaultMemPool(&pool, 0);
  say("cudaMallocFromPoolAsync max", cudaMallocFromPoolAsync(&p, kMax, pool, stream));
  say("cudaMallocFromPoolAsync_ptsz max", cudaMallocFromPoolAsync_ptsz(&p, kMax, pool, stream));
  say("cudaMallocManaged max", cudaMallocManaged(&p, kMax, 1));
  say("cudaMallocHost max", cudaMallocHost(&p, kMax));
  say("cudaHostAlloc max", cudaHostAlloc(&p, kMax, 0));
  size_t pitch = 0;
  say("cudaMallocPitch overflowing", cudaMallocPitch(&p, &pitch, size_t{1} << 40, size_t{1} << 40));
  say("cudaMallocPitch max width", cudaMallocPitch(&p, &pitch, kMax, 2));
  cudaPitchedPtr pitched{};
  cudaExtent extent{size_t{1} << 30, size_t{1} << 30, size_t{1} << 30};
  say("cudaMalloc3D overflowing", cudaMalloc3D(&pitched, extent));
  cudaArray_t array = nullptr;
  cudaChannelFormatDesc desc{32, 32, 32, 32, cudaChannelFormatKindFloat};
  say("cudaMallocArray max", cudaMallocArray(&array, &desc, kMax, kMax, 0));
  say("cudaMemPoolTrimTo max", cudaMemPoolTrimTo(pool, kMax));
  say("cudaFree garbage", cudaFree(reinterpret_cast<void*>(UINTPTR_MAX)));
  say("cudaFreeAsync garbage", cudaFreeAsync(reinterpret_cast<void*>(UINTPTR_MAX - 7), stream));
  say("cudaFreeAsync_ptsz garbage", cudaFreeAsync_ptsz(reinterpret_cast<void*>(UINTPTR_MAX - 15), stream));
  say("cudaFreeHost null", cudaFreeHost(nullptr));
  say("cudaFreeArray null", cudaFreeArray(nullptr));
  size_t free_bytes = 0, total = 0;
  say("cudaMemGetInfo", cudaMemGetInfo(&free_bytes, &total));
  // One that works, so the report has a device and a leak to show as well.
  say("cudaMalloc 1 MiB", cudaMalloc(&p, 1 << 20));
}

NOINLINE void report_odd_blocks() {
  const void* top = reinterpret_cast<const void*>(UINTPTR_MAX - 4095);
  gpumemtrace_block_alloc(top, 1 << 20, top, 0, "wraps");                     // past the end of memory
  gpumemtrace_block_alloc(reinterpret_cast<const void*>(0x1000), kMax, nullptr, -7, "huge");
  gpumemtrace_block_alloc(reinterpret_cast<const void*>(0x2000), k2pow53, nullptr, INT32_MIN, "huge");
  gpumemtrace_block_free(reinterpret_cast<const void*>(0x1000), kMax, nullptr, -7, "huge");
  gpumemtrace_block_oom(kMax, -7, "pool");
  gpumemtrace_block_oom(k2pow53 + 1, 0, nullptr);
  gpumemtrace_block_oom(0, -2, "");  // -2: not a device, and the recorder's own "current device" mark
  gpumemtrace_mark("");
  gpumemtrace_scope_begin("");
  gpumemtrace_scope_end(nullptr);
}

// The PyTorch bridge (interpose/hooks/torch_bridge.cpp) as a careless caller would use it.
struct TorchFrame {
  const char* file;
  const char* function;
  int64_t line;
};
struct TorchEntry {
  const char* action;
  uint64_t addr, size, stream, segment, time_ns, free_bytes;
  const char* pool;
  const TorchFrame* frames;
  uint32_t frame_count;
  int32_t device;
};

NOINLINE void torch_bridge_extremes() {
  using RecordTorch = int64_t (*)(const TorchEntry*, uint64_t, uint32_t, uint32_t);
  auto record = reinterpret_cast<RecordTorch>(dlsym(RTLD_DEFAULT, "gpumemtrace_record_torch"));
  if (!record) return;
  const TorchFrame frames[] = {{"x.py", "f", -5}, {"y.py", "g", INT64_MAX}};
  TorchEntry entries[] = {
      {"oom", 0, kMax, 0, 0, 1, kMax, "pool", frames, 2, 0},
      {"alloc", UINT64_MAX - 10, 1 << 20, 0, UINT64_MAX - 10, 2, 0, nullptr, frames, 2, 0},
      {"segment_alloc", 0x5000, k2pow53 + 7, 0, 0, 3, 0, nullptr, nullptr, 0, -1},
  };
  std::printf("record_torch %lld\n", static_cast<long long>(record(entries, 3, sizeof(TorchEntry), sizeof(TorchFrame))));
}

// A buffer whose last byte is followed by a page that is not mapped: a name there has no NUL.
char* before_unmapped_page(size_t bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  char* two = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (two == MAP_FAILED) return nullptr;
  munmap(two + page, page);
  char* text = two + page - bytes;
  memset(text, 'n', bytes);
  return text;
}

NOINLINE int unterminated_strings() {
  char* label = before_unmapped_page(16);
  char* name = before_unmapped_page(100);
  char* pool = before_unmapped_page(8);
  if (!label || !name || !pool) return 1;
  gpumemtrace_mark(label);
  gpumemtrace_scope_begin(name);
  gpumemtrace_block_alloc(reinterpret_cast<const void*>(0x3000), 4096, nullptr, 0, pool);
  gpumemtrace_scope_end(name);
  using RecordTorch = int64_t (*)(const TorchEntry*, uint64_t, uint32_t, uint32_t);
  auto record = reinterpret_cast<RecordTorch>(dlsym(RTLD_DEFAULT, "gpumemtrace_record_torch"));
  if (record) {
    char* action = before_unmapped_page(5);
    memcpy(action, "alloc", 5);  // "alloc" with no NUL after it
    const TorchFrame frames[] = {{before_unmapped_page(3), before_unmapped_page(7), 1}};
    TorchEntry entry{action, 0x4000, 512, 0, 0, 0, 0, pool, frames, 1, 0};
    std::printf("record_torch %lld\n", static_cast<long long>(record(&entry, 1, sizeof(TorchEntry), sizeof(TorchFrame))));
  }
  void* p = nullptr;
  cudaMalloc(&p, 4096);  // the recorder still records afterwards
  return 0;
}

}  // namespace

// A C function whose name is also a type's encoding ("v" is void): named as it is.
extern "C" NOINLINE void v() {
  void* p = nullptr;
  cudaMalloc(&p, 12345);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "runtime") {
    ask_for_everything();
    report_odd_blocks();
    torch_bridge_extremes();
    cudaDeviceReset();
    v();  // kept: a leak at exit, allocated in `v`
    std::printf("done\n");
    return 0;
  }
  if (mode == "strings") {
    const int rc = unterminated_strings();
    std::printf("done\n");
    return rc;
  }
  std::fprintf(stderr, "usage: extreme_args runtime|strings\n");
  return 2;
}
