// report/analyses/growth.cpp — growing call sites (rules in growth.h).
#include "report/analyses/growth.h"

#include "report/analyses/roles.h"

#include <algorithm>

namespace gpumemtrace::report {

uint32_t GrowthClock::tick(const Event& e, bool* widened) {
  *widened = false;
  const bool same = started_ && e.op == last_op_ && e.stack == last_stack_ && e.result == last_result_;
  started_ = true;
  last_op_ = e.op;
  last_stack_ = e.stack;
  last_result_ = e.result;
  if (same) return window_;
  window_ = windows_.window_of(++ticks_, widened);
  return window_;
}

bool is_growing(const Ledger::Site& site, uint32_t windows_used) {
  if (site.rises < 3 || site.high <= site.first_high || site.windows == 0) return false;
  uint32_t rising = static_cast<uint32_t>(__builtin_popcount(site.windows));
  uint32_t first = static_cast<uint32_t>(__builtin_ctz(site.windows));
  uint32_t last = 31u - static_cast<uint32_t>(__builtin_clz(site.windows));
  uint32_t needed = std::max<uint32_t>(3, (windows_used + 3) / 4);
  // Memory of a step's phase (activations, backward, optimizer state) grows across iterations only
  // when its rises fell in as many passes (passes.h) as windows: rises inside one pass (a forward
  // pass through identical layers until the device is full) are that pass's memory, however long it is.
  if (site.passes && site.passes < needed) return false;
  // The last quarter of the run (at least its last window): a cache that filled and then stayed
  // flat stopped rising before it.
  uint32_t last_part = windows_used - std::max<uint32_t>(1, windows_used / 4);
  return rising >= needed && (last - first + 1) * 2 >= windows_used && last >= last_part;
}

namespace {

// `skip_segments`: on a device with block data, a caching allocator taking more segments is the
// consequence of its blocks growing (reported at the block level), not a growth of its own: a site
// whose memory blocks landed in, or whose stack is a caching allocator's (its expandable chunks).
void collect_level(const Ledger& ledger, Level level, int32_t device, uint32_t windows_used, bool skip_segments,
                   const SymbolTable& symbols, std::vector<GrowthReport>& out) {
  // Growth is the level's total rising (what it holds once each window's temporaries are gone), and a
  // site whose rise that explains: a site that only took the place of another's memory (a bounded
  // cache refilled from a second call site) is no growth while the total stays flat, nor one whose
  // kept memory (its floor at its last high, temporaries aside) rose by more than twice the total's.
  uint64_t total_rise = 0;
  if (!ledger.floor_grows(windows_used, &total_rise)) return;
  for (const auto& [site_id, site] : ledger.sites()) {
    const uint64_t kept_rise = site.last_floor - std::min(site.last_floor, site.first_high);
    if (!is_growing(site, windows_used) || kept_rise > 2 * total_rise) continue;
    if (skip_segments && site.holds_blocks) continue;
    Stack stack = resolve_site(symbols, site_id);
    if (skip_segments && is_allocator_segment_stack(stack)) continue;
    GrowthReport g;
    g.device = device;
    g.level = level;
    g.stack = std::move(stack);
    g.first_bytes = site.first_high;
    g.peak_bytes = site.high;
    g.final_bytes = site.bytes;
    g.rises = site.rises;
    g.windows_rising = static_cast<uint32_t>(__builtin_popcount(site.windows));
    g.windows_total = windows_used;
    g.first_time_ns = site.first_time_ns;  // the rate in time (time_to_oom.h)
    g.last_rise_time_ns = site.last_rise_time_ns;
    out.push_back(std::move(g));
  }
}

}  // namespace

void collect_growth(const MemoryModel& model, uint32_t windows_used, const SymbolTable& symbols,
                    std::vector<GrowthReport>& out) {
  for (const auto& [device, state] : model.devices()) {
    collect_level(state.reserved, Level::Allocation, device, windows_used, state.has_blocks, symbols, out);
    collect_level(state.allocated, Level::Block, device, windows_used, false, symbols, out);
  }
  collect_level(model.host().ledger, Level::Host, -1, windows_used, false, symbols, out);
  std::stable_sort(out.begin(), out.end(), [](const GrowthReport& a, const GrowthReport& b) {
    return a.peak_bytes - a.first_bytes > b.peak_bytes - b.first_bytes;
  });
}

}  // namespace gpumemtrace::report
