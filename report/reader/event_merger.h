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
// "allocator_settings" records (Op::AllocatorSettings) and "gc" records (Op::Gc) are merged as live
// events and handed on through TraceHandler::on_allocator_settings and on_gc.
// Before the first sync and in traces without any, events pass straight through: no buffering,
// no cost. After it, memory is bounded by the events of one drain interval (what lies between two
// syncs), and at most `max_buffered` events or kMaxHeldBytes of them (their strings included):
// beyond either, the oldest are handed on early (counted; the order around them may then be off).
//
// Time: O(1) per event for delayed events that come in time order (a drain hands its entries on oldest
// first: they wait in a queue), O(log n) for those that do not (a binary heap keyed by (t, file order);
// a drain in reverse time order costs what a sorted one does, within a factor).
//
// A delayed event whose t is at or below a sync already seen (a broken promise, or a delayed event
// before the first sync) is handed on at the next release point and counted as late.
//
// Lifetime: the string_views of an Event handed to push() need not outlive the call (held events
// keep their own copies, shared between the events that hold the same text and freed with the last
// of them); those handed on are valid during the handler's callback only.
// Single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "report/reader/records.h"

namespace gpumemtrace::report {

class TraceHandler;

class EventMerger {
 public:
  // Limits on what is held between two syncs (docs/security.md): a PyTorch drain delivers at most
  // its history ring (GPUMEMTRACE_TORCH_ENTRIES, 65,536 by default) per interval.
  static constexpr size_t kDefaultMaxBuffered = size_t{1} << 20;
  static constexpr size_t kMaxHeldBytes = size_t{256} << 20;

  explicit EventMerger(TraceHandler& out, size_t max_buffered = kDefaultMaxBuffered,
                       size_t max_held_bytes = kMaxHeldBytes)
      : out_(out), max_buffered_(max_buffered ? max_buffered : 1), max_held_bytes_(max_held_bytes) {}

  // event.delayed says which kind it is. `stable_api`: event.api stays valid for the whole read (the
  // reader's interned API names of version 2 sites), so it is not copied while held.
  void push(const Event& event, bool stable_api = false);
  void sync(uint64_t time_ns);    // a sync event at t = time_ns
  void finish();                  // end of the trace: hands on everything still held

  bool merging() const { return merging_; }  // a sync was seen
  size_t buffered() const { return live_.size() + sorted_.size() + heap_.size(); }
  size_t max_held() const { return max_held_; }
  size_t held_bytes() const { return held_bytes_; }
  uint64_t late() const { return late_; }       // delayed events older than a sync already seen
  uint64_t forced() const { return forced_; }   // handed on early (max_buffered or the bytes reached)

 private:
  struct Held {
    Event event;       // its string_views point into strings_ (api: unless stable_api)
    uint64_t order;    // file order, for ties on t between delayed events
    bool stable_api;   // event.api is not a copy in strings_
  };
  // A min-heap on (t, order) through std::push_heap / pop_heap, which build max-heaps.
  struct Later {
    bool operator()(const Held& a, const Held& b) const {
      return a.event.t != b.event.t ? a.event.t > b.event.t : a.order > b.order;
    }
  };
  // Where the next event to hand on waits.
  enum class Queue { Live, Sorted, Heap };
  // A FIFO in one growing ring: no allocation per element once it has grown to a drain's size
  // (a std::deque of these 200-byte events allocates a node every two).
  class Fifo {
   public:
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    Held& front() { return ring_[head_]; }
    const Held& front() const { return ring_[head_]; }
    const Held& back() const { return ring_[(head_ + size_ - 1) & (ring_.size() - 1)]; }
    void pop_front() {
      head_ = (head_ + 1) & (ring_.size() - 1);
      --size_;
    }
    void push_back(const Held& held) {
      if (size_ == ring_.size()) grow();
      ring_[(head_ + size_) & (ring_.size() - 1)] = held;
      ++size_;
    }

   private:
    void grow() {
      std::vector<Held> bigger(ring_.empty() ? 64 : 2 * ring_.size());  // a power of two
      for (size_t i = 0; i < size_; ++i) bigger[i] = ring_[(head_ + i) & (ring_.size() - 1)];
      ring_ = std::move(bigger);
      head_ = 0;
    }
    std::vector<Held> ring_;
    size_t head_ = 0;
    size_t size_ = 0;
  };
  // One copy of a held text, shared by every held event that has it.
  struct Stored {
    std::unique_ptr<char[]> text;
    size_t refs = 0;
  };

  std::string_view keep(std::string_view text);
  void drop(std::string_view text);
  Held hold(const Event& event, bool stable_api);
  void release(const Held& held);
  void emit(const Event& event);
  const Held* delayed_head(Queue* queue) const;
  Queue first() const;
  void release_one(Queue queue);
  void release_until(uint64_t bound, bool everything);
  bool over_limits() const { return buffered() > max_buffered_ || held_bytes_ > max_held_bytes_; }

  TraceHandler& out_;
  size_t max_buffered_;
  size_t max_held_bytes_;
  bool merging_ = false;          // a sync was seen
  uint64_t synced_ = 0;           // highest sync time seen
  uint64_t next_order_ = 0;
  Fifo live_;    // file order
  // Delayed events: those that came in (t, order) order in a queue, the others in a heap (Later); the
  // next to hand on is the earlier of the two fronts.
  Fifo sorted_;
  std::vector<Held> heap_;
  // api, pool, label of held events, by their text (the key views the Stored copy).
  std::unordered_map<std::string_view, Stored> strings_;
  size_t held_bytes_ = 0;         // sizeof each held event, and each stored text once
  size_t max_held_ = 0;
  uint64_t late_ = 0;
  uint64_t forced_ = 0;
};

}  // namespace gpumemtrace::report
