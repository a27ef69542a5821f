// interpose/hooks/driver_table.h — which driver functions we wrap, and how a pointer to one of them,
// obtained from the driver by any route, is swapped for our wrapper.
//
// The routes (docs/capture.md): a program linked against libcuda calls our exported cu* symbols;
// dlsym(handle, "cuMemAlloc_v2") and dlsym(handle, "cuGetProcAddress_v2") go through our dlsym
// (dlsym.cpp); cuGetProcAddress[_v2] and cudaGetDriverEntryPoint[ByVersion] results are mapped per
// (base name, cudaVersion, flags) to the concrete variant (driver_hooks.def) and wrapped.
//
// Wrapping without generating code: each function has kSlots template-instantiated wrappers, each
// calling the real pointer stored in its slot. A real pointer claims a slot on first sight (CAS) and
// keeps it for the life of the process, so handing out a wrapper is lock-free and a wrapper's target
// never changes. Different real pointers for one function (the exported entry point vs. what
// cuGetProcAddress returns, two driver copies) get different slots. When the slots are exhausted the
// real pointer is handed out unwrapped (one warning line): events are missed, nothing breaks.
//
// Thread-safety: all functions may be called from any thread. Only the dlsym/cuGetProcAddress paths
// (init-time, not per allocation) compare strings or call dladdr.
#pragma once

#include <atomic>
#include <cstdint>

#include "interpose/hooks/driver_query.h"  // is_own_code, current_device, device_of
#include "interpose/hooks/real_function.h"  // Need

namespace gpumemtrace::driver {

enum class Stream : uint8_t { Any, Legacy, PerThread };

enum class Fn : int {
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args, meaning) symbol,
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
  kCount
};
inline constexpr int kFnCount = static_cast<int>(Fn::kCount);

// The resolvers (cuGetProcAddress[_v2]): always wrapped, never recorded.
constexpr bool is_resolver(Fn fn) { return fn == Fn::cuGetProcAddress || fn == Fn::cuGetProcAddress_v2; }
inline constexpr int kSlots = 4;

struct FnInfo {
  const char* symbol;  // exported name, also the "api" of its events
  const char* proc;    // cuGetProcAddress base name
  int since;
  Stream stream;
  Need need;
};
extern const FnInfo kFnInfo[kFnCount];

// Exact exported symbol name -> function index, -1 when not hooked.
int find_symbol(const char* symbol) noexcept;
// cuGetProcAddress semantics: the variant handed out for (proc, cudaVersion, flags), -1 when none is
// hooked (unknown name, or a legacy variant older than every row).
int find_proc(const char* proc, int cuda_version, uint64_t flags) noexcept;

// The pointer to hand out instead of `real` (a pointer to function `fn` from the driver): one of our
// wrappers, or `real` itself when it is null, is already ours, or no slot is left.
void* wrap(int fn, void* real) noexcept;

// Slot table, filled by wrap(); read by the wrappers (driver.cpp). Never cleared.
extern std::atomic<void*> g_real[kFnCount][kSlots];
// Our wrappers, defined in driver.cpp: [fn][slot].
extern void* const kSlotWrappers[kFnCount][kSlots];

// The next definition of `fn`'s exported symbol after this library (the real libcuda entry point),
// for our exported cu* symbols; null when no driver is loaded. Cached. A loaded driver without a
// Required function (driver_hooks.def) says so in one line.
void* export_real(Fn fn) noexcept;

// A driver function for the hooks' own queries (device of the current context, free memory), found
// through the first real cuGetProcAddress we saw, else by symbol. Null when unavailable. Cached.
enum class Query { CtxGetDevice, CtxGetDeviceOf, MemGetInfo, DeviceGetName, DeviceTotalMem, kCount };
void* query_function(Query q) noexcept;

// Remembers the first real cuGetProcAddress_v2 / cuGetProcAddress (for query_function). A CAS: call it
// when a resolver pointer is first seen (cached), not per call.
void note_real_resolver(Fn fn, void* real) noexcept;

// Counters for GPUMEMTRACE_DRIVER_STATS=1 (printed at exit, used by the tests).
struct Stats {
  std::atomic<uint64_t> dlsym_driver{0};     // dlsym answers for hooked driver symbols
  std::atomic<uint64_t> procaddr_calls{0};   // cuGetProcAddress[_v2] / cudaGetDriverEntryPoint calls
  std::atomic<uint64_t> wrapped{0};          // pointers swapped for a wrapper
  std::atomic<uint64_t> slots_full{0};       // pointers handed out unwrapped for lack of a slot
};
Stats& stats() noexcept;

}  // namespace gpumemtrace::driver
