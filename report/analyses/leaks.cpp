// report/analyses/leaks.cpp — the classes of memory live at exit (rules in leaks.h).
#include "report/analyses/leaks.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpumemtrace::report {
namespace {

enum class ExitClass : uint8_t { Leaked, Library, AliveAtExit, BeforeRecording };

struct Group {
  ExitClass cls = ExitClass::Leaked;
  Kind kind = Kind::Device;
  uint64_t bytes = 0;
  uint64_t count = 0;
};

DeviceSummary* summary_of(ProcessReport& out, int32_t device) {
  for (DeviceSummary& d : out.devices) {
    if (d.device == device) return &d;
  }
  return nullptr;
}

}  // namespace

void collect_exit_state(const MemoryModel& model, const SymbolTable& symbols, const Suppressions& suppressions,
                        ProcessReport& out) {
  std::map<SiteId, const Suppressions::LibraryRule*> library_of;  // per site, resolved once
  auto library = [&](SiteId site) {
    auto it = library_of.find(site);
    if (it == library_of.end()) it = library_of.emplace(site, suppressions.match_library(resolve_site(symbols, site))).first;
    return it->second;
  };
  // Grouped by level in enum order (allocation, physical, block), so that the grouping order (and
  // the output for ties) is fixed. Memory held before the recording began (a flight recorder's
  // checkpoint) is grouped apart from the window's own at the same site: it is not the window's leak.
  using Key = std::tuple<int32_t, Level, SiteId, bool>;
  std::map<Key, Group> groups;
  auto add = [&](int32_t device, Level level, Kind kind, SiteId site, uint64_t size, bool torch_block, bool initial) {
    Group& group = groups[Key{device, level, site, initial && !torch_block}];
    if (group.count == 0) {
      group.kind = kind;
      group.cls = library(site)  ? ExitClass::Library
                  : torch_block  ? ExitClass::AliveAtExit
                  : initial      ? ExitClass::BeforeRecording
                                 : ExitClass::Leaked;
    }
    group.bytes += size;
    group.count += 1;
  };
  auto cached = [&](int32_t device, uint64_t bytes) {
    if (DeviceSummary* d = summary_of(out, device)) d->cached_bytes += bytes;
  };
  for (const auto& [addr, allocation] : model.allocations()) {
    if (allocation.has_blocks || allocation.torch) {
      cached(allocation.device, allocation.size - std::min(allocation.size, allocation.block_bytes));
      continue;
    }
    add(allocation.device, allocation.kind == Kind::Host ? Level::Host : Level::Allocation, allocation.kind,
        allocation.site, allocation.size, false, allocation.initial);
  }
  for (const auto& [handle, allocation] : model.physical()) {
    uint64_t block_bytes = 0;
    if (model.is_allocator_chunk(handle, allocation, &block_bytes)) {
      // Reserved by the caching allocator: its live blocks are reported (as blocks), the rest is cached.
      cached(allocation.device, allocation.size - std::min(allocation.size, block_bytes));
      continue;
    }
    add(allocation.device, Level::Physical, allocation.kind, allocation.site, allocation.size, false, allocation.initial);
  }
  for (const auto& [addr, block] : model.blocks()) {
    add(block.device, Level::Block, Kind::Block, block.site, block.size, block.torch, block.initial);
  }
  for (const MemoryModel::Pool& pool : model.pools()) {
    if (pool.trimmed) cached(pool.device, pool.cached);
  }
  for (auto& [key, group] : groups) {
    const auto& [device, level, site, initial] = key;
    Stack stack = resolve_site(symbols, site);
    if (group.cls == ExitClass::Leaked) {
      LeakGroup leak;
      leak.device = device;
      leak.level = level;
      leak.kind = format::kind_name(group.kind);
      leak.bytes = group.bytes;
      leak.count = group.count;
      if (const std::string* pattern = suppressions.match_leak(stack)) {
        leak.suppressed = true;
        leak.suppressed_by = *pattern;
      }
      leak.stack = std::move(stack);
      // Pinned host memory leaked is the process's leak, not the device's.
      DeviceSummary* d = level == Level::Host ? nullptr : summary_of(out, device);
      if (d && !leak.suppressed) d->leaked_bytes += leak.bytes;
      out.leaks.push_back(std::move(leak));
      continue;
    }
    HeldAtExit held;
    held.device = device;
    held.level = level;
    held.kind = format::kind_name(group.kind);
    held.bytes = group.bytes;
    held.count = group.count;
    if (group.cls == ExitClass::Library) {
      held.reason = "library";
      held.library = library(site)->library;
    } else {
      held.reason = group.cls == ExitClass::BeforeRecording ? "before_recording" : "alive_at_exit";
    }
    held.stack = std::move(stack);
    if (DeviceSummary* d = summary_of(out, device)) {
      if (group.cls == ExitClass::Library) d->library_bytes += held.bytes;
      else if (group.cls == ExitClass::AliveAtExit) d->alive_at_exit_bytes += held.bytes;
    }
    out.held_at_exit.push_back(std::move(held));
  }
  std::stable_sort(out.leaks.begin(), out.leaks.end(),
                   [](const LeakGroup& a, const LeakGroup& b) { return a.bytes > b.bytes; });
  std::stable_sort(out.held_at_exit.begin(), out.held_at_exit.end(),
                   [](const HeldAtExit& a, const HeldAtExit& b) { return a.bytes > b.bytes; });
}

}  // namespace gpumemtrace::report
