// report/reader/event_merger.cpp — merges delayed (PyTorch history) events into the timeline by time.
#include "report/reader/event_merger.h"

#include <algorithm>
#include <cstring>

#include "report/reader/trace_reader.h"

namespace gpumemtrace::report {

std::string_view EventMerger::keep(std::string_view text) {
  if (text.empty()) return {};
  auto found = strings_.find(text);
  if (found != strings_.end()) {
    ++found->second.refs;
    return found->first;
  }
  Stored stored;
  stored.text.reset(new char[text.size()]);
  std::memcpy(stored.text.get(), text.data(), text.size());
  stored.refs = 1;
  const std::string_view key(stored.text.get(), text.size());  // the buffer does not move with the node
  strings_.emplace(key, std::move(stored));
  held_bytes_ += text.size();
  return key;
}

void EventMerger::drop(std::string_view text) {
  if (text.empty()) return;
  auto found = strings_.find(text);
  if (found == strings_.end() || --found->second.refs) return;
  held_bytes_ -= text.size();
  strings_.erase(found);
}

EventMerger::Held EventMerger::hold(const Event& event, bool stable_api) {
  Held held{event, next_order_++, stable_api};
  if (!stable_api) held.event.api = keep(event.api);
  held.event.pool = keep(event.pool);
  held.event.label = keep(event.label);
  held_bytes_ += sizeof(Event);
  return held;
}

// Hands the event on, then lets go of its texts (the handler sees them while they are still held).
void EventMerger::release(const Held& held) {
  emit(held.event);
  if (!held.stable_api) drop(held.event.api);
  drop(held.event.pool);
  drop(held.event.label);
  held_bytes_ -= sizeof(Event);
}

// Allocator settings and gc records ride in the timeline like a live event, and leave it to a callback
// of their own.
void EventMerger::emit(const Event& event) {
  if (event.op == Op::AllocatorSettings) return out_.on_allocator_settings(event);
  if (event.op == Op::Gc) return out_.on_gc(event);
  out_.on_event(event);
}

void EventMerger::push(const Event& event, bool stable_api) {
  if (!merging_) {
    emit(event);
    return;
  }
  if (event.delayed) {
    if (event.t <= synced_) ++late_;
    if (sorted_.empty() || sorted_.back().event.t <= event.t) {
      sorted_.push_back(hold(event, stable_api));  // after every queued one: (t, order) order kept
    } else {
      heap_.push_back(hold(event, stable_api));
      std::push_heap(heap_.begin(), heap_.end(), Later{});
    }
  } else {
    live_.push_back(hold(event, stable_api));
  }
  if (buffered() > max_held_) max_held_ = buffered();
  while (over_limits() && buffered() > 0) {
    ++forced_;
    release_one(first());
  }
}

void EventMerger::sync(uint64_t time_ns) {
  merging_ = true;
  if (time_ns > synced_) synced_ = time_ns;
  release_until(synced_, false);
}

void EventMerger::finish() { release_until(0, true); }

// The earliest delayed event, by (t, file order), and the queue it waits in; null when none waits.
const EventMerger::Held* EventMerger::delayed_head(Queue* queue) const {
  const Held* sorted = sorted_.empty() ? nullptr : &sorted_.front();
  const Held* heap = heap_.empty() ? nullptr : &heap_.front();
  if (!sorted || (heap && Later{}(*sorted, *heap))) {
    *queue = Queue::Heap;
    return heap;
  }
  *queue = Queue::Sorted;
  return sorted;
}

// The queue whose head comes first (ties between live and delayed: live). Precondition: buffered() > 0.
EventMerger::Queue EventMerger::first() const {
  Queue queue = Queue::Live;
  const Held* delayed = delayed_head(&queue);
  if (!delayed || (!live_.empty() && live_.front().event.t <= delayed->event.t)) return Queue::Live;
  return queue;
}

void EventMerger::release_one(Queue queue) {
  switch (queue) {
    case Queue::Live: {
      const Held held = live_.front();
      live_.pop_front();
      return release(held);
    }
    case Queue::Sorted: {
      const Held held = sorted_.front();
      sorted_.pop_front();
      return release(held);
    }
    case Queue::Heap: {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      const Held held = heap_.back();
      heap_.pop_back();
      return release(held);
    }
  }
}

void EventMerger::release_until(uint64_t bound, bool everything) {
  while (buffered() > 0) {
    const Queue queue = first();
    const Held& head = queue == Queue::Live ? live_.front() : queue == Queue::Sorted ? sorted_.front() : heap_.front();
    if (!everything && head.event.t > bound) break;
    release_one(queue);
  }
}

}  // namespace gpumemtrace::report
