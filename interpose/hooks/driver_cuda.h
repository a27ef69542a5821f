// interpose/hooks/driver_cuda.h — <cuda.h> as the driver hooks need it.
//
// __CUDA_API_VERSION_INTERNAL turns off cuda.h's renaming macros (cuMemAlloc -> cuMemAlloc_v2,
// cuGetProcAddress -> cuGetProcAddress_v2, ...) and declares the legacy names, so that every hooked
// symbol can be spelled exactly as libcuda.so.1 exports it. Include this instead of <cuda.h> in the
// driver hooks; never together with a plain <cuda.h> in the same file.
#pragma once

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

// Not declared by cuda.h outside per-thread-default-stream builds; same signatures as the legacy ones.
extern "C" {
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream);
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream);
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
}
