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

// True when the whole line was read into `f` (cleared first); false: the line is to go through
// parse_line (line_parser.h), and `f` holds nothing meaningful. The line is followed by kLinePadding
// readable bytes (line_reader.h). Reads nothing but the line: safe on any thread (the line reader's
// runs it ahead of the parser).
bool scan_compact_event(std::string_view line, EventLineFields& f);
// The same into one line's Fields: its event fields set (Fields::set_event_line) when true, left
// alone when false.
bool scan_compact_event(std::string_view line, Fields& f);

}  // namespace gpumemtrace::report::reader
