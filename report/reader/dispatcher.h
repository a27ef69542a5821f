// report/reader/dispatcher.h — what the reader does with each parsed line (Fields): checks the record
// against what came before (the header first, ids defined before use, seq increasing, the reader's
// limits of docs/security.md), resolves version 2 event lines through their sites, puts symbols into the
// SymbolTable and hands events to the TraceHandler through the EventMerger. Internal to report/reader/.
// Single-threaded: one Dispatcher per trace read.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>

#include "report/reader/event_merger.h"
#include "report/reader/fields.h"
#include "report/reader/offline_symbolizer.h"
#include "report/reader/trace_reader.h"

namespace gpumemtrace::report::reader {

// A line of nothing but blanks (it is skipped).
bool blank(std::string_view text);

class Dispatcher {
 public:
  Dispatcher(SymbolTable& symbols, TraceHandler& handler, ReadResult& result)
      : symbols_(symbols), handler_(handler), result_(result), merger_(handler) {}

  // End of the trace (or of what could be read): the events still held for merging go out.
  void finish();

  // True when the last line dispatched was a record this reader ignores (an unknown type).
  bool ignored() const { return ignored_; }
  int version() const { return version_; }
  void dispatch(const Fields& f, uint64_t line_number);
  void set_first_line(uint64_t line) { first_line_ = line; }

 private:
  void header(const Fields& f);
  void frame(const Fields& f);
  [[noreturn]] static void too_many(const char* what, uint64_t limit);
  void check_text() const;
  void stack(const Fields& f);
  void event(const Fields& f);

  // Version 2: what the events of one call site share, defined once (ids 1, 2, 3... in order).
  void site(const Fields& f);

  // Version 2 event line: the site's fields, then what this line says.
  void compact_event(const Fields& f);

  // A "live" record: an allocation still live at the end of a capped trace (its seq is its own
  // allocation's, so it does not follow the event order).
  void live(const Fields& f);

  // What the records placed in the timeline as live events share (allocator_settings, gc): absolute
  // seq and t; the seq above the event lines' before it (they do not move the lines' deltas, as a
  // "live" record does not); none after the capped record.
  Event timeline_record(const Fields& f, const std::string& type, Op op);

  // An "allocator_settings" record: merged into the timeline as a live event at its t (it was recorded
  // live), handed on through on_allocator_settings.
  void allocator_settings(const Fields& f);

  // A "gc" record: a garbage collection from t to end_time on thread tid, recorded when it ended (its
  // seq). Merged into the timeline as a live event, like allocator_settings, handed on through on_gc.
  void gc(const Fields& f);

  // The fields shared by event and live records; `what` names the record in errors.
  Event to_event(const Fields& f, const char* what);

  // The values the recorder clamped (format.h, "*_exact"): counted for the warning; a failed request
  // (an allocation that failed, an allocator's OOM: no memory range) gets its exact size back, so the
  // report names what the program asked for.
  void exact_values(const Fields& f, Event& e);
  void note_clamped(const char* field, const std::string& value);

  // The optional event fields, named alike in both versions.
  static void fill_optional(const Fields& f, Event& e);
  SymbolTable& symbols_;
  TraceHandler& handler_;
  ReadResult& result_;
  EventMerger merger_;
  OfflineSymbolizer offline_;  // frames recorded with GPUMEMTRACE_SYMBOLIZE=0
  uint64_t first_line_ = 1;
  uint64_t last_seq_ = 0;
  uint64_t last_time_ = 0;  // version 2: t of the previous event line
  int version_ = 0;         // the header's; 0 until it is read
  // Version 2: what a site gives its events (40 bytes, not an Event's 200: a trace may define a
  // million sites).
  struct Site {
    uint64_t tid = 0;
    std::string_view api;  // into site_apis_
    int32_t device = -1;
    StackId stack;
    Op op = Op::Mark;
    Kind kind = Kind::None;
    bool delayed = false;
  };
  std::deque<Site> sites_;  // site id - 1 -> the fields it gives events (a deque: no doubling copy)
  std::unordered_set<std::string> site_apis_;  // their api names, interned
  uint64_t site_text_bytes_ = 0;             // the bytes of those names
  uint64_t stack_refs_ = 0;                  // frame references of the stacks defined
  uint64_t offline_text_bytes_ = 0;          // module paths and build ids the offline symbolizer keeps
  bool warned_after_footer_ = false;
  bool ignored_ = false;     // the last record dispatched was one this reader skips
  uint64_t line_ = 0;        // the line being dispatched
  uint64_t clamped_ = 0;     // values the recorder clamped (format.h, "*_exact")
  std::string clamped_first_;
};

}  // namespace gpumemtrace::report::reader
