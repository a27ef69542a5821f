// report/analyses/open_scopes.h — the scopes open at one moment, as scope events pair them: an end
// closes the innermost open scope of the same name (docs/report.md, "Scoped leak checks"). Shared by
// the analyses that follow scopes (scopes.h: leaks, scope_peaks.h: peaks), so they pair alike.
//
// At most kMaxOpenScopes are kept, so memory and the search at an end do not grow with a trace that
// opens scopes without closing them; deeper ones are counted (untracked) and ended LIFO first.
// Single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace gpumemtrace::report {

inline constexpr size_t kMaxOpenScopes = 64;

// Open: a struct with a `name` (std::string) and whatever the analysis keeps per scope.
template <typename Open>
class OpenScopes {
 public:
  // A scope_begin: false when the scope is beyond kMaxOpenScopes (counted, not kept).
  bool begin(Open scope) {
    if (open_.size() >= kMaxOpenScopes) {
      ++untracked_open_;
      ++untracked_total_;
      return false;
    }
    open_.push_back(std::move(scope));
    return true;
  }
  // A scope_end of `name`: the scope it closes, taken out; nullopt when it closes one beyond the limit
  // or none is open under that name.
  std::optional<Open> end(std::string_view name) {
    if (untracked_open_) {
      --untracked_open_;
      return std::nullopt;
    }
    for (size_t i = open_.size(); i-- > 0;) {
      if (open_[i].name != name) continue;
      Open scope = std::move(open_[i]);
      open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(i));
      return scope;
    }
    return std::nullopt;
  }
  std::vector<Open>& open() { return open_; }
  bool empty() const { return open_.empty(); }
  uint64_t untracked_total() const { return untracked_total_; }

 private:
  std::vector<Open> open_;
  uint64_t untracked_open_ = 0;
  uint64_t untracked_total_ = 0;
};

}  // namespace gpumemtrace::report
