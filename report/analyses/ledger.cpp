// report/analyses/ledger.cpp — live bytes per site, peaks and their culprits, growth windows.
#include "report/analyses/ledger.h"

#include <algorithm>

#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

uint32_t GrowthWindows::window_of(uint64_t seq, bool* widened) {
  *widened = false;
  if (!started_) {
    started_ = true;
    origin_ = seq;
  }
  uint64_t offset = seq - origin_;  // seq strictly increases (reader invariant)
  while ((offset >> width_log2_) >= kWindows) {
    ++width_log2_;
    *widened = true;
  }
  return static_cast<uint32_t>(offset >> width_log2_);
}

uint32_t GrowthWindows::used(uint64_t last_seq) const {
  if (!started_ || last_seq < origin_) return 1;
  return static_cast<uint32_t>(std::min<uint64_t>(((last_seq - origin_) >> width_log2_) + 1, kWindows));
}

Ledger::Site* Ledger::find_site(SiteId id, bool create) {
  if (last_.site && last_.id == id) return last_.site;
  Site* site = nullptr;
  if (create) {
    site = &sites_[id];
  } else {
    auto it = sites_.find(id);
    if (it == sites_.end()) return nullptr;
    site = &it->second;
  }
  last_.id = id;
  last_.site = site;
  return site;
}

void Ledger::note_high(Site& site, uint64_t time_ns, uint32_t window, uint64_t pass) {
  if (site.bytes <= site.high) return;
  const bool first = site.high == 0;
  if (first) {
    site.first_high = site.bytes;
    site.first_time_ns = time_ns;
  }
  if (first || site.floor > site.last_floor) {
    site.rises += 1;
    site.windows |= 1u << window;
    if (pass && pass != site.last_pass) {  // passes only go up: a new one
      site.passes += 1;
      site.last_pass = pass;
    }
  }
  site.high = site.bytes;
  site.last_rise_time_ns = time_ns;
  site.last_floor = site.floor;
  site.floor = site.bytes;
}

// What a site holds from the start is where its history starts from: its first high, no rise.
void Ledger::note_baseline(Site& site, uint64_t time_ns) {
  if (site.bytes <= site.high) return;
  site.high = site.first_high = site.bytes;
  site.first_time_ns = site.last_rise_time_ns = time_ns;
  site.floor = site.last_floor = site.bytes;
}

void Ledger::note_peak(uint64_t seq, uint64_t time_ns) {
  if (live_ <= peak_.bytes) return;
  peak_.bytes = live_;
  peak_.seq = seq;
  peak_.time_ns = time_ns;
  snapshot_pending_ = true;
}

// Windows begun since the last change start from what was live then.
void Ledger::enter_window(uint32_t window) {
  if (window == kSameWindow || window >= GrowthWindows::kWindows) return;
  if (floors_[window_] == kNoFloor) floors_[window_] = live_;
  for (uint32_t w = window_ + 1; w <= window; ++w) floors_[w] = live_;
  if (window > window_) window_ = window;
}

bool Ledger::floor_grows(uint32_t windows_used, uint64_t* rise) const {
  *rise = 0;
  windows_used = std::min<uint32_t>(windows_used, GrowthWindows::kWindows);
  if (windows_used < 2) return false;
  auto floor = [&](uint32_t w) { return w > window_ || floors_[w] == kNoFloor ? live_ : floors_[w]; };
  uint32_t rising = 0, first = 0, last = 0;
  uint64_t highest = floor(0);
  for (uint32_t w = 1; w < windows_used; ++w) {
    highest = std::max(highest, floor(w));
    if (floor(w) <= floor(w - 1)) continue;
    if (rising++ == 0) first = w;
    last = w;
  }
  *rise = highest - floor(0);
  const uint32_t needed = std::max<uint32_t>(3, (windows_used + 3) / 4);
  const uint32_t last_part = windows_used - std::max<uint32_t>(1, windows_used / 4);
  return rising >= needed && (last - first + 1) * 2 >= windows_used && last >= last_part;
}

void Ledger::add(SiteId stack, uint64_t bytes, uint64_t seq, uint64_t time_ns, uint32_t window, uint64_t pass) {
  enter_window(window);
  Site& site = *find_site(stack, true);
  site.bytes += bytes;
  site.count += 1;
  note_high(site, time_ns, window, pass);
  live_ += bytes;
  note_peak(seq, time_ns);
}

void Ledger::add_initial(SiteId stack, uint64_t bytes, uint64_t seq, uint64_t time_ns) {
  Site& site = *find_site(stack, true);
  site.bytes += bytes;
  site.count += 1;
  note_baseline(site, time_ns);
  live_ += bytes;
  floors_[window_] = live_;  // the state the trace starts with: where its floor starts from
  note_peak(seq, time_ns);
}

void Ledger::add_live(SiteId stack, uint64_t bytes) {
  Site& site = *find_site(stack, true);
  site.bytes += bytes;
  site.count += 1;
  live_ += bytes;
}

void Ledger::remove(SiteId stack, uint64_t bytes, const std::string& phase, uint32_t window) {
  enter_window(window);
  if (snapshot_pending_) take_snapshot(phase);
  if (Site* site = find_site(stack, false)) {
    site->bytes -= std::min(site->bytes, bytes);
    site->count -= std::min<uint64_t>(site->count, 1);
    site->floor = std::min(site->floor, site->bytes);
  }
  live_ -= std::min(live_, bytes);
  floors_[window_] = std::min(floors_[window_], live_);
}

void Ledger::clear_live(const std::string& phase) {
  if (snapshot_pending_) take_snapshot(phase);
  for (auto& entry : sites_) {
    entry.second.bytes = 0;
    entry.second.count = 0;
    entry.second.floor = 0;
  }
  live_ = 0;
  floors_[window_] = 0;
}

void Ledger::take_snapshot(const std::string& phase) {
  snapshot_pending_ = false;
  peak_.phase = phase;
  peak_.culprits = top(kMaxCulprits, &peak_.other_bytes);
}

void Ledger::fold_windows() {
  auto fold = [](Site& site) {
    uint32_t folded = 0;
    for (uint32_t i = 0; i < GrowthWindows::kWindows / 2; ++i) {
      if (site.windows & (3u << (2 * i))) folded |= 1u << i;
    }
    site.windows = folded;
  };
  for (auto& entry : sites_) fold(entry.second);
  for (uint32_t i = 0; i < GrowthWindows::kWindows / 2; ++i) {  // a window's floor: the lesser of the two
    const uint64_t a = floors_[2 * i], b = floors_[2 * i + 1];
    floors_[i] = a == kNoFloor ? b : b == kNoFloor ? a : std::min(a, b);
  }
  for (uint32_t i = GrowthWindows::kWindows / 2; i < GrowthWindows::kWindows; ++i) floors_[i] = kNoFloor;
  window_ /= 2;
}

std::vector<StackCount> Ledger::top(size_t n, uint64_t* other) const {
  std::vector<StackCount> all;
  for (const auto& [id, site] : sites_) {
    if (site.bytes > 0) all.push_back(StackCount{id, site.bytes, site.count});
  }
  auto larger = [](const StackCount& a, const StackCount& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;  // stable across runs
  };
  size_t keep = std::min(n, all.size());
  std::partial_sort(all.begin(), all.begin() + keep, all.end(), larger);
  uint64_t rest = 0;
  for (size_t i = keep; i < all.size(); ++i) rest += all[i].bytes;
  all.resize(keep);
  if (other) *other = rest;
  return all;
}

}  // namespace gpumemtrace::report
