// report/analyses/top_sites.h — the call sites that matter, as memray's `stats` and heaptrack's
// sections list them: by bytes live at the peak, by total bytes allocated, by number of allocations,
// and by temporary allocations (freed within kTemporaryNs of their allocation: churn that costs
// allocator time, cudaMalloc/cudaFree above all), per device and level (blocks; CUDA level).
//
// A listener of the memory model: one lifetime per holding at its release, and those still live at
// the end; the peak ranking is the ledgers' peak snapshot (ledger.h).
// Memory: one entry per call site, device and level; nothing per event. Single-threaded.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "report/analyses/device_table.h"
#include "report/analyses/memory_model.h"
#include "report/analyses/report_model.h"
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

inline constexpr uint64_t kTemporaryNs = 1'000'000;  // 1 ms
inline constexpr size_t kMaxTopSites = 10;

class TopSites : public ModelListener {
 public:
  explicit TopSites(const MemoryModel& model) : model_(model) {}

  void on_release(const Holding& h) override;
  // Counts what is still live, then fills out.top_sites, per device and level that allocated.
  void finish(const SymbolTable& symbols, ProcessReport& out);

  struct Totals {
    uint64_t bytes = 0, count = 0, temporary_bytes = 0, temporary_count = 0;
  };
  using Sites = std::unordered_map<SiteId, Totals>;
  // Every site of one device and level (Block, or the CUDA level); null when none allocated there.
  const Sites* sites_of(int32_t device, Level level) const {
    const DeviceSites* d = devices_.find(device);
    if (!d) return nullptr;
    return level == Level::Block ? &d->blocks : &d->memory;
  }

 private:
  struct DeviceSites {
    Sites blocks, memory;
  };
  // One holding: freed `lifetime_ns` after it was acquired, or still live at the end (`live`).
  void on_lifetime(const Holding& h, uint64_t lifetime_ns, bool live);
  void collect(int32_t device, Level level, const Sites& sites, const Ledger& ledger, const SymbolTable& symbols,
               ProcessReport& out) const;

  const MemoryModel& model_;
  DeviceTable<DeviceSites> devices_;
  // The last site counted: allocations come from a few sites in a row.
  Totals* last_ = nullptr;
  SiteId last_site_ = 0;
  int32_t last_device_ = -2;
  bool last_blocks_ = false;
};

}  // namespace gpumemtrace::report
