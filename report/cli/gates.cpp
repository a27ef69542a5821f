#include "report/cli/gates.h"

#include <cstdio>
#include <sstream>

#include "report/outputs/text_output.h"
#include "report/outputs/units.h"

namespace gpumemtrace::report {

std::vector<std::string> check_gates(const std::vector<ProcessReport>& reports, const Options& options) {
  std::vector<std::string> failures;
  for (const ProcessReport& r : reports) {
    if (options.fail_on_leak && r.leaked_bytes() > *options.fail_on_leak) {
      std::ostringstream message;
      size_t groups = 0;
      const LeakGroup* largest = nullptr;  // leaks are sorted largest first
      for (const LeakGroup& leak : r.leaks) {
        if (leak.suppressed) continue;
        if (!largest) largest = &leak;
        ++groups;
      }
      message << r.file << ": leaked " << format_bytes(r.leaked_bytes()) << " in "
              << r.leaked_count() << (r.leaked_count() == 1 ? " allocation" : " allocations");
      if (*options.fail_on_leak) message << " (limit " << format_bytes(*options.fail_on_leak) << ")";
      if (groups > 1) {
        message << " from " << groups << " stacks; the largest, " << format_bytes(largest->bytes) << " in "
                << largest->count;
      }
      message << ", allocated here:\n";
      write_stack(message, largest->stack, "    ", options.stacks);
      failures.push_back(message.str());
    }
    if (options.fail_on_growth) {
      for (const GrowthReport& g : r.growth) {
        std::ostringstream message;
        message << r.file << ": memory keeps growing: " << format_bytes(g.first_bytes) << " -> "
                << format_bytes(g.peak_bytes) << " over " << g.rises << " rises, allocated here:\n";
        write_stack(message, g.stack, "    ", options.stacks);
        failures.push_back(message.str());
      }
    }
  }
  return failures;
}

std::vector<std::string> check_diff_gates(const DiffReport& diff, const Options& options) {
  std::vector<std::string> failures;
  if (!options.fail_on_peak_increase) return failures;
  const PeakIncreaseLimit& limit = *options.fail_on_peak_increase;
  for (const PeakDelta& p : diff.peaks) {
    if (p.delta() <= 0) continue;
    double increase = static_cast<double>(p.delta());
    double percent = p.base_bytes ? 100.0 * increase / static_cast<double>(p.base_bytes) : 1e300;
    if ((limit.percent ? percent : increase) <= limit.value) continue;
    std::ostringstream message;
    char pct[32];
    std::snprintf(pct, sizeof pct, p.base_bytes ? "+%.1f%%" : "new", percent);
    message << "peak of device " << p.device << " (process " << p.process << ") grew by "
            << format_bytes(static_cast<uint64_t>(p.delta())) << " (" << pct << "): "
            << format_bytes(p.base_bytes) << " -> " << format_bytes(p.new_bytes);
    for (const StackDelta& d : p.culprits) {
      if (d.delta() <= 0) continue;
      message << "; largest increase, +" << format_bytes(static_cast<uint64_t>(d.delta())) << ", allocated here:\n";
      write_stack(message, d.stack, "    ", options.stacks);
      break;
    }
    failures.push_back(message.str());
  }
  return failures;
}

}  // namespace gpumemtrace::report
