// report/reader/trace_reader.cpp — reads a trace line by line: each line parsed (compact_event.h for a
// version 2 event line in the recorder's shape, line_parser.h for any other) and dispatched (dispatcher.h).
#include "report/reader/trace_reader.h"

#include <simdjson.h>

#include "report/reader/compact_event.h"
#include "report/reader/dispatcher.h"
#include "report/reader/line_parser.h"
#include "report/reader/line_reader.h"

namespace gpumemtrace::report {

ReadResult read_trace(ByteSource& source, const std::string& name, SymbolTable& symbols,
                      TraceHandler& handler) {
  ReadResult result;
  // Event lines are scanned on the read-ahead thread, where there is one (line_reader.h).
  LineReader lines(source, LineReader::kDefaultChunk, kMaxLineBytes, /*scan_events_ahead=*/true);
  simdjson::ondemand::parser parser;
  reader::Fields fields;
  reader::Dispatcher dispatcher(symbols, handler, result);
  Line line;
  bool seen_header = false;
  // Bytes read since the last record this reader uses: blank lines and skipped records. A stream
  // that goes on without one (a zstd "newline bomb": a few KB that expand to gigabytes of '\n') is
  // stopped within a second or so, not read to its end.
  uint64_t without_record = 0;
  auto idle = [&](const Line& l) {
    without_record += l.text.size() + 1;
    if (without_record > kMaxBytesWithoutRecord) {
      throw reader::LineError{"no record in the last " + std::to_string(kMaxBytesWithoutRecord >> 20) +
                      " MiB (blank lines or records this reader skips): not a gpumemtrace trace"};
    }
  };
  try {
    while (lines.next(line)) {
      result.lines = line.number;
      // A line scanned ahead is not blank, and its bytes, which the read-ahead thread wrote, are read
      // here only for a pool's name.
      if (!line.event && reader::blank(line.text)) {
        if (!seen_header) dispatcher.set_first_line(line.number + 1);
        idle(line);
        continue;
      }
      fields.strings.set_line(line.number);
      try {
        bool compact = false;
        if (dispatcher.version() >= format::kVersion2) {
          if (line.event) reader::set_common_event(*line.event, fields);  // scanned ahead
          compact = line.event || (line.text.substr(0, 5) == "{\"e\":" && reader::scan_compact_event(line.text, fields));
        }
        if (!compact) reader::parse_line(parser, line, fields, dispatcher.version());
      } catch (const reader::LineError& error) {
        // A writer killed mid-line leaves an unterminated last line: warn and keep what came before.
        if (!line.terminated && seen_header) {
          result.truncated = true;
          result.warnings.push_back("line " + std::to_string(line.number) +
                                    ": truncated last line ignored (process killed?)");
          break;
        }
        if (!seen_header) throw reader::LineError{"not a gpumemtrace trace (the first line is not a JSON header: " + error.message + ")"};
        throw;
      }
      dispatcher.dispatch(fields, line.number);
      seen_header = true;
      if (dispatcher.ignored()) idle(line);
      else without_record = 0;
    }
  } catch (const reader::LineError& error) {
    throw TraceError(name, line.number, error.message);
  } catch (const std::runtime_error& error) {
    if (dynamic_cast<const TraceError*>(&error)) throw;
    throw TraceError(name, line.number + 1, error.what());  // I/O or zstd error
  }
  if (!seen_header && source.truncated()) throw TraceCutBeforeFirstLine(name);
  if (!seen_header) throw TraceError(name, 1, "empty file: not a gpumemtrace trace");
  dispatcher.finish();
  if (fields.strings.count()) result.warnings.push_back(fields.strings.warning());
  if (source.truncated() && !result.truncated) {
    result.truncated = true;
    result.warnings.push_back("compressed stream cut short after line " + std::to_string(result.lines) +
                              " (process killed?)");
  }
  return result;
}

}  // namespace gpumemtrace::report
