// interpose/hooks/call_description.h — what a CUDA memory call means, written once per API.
//
// The meaning of each hooked runtime and driver function is the last column of its row in
// runtime_hooks.def / driver_hooks.def: an expression over the call's own parameters and its Outcome
// `o`, built from the named event constructors (recorder.h, namespace event) and the size rules below.
// runtime_calls.h and driver_calls.h expand the rows into describe_<symbol>(o, args...) functions.
// The runtime hooks, the driver hooks and the CUPTI callbacks call those with the arguments they
// have (CUPTI: the fields of its parameter struct, named like the parameters) and hand the result to
// record_call(), the one recording entry point. So a call means the same event whichever layer saw it.
//
// Thread-safety: pure functions of their arguments. Hot path: no allocation, no lock, no libc call.
#pragma once

#include <cstdint>

#include "interpose/recorder/recorder.h"

namespace gpumemtrace::capture {

using format::Kind;
using namespace gpumemtrace::event;

// Where the call stands when it is described: before the real call (pending) or after it returned.
class Outcome {
 public:
  static constexpr Outcome pending() noexcept { return Outcome(false, kCudaSuccess); }
  static constexpr Outcome returned(int32_t result) noexcept { return Outcome(true, result); }

  bool ok() const noexcept { return returned_ && result_ == kCudaSuccess; }
  int32_t result() const noexcept { return result_; }

  // What an out-parameter holds after a successful call; 0 before, or after a failed one (garbage,
  // or null).
  template <typename T>
  uint64_t out(T* const* p) const noexcept {
    return ok() && p ? reinterpret_cast<uint64_t>(*p) : 0;
  }
  uint64_t out(const unsigned long long* p) const noexcept { return ok() && p ? *p : 0; }  // CUdeviceptr, handles

 private:
  constexpr Outcome(bool returned, int32_t result) : returned_(returned), result_(result) {}
  bool returned_;
  int32_t result_;
};

// An opaque handle or pointer argument as the trace writes it.
inline uint64_t address(const void* p) noexcept { return reinterpret_cast<uint64_t>(p); }

// ---- size rules ----
// Products of the arguments saturate (event::Bytes): a request too large for 64 bits is recorded as
// such ("size_exact":"out of range" in the trace), not as the few bytes a wrapped product would say.
// Pitched allocations: the real footprint is pitch * rows; on failure (or before the call) only the
// requested width * rows is known.
inline Bytes pitched_bytes(const Outcome& o, const size_t* pitch, uint64_t width, Bytes rows) noexcept {
  return product(rows, o.ok() && pitch ? *pitch : width);
}
inline Bytes pitched_bytes(const Outcome& o, const size_t* pitch, uint64_t width, uint64_t rows) noexcept {
  return pitched_bytes(o, pitch, width, Bytes{rows, false});
}

// Arrays have an opaque layout: width * height * element bytes is a lower bound of the footprint.
inline Bytes array_bytes(uint64_t element_bytes, uint64_t width, uint64_t height) noexcept {
  return product(product(element_bytes, width), height ? height : 1);
}

// A free-memory query (cudaMemGetInfo, cuMemGetInfo_v2) is a meminfo event when it succeeded.
inline EventFacts reported_meminfo(const Outcome& o, const size_t* free_bytes, const size_t* total_bytes) noexcept {
  return o.ok() && free_bytes && total_bytes ? meminfo(*free_bytes, *total_bytes) : nothing();
}

// The one step every description ends with: the api that was called and, for an event taken after
// the call, its result. In place: the facts are built once, where record_call() takes them (copying
// them right after zeroing them stalled the hook on store forwarding).
inline void finish_description(const char* api, const Outcome& o, EventFacts& e) noexcept {
  e.api = api;
  if (e.has_result) e.result = o.result();
}

// describe_<name>'s body for a row whose meaning is `meaning` (runtime_calls.h, driver_calls.h).
#define GPUMEMTRACE_DESCRIBED(api, meaning)                \
  {                                                        \
    EventFacts e = meaning;                                \
    ::gpumemtrace::capture::finish_description(api, o, e); \
    return e;                                              \
  }

// Describes `describe(o, args...)` at the right moment around `real(args...)` and records it: before
// the call for whatever ends memory, after it (failed calls included) for the rest.
// `recording`: HookScope::recording() of the caller's scope. Always inlined into the hook, so that
// `describe` is a known function there: the description made only to learn when to record (the op)
// then costs nothing.
template <typename Result, typename Real, typename Describe, typename... Args>
__attribute__((always_inline)) inline Result call_and_record(bool recording, const DeviceQueries& queries, Real real,
                                                              Describe describe, Args... args) noexcept {
  if (!recording) return real(args...);
  EventFacts before = describe(Outcome::pending(), args...);
  if (before.taken_before_call()) {
    record_call(before, queries);
    return real(args...);
  }
  const Result r = real(args...);
  EventFacts after = describe(Outcome::returned(static_cast<int32_t>(r)), args...);
  record_call(after, queries);
  return r;
}

}  // namespace gpumemtrace::capture

// The parameter list of a describe_<symbol> function: the Outcome, then the row's parameters (none
// for cudaDeviceReset; __VA_OPT__, which GCC and Clang accept in C++17, drops the comma then).
#define GPUMEMTRACE_OUTCOME_AND(...) (const ::gpumemtrace::capture::Outcome& o __VA_OPT__(, ) __VA_ARGS__)
