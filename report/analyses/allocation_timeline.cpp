// report/analyses/allocation_timeline.cpp — bands, pins, budgets and time buckets (rules in
// allocation_timeline.h).
#include "report/analyses/allocation_timeline.h"

#include <algorithm>
#include <map>

namespace gpumemtrace::report {
namespace {

// Min-heap order: the smallest band on top (ties: the shortest).
template <typename Band>
bool larger(const Band& a, const Band& b) {
  if (a.size != b.size) return a.size > b.size;
  return a.end_ns - a.start_ns > b.end_ns - b.start_ns;
}

// How much a band matters when the total budget is cut at the end: what it is kept for, then size.
int rank_of(uint8_t why) {
  if (why & TimelineBand::kAtPeak) return 3;
  if (why & TimelineBand::kAtOom) return 2;
  if (why & TimelineBand::kAtEnd) return 1;
  return 0;
}

}  // namespace

bool AllocationTimelineAnalysis::SmallestOut::push(const Band& band, Band* evicted) {
  // Full, and the band is no larger than the smallest kept: it is the one that gives way, without the
  // heap's push and pop (the common case once the budget is full: a loop's equal blocks, each of them
  // otherwise two walks of the heap).
  if (capacity_ == 0 || (heap_.size() >= capacity_ && !larger(band, heap_.front()))) {
    *evicted = band;
    return true;
  }
  heap_.push_back(band);
  std::push_heap(heap_.begin(), heap_.end(), [](const Band& a, const Band& b) { return larger(a, b); });
  if (heap_.size() <= capacity_) return false;
  std::pop_heap(heap_.begin(), heap_.end(), [](const Band& a, const Band& b) { return larger(a, b); });
  *evicted = heap_.back();
  heap_.pop_back();
  return true;
}

AllocationTimelineAnalysis::Band AllocationTimelineAnalysis::band_of(const Holding& h, bool live_at_end,
                                                                      uint64_t end_ns) const {
  Band band;
  band.start_ns = h.time_ns;
  band.end_ns = std::max(h.time_ns, end_ns);
  band.start_pos = h.position;
  band.end_pos = live_at_end ? UINT64_MAX : model_.position();
  band.addr = h.addr;
  band.size = h.size;
  band.site = h.site;
  band.device = h.device;
  band.level = h.level;
  band.role = roles_.role_of(h);  // Roles hears the release after this listener
  band.live_at_end = live_at_end;
  band.segment = h.segment;
  return band;
}

// --- time buckets ----------------------------------------------------------------------------------

// Whole-bucket coverage into the byte-ns areas; the difference arrays start again from zero.
void AllocationTimelineAnalysis::settle(Buckets& b) {
  for (Group& g : b.groups) {
    int64_t level = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      level += g.delta[i];
      g.area[i] += static_cast<double>(level) * static_cast<double>(b.width);
      g.delta[i] = 0;
    }
    g.delta[kBuckets] = 0;
  }
}

// Doubles the bucket width (folding pairs) until `time` falls inside the kBuckets buckets.
void AllocationTimelineAnalysis::grow_to(Buckets& b, uint64_t time) {
  if (!b.started) {
    b.started = true;
    b.origin = time;
    b.live_max.assign(kBuckets, 0);
    b.live_last.assign(kBuckets, 0);
    b.touched.assign(kBuckets, 0);
  }
  while ((time - b.origin) / b.width >= kBuckets) {
    settle(b);
    for (size_t i = 0; i < kBuckets / 2; ++i) {
      const size_t l = 2 * i, r = 2 * i + 1;
      b.live_max[i] = std::max(b.live_max[l], b.live_max[r]);
      b.live_last[i] = b.touched[r] ? b.live_last[r] : b.live_last[l];
      b.touched[i] = b.touched[l] | b.touched[r];
      for (Group& g : b.groups) g.area[i] = g.area[l] + g.area[r];
    }
    std::fill(b.live_max.begin() + kBuckets / 2, b.live_max.end(), 0);
    std::fill(b.live_last.begin() + kBuckets / 2, b.live_last.end(), 0);
    std::fill(b.touched.begin() + kBuckets / 2, b.touched.end(), 0);
    for (Group& g : b.groups) std::fill(g.area.begin() + kBuckets / 2, g.area.end(), 0.0);
    b.width *= 2;
    b.last_used /= 2;
  }
}

size_t AllocationTimelineAnalysis::bucket_of(Buckets& b, uint64_t time) {
  grow_to(b, std::max(time, b.started ? b.origin : time));
  const size_t i = static_cast<size_t>((std::max(time, b.origin) - b.origin) / b.width);
  b.last_used = std::max(b.last_used, i);
  return i;
}

