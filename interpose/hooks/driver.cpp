// interpose/hooks/driver.cpp — CUDA driver API hooks, one per row of driver_hooks.def.
//
// Reached three ways (driver_table.h): our exported cu* symbols (programs linked against libcuda),
// and the wrappers dlsym.cpp hands out for dlsym / cuGetProcAddress / cudaGetDriverEntryPoint.
//
// One event per allocation: a driver hook nested in a runtime hook (cudaMalloc -> cuMemAlloc_v2)
// finds its HookScope not recording and only names itself as the runtime event's driver_api. When it
// is outermost (static cudart, JAX, direct driver use) it records the event itself: what the call
// means is its description (driver_calls.h), recorded through record_call() with the driver's device
// queries, as the CUPTI callbacks record the same calls. Return values, out-parameters and errno are
// what the program would have seen: the driver calls we add (device of a context, free memory) run
// inside our scope, only when recording, and keep errno (record_call).
#include "interpose/recorder/capture_backend.h"
#include "interpose/hooks/driver_cuda.h"
#include "interpose/hooks/driver_calls.h"
#include "interpose/hooks/driver_table.h"
#include "interpose/recorder/recorder.h"

namespace gpumemtrace::driver {
namespace {

#define GPUMEMTRACE_UNPACK(...) __VA_ARGS__
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args, meaning) \
  using Pfn_##symbol = CUresult (*) params;
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK

// ---- the hooks: the re-entry scope, then the call and its description ----
// Nested in a runtime hook, the scope does not record: the hook names itself as the driver call
// serving the runtime's event (record() clears that note after each event, so the runtime's own later
// queries cannot overwrite it).
#define GPUMEMTRACE_DRIVER_RESOLVER(...)  // below: resolving records nothing
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args, meaning)              \
  CUresult hook_##symbol(Pfn_##symbol real, GPUMEMTRACE_UNPACK params) {                            \
    HookScope scope;                                                                                 \
    if (!scope.recording()) HookScope::note_driver_api(#symbol);                                     \
    return capture::call_and_record<CUresult>(scope.recording(), kDriverQueries, real,              \
                                              capture::describe_##symbol, GPUMEMTRACE_UNPACK args); \
  }
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
#undef GPUMEMTRACE_DRIVER_RESOLVER

// The resolvers: every pointer they hand out for a hooked function becomes our wrapper. No HookScope:
// resolving records nothing, and the driver may call back into hooked functions while resolving.
CUresult resolved(CUresult r, const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  stats().procaddr_calls.fetch_add(1, std::memory_order_relaxed);
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = wrap(find_proc(symbol, cudaVersion, flags), *pfn);
  return r;
}

CUresult hook_cuGetProcAddress(Pfn_cuGetProcAddress real, const char* symbol, void** pfn, int cudaVersion,
                               cuuint64_t flags) {
  backend::on_driver_contact();
  return resolved(real(symbol, pfn, cudaVersion, flags), symbol, pfn, cudaVersion, flags);
}

CUresult hook_cuGetProcAddress_v2(Pfn_cuGetProcAddress_v2 real, const char* symbol, void** pfn,
                                  int cudaVersion, cuuint64_t flags, CUdriverProcAddressQueryResult* symbolStatus) {
  backend::on_driver_contact();
  return resolved(real(symbol, pfn, cudaVersion, flags, symbolStatus), symbol, pfn, cudaVersion, flags);
}

// ---- wrappers handed out for driver pointers (slots) and our exported symbols ----
// While CUPTI records, the real function runs untouched (interpose/recorder/capture_backend.h). The resolvers are always
// wrapped: a pointer handed out now may be called after a backend fallback.
inline bool passthrough(Fn fn) noexcept { return !is_resolver(fn) && !backend::interpose_recording(); }

CUresult no_real_function() {
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) log_line("driver hooks: a cu* function was called but no CUDA driver is loaded");
  return CUDA_ERROR_NOT_INITIALIZED;
}

#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args, meaning)                          \
  template <int Slot>                                                                                      \
  CUresult slot_##symbol params {                                                                          \
    auto real = reinterpret_cast<Pfn_##symbol>(g_real[static_cast<int>(Fn::symbol)][Slot].load(           \
        std::memory_order_acquire));                                                                       \
    if (passthrough(Fn::symbol)) return real args;                                                         \
    return hook_##symbol(real, GPUMEMTRACE_UNPACK args);                                       \
  }
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK

static_assert(kSlots == 4, "kSlotWrappers lists four slots per function");

}  // namespace

void* const kSlotWrappers[kFnCount][kSlots] = {
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args, meaning)               \
  {reinterpret_cast<void*>(&slot_##symbol<0>), reinterpret_cast<void*>(&slot_##symbol<1>), \
   reinterpret_cast<void*>(&slot_##symbol<2>), reinterpret_cast<void*>(&slot_##symbol<3>)},
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
};

}  // namespace gpumemtrace::driver

// Exported: programs linked against libcuda.so.1 bind their cu* calls here (we are preloaded).
// export_real remembers the real resolvers (for the hooks' own queries) when it first finds them.
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args, meaning)                  \
  extern "C" __attribute__((visibility("default"))) CUresult symbol params {                     \
    using namespace gpumemtrace::driver;                                                          \
    if (!is_resolver(Fn::symbol)) gpumemtrace::backend::on_driver_contact();                      \
    auto real = reinterpret_cast<Pfn_##symbol>(export_real(Fn::symbol));                          \
    if (!real) return no_real_function();                                                         \
    if (passthrough(Fn::symbol)) return real args;                                                \
    return hook_##symbol(real, GPUMEMTRACE_UNPACK args);                              \
  }
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
