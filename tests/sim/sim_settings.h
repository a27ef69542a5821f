// tests/sim/sim_settings.h — settings shared by the simulated CUDA runtime (fake_cudart.cpp) and the
// simulated driver (fake_libcuda.cpp), so that both describe the same simulated machine.
//   GPUMEMTRACE_SIM_CAPACITY  bytes per device (a size: util/byte_size.h, at least kMinCapacity),
//                             default 16 GiB
//   GPUMEMTRACE_SIM_DEVICES   number of devices, 1..max_devices, default 1
// Unset or empty: the default. Any other value that is not one of these is refused when the library
// is loaded (check_settings(), from each library's constructor): one line on stderr, exit status 2.
// A test that asks for a 64 MiB device and misspells it ("64 MiB", "lots") must not run on a 16 GiB
// one, nor one that asks for "100" (bytes) on a device too small to hold a single allocation.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "util/byte_size.h"
#include "util/terminal_text.h"

namespace gpumemtrace::sim {

inline constexpr uint64_t kDefaultCapacity = 16ull << 30;
// The simulated driver's allocation granularity: a smaller device could not hold one allocation.
inline constexpr uint64_t kMinCapacity = 2ull << 20;

// A variable's value (getenv's), or nullptr when it is unset or empty: the default applies.
inline const char* setting(const char* value) { return value && *value ? value : nullptr; }

[[noreturn]] inline void refuse(const char* name, const char* value, const std::string& expected) {
  fprintf(stderr, "gpumemtrace sim: %s=%s: expected %s\n", name, util::printable(value).c_str(), expected.c_str());
  _exit(2);  // at load time, before the program could depend on the device
}

inline uint64_t device_capacity() {
  const char* text = setting(getenv("GPUMEMTRACE_SIM_CAPACITY"));
  if (!text) return kDefaultCapacity;
  const std::optional<uint64_t> size = util::parse_byte_size(text);
  if (!size || *size < kMinCapacity) refuse("GPUMEMTRACE_SIM_CAPACITY", text, "a size of at least 2M, such as 64M or 16G");
  return *size;
}

inline int device_count(int max_devices) {
  const char* text = setting(getenv("GPUMEMTRACE_SIM_DEVICES"));
  if (!text) return 1;
  char* end = nullptr;
  const long n = strtol(text, &end, 10);
  if (*text < '0' || *text > '9' || *end != '\0' || n < 1 || n > max_devices)
    refuse("GPUMEMTRACE_SIM_DEVICES", text, "a number of devices from 1 to " + std::to_string(max_devices));
  return static_cast<int>(n);
}

// Every setting checked once, when the library is loaded.
inline void check_settings(int max_devices) {
  device_capacity();
  device_count(max_devices);
}

}  // namespace gpumemtrace::sim