// Live bytes of `level` went from `before` to level.live at the event being applied.
void AllocationTimelineAnalysis::changed(LevelState& level, uint64_t before) {
  Buckets& b = level.buckets;
  const size_t i = bucket_of(b, model_.time_ns());
  b.live_max[i] = std::max({b.live_max[i], before, level.live});
  b.live_last[i] = level.live;
  b.touched[i] = 1;
}

AllocationTimelineAnalysis::Group& AllocationTimelineAnalysis::group_for(Buckets& b, const Band& band) {
  auto make = [&](SiteId site, bool other) {
    Group g;
    g.site = site;
    g.other = other;
    g.role = band.role;
    g.area.assign(kBuckets, 0.0);
    g.delta.assign(kBuckets + 1, 0);
    b.groups.push_back(std::move(g));
  };
  if (b.groups.empty()) make(0, true);
  auto found = b.group_of.find(band.site);
  if (found != b.group_of.end()) return b.groups[found->second];
  if (b.groups.size() > kMaxGroups) return b.groups[0];
  b.group_of.emplace(band.site, b.groups.size());
  make(band.site, false);
  return b.groups.back();
}

// The band is not drawn: its bytes go to its level's aggregate.
void AllocationTimelineAnalysis::give_way(const Band& band) {
  LevelState& level = level_of(band.device, band.level);
  ++level.aggregated;
  level.aggregated_bytes += band.size;
  Buckets& b = level.buckets;
  if (band.end_ns <= band.start_ns) return;  // no duration: no area
  Group& g = group_for(b, band);
  g.bytes += band.size;
  g.count += 1;
  const size_t first = bucket_of(b, band.start_ns), last = bucket_of(b, band.end_ns);
  const double size = static_cast<double>(band.size);
  auto start_of = [&](size_t i) { return b.origin + i * b.width; };
  if (first == last) {
    g.area[first] += size * static_cast<double>(band.end_ns - band.start_ns);
    return;
  }
  g.area[first] += size * static_cast<double>(start_of(first + 1) - band.start_ns);
  g.area[last] += size * static_cast<double>(band.end_ns - start_of(last));
  if (last > first + 1) {
    g.delta[first + 1] += static_cast<int64_t>(band.size);
    g.delta[last] -= static_cast<int64_t>(band.size);
  }
}

// --- bands -------------------------------------------------------------------------------------------

void AllocationTimelineAnalysis::keep(const Band& band) {
  Band evicted;
  bool out = false;
  if (band.why & (TimelineBand::kAtOom | TimelineBand::kAtEnd)) {
    out = pinned_.push(band, &evicted);
  } else if (band.why & TimelineBand::kAtPeak) {
    out = level_of(band.device, band.level).at_peak.push(band, &evicted);
  } else {
    Band ordinary = band;
    ordinary.why |= TimelineBand::kLarge;
    out = ordinary_.push(ordinary, &evicted);
  }
  if (out) give_way(evicted);
}

// --- the event clock -----------------------------------------------------------------------------

void AllocationTimelineAnalysis::Clock::tick(uint64_t time_ns) {
  // Time never goes back on the clock (events of two threads may carry times a little out of order).
  last = EventClock::Knot{std::max(time_ns, last.time_ns), clock.events++};
  if (last.event % stride != 0) return;
  clock.knots.push_back(last);
  if (clock.knots.size() < EventClock::kMaxKnots) return;
  // Full: keep every other knot (events that are multiples of the doubled stride).
  size_t kept = 0;
  for (size_t i = 0; i < clock.knots.size(); i += 2) clock.knots[kept++] = clock.knots[i];
  clock.knots.resize(kept);
  stride *= 2;
}

EventClock AllocationTimelineAnalysis::Clock::finish() const {
  EventClock out = clock;
  if (out.events && (out.knots.empty() || out.knots.back().event != last.event)) out.knots.push_back(last);
  return out;
}

void AllocationTimelineAnalysis::on_acquire(const Holding& h) {
  if (h.level == Level::Host) return;  // pinned host memory: not the device's (memory_model.h)
  devices_.get(h.device).clock.tick(model_.time_ns());
  LevelState& level = level_of(h.device, h.level);
  const uint64_t before = level.live;
  level.live += h.size;
  level.count += 1;
  level.allocations += 1;
  changed(level, before);
  if (level.live <= level.peak) return;
  level.peak = level.live;
  level.peak_pos = model_.position();
  level.peak_time = model_.time_ns();
  level.peak_count = level.count;
  // A new peak: what was freed since the last one was not live at this one.
  std::vector<Band> freed = std::move(level.at_peak.bands());
  level.at_peak.bands().clear();
  for (Band& band : freed) {
    band.why &= static_cast<uint8_t>(~TimelineBand::kAtPeak);
    keep(band);
  }
}

