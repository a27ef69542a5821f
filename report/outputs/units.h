// report/outputs/units.h — sizes and times for people ("3.0 MiB", "1.234 s") and size arguments
// from people ("10M", "1.5GiB", "4096").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpumemtrace::report {

std::string format_bytes(uint64_t bytes);      // "512 B", "3.0 KiB", "1.5 GiB"
std::string format_seconds(uint64_t nanoseconds);  // "1.234 s", "12 ms"

// "123", "10K", "10KiB", "1.5M", "2G", "2GiB" (K/M/G are powers of 1024, as KiB/MiB/GiB).
// nullopt when it is not a size.
std::optional<uint64_t> parse_size(const std::string& text);

}  // namespace gpumemtrace::report
