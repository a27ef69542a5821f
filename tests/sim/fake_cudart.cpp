// tests/sim/fake_cudart.cpp — a simulated CUDA runtime: build/sim/libcudart.so.13.
//
// For tests, the demo and benchmarks on machines without a GPU. It has the real runtime's soname and
// symbol version node (libcudart.so.13), so programs built against it and run under LD_PRELOAD see
// exactly the interposition they would see with the real one. Device memory is a fake address space
// (first-fit, 512-byte aligned; the addresses are never dereferenceable) with a capacity per device,
// so out-of-memory and fragmentation can be provoked. Host (pinned, managed) memory is real memory,
// because programs touch it.
//
// Settings: tests/sim/sim_settings.h.
// Thread-safety: one mutex around the address space (it is a test double, not a fast path).
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "tests/sim/sim_settings.h"

namespace {

constexpr uint64_t kAlign = 512;
constexpr int kMaxDevices = 8;

struct Device {
  uint64_t base = 0;
  uint64_t capacity = 0;
  uint64_t used = 0;
  std::map<uint64_t, uint64_t> free_ranges;         // start -> size
  std::unordered_map<uint64_t, uint64_t> live;      // start -> size
};

struct Sim {
  std::mutex mu;
  int device_count = 1;
  Device devices[kMaxDevices];
  Sim() {
    device_count = gpumemtrace::sim::device_count(kMaxDevices);
    const uint64_t capacity = gpumemtrace::sim::device_capacity();
    for (int d = 0; d < device_count; ++d) {
      Device& dev = devices[d];
      dev.base = 0x700000000000ull + (static_cast<uint64_t>(d) << 40);
      dev.capacity = capacity & ~(kAlign - 1);
      dev.free_ranges[dev.base] = dev.capacity;
    }
  }
};

// A bad GPUMEMTRACE_SIM_* value stops the program when the library is loaded (sim_settings.h).
__attribute__((constructor)) void check_sim_settings() { gpumemtrace::sim::check_settings(kMaxDevices); }

Sim& sim() {
  static Sim* s = new Sim();  // never destroyed: programs free memory from static destructors
  return *s;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

cudaError_t device_alloc(void** out, size_t size) {
  if (!out) return fail(cudaErrorInvalidValue);
  *out = nullptr;
  if (size == 0) return cudaSuccess;
  Sim& s = sim();
  std::lock_guard<std::mutex> lock(s.mu);
  Device& dev = s.devices[t_device];
  // More than the device holds, whatever its rounding: refused before the rounding can wrap (the real
  // runtime says out of memory for cudaMalloc(&p, SIZE_MAX)).
  if (size > dev.capacity) return fail(cudaErrorMemoryAllocation);
  const uint64_t want = (size + kAlign - 1) & ~(kAlign - 1);
  for (auto it = dev.free_ranges.begin(); it != dev.free_ranges.end(); ++it) {
    if (it->second < want) continue;
    const uint64_t start = it->first, rest = it->second - want;
    dev.free_ranges.erase(it);
    if (rest) dev.free_ranges[start + want] = rest;
    dev.live[start] = want;
    dev.used += want;
    *out = reinterpret_cast<void*>(start);
    return cudaSuccess;
  }
  return fail(cudaErrorMemoryAllocation);
}

cudaError_t device_free(void* ptr) {
  if (!ptr) return cudaSuccess;
  Sim& s = sim();
  std::lock_guard<std::mutex> lock(s.mu);
  const uint64_t start = reinterpret_cast<uint64_t>(ptr);
  // Each device's addresses lie in its own disjoint range [base, base + capacity).
  Device* owner = nullptr;
  for (int d = 0; d < s.device_count; ++d)
    if (start >= s.devices[d].base && start < s.devices[d].base + s.devices[d].capacity) owner = &s.devices[d];
  auto it = owner ? owner->live.find(start) : decltype(owner->live.end()){};
  if (!owner || it == owner->live.end()) return fail(cudaErrorInvalidValue);
  Device& dev = *owner;
  uint64_t size = it->second;
  dev.live.erase(it);
  dev.used -= size;
  // Coalesce with the neighbours so fragmentation behaves like a real first-fit heap.
  uint64_t lo = start;
  auto next = dev.free_ranges.lower_bound(start);
  if (next != dev.free_ranges.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      lo = prev->first;
      size += prev->second;
      dev.free_ranges.erase(prev);
    }
  }
  next = dev.free_ranges.find(lo + size);
  if (next != dev.free_ranges.end()) {
    size += next->second;
    dev.free_ranges.erase(next);
  }
  dev.free_ranges[lo] = size;
  return cudaSuccess;
}

void reset_device(int d) {
  Sim& s = sim();
  std::lock_guard<std::mutex> lock(s.mu);
  Device& dev = s.devices[d];
  dev.live.clear();
  dev.used = 0;
  dev.free_ranges.clear();
  dev.free_ranges[dev.base] = dev.capacity;
}

struct FakeArray {
  size_t bytes;
};

}  // namespace

