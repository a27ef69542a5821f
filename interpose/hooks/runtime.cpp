// interpose/hooks/runtime.cpp — CUDA runtime API hooks (LD_PRELOAD symbol interposition), one per row
// of runtime_hooks.def.
//
// Each hook: open a HookScope, resolve the real function, and let call_and_record() (call_description.h)
// call it and record what the call means (runtime_calls.h) through record_call(). Return values,
// out-parameters, errno and the CUDA error state are exactly what the program would have seen: the
// only runtime calls we add (cudaGetDevice, cudaMemGetInfo, device properties, the queries below) are
// made after a successful call or an out-of-memory error, when they cannot fail.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>

#include "interpose/hooks/real_function.h"
#include "interpose/hooks/runtime_calls.h"
#include "interpose/hooks/runtime_query.h"
#include "interpose/recorder/recorder.h"

namespace {

// The real functions, resolved on first use (see real_function.h for how, and why lazily).
#define RUNTIME_HOOK(name, need, params, args, meaning) \
  gpumemtrace::RealFunction<decltype(&::name)> real_##name{#name, gpumemtrace::Library::CudaRuntime};
#include "interpose/hooks/runtime_hooks.def"
#undef RUNTIME_HOOK

// Helpers the queries need but do not interpose.
gpumemtrace::RealFunction<decltype(&::cudaGetDevice)> real_get_device{"cudaGetDevice",
                                                                      gpumemtrace::Library::CudaRuntime};
gpumemtrace::RealFunction<cudaError_t (*)(cudaDeviceProp*, int)> real_get_properties{
    "cudaGetDeviceProperties_v2", gpumemtrace::Library::CudaRuntime};

// Returned when the real function cannot be found (cannot happen for a program that links it; kept
// so a broken installation fails loudly instead of crashing), with one line saying which.
cudaError_t missing_real_function(const char* name, gpumemtrace::Need need, std::atomic<bool>* logged) {
  if (!logged->exchange(true)) {
    char msg[160];
    snprintf(msg, sizeof(msg), "no real %s in this process (%s); returning cudaErrorSharedObjectSymbolNotFound",
             name, need == gpumemtrace::Need::Required ? "every supported CUDA runtime has it: a broken installation?"
                                                       : "optional: this CUDA runtime lacks it");
    gpumemtrace::log_line(msg);
  }
  return cudaErrorSharedObjectSymbolNotFound;
}

// ---- the runtime's answers for record_call() (recorder.h: DeviceQueries) ----
// A runtime call we add can only be trusted not to disturb the error state after these results.
bool safe_to_query(int32_t result) { return result == cudaSuccess || result == cudaErrorMemoryAllocation; }

int32_t runtime_current_device(int32_t call_result) {
  int device = -1;
  if (!safe_to_query(call_result) || !real_get_device || real_get_device()(&device) != cudaSuccess) device = -1;
  return device;
}

bool runtime_memory(uint64_t* free_bytes, uint64_t* total_bytes) {
  size_t free_now = 0, total = 0;
  if (!real_cudaMemGetInfo || real_cudaMemGetInfo()(&free_now, &total) != cudaSuccess) return false;
  *free_bytes = free_now;
  *total_bytes = total;
  return true;
}

void runtime_describe_device(int32_t device, char* name, size_t name_size, uint64_t* total_bytes) {
  cudaDeviceProp props{};
  if (!real_get_properties || real_get_properties()(&props, device) != cudaSuccess) return;
  size_t i = 0;
  for (; props.name[i] && i + 1 < name_size; ++i) name[i] = props.name[i];
  name[i] = '\0';
  *total_bytes = 0;  // the device line's total is cudaMemGetInfo's, as the runtime reports it
}

}  // namespace

const gpumemtrace::DeviceQueries gpumemtrace::runtime::kRuntimeQueries = {
    "cudaMemGetInfo", runtime_current_device, nullptr, runtime_memory, runtime_describe_device};
using gpumemtrace::runtime::kRuntimeQueries;

// clang-format off
#define RUNTIME_HOOK(name, need, params, args, meaning)                                              \
  extern "C" cudaError_t name params {                                                               \
    gpumemtrace::HookScope scope(gpumemtrace::HookLayer::Runtime);                                   \
    auto real = real_##name();                                                                       \
    if (!real) {                                                                                     \
      static std::atomic<bool> logged{false};                                                        \
      return missing_real_function(#name, gpumemtrace::Need::need, &logged);                         \
    }                                                                                                \
    return gpumemtrace::capture::call_and_record<cudaError_t>(scope.recording(), kRuntimeQueries, real, \
        gpumemtrace::capture::describe_##name GPUMEMTRACE_COMMA_ARGS args);                         \
  }
// clang-format on
#define GPUMEMTRACE_COMMA_ARGS(...) __VA_OPT__(, ) __VA_ARGS__
#include "interpose/hooks/runtime_hooks.def"
#undef RUNTIME_HOOK
#undef GPUMEMTRACE_COMMA_ARGS
