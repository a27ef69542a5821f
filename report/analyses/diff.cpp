// report/analyses/diff.cpp — `gpumem-report diff`: peaks and leaks of two runs matched by call stack.
#include "report/analyses/diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace gpumemtrace::report {
namespace {

// Accumulates (bytes, count) of both sides by stack signature.
class StackMerge {
 public:
  void add(const Stack& stack, uint64_t bytes, uint64_t count, bool is_new) {
    StackDelta& d = by_signature_[stack_signature(stack)];
    if (d.stack.empty()) d.stack = stack;
    (is_new ? d.new_bytes : d.base_bytes) += bytes;
    (is_new ? d.new_count : d.base_count) += count;
  }
  std::vector<StackDelta> changed() const {
    std::vector<StackDelta> out;
    for (const auto& [signature, d] : by_signature_) {
      if (d.delta() != 0) out.push_back(d);
    }
    std::stable_sort(out.begin(), out.end(), [](const StackDelta& a, const StackDelta& b) {
      return std::llabs(a.delta()) > std::llabs(b.delta());
    });
    return out;
  }

 private:
  std::map<std::string, StackDelta> by_signature_;
};

const PeakReport* find_peak(const ProcessReport& report, int32_t device) {
  for (const PeakReport& peak : report.peaks) {
    if (peak.device == device) return &peak;
  }
  return nullptr;
}

// The level a person cares about: blocks when the caching allocator reported them.
const PeakLevel& main_level(const PeakReport& peak) { return peak.has_blocks ? peak.allocated : peak.reserved; }

}  // namespace

std::string stack_signature(const Stack& stack) {
  std::string out;
  for (const LogicalFrame& frame : stack) {
    if (!out.empty()) out += " <- ";
    out += frame.function + " (" + frame.file + ":" + std::to_string(frame.line) + ")";
  }
  return out;
}

DiffReport diff_reports(const std::vector<ProcessReport>& base, const std::vector<ProcessReport>& next) {
  DiffReport out;
  for (const ProcessReport& r : base) out.base_files.push_back(r.file);
  for (const ProcessReport& r : next) out.new_files.push_back(r.file);
  if (base.size() != next.size()) {
    out.warnings.push_back("BASE has " + std::to_string(base.size()) + " processes and NEW " +
                           std::to_string(next.size()) + "; comparing the first " +
                           std::to_string(std::min(base.size(), next.size())) + " in order");
  }
  StackMerge leaks;
  for (size_t i = 0; i < std::min(base.size(), next.size()); ++i) {
    std::vector<int32_t> devices;
    for (const PeakReport& p : base[i].peaks) devices.push_back(p.device);
    for (const PeakReport& p : next[i].peaks) devices.push_back(p.device);
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    for (int32_t device : devices) {
      PeakDelta delta;
      delta.process = i;
      delta.base_pid = base[i].header.pid;
      delta.new_pid = next[i].header.pid;
      delta.device = device;
      StackMerge culprits;
      if (const PeakReport* p = find_peak(base[i], device)) {
        delta.base_bytes = main_level(*p).bytes;
        for (const StackBytes& c : main_level(*p).culprits) culprits.add(c.stack, c.bytes, c.count, false);
      }
      if (const PeakReport* p = find_peak(next[i], device)) {
        delta.new_bytes = main_level(*p).bytes;
        for (const StackBytes& c : main_level(*p).culprits) culprits.add(c.stack, c.bytes, c.count, true);
      }
      delta.culprits = culprits.changed();
      out.peaks.push_back(std::move(delta));
    }
  }
  for (size_t side = 0; side < 2; ++side) {
    for (const ProcessReport& r : side ? next : base) {
      for (const LeakGroup& leak : r.leaks) {
        if (!leak.suppressed) leaks.add(leak.stack, leak.bytes, leak.count, side == 1);
      }
      (side ? out.new_leaked : out.base_leaked) += r.leaked_bytes();
    }
  }
  out.leaks = leaks.changed();
  return out;
}

}  // namespace gpumemtrace::report
