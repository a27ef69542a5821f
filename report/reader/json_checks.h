// report/reader/json_checks.h — what the reader holds every line to, whatever its record type:
//  - every value is valid JSON, nested at most kMaxJsonDepth levels, the values of fields it does not
//    know included (validate_value):
//    simdjson's on-demand parser checks structure, UTF-8 and control characters on its own, but
//    a value nobody reads (an unknown field's `tru`, `"\q"`, `01`) only when it is read;
//  - every string is at most format::kMaxStringBytes once unescaped (StringLimit): a longer one is
//    cut at a character boundary and marked with format::kCutMark, and the trace gets one warning,
//    so that a few KB of zstd cannot make the analyzer hold gigabytes of names.
//  - the "*_exact" fields of values the recorder clamped are decimals in strings (parse_exact_*).
// Thread-safety: a StringLimit belongs to one reader; validate_value is pure.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace gpumemtrace::report {

// A malformed line: thrown inside one line's parse; read_trace adds the file and line number.
struct JsonLineError {
  std::string message;
};

// Arrays and objects nested deeper than this in one value (an unknown field's) are an error: the
// check below recurses once per level, and 50,000 levels would overflow the stack. The format nests
// three levels at most (a frame's "inlined" list of objects).
inline constexpr int kMaxJsonDepth = 64;

// Throws JsonLineError ("not valid JSON (...)") for a value that is not valid JSON, and for one
// nested deeper than kMaxJsonDepth. `depth`: the levels around `value` already.
void validate_value(simdjson::ondemand::value& value, int depth = 0);

// Counts what it cuts as a strict JSON reader would see it: only the strings a line keeps (of a key
// given twice, the last value's), and only once the line has parsed.
// The "*_exact" fields of values the recorder clamped (trace/format.h): a decimal in a string.
// parse_exact_size: 0 to 2^64 - 1, or (`out_of_range` given) format::kOutOfRange, read as UINT64_MAX
// with *out_of_range set. parse_exact_device: a device below -1. Throw JsonLineError otherwise.
uint64_t parse_exact_size(std::string_view text, std::string_view key, bool* out_of_range);
int64_t parse_exact_device(std::string_view text);

class StringLimit {
 public:
  // `text` as the reader may keep it: itself, or a marked copy cut to kMaxStringBytes (valid until
  // the next line). Counted for the top-level field begun last.
  std::string_view cut(std::string_view text);
  void next_line() {
    copies_.clear();
    fields_.clear();
  }
  void set_line(uint64_t line) { line_ = line; }
  // A top-level field `key` of the line begins: what a repeated key cut before no longer counts.
  void begin_field(std::string_view key);
  // The line parsed: its cuts count.
  void end_line();

  uint64_t count() const { return count_; }
  // One line for the trace's warnings, "" when nothing was cut.
  std::string warning() const;

 private:
  struct FieldCuts {
    std::string_view key;  // valid for the line
    uint64_t cuts;
  };
  std::deque<std::string> copies_;  // this line's cut strings (a deque: the views stay valid)
  std::vector<FieldCuts> fields_;   // this line's fields with their cuts
  size_t current_ = SIZE_MAX;       // index in fields_ of the field being parsed
  uint64_t count_ = 0;
  uint64_t line_ = 0;
  uint64_t first_line_ = 0;
  std::string first_field_;
};

}  // namespace gpumemtrace::report
