// report/reader/event_merger.cpp — merges delayed (PyTorch history) events into the timeline by time.
#include "report/reader/event_merger.h"

#include <iterator>

#include "report/reader/trace_reader.h"

namespace gpumemtrace::report {

std::string_view EventMerger::keep(std::string_view text) {
  if (text.empty()) return {};
  auto found = strings_.find(text);
  if (found != strings_.end()) return *found;
  // Deque elements never move: the view stays valid until string_store_ is cleared.
  std::string_view stored = string_store_.emplace_back(text);
  strings_.insert(stored);
  return stored;
}

// Allocator settings ride in the timeline like a live event, and leave it to a callback of their own.
void EventMerger::emit(const Event& event) {
  if (event.op == Op::AllocatorSettings) return out_.on_allocator_settings(event);
  out_.on_event(event);
}

void EventMerger::push(const Event& event) {
  if (!merging_) {
    emit(event);
    return;
  }
  Held held{event};
  held.event.api = keep(event.api);
  held.event.pool = keep(event.pool);
  held.event.label = keep(event.label);
  if (event.delayed) {
    if (event.t <= synced_) ++late_;
    // Drains deliver their events nearly sorted: the place is found from the back.
    auto it = delayed_.end();
    while (it != delayed_.begin() && std::prev(it)->event.t > event.t) --it;
    delayed_.insert(it, std::move(held));
  } else {
    live_.push_back(std::move(held));
  }
  if (buffered() > max_buffered_) {
    ++forced_;
    release_one(live_first());
  }
  if (buffered() > max_held_) max_held_ = buffered();
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
  return live_.front().event.t <= delayed_.front().event.t;
}

void EventMerger::release_one(bool from_live) {
  std::deque<Held>& queue = from_live ? live_ : delayed_;
  Held held = std::move(queue.front());
  queue.pop_front();
  emit(held.event);
}

void EventMerger::release_until(uint64_t bound, bool everything) {
  for (;;) {
    const bool live = !live_.empty() && (everything || live_.front().event.t <= bound);
    const bool delayed = !delayed_.empty() && (everything || delayed_.front().event.t <= bound);
    if (!live && !delayed) break;
    release_one(live && (!delayed || live_first()));
  }
  if (live_.empty() && delayed_.empty()) {
    strings_.clear();
    string_store_.clear();
  }
}

}  // namespace gpumemtrace::report
