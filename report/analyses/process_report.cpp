// ProcessAnalyzer::finish(): from the memory model at the end of the trace to a ProcessReport.
#include <algorithm>
#include <tuple>

#include "report/analyses/process_analyzer.h"
#include "report/analyses/verdicts.h"

namespace gpumemtrace::report {
namespace {

std::vector<StackBytes> resolve_all(const std::vector<StackCount>& counts, const SymbolTable& symbols) {
  std::vector<StackBytes> out;
  out.reserve(counts.size());
  for (const StackCount& c : counts) out.push_back(StackBytes{c.bytes, c.count, symbols.resolve(c.stack)});
  return out;
}

PeakLevel peak_level(const Ledger& ledger, const SymbolTable& symbols) {
  const Ledger::Snapshot& snapshot = ledger.peak_snapshot();
  PeakLevel level;
  level.bytes = snapshot.bytes;
  level.seq = snapshot.seq;
  level.time_ns = snapshot.time_ns;
  level.phase = snapshot.phase;
  level.culprits = resolve_all(snapshot.culprits, symbols);
  level.other_bytes = snapshot.other_bytes;
  return level;
}

void collect_growth(const Ledger& ledger, Level level, int32_t device, uint32_t windows_used,
                    const SymbolTable& symbols, std::vector<GrowthReport>& out) {
  for (const auto& [stack, site] : ledger.sites()) {
    if (!is_growing(site, windows_used)) continue;
    GrowthReport g;
    g.device = device;
    g.level = level;
    g.stack = symbols.resolve(stack);
    g.first_bytes = site.first_high;
    g.peak_bytes = site.high;
    g.final_bytes = site.bytes;
    g.rises = site.rises;
    g.windows_rising = static_cast<uint32_t>(__builtin_popcount(site.windows));
    g.windows_total = windows_used;
    out.push_back(std::move(g));
  }
}

}  // namespace

ProcessReport ProcessAnalyzer::finish(const std::string& file, const ReadResult& read,
                                      const SymbolTable& symbols, const Suppressions& suppressions) {
  settle_all();
  ProcessReport out;
  out.file = file;
  out.header = header_;
  out.complete = read.footer_seen;
  out.truncated = read.truncated;
  out.events = events_;
  out.dropped_events = dropped_;
  out.first_time_ns = first_time_;
  out.last_time_ns = std::max(last_time_, end_time_);
  out.warnings = read.warnings;
  if (replaced_live_) {
    out.warnings.push_back(std::to_string(replaced_live_) +
                           " allocations at an address that was still live (a free was not recorded)");
  }
  if (orphan_blocks_) {
    out.warnings.push_back(std::to_string(orphan_blocks_) + " blocks (" + std::to_string(orphan_bytes_) +
                           " bytes) were still live when their segment was freed: ended with it, not leaks");
  }
  out.marks = marks_;
  out.marks_total = marks_total_;

  collect_leaks(out, symbols, suppressions);

  uint32_t windows_used = windows_.used(events_);
  for (auto& [device, state] : devices_) {
    DeviceSummary summary = state.summary;
    summary.peak_reserved = state.reserved.peak();
    summary.peak_allocated = state.allocated.peak();
    for (const LeakGroup& leak : out.leaks) {
      if (leak.device == device && !leak.suppressed) summary.leaked_bytes += leak.bytes;
    }
    out.devices.push_back(summary);
    if (summary.peak_reserved || summary.peak_allocated) {
      PeakReport peak;
      peak.device = device;
      peak.reserved = peak_level(state.reserved, symbols);
      peak.has_blocks = state.has_blocks;
      if (state.has_blocks) peak.allocated = peak_level(state.allocated, symbols);
      peak.has_fragmentation = state.has_fragmentation_at_peak;
      peak.fragmentation = state.fragmentation_at_peak;
      out.peaks.push_back(std::move(peak));
    }
    collect_growth(state.reserved, Level::Allocation, device, windows_used, symbols, out.growth);
    collect_growth(state.allocated, Level::Block, device, windows_used, symbols, out.growth);
    if (state.has_blocks) {
      FragmentationReport f;
      f.device = device;
      f.timeline = state.timeline.take(TimelineSample{summary.last_time_ns, state.reserved.live(),
                                                      state.allocated.live()});
      f.at_peak = state.fragmentation_at_peak;
      f.peak_time_ns = state.allocated.peak_snapshot().time_ns;
      out.fragmentation.push_back(std::move(f));
    }
  }
  std::sort(out.growth.begin(), out.growth.end(), [](const GrowthReport& a, const GrowthReport& b) {
    return a.peak_bytes - a.first_bytes > b.peak_bytes - b.first_bytes;
  });

  for (OomRecord& record : ooms_) {
    OomReport r = std::move(record.report);
    r.stack = symbols.resolve(record.stack);
    r.top_holders = resolve_all(record.holders, symbols);
    r.verdict = oom_verdict(r.requested, r.fragmentation, r.has_device_free, r.device_free);
    for (FragmentationReport& f : out.fragmentation) {
      if (f.device == r.device) f.at_ooms.push_back(FragmentationReport::AtOom{r.seq, r.time_ns, r.fragmentation});
    }
    out.ooms.push_back(std::move(r));
  }
  return out;
}

// Live at the end: CUDA allocations (minus caching-allocator segments, whose unused part is
// cached), physical handles and blocks. Grouped by (device, level, stack), largest first.
void ProcessAnalyzer::collect_leaks(ProcessReport& out, const SymbolTable& symbols,
                                    const Suppressions& suppressions) {
  // Grouped by level in enum order (allocation, physical, block), so that the grouping order (and
  // the output for ties) is fixed.
  using Key = std::tuple<int32_t, Level, uint32_t>;
  std::map<Key, LeakGroup> groups;
  auto add = [&](int32_t device, Level level, Kind kind, uint32_t stack, uint64_t size) {
    LeakGroup& group = groups[Key{device, level, stack}];
    if (group.count == 0) {
      group.device = device;
      group.level = level;
      group.kind = format::kind_name(kind);
    }
    group.bytes += size;
    group.count += 1;
  };
  for (const auto& [addr, allocation] : allocations_) {
    if (allocation.has_blocks) {
      device_state(allocation.device).summary.cached_bytes +=
          allocation.size - std::min(allocation.size, allocation.block_bytes);
      continue;
    }
    add(allocation.device, Level::Allocation, allocation.kind, allocation.stack, allocation.size);
  }
  for (const auto& [handle, allocation] : physical_) {
    uint64_t block_bytes = 0;
    if (is_allocator_chunk(handle, allocation, &block_bytes)) {
      // Reserved by the caching allocator: its live blocks are reported (as blocks), the rest is cached.
      device_state(allocation.device).summary.cached_bytes += allocation.size - std::min(allocation.size, block_bytes);
      continue;
    }
    add(allocation.device, Level::Physical, allocation.kind, allocation.stack, allocation.size);
  }
  for (const auto& [addr, block] : blocks_) add(block.device, Level::Block, Kind::Block, block.stack, block.size);
  for (const Pool& pool : pools_) {
    if (pool.trimmed) device_state(pool.device).summary.cached_bytes += pool.cached;
  }
  for (auto& [key, group] : groups) {
    group.stack = symbols.resolve(std::get<2>(key));
    if (const std::string* pattern = suppressions.match_leak(group.stack)) {
      group.suppressed = true;
      group.suppressed_by = *pattern;
    }
    out.leaks.push_back(std::move(group));
  }
  std::stable_sort(out.leaks.begin(), out.leaks.end(),
                   [](const LeakGroup& a, const LeakGroup& b) { return a.bytes > b.bytes; });
}

}  // namespace gpumemtrace::report
