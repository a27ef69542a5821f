// report/reader/compact_event.h — version 2 event lines read without simdjson. Internal to report/reader/.
//
// Version 2 event lines without simdjson. Nearly every line of a version 2 trace is an event line in
// the one shape the recorder writes: {"e":4,"t":3365,"a":"0x700000000000","s":256}. Such a line is
// read here directly: for lines this short simdjson's per-document set-up costs more than the
// parse. Accepted: no whitespace; keys of a-z and _; numbers as JSON writes integers (t and r may be
// negative; at most 19 digits); strings of printable ASCII without escapes; only the keys below,
// each read exactly as parse_field reads it for version 2 (same limits). Anything else — whitespace,
// an escape, non-ASCII text, another key, a value out of range — makes scan() return false, and the
// line goes through simdjson, which validates it and names what is wrong.
#pragma once

#include <string_view>

#include "report/reader/fields.h"

namespace gpumemtrace::report::reader {

// True when the whole line was read into `f` (its event fields cleared first); false: the line is to
// go through parse_line (line_parser.h). The line is followed by kLinePadding readable bytes
// (line_reader.h).
bool scan_compact_event(std::string_view line, Fields& f);

// The common event line, {"e":SITE,"t":DELTA,"a":"0x...","s":SIZE,"pool":"NAME","segment":"0x..."}
// (all but e optional): what the read-ahead thread hands over per line (line_reader.h), in 64 bytes,
// where Fields is hundreds.
struct CommonEventLine {
  uint64_t site = 0, t = 0, addr = 0, size = 0, segment = 0;
  std::string_view pool;  // into the line's bytes
  uint32_t present = 0;   // Fields::present
  bool t_negative = false;
};

// True when scan_compact_event read the line into `scratch` and it has no key but those: then `out`
// holds it. Reads nothing but the line and the two arguments: safe on any thread.
bool scan_common_event(std::string_view line, Fields& scratch, CommonEventLine& out);

// The fields scan_compact_event would have set for that line: `f` as after it.
void set_common_event(const CommonEventLine& line, Fields& f);

}  // namespace gpumemtrace::report::reader
