// interpose/hooks/runtime_calls.h — describe_<name>(o, args...) for every row of runtime_hooks.def:
// the event each CUDA runtime memory call is (call_description.h).
//
// Thread-safety: pure functions. Include after <cuda_runtime_api.h>.
#pragma once

#include <cuda_runtime_api.h>

#include "interpose/hooks/call_description.h"

static_assert(cudaSuccess == gpumemtrace::kCudaSuccess && cudaErrorMemoryAllocation == gpumemtrace::kCudaOutOfMemory,
              "record_call() reads runtime results as the driver's");

// Per-thread default stream variants are only declared when compiling with per-thread streams.
extern "C" {
cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream);
}

namespace gpumemtrace::capture {

// Bytes of one element of a channel format (e.g. float4 = 16), for the array size rule.
inline uint64_t element_bytes(const cudaChannelFormatDesc* d) noexcept {
  return d ? static_cast<uint64_t>(d->x + d->y + d->z + d->w) / 8 : 0;
}

// cudaMalloc3D: a pitched allocation of height * depth rows.
inline EventFacts allocation_3d(const Outcome& o, const cudaPitchedPtr* p, const cudaExtent& extent) noexcept {
  const Bytes rows = product(extent.height, extent.depth ? extent.depth : 1);
  return allocation(Kind::Device, o.ok() && p ? address(p->ptr) : 0,
                    pitched_bytes(o, p ? &p->pitch : nullptr, extent.width, rows));
}

#define RUNTIME_HOOK(name, need, params, args, meaning) \
  inline EventFacts describe_##name GPUMEMTRACE_OUTCOME_AND params noexcept GPUMEMTRACE_DESCRIBED(#name, meaning)
#include "interpose/hooks/runtime_hooks.def"
#undef RUNTIME_HOOK

}  // namespace gpumemtrace::capture
