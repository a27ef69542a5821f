#include "report/analyses/verdicts.h"

#include <algorithm>

namespace gpumemtrace::report {

Verdict oom_verdict(uint64_t requested, const FragmentationPoint& reserved_state,
                    bool has_device_free, uint64_t device_free) {
  uint64_t free_device = has_device_free ? device_free : 0;
  uint64_t could_be_free = reserved_state.free_in_reserved + free_device;
  if (requested > could_be_free) return Verdict::Capacity;
  if (requested > std::max(reserved_state.largest_free_block, free_device)) {
    return Verdict::Fragmentation;
  }
  return Verdict::Unknown;
}

bool is_growing(const Ledger::Site& site, uint32_t windows_used) {
  if (site.rises < 3 || site.high <= site.first_high || site.windows == 0) return false;
  uint32_t rising = static_cast<uint32_t>(__builtin_popcount(site.windows));
  uint32_t first = static_cast<uint32_t>(__builtin_ctz(site.windows));
  uint32_t last = 31u - static_cast<uint32_t>(__builtin_clz(site.windows));
  uint32_t needed = std::max<uint32_t>(3, (windows_used + 3) / 4);
  return rising >= needed && (last - first + 1) * 2 >= windows_used;
}

}  // namespace gpumemtrace::report
