#include "report/analyses/report_model.h"

#include <algorithm>

namespace gpumemtrace::report {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::Capacity: return "capacity";
    case Verdict::Fragmentation: return "fragmentation";
    case Verdict::Unknown: return "unknown";
  }
  return "unknown";
}

const char* level_name(Level level) {
  switch (level) {
    case Level::Allocation: return "allocation";
    case Level::Physical: return "physical";
    case Level::Block: return "block";
  }
  return "allocation";
}

uint64_t ProcessReport::peak_bytes() const {
  uint64_t peak = 0;
  for (const DeviceSummary& d : devices) peak = std::max(peak, d.peak_reserved);
  return peak;
}

uint64_t ProcessReport::leaked_bytes() const {
  uint64_t total = 0;
  for (const LeakGroup& leak : leaks) total += leak.suppressed ? 0 : leak.bytes;
  return total;
}

uint64_t ProcessReport::leaked_count() const {
  uint64_t total = 0;
  for (const LeakGroup& leak : leaks) total += leak.suppressed ? 0 : leak.count;
  return total;
}

}  // namespace gpumemtrace::report
