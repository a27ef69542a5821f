// report/reader/line_reader.h — splits a ByteSource into lines without copying them.
//
// Each line handed out is followed in memory by at least kLinePadding readable bytes, as simdjson
// requires, so the parser can read it in place. Memory: one buffer as large as the longest line
// plus a fixed chunk; never proportional to the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "report/reader/byte_source.h"

namespace gpumemtrace::report {

inline constexpr size_t kLinePadding = 64;  // >= SIMDJSON_PADDING (checked in trace_reader.cpp)

struct Line {
  std::string_view text;  // without the '\n'
  uint64_t number = 0;    // 1-based
  bool terminated = true; // false for a last line without '\n' (possibly cut short)
};

class LineReader {
 public:
  explicit LineReader(ByteSource& source, size_t chunk = 1 << 20);
  // Next line, or false at the end of the input.
  bool next(Line& line);

 private:
  bool fill();  // reads more bytes after end_; false at the end of the input

  ByteSource& source_;
  size_t chunk_;
  std::vector<char> buffer_;  // data is [begin_, end_); capacity keeps kLinePadding spare
  size_t begin_ = 0;
  size_t end_ = 0;
  uint64_t number_ = 0;
  bool eof_ = false;
};

}  // namespace gpumemtrace::report