void AllocationTimelineAnalysis::on_release(const Holding& h) {
  if (h.level == Level::Host) return;
  devices_.get(h.device).clock.tick(model_.time_ns());
  LevelState& level = level_of(h.device, h.level);
  const uint64_t before = level.live;
  level.live -= std::min(level.live, h.size);
  level.count -= std::min<uint64_t>(level.count, 1);
  changed(level, before);
  Band band = band_of(h, false, model_.time_ns());
  if (level.peak_pos && band.start_pos <= level.peak_pos) band.why |= TimelineBand::kAtPeak;
  if (band.start_pos <= devices_.get(h.device).last_oom_pos) band.why |= TimelineBand::kAtOom;
  keep(band);
}

void AllocationTimelineAnalysis::on_oom(int32_t device) {
  DeviceState& d = devices_.get(device);
  d.clock.tick(model_.time_ns());
  d.last_oom_pos = model_.position();
  ++d.ooms_total;
  if (d.ooms.size() >= kMaxOoms) return;
  OomAt at;
  at.position = model_.position();
  at.time_ns = model_.time_ns();
  at.bytes[0] = d.blocks.live;
  at.count[0] = d.blocks.count;
  at.bytes[1] = d.memory.live;
  at.count[1] = d.memory.count;
  d.ooms.push_back(at);
}

// --- the end -------------------------------------------------------------------------------------------

namespace {

// One level's output from its state; the bands are added by the caller.
void fill_level(TimelineLevel& out, uint64_t allocations, uint64_t peak, uint64_t peak_time, uint64_t peak_count) {
  out.allocations = allocations;
  out.peak.time_ns = peak_time;
  out.peak.bytes = peak;
  out.peak.count = peak_count;
}

}  // namespace

