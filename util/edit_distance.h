// util/edit_distance.h — how far apart two names are, for "did you mean" suggestions (the recorder's
// unknown GPUMEMTRACE_* variables, the command lines' misspelt options and commands).
// Header-only. Allocates (one table per call): for error paths, never the recorder's hot path.
#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

namespace gpumemtrace::util {

// Optimal string alignment distance (Levenshtein plus transpositions of neighbours), capped: any
// distance above `cap` is reported as cap + 1. Names are short; this runs once per unknown name.
inline size_t edit_distance(std::string_view a, std::string_view b, size_t cap) {
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > cap) return cap + 1;
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return std::min(d[a.size()][b.size()], cap + 1);
}

// The candidate nearest to `name`, when at most `max_edits` edits away (the first of equals); nullptr
// otherwise. Candidates: anything a std::string_view can be made from (const char*, std::string).
template <typename Candidates>
auto nearest_name(std::string_view name, const Candidates& candidates, size_t max_edits) -> decltype(&*std::begin(candidates)) {
  decltype(&*std::begin(candidates)) best = nullptr;
  size_t best_distance = max_edits + 1;
  for (const auto& candidate : candidates) {
    const size_t d = edit_distance(name, candidate, max_edits);
    if (d < best_distance) {
      best = &candidate;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace gpumemtrace::util
