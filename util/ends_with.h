// util/ends_with.h — whether a string ends with a suffix (file names: ".zst", ".jsonl", ".py").
// Header-only: no allocation, usable anywhere.
#pragma once

#include <string_view>

namespace gpumemtrace::util {

constexpr bool ends_with(std::string_view text, std::string_view suffix) noexcept {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace gpumemtrace::util
