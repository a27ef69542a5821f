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

Event EventMerger::hold(const Event& event) {
  Event held = event;
  held.api = keep(event.api);
  held.pool = keep(event.pool);
  held.label = keep(event.label);
  held_bytes_ += sizeof(Event);
  return held;
}

// Hands `event` on, then lets go of its texts (the handler sees them while they are still held).
void EventMerger::release(Event event) {
  emit(event);
  drop(event.api);
  drop(event.pool);
  drop(event.label);
  held_bytes_ -= sizeof(Event);
}

// Allocator settings and gc records ride in the timeline like a live event, and leave it to a callback
// of their own.
void EventMerger::emit(const Event& event) {
  if (event.op == Op::AllocatorSettings) return out_.on_allocator_settings(event);
  if (event.op == Op::Gc) return out_.on_gc(event);
  out_.on_event(event);
}

void EventMerger::push(const Event& event) {
  if (!merging_) {
    emit(event);
    return;
  }
  if (event.delayed) {
    if (event.t <= synced_) ++late_;
    delayed_.push_back(Delayed{hold(event), next_order_++});
    std::push_heap(delayed_.begin(), delayed_.end(), Later{});
  } else {
    live_.push_back(hold(event));
  }
  if (buffered() > max_held_) max_held_ = buffered();
  while (over_limits() && buffered() > 0) {
    ++forced_;
    release_one(live_first());
  }
}

void EventMerger::sync(uint64_t time_ns) {
  merging_ = true;
  if (time_ns > synced_) synced_ = time_ns;
  release_until(synced_, false);
}

void EventMerger::finish() { release_until(0, true); }

// Of the two queue heads, the one that comes first (ties: live).
bool EventMerger::live_first() const {
  if (delayed_.empty()) return true;
  if (live_.empty()) return false;
  return live_.front().t <= delayed_.front().event.t;
}

void EventMerger::release_one(bool from_live) {
  if (from_live) {
    Event event = live_.front();
    live_.pop_front();
    release(event);
    return;
  }
  std::pop_heap(delayed_.begin(), delayed_.end(), Later{});
  Event event = delayed_.back().event;
  delayed_.pop_back();
  release(event);
}

void EventMerger::release_until(uint64_t bound, bool everything) {
  for (;;) {
    const bool live = !live_.empty() && (everything || live_.front().t <= bound);
    const bool delayed = !delayed_.empty() && (everything || delayed_.front().event.t <= bound);
    if (!live && !delayed) break;
    release_one(live && (!delayed || live_first()));
  }
}

}  // namespace gpumemtrace::report
