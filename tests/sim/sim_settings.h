// tests/sim/sim_settings.h — settings shared by the simulated CUDA runtime (fake_cudart.cpp) and the
// simulated driver (fake_libcuda.cpp), so that both describe the same simulated machine.
//   GPUMEMTRACE_SIM_CAPACITY  bytes per device (a size: util/byte_size.h), default 16 GiB
//   GPUMEMTRACE_SIM_DEVICES   number of devices, 1..max_devices, default 1
#pragma once

#include <cstdint>
#include <cstdlib>

#include "util/byte_size.h"

namespace gpumemtrace::sim {

inline constexpr uint64_t kDefaultCapacity = 16ull << 30;

// "512", "64M", "16G" -> bytes; `fallback` when unset, not a size or zero.
inline uint64_t parse_size(const char* text, uint64_t fallback) {
  const std::optional<uint64_t> size = text ? util::parse_byte_size(text) : std::nullopt;
  return size && *size ? *size : fallback;
}

inline uint64_t device_capacity() { return parse_size(getenv("GPUMEMTRACE_SIM_CAPACITY"), kDefaultCapacity); }

inline int device_count(int max_devices) {
  const uint64_t n = parse_size(getenv("GPUMEMTRACE_SIM_DEVICES"), 1);
  return n > static_cast<uint64_t>(max_devices) ? max_devices : static_cast<int>(n);
}

}  // namespace gpumemtrace::sim
