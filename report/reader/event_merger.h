// report/reader/event_merger.h — turns a trace's events into ONE stream in time order.
//
// Events reported after the fact ("delayed":true, PyTorch's allocation history drained every so
// often) enter the file — and get their seq — at drain time, after live events that happened later.
// A `sync` event at t = D promises that every delayed event with t <= D is on an earlier line
// (docs/trace-format.md). So, from the first sync on, the merger holds live events back, merges the
// delayed ones into them by t and, at each sync(D), hands on everything with t <= D; finish() (end of
// file) hands on the rest.
//
// Order of what comes out:
//  - live events keep their file (seq) order among themselves: seq is their truth, t can be a few ns
//    out of order between threads;
//  - delayed events are ordered by t among themselves (file order on equal t);
//  - between the two, by t; on equal t the live event comes first (PyTorch's times are whole
//    microseconds, rounded down: a delayed event stamped t happened at or after t).
// "allocator_settings" records (Op::AllocatorSettings) are merged as live events and handed on through
// TraceHandler::on_allocator_settings.
// Before the first sync and in traces without any, events pass straight through: no buffering,
// no cost. After it, memory is bounded by the events of one drain interval (what lies between two
// syncs), and at most `max_buffered` events: beyond that the oldest are handed on early (counted;
// the order around them may then be off).
//
// A delayed event whose t is at or below a sync already seen (a broken promise, or a delayed event
// before the first sync) is handed on at the next release point and counted as late.
//
// Lifetime: the string_views of an Event handed to push() need not outlive the call (buffered
// events keep their own copies); those handed on are valid during the handler's callback only.
// Single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>

#include "report/reader/records.h"

namespace gpumemtrace::report {

class TraceHandler;

class EventMerger {
 public:
  static constexpr size_t kDefaultMaxBuffered = size_t{1} << 22;

  explicit EventMerger(TraceHandler& out, size_t max_buffered = kDefaultMaxBuffered)
      : out_(out), max_buffered_(max_buffered ? max_buffered : 1) {}

  void push(const Event& event);  // event.delayed says which kind it is
  void sync(uint64_t time_ns);    // a sync event at t = time_ns
  void finish();                  // end of the trace: hands on everything still held

  bool merging() const { return merging_; }  // a sync was seen
  size_t buffered() const { return live_.size() + delayed_.size(); }
  size_t max_held() const { return max_held_; }
  uint64_t late() const { return late_; }       // delayed events older than a sync already seen
  uint64_t forced() const { return forced_; }   // handed on early (max_buffered reached)

 private:
  struct Held {
    Event event;  // its string_views point into string_store_
  };
  std::string_view keep(std::string_view text);
  void emit(const Event& event);
  bool live_first() const;
  void release_one(bool from_live);
  void release_until(uint64_t bound, bool everything);

  TraceHandler& out_;
  size_t max_buffered_;
  bool merging_ = false;          // a sync was seen
  uint64_t synced_ = 0;           // highest sync time seen
  std::deque<Held> live_;         // file order
  std::deque<Held> delayed_;      // sorted by t, file order on ties
  // api, pool, label of held events (few distinct ones): looked up by view (no allocation per
  // event), stored once in string_store_ (a deque: its elements never move).
  std::unordered_set<std::string_view> strings_;
  std::deque<std::string> string_store_;
  size_t max_held_ = 0;
  uint64_t late_ = 0;
  uint64_t forced_ = 0;
};

}  // namespace gpumemtrace::report
