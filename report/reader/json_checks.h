// report/reader/json_checks.h — what the reader holds every line to, whatever its record type:
//  - every value is valid JSON, the values of fields it does not know included (validate_value):
//    simdjson's on-demand parser checks structure, UTF-8 and control characters on its own, but
//    a value nobody reads (an unknown field's `tru`, `"\q"`, `01`) only when it is read;
//  - every string is at most format::kMaxStringBytes once unescaped (StringLimit): a longer one is
//    cut at a character boundary and marked with format::kCutMark, and the trace gets one warning,
//    so that a few KB of zstd cannot make the analyzer hold gigabytes of names.
// Thread-safety: a StringLimit belongs to one reader; validate_value is pure.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

namespace gpumemtrace::report {

// A malformed line: thrown inside one line's parse; read_trace adds the file and line number.
struct JsonLineError {
  std::string message;
};

// Throws JsonLineError ("not valid JSON (...)") for a value that is not valid JSON, however
// deeply nested.
void validate_value(simdjson::ondemand::value& value);

class StringLimit {
 public:
  // `text` as the reader may keep it: itself, or a marked copy cut to kMaxStringBytes (valid until
  // the next line). `field` names it in the warning.
  std::string_view cut(std::string_view text, std::string_view field);
  void next_line() { copies_.clear(); }
  void set_line(uint64_t line) { line_ = line; }

  uint64_t count() const { return count_; }
  // One line for the trace's warnings, "" when nothing was cut.
  std::string warning() const;

 private:
  std::deque<std::string> copies_;  // this line's cut strings (a deque: the views stay valid)
  uint64_t count_ = 0;
  uint64_t line_ = 0;
  uint64_t first_line_ = 0;
  std::string first_field_;
};

}  // namespace gpumemtrace::report
