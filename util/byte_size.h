// util/byte_size.h — parses a byte count written by a person: "4096", "512M", "20g", "1.5GiB".
// One grammar for every size the project reads: GPUMEMTRACE_MAX_BYTES (recorder start-up),
// gpumem-report's --fail-on-leak / --fail-on-peak-increase, the simulated runtime's
// GPUMEMTRACE_SIM_CAPACITY. Header-only and allocation-free (the recorder parses its settings before
// it may allocate freely), no locale (no strtod).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpumemtrace::util {

// Digits with an optional fraction ("1.5", ".5", "2."), then an optional unit K, M, G or T (powers of
// 1024, any case) optionally followed by "i", then an optional "B" (any case): "10K", "10KiB", "10kb",
// "3B". Nothing else: no sign, no spaces, no exponent. The result is rounded to the nearest byte.
// nullopt on anything else or when the count does not fit in 64 bits.
inline std::optional<uint64_t> parse_byte_size(std::string_view text) noexcept {
  size_t i = 0;
  auto is_digit = [&](size_t at) { return at < text.size() && text[at] >= '0' && text[at] <= '9'; };

  uint64_t whole = 0;
  bool any_digit = false;
  for (; is_digit(i); ++i, any_digit = true) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (whole > (UINT64_MAX - digit) / 10) return std::nullopt;
    whole = whole * 10 + digit;
  }
  // The fraction as fraction / scale; digits past the 18th are far below a byte and are dropped.
  uint64_t fraction = 0, scale = 1;
  if (i < text.size() && text[i] == '.') {
    for (++i; is_digit(i); ++i, any_digit = true) {
      if (scale < 1000000000000000000ull) {
        fraction = fraction * 10 + static_cast<uint64_t>(text[i] - '0');
        scale *= 10;
      }
    }
  }
  if (!any_digit) return std::nullopt;

  int shift = 0;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      default: break;
    }
  }
  if (shift) {
    ++i;
    if (i < text.size() && (text[i] == 'i' || text[i] == 'I')) ++i;
  }
  if (i < text.size() && (text[i] == 'b' || text[i] == 'B')) ++i;
  if (i != text.size() || whole > (UINT64_MAX >> shift)) return std::nullopt;

  const uint64_t bytes = whole << shift;
  // fraction < scale <= 1e18 < 2^60 and shift <= 40: the product fits in 128 bits.
  const unsigned __int128 part = ((static_cast<unsigned __int128>(fraction) << shift) + scale / 2) / scale;
  if (part > UINT64_MAX - bytes) return std::nullopt;
  return bytes + static_cast<uint64_t>(part);
}

}  // namespace gpumemtrace::util