extern "C" {

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    default: return "unknown error";
  }
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    default: return "cudaErrorUnknown";
  }
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = sim().device_count;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail(cudaErrorInvalidValue);
  *device = t_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= sim().device_count) return fail(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaStreamCreate(cudaStream_t* s) {
  static uint64_t next = 0x5000;
  if (!s) return fail(cudaErrorInvalidValue);
  *s = reinterpret_cast<cudaStream_t>(__atomic_add_fetch(&next, 0x10, __ATOMIC_RELAXED));
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaGetDeviceProperties_v2(cudaDeviceProp* prop, int device) {
  if (!prop || device < 0 || device >= sim().device_count) return fail(cudaErrorInvalidValue);
  memset(prop, 0, sizeof(*prop));
  strcpy(prop->name, "gpumemtrace simulated GPU");
  prop->totalGlobalMem = sim().devices[device].capacity;
  prop->major = 9;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) { return cudaGetDeviceProperties_v2(prop, device); }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  if (!free_bytes || !total) return fail(cudaErrorInvalidValue);
  Sim& s = sim();
  std::lock_guard<std::mutex> lock(s.mu);
  const Device& dev = s.devices[t_device];
  *free_bytes = dev.capacity - dev.used;
  *total = dev.capacity;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t size) { return device_alloc(p, size); }
cudaError_t cudaFree(void* p) { return device_free(p); }
cudaError_t cudaMallocAsync(void** p, size_t size, cudaStream_t) { return device_alloc(p, size); }
cudaError_t cudaMallocAsync_ptsz(void** p, size_t size, cudaStream_t) { return device_alloc(p, size); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return device_free(p); }
cudaError_t cudaFreeAsync_ptsz(void* p, cudaStream_t) { return device_free(p); }
cudaError_t cudaMallocFromPoolAsync(void** p, size_t size, cudaMemPool_t, cudaStream_t) { return device_alloc(p, size); }
cudaError_t cudaMallocFromPoolAsync_ptsz(void** p, size_t size, cudaMemPool_t, cudaStream_t) {
  return device_alloc(p, size);
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (!pool) return fail(cudaErrorInvalidValue);
  *pool = reinterpret_cast<cudaMemPool_t>(0x9000 + device);
  return cudaSuccess;
}
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t) { return cudaSuccess; }

cudaError_t cudaMallocPitch(void** p, size_t* pitch, size_t width, size_t height) {
  if (!pitch) return fail(cudaErrorInvalidValue);
  size_t bytes;
  if (width > (uint64_t{1} << 48) || __builtin_mul_overflow((width + kAlign - 1) & ~(kAlign - 1), height, &bytes)) {
    if (p) *p = nullptr;
    return fail(cudaErrorMemoryAllocation);
  }
  *pitch = (width + kAlign - 1) & ~(kAlign - 1);
  return device_alloc(p, bytes);
}
cudaError_t cudaMalloc3D(cudaPitchedPtr* pp, cudaExtent e) {
  if (!pp) return fail(cudaErrorInvalidValue);
  size_t pitch = (e.width + kAlign - 1) & ~(kAlign - 1);
  size_t rows, bytes;
  if (e.width > (uint64_t{1} << 48) || __builtin_mul_overflow(e.height, e.depth ? e.depth : 1, &rows) ||
      __builtin_mul_overflow(pitch, rows, &bytes))
    return fail(cudaErrorMemoryAllocation);
  void* p = nullptr;
  cudaError_t rc = device_alloc(&p, bytes);
  if (rc != cudaSuccess) return rc;
  pp->ptr = p;
  pp->pitch = pitch;
  pp->xsize = e.width;
  pp->ysize = e.height;
  return cudaSuccess;
}

cudaError_t cudaMallocManaged(void** p, size_t size, unsigned int) {
  if (!p) return fail(cudaErrorInvalidValue);
  // As the simulated driver's host allocations: no host holds more (and AddressSanitizer's malloc
  // aborts on a size past its maximum instead of returning null).
  if (size > (size_t{1} << 40)) return fail(cudaErrorMemoryAllocation);
  *p = malloc(size ? size : 1);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaMallocHost(void** p, size_t size) { return cudaMallocManaged(p, size, 0); }
cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int) { return cudaMallocManaged(p, size, 0); }
cudaError_t cudaFreeHost(void* p) {
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMallocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width, size_t height,
                            unsigned int) {
  if (!array || !desc || width > (1u << 17) || height > (1u << 16)) return fail(cudaErrorInvalidValue);  // 2D limits
  *array = reinterpret_cast<cudaArray_t>(new FakeArray{width * (height ? height : 1)});
  return cudaSuccess;
}
cudaError_t cudaFreeArray(cudaArray_t array) {
  delete reinterpret_cast<FakeArray*>(array);
  return cudaSuccess;
}

cudaError_t cudaDeviceReset(void) {
  reset_device(t_device);
  return cudaSuccess;
}

}  // extern "C"