void AllocationTimelineAnalysis::finish(ProcessReport& out) {
  // What is still live: bands to the end of the trace (the process's last time, ProcessReport).
  const uint64_t end_ns = std::max(model_.time_ns(), out.last_time_ns);
  model_.for_each_live([&](const Holding& h) {
    Band band = band_of(h, true, end_ns);
    band.why |= TimelineBand::kAtEnd;
    const LevelState& level = level_of(h.device, h.level);
    if (level.peak_pos && band.start_pos <= level.peak_pos) band.why |= TimelineBand::kAtPeak;
    if (band.start_pos <= devices_.get(h.device).last_oom_pos) band.why |= TimelineBand::kAtOom;
    keep(band);
  });

  // Everything kept, most important first; beyond kMaxBands the rest gives way.
  std::vector<Band> all = std::move(ordinary_.bands());
  all.insert(all.end(), pinned_.bands().begin(), pinned_.bands().end());
  for (auto& [device, d] : devices_) {
    for (LevelState* level : {&d.blocks, &d.memory}) {
      all.insert(all.end(), level->at_peak.bands().begin(), level->at_peak.bands().end());
    }
  }
  std::sort(all.begin(), all.end(), [](const Band& a, const Band& b) {
    const int ra = rank_of(a.why), rb = rank_of(b.why);
    if (ra != rb) return ra > rb;
    return larger(a, b);
  });
  if (all.size() > kMaxBands) {
    for (size_t i = kMaxBands; i < all.size(); ++i) give_way(all[i]);
    all.resize(kMaxBands);
  }

  // Stacks: the sites holding the most bytes in bands first; index 0 stands for "not kept".
  AllocationTimeline& timeline = out.allocation_timeline;
  timeline.max_ordinary = kMaxOrdinary;
  timeline.max_pinned = kMaxPinned;
  std::map<SiteId, uint64_t> weight;
  for (const Band& band : all) weight[band.site] += band.size;
  for (auto& [device, d] : devices_) {
    for (LevelState* level : {&d.blocks, &d.memory}) {
      for (const Group& g : level->buckets.groups) {
        if (!g.other) weight[g.site] += g.bytes + 1;
      }
    }
    if (!sites_) continue;
    for (Level level : {Level::Block, Level::Allocation}) {
      if (const TopSites::Sites* sites = sites_->sites_of(device, level)) {
        for (const auto& [site, totals] : *sites) weight[site] += 1;  // after every band's and group's site
      }
    }
  }
  std::vector<std::pair<uint64_t, SiteId>> order;
  for (const auto& [site, w] : weight) order.emplace_back(w, site);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::unordered_map<SiteId, uint32_t> index;
  timeline.stacks.push_back(Stack{LogicalFrame{}});
  timeline.stacks[0][0].function = "(stack not kept: the page keeps " + std::to_string(kMaxStacks) + " stacks)";
  for (const auto& [w, site] : order) {
    if (index.size() >= kMaxStacks) break;
    index.emplace(site, static_cast<uint32_t>(timeline.stacks.size()));
    timeline.stacks.push_back(resolve_site(symbols_, site));
  }
  auto stack_index = [&](SiteId site) -> uint32_t {
    auto found = index.find(site);
    if (found != index.end()) return found->second;
    ++timeline.stacks_dropped;
    return 0;
  };

  std::sort(all.begin(), all.end(), [](const Band& a, const Band& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.start_pos < b.start_pos;
  });
  for (auto& [device, d] : devices_) {
    DeviceTimeline dt;
    dt.device = device;
    dt.clock = d.clock.finish();
    const std::pair<LevelState*, TimelineLevel*> levels[] = {{&d.blocks, &dt.blocks}, {&d.memory, &dt.memory}};
    for (size_t which = 0; which < 2; ++which) {
      LevelState& state = *levels[which].first;
      TimelineLevel& level = *levels[which].second;
      if (!state.allocations) continue;
      fill_level(level, state.allocations, state.peak, state.peak_time, state.peak_count);
      for (const OomAt& at : d.ooms) {
        level.ooms.push_back(TimelineMoment{at.time_ns, at.bytes[which], at.count[which], 0, 0});
      }
      const bool blocks = which == 0;
      for (const Band& band : all) {
        if (band.device != device || (band.level == Level::Block) != blocks) continue;
        if (band.start_pos <= state.peak_pos && state.peak_pos < band.end_pos) {
          level.peak.shown_bytes += band.size;
          level.peak.shown_count += 1;
        }
        for (size_t i = 0; i < d.ooms.size(); ++i) {
          if (band.start_pos <= d.ooms[i].position && d.ooms[i].position < band.end_pos) {
            level.ooms[i].shown_bytes += band.size;
            level.ooms[i].shown_count += 1;
          }
        }
        TimelineBand out_band;
        out_band.start_ns = band.start_ns;
        out_band.end_ns = band.end_ns;
        out_band.addr = band.addr;
        out_band.size = band.size;
        out_band.stack = stack_index(band.site);
        out_band.level = band.level;
        out_band.role = band.role;
        out_band.why = band.why;
        out_band.live_at_end = band.live_at_end;
        out_band.segment = band.segment;
        level.bands.push_back(out_band);
      }
      level.shown = level.bands.size();
      if (const TopSites::Sites* sites = sites_ ? sites_->sites_of(device, blocks ? Level::Block : Level::Allocation) : nullptr) {
        for (const auto& [site, totals] : *sites) {
          auto found = index.find(site);
          TimelineSite& into = found == index.end() ? level.other_sites : level.sites.emplace_back();
          into.stack = found == index.end() ? 0 : found->second;
          into.bytes += totals.bytes;
          into.count += totals.count;
          into.temporary_bytes += totals.temporary_bytes;
          into.temporary_count += totals.temporary_count;
        }
        std::sort(level.sites.begin(), level.sites.end(), [](const TimelineSite& a, const TimelineSite& b) {
          return a.bytes != b.bytes ? a.bytes > b.bytes : a.stack < b.stack;
        });
      }
      level.aggregated = state.aggregated;
      level.aggregated_bytes = state.aggregated_bytes;
      // The buckets used, as average bytes and highest live bytes; buckets no event touched hold
      // what the last one before them ended with.
      Buckets& b = state.buckets;
      if (!b.started) continue;
      settle(b);
      const size_t used = b.last_used + 1;
      level.origin_ns = b.origin;
      level.bucket_ns = b.width;
      uint64_t carry = 0;
      for (size_t i = 0; i < used; ++i) {
        if (!b.touched[i]) b.live_max[i] = b.live_last[i] = carry;
        carry = b.live_last[i];
        level.live_max.push_back(b.live_max[i]);
      }
      for (const Group& g : b.groups) {
        if (!g.count) continue;
        TimelineGroup group;
        group.stack = g.other ? TimelineGroup::kOtherStacks : stack_index(g.site);
        group.role = g.role;
        group.bytes = g.bytes;
        group.count = g.count;
        for (size_t i = 0; i < used; ++i) {
          group.average.push_back(static_cast<uint64_t>(g.area[i] / static_cast<double>(b.width) + 0.5));
        }
        level.groups.push_back(std::move(group));
      }
    }
    if (!dt.blocks.empty() || !dt.memory.empty()) timeline.devices.push_back(std::move(dt));
  }
}

}  // namespace gpumemtrace::report
