// report/cli/gates.cpp — the CI gates (--fail-on-leak, --fail-on-growth, --fail-on-oom-within,
// --fail-on-peak-increase).
#include "report/cli/gates.h"

#include <cstdio>
#include <sstream>

#include "report/outputs/text_output.h"
#include "report/outputs/units.h"
#include "report/outputs/what_if_output.h"
#include "util/terminal_text.h"

namespace gpumemtrace::report {

using util::printable;

namespace {

// A trace the recorder dropped events from (GPUMEMTRACE_ON_FULL=drop) is incomplete: a dropped free is
// a false leak, a dropped allocation a missed one. Its gates give no verdict (check_incomplete) unless
// --allow-incomplete, and then every failure says so.
std::string incomplete_note(const ProcessReport& r) {
  return r.dropped_events ? " (incomplete: the recorder dropped " + std::to_string(r.dropped_events) + " events)" : "";
}

}  // namespace

std::vector<std::string> check_gates(const std::vector<ProcessReport>& reports, const Options& options) {
  std::vector<std::string> failures;
  for (const ProcessReport& r : reports) {
    if (r.dropped_events && !options.allow_incomplete) continue;  // no verdict: check_incomplete says why
    const std::string file = printable(r.file) + incomplete_note(r);
    // Leaked memory, and on request the PyTorch blocks still referenced at exit. A process killed by a
    // signal, whose trace was cut or whose run ended in an OOM (story.h) leaked nothing: what it held
    // then is "live when killed/cut/it crashed".
    const uint64_t alive = options.count_alive_at_exit && !r.ended_early() ? r.alive_at_exit_bytes() : 0;
    if (options.fail_on_leak && r.leaked_bytes() + alive > *options.fail_on_leak) {
      std::ostringstream message;
      size_t groups = 0;
      const Stack* largest_stack = nullptr;  // leaks and held_at_exit are sorted largest first
      uint64_t largest_bytes = 0, largest_count = 0;
      for (const LeakGroup& leak : r.leaks) {
        if (leak.suppressed) continue;
        if (!largest_stack) largest_stack = &leak.stack, largest_bytes = leak.bytes, largest_count = leak.count;
        ++groups;
      }
      message << file << ": leaked " << format_bytes(r.leaked_bytes()) << " in " << r.leaked_count()
              << (r.leaked_count() == 1 ? " allocation" : " allocations");
      if (alive) message << ", plus " << format_bytes(alive) << " of PyTorch blocks alive at exit";
      if (*options.fail_on_leak) message << " (limit " << format_bytes(*options.fail_on_leak) << ")";
      if (!largest_stack) {
        for (const HeldAtExit& held : r.held_at_exit) {
          if (held.reason != "alive_at_exit") continue;
          largest_stack = &held.stack, largest_bytes = held.bytes, largest_count = held.count;
          break;
        }
      } else if (groups > 1) {
        message << " from " << groups << " stacks; the largest, " << format_bytes(largest_bytes) << " in "
                << largest_count;
      }
      message << ", allocated here:\n";
      if (largest_stack) write_stack(message, *largest_stack, "    ", options.stacks);
      failures.push_back(message.str());
    }
    for (const ScopeReport& scope : r.scopes) {
      if (!options.fail_on_leak || scope.leaked_bytes <= *options.fail_on_leak) continue;
      if (r.ended_early() && !scope.closed) continue;  // cut, killed or crashed inside it: no verdict
      if (scope.failed) continue;  // the test failed: not checked (Scopes)
      if (scope.own_leak_limit) continue;  // its own limit (gpu_leak_limit) decided it, inside pytest
      std::ostringstream message;
      message << file << ": " << printable(scope.name) << " leaked " << format_bytes(scope.leaked_bytes) << " in "
              << scope.leaked_count << (scope.leaked_count == 1 ? " allocation" : " allocations")
              << " (still live when the scope ended";
      if (*options.fail_on_leak) message << "; limit " << format_bytes(*options.fail_on_leak);
      message << ")";
      if (!scope.leaks.empty()) {
        message << ", allocated here:\n";
        write_stack(message, scope.leaks.front().stack, "    ", options.stacks);
      } else {
        message << "\n";
      }
      failures.push_back(message.str());
    }
    if (options.fail_on_growth) {
      for (const GrowthReport& g : r.growth) {
        std::ostringstream message;
        message << file << ": memory keeps growing: " << format_bytes(g.first_bytes) << " -> "
                << format_bytes(g.peak_bytes) << " over " << g.rises << " rises, allocated here:\n";
        write_stack(message, g.stack, "    ", options.stacks);
        failures.push_back(message.str());
      }
    }
    if (options.fail_on_oom_within) {  // time_to_oom.h: growth that fills its device too soon
      for (const TimeToOomReport& t : r.time_to_oom) {
        if (t.seconds_left < 0 || t.seconds_left >= *options.fail_on_oom_within) continue;
        std::ostringstream message;
        message << file << ": device " << t.device << " would be full in " << format_duration(t.seconds_left)
                << " at the rate memory grows here (" << format_bytes(t.bytes_per_step) << " per step, "
                << format_bytes(t.free_bytes) << " left; limit " << format_duration(*options.fail_on_oom_within)
                << "), allocated here:\n";
        write_stack(message, t.stack, "    ", options.stacks);
        failures.push_back(message.str());
      }
    }
  }
  return failures;
}

std::vector<std::string> check_incomplete(const std::vector<ProcessReport>& reports, const Options& options) {
  std::vector<std::string> incomplete;
  if (options.allow_incomplete || (!options.fail_on_leak && !options.fail_on_growth && !options.fail_on_oom_within)) {
    return incomplete;
  }
  for (const ProcessReport& r : reports) {
    if (r.dropped_events && !r.cut()) {
      incomplete.push_back(printable(r.file) + ": the recorder dropped " + std::to_string(r.dropped_events) +
                           " events (GPUMEMTRACE_ON_FULL=drop): no verdict on an incomplete trace "
                           "(--allow-incomplete gates it on what it recorded)");
      continue;
    }
    if (!r.cut()) continue;
    const std::string at = format_seconds(r.last_time_ns - r.first_time_ns);
    incomplete.push_back(printable(r.file) + ": cut at " + at + " (" + (r.truncated ? "cut-short last line" : "no footer") +
                         "): no verdict on a cut trace (--allow-incomplete gates it on what it recorded)");
  }
  return incomplete;
}

std::vector<std::string> check_diff_gates(const DiffReport& diff, const std::vector<ProcessReport>& new_reports,
                                          const Options& options) {
  std::vector<std::string> failures = check_gates(new_reports, options);
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
    message << "peak of device " << p.device << " (" << pair_name(diff.pairs[p.process]) << ") grew by "
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
