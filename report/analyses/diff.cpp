// report/analyses/diff.cpp — `gpumem-report diff`: peaks and leaks of two runs matched by call stack.
#include "report/analyses/diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>

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

// The processes of a run in start order: the recorder's start time, then pid (a trace without a
// start time, such as a converted snapshot, sorts first, by pid).
std::vector<DiffProcess> in_start_order(const std::vector<ProcessReport>& reports) {
  std::vector<DiffProcess> order;
  for (size_t i = 0; i < reports.size(); ++i) {
    order.push_back(DiffProcess{i, reports[i].file, reports[i].header.pid, reports[i].header.rank});
  }
  std::stable_sort(order.begin(), order.end(), [&](const DiffProcess& a, const DiffProcess& b) {
    const Header& x = reports[a.index].header;
    const Header& y = reports[b.index].header;
    return std::tie(x.start_time_ns, x.pid) < std::tie(y.start_time_ns, y.pid);
  });
  return order;
}

std::string describe(const DiffProcess& p) { return p.file + " (" + process_name(p) + ")"; }

}  // namespace

std::string process_name(const DiffProcess& p) {
  return p.rank >= 0 ? "rank " + std::to_string(p.rank) : "pid " + std::to_string(p.pid);
}

void pair_processes(const std::vector<ProcessReport>& base, const std::vector<ProcessReport>& next, DiffReport& out) {
  std::vector<DiffProcess> left = in_start_order(base), right = in_start_order(next);
  std::vector<bool> taken_left(left.size()), taken_right(right.size());
  // By rank: the k-th process of rank r in BASE with the k-th of rank r in NEW, in start order.
  for (size_t i = 0; i < left.size(); ++i) {
    if (left[i].rank < 0) continue;
    for (size_t j = 0; j < right.size(); ++j) {
      if (taken_right[j] || right[j].rank != left[i].rank) continue;
      out.pairs.push_back(ProcessPair{left[i], right[j], true});
      taken_left[i] = taken_right[j] = true;
      break;
    }
  }
  // The rest in start order; two different ranks never pair.
  for (size_t i = 0; i < left.size(); ++i) {
    if (taken_left[i]) continue;
    for (size_t j = 0; j < right.size(); ++j) {
      if (taken_right[j] || (left[i].rank >= 0 && right[j].rank >= 0)) continue;
      out.pairs.push_back(ProcessPair{left[i], right[j], false});
      taken_left[i] = taken_right[j] = true;
      break;
    }
  }
  for (size_t i = 0; i < left.size(); ++i) {
    if (!taken_left[i]) out.only_base.push_back(left[i]);
  }
  for (size_t j = 0; j < right.size(); ++j) {
    if (!taken_right[j]) out.only_new.push_back(right[j]);
  }
  // Pairs in the base run's start order (rank pairs were found first).
  std::vector<size_t> position(base.size());
  for (size_t i = 0; i < left.size(); ++i) position[left[i].index] = i;
  std::stable_sort(out.pairs.begin(), out.pairs.end(), [&](const ProcessPair& a, const ProcessPair& b) {
    return position[a.base.index] < position[b.base.index];
  });
  if (out.only_base.empty() && out.only_new.empty()) return;
  std::string warning = "BASE has " + std::to_string(base.size()) + " processes and NEW " +
                        std::to_string(next.size()) + "; " + std::to_string(out.pairs.size()) +
                        " pairs compared, the rest in no figure below:";
  for (const DiffProcess& p : out.only_base) warning += " only in BASE: " + describe(p) + ";";
  for (const DiffProcess& p : out.only_new) warning += " only in NEW: " + describe(p) + ";";
  warning.pop_back();
  out.warnings.push_back(warning);
}

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
  pair_processes(base, next, out);
  StackMerge leaks;
  for (size_t i = 0; i < out.pairs.size(); ++i) {
    const ProcessReport& b = base[out.pairs[i].base.index];
    const ProcessReport& n = next[out.pairs[i].next.index];
    std::vector<int32_t> devices;
    for (const PeakReport& p : b.peaks) devices.push_back(p.device);
    for (const PeakReport& p : n.peaks) devices.push_back(p.device);
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    for (int32_t device : devices) {
      PeakDelta delta;
      delta.process = i;
      delta.base_pid = b.header.pid;
      delta.new_pid = n.header.pid;
      delta.rank = out.pairs[i].by_rank ? out.pairs[i].base.rank : -1;
      delta.device = device;
      StackMerge culprits;
      if (const PeakReport* p = find_peak(b, device)) {
        delta.base_bytes = main_level(*p).bytes;
        for (const StackBytes& c : main_level(*p).culprits) culprits.add(c.stack, c.bytes, c.count, false);
      }
      if (const PeakReport* p = find_peak(n, device)) {
        delta.new_bytes = main_level(*p).bytes;
        for (const StackBytes& c : main_level(*p).culprits) culprits.add(c.stack, c.bytes, c.count, true);
      }
      delta.culprits = culprits.changed();
      out.peaks.push_back(std::move(delta));
    }
    // The leaks of the same pairs as the peaks.
    for (size_t side = 0; side < 2; ++side) {
      const ProcessReport& r = side ? n : b;
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
