// util/keep.h — parses GPUMEMTRACE_KEEP (the flight recorder: interpose/writer/flight.cpp), read by
// the recorder at start-up and checked by the launcher's --keep: a duration ("2h", "30min", "1.5d",
// "45s", "500ms") or a size as util/byte_size.h reads it ("20GiB", "300K"; "m" is MiB, minutes are
// "min"). Header-only and allocation-free, no locale (no strtod), like byte_size.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "util/byte_size.h"

namespace gpumemtrace::util {

// The smallest accepted: a size (two segments, each with room for its checkpoint) and a duration.
inline constexpr uint64_t kMinKeepBytes = 128 * 1024;
inline constexpr uint64_t kMinKeepNs = 100 * 1000000ull;

// Into *ns (a duration) or *bytes (a size), the other 0. False on anything else, or on less than
// kMinKeepNs / kMinKeepBytes.
inline bool parse_keep(const char* text, uint64_t* ns, uint64_t* bytes) {
  *ns = *bytes = 0;
  const std::string_view v(text);
  // A duration: digits with an optional fraction, then one unit. Sizes never end in these letters
  // ("ms", "s", "min", "h", "d"): "m" alone stays a size (MiB), as everywhere else.
  static constexpr std::pair<std::string_view, uint64_t> kUnits[] = {
      {"ms", 1000000ull}, {"min", 60000000000ull}, {"s", 1000000000ull}, {"h", 3600000000000ull},
      {"d", 86400000000000ull}};
  for (const auto& [unit, scale] : kUnits) {
    if (v.size() <= unit.size() || v.substr(v.size() - unit.size()) != unit) continue;
    // Parsed by hand, not with strtod: the program's locale may write its decimal point otherwise.
    const std::string_view number = v.substr(0, v.size() - unit.size());
    uint64_t whole = 0, fraction = 0, divisor = 1;
    bool point = false, digit = false;
    for (char c : number) {
      if (c == '.' && !point) {
        point = true;
      } else if (c >= '0' && c <= '9') {
        digit = true;
        if (!point && whole < 1000000000000ull) whole = whole * 10 + static_cast<uint64_t>(c - '0');
        else if (!point) return false;  // beyond any duration worth keeping
        else if (divisor < 1000000000ull) fraction = fraction * 10 + static_cast<uint64_t>(c - '0'), divisor *= 10;
      } else {
        return false;
      }
    }
    if (!digit || whole > UINT64_MAX / scale / 2) return false;
    const uint64_t value = whole * scale + static_cast<uint64_t>(static_cast<unsigned __int128>(fraction) * scale / divisor);
    if (value < kMinKeepNs) return false;
    *ns = value;
    return true;
  }
  const std::optional<uint64_t> size = parse_byte_size(v);
  if (!size || *size < kMinKeepBytes) return false;
  *bytes = *size;
  return true;
}

}  // namespace gpumemtrace::util
