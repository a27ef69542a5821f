// report/reader/line_reader.h — splits a ByteSource into lines without copying them.
//
// Each line handed out is followed in memory by at least kLinePadding readable bytes, as simdjson
// requires, so the parser can read it in place. Memory: one buffer as large as the longest line
// plus a fixed chunk; never proportional to the file.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "report/reader/byte_source.h"

namespace gpumemtrace::report {

inline constexpr size_t kLinePadding = 64;  // >= SIMDJSON_PADDING (checked in trace_reader.cpp)
// The longest line accepted: a trace line is a few hundred bytes (a deep stack with long names a few
// KiB), so a longer one is not a trace (a binary file without newlines would otherwise be read
// into memory whole).
inline constexpr size_t kMaxLineBytes = size_t{64} << 20;

struct Line {
  std::string_view text;  // without the '\n'
  uint64_t number = 0;    // 1-based
  bool terminated = true; // false for a last line without '\n' (possibly cut short)
};

class LineReader {
 public:
  explicit LineReader(ByteSource& source, size_t chunk = 1 << 20, size_t max_line = kMaxLineBytes);
  // Next line, or false at the end of the input. Throws std::runtime_error for a line longer than
  // max_line bytes.
  bool next(Line& line);

 private:
  bool fill();  // reads more bytes after end_; false at the end of the input

  ByteSource& source_;
  size_t chunk_;
  size_t max_line_;
  std::vector<char> buffer_;  // data is [begin_, end_); capacity keeps kLinePadding spare
  size_t begin_ = 0;
  size_t end_ = 0;
  uint64_t number_ = 0;
  bool eof_ = false;
};

}  // namespace gpumemtrace::report
