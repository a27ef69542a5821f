// report/reader/line_parser.h — reads any trace line into Fields with simdjson's on-demand parser, holding
// it to the format: a JSON object, valid JSON throughout (the values of fields no one reads included),
// each known field of its type and within its range, strings within their limit (json_checks.h).
// Internal to report/reader/.
#pragma once

#include <simdjson.h>

#include "report/reader/fields.h"
#include "report/reader/line_reader.h"

namespace gpumemtrace::report::reader {

// Reads one line into `f` (cleared first). `version`: the trace's (0 while the header is read);
// version 2 adds the short keys of event lines. Throws LineError when the line is not a JSON object
// or a field has the wrong type. The line is followed by kLinePadding readable bytes (line_reader.h).
void parse_line(simdjson::ondemand::parser& parser, const Line& line, Fields& f, int version);

}  // namespace gpumemtrace::report::reader
