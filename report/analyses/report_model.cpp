#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::Capacity: return "capacity";
    case Verdict::Fragmentation: return "fragmentation";
    case Verdict::Unknown: return "unknown";
  }
  return "unknown";
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
