// interpose/writer/format_limits.h — what the writer does with a value the trace format cannot hold
// (trace/format.h, "limits"), so that it never writes a line its reader refuses.
//
// A program may pass anything: cudaMalloc(&p, SIZE_MAX), a pitch whose product with the rows passes
// 2^64, gpumemtrace_block_alloc() with device -7 or a range that runs past the end of the address
// space. A failed request of that kind is exactly what the report must explain, so it is clamped and
// kept: the field gets the nearest value the format allows (a size of at most 2^53 - 1 that keeps
// addr + size within 64 bits, device -1, free/total at most 2^53 - 1) and "<field>_exact" beside it
// the value the program passed, as a decimal string ("out of range" for a size past 2^64 - 1).
// Strings are cut by JsonLine itself (trace/json_line.h).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "trace/format.h"
#include "trace/json_line.h"

namespace gpumemtrace::limits {

// The largest size an event may write: kMaxInteger, and for an event with an address range, what
// keeps addr + size within 64 bits.
inline uint64_t size_limit(bool has_addr, uint64_t addr) {
  const uint64_t room = has_addr ? UINT64_MAX - addr : UINT64_MAX;
  return room < format::kMaxInteger ? room : format::kMaxInteger;
}

// `"key":size`, or, past `limit` (or saturated: `overflow`), `"key":limit,"size_exact":"..."`.
// `omit_zero`: a size of 0 is left out (version 2 event lines).
inline void write_size(JsonLine& j, const char* key, uint64_t size, uint64_t limit, bool overflow, bool omit_zero) {
  if (size <= limit && !overflow) {
    if (size || !omit_zero) j.unum(key, size);
    return;
  }
  if (limit || !omit_zero) j.unum(key, limit);
  j.str(format::kFieldSizeExact, overflow ? std::string(format::kOutOfRange) : std::to_string(size));
}

// An integer counted in bytes (free, total): `"key":value`, or past kMaxInteger,
// `"key":kMaxInteger,"exact_key":"value"`.
inline void write_count(JsonLine& j, const char* key, const char* exact_key, uint64_t value) {
  if (value <= format::kMaxInteger) {
    j.unum(key, value);
    return;
  }
  j.unum(key, format::kMaxInteger).str(exact_key, std::to_string(value));
}

// The device a record may name: -1 (unknown) for anything below.
inline int32_t device(int32_t device) { return device < -1 ? -1 : device; }
// `"device_exact":"-7"` for a device below -1 (on the event line: the site holds -1).
inline void write_device_exact(JsonLine& j, int32_t device) {
  if (device < -1) j.str(format::kFieldDeviceExact, std::to_string(device));
}

}  // namespace gpumemtrace::limits
