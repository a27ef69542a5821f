// report/analyses/report_model.cpp — names of the model's enums, and the totals the outputs and
// gates share.
#include "report/analyses/report_model.h"

#include <algorithm>

namespace gpumemtrace::report {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::Capacity: return "capacity";
    case Verdict::Fragmentation: return "fragmentation";
    case Verdict::AllocatorLimit: return "allocator limit";
    case Verdict::OtherProcesses: return "other processes";
    case Verdict::NotEnoughInformation: return "not enough information";
  }
  return "not enough information";
}

const char* role_name(Role role) {
  switch (role) {
    case Role::Parameters: return "parameters";
    case Role::Gradients: return "gradients";
    case Role::OptimizerState: return "optimizer state";
    case Role::Activations: return "activations";
    case Role::BackwardTemporaries: return "backward temporaries";
    case Role::LibraryWorkspaces: return "library workspaces";
    case Role::AllocatorCache: return "allocator cache";
    case Role::Other: return "other";
  }
  return "other";
}

uint64_t RoleSplit::total() const {
  uint64_t sum = 0;
  for (uint64_t b : bytes) sum += b;
  return sum;
}

const char* level_name(Level level) {
  switch (level) {
    case Level::Allocation: return "allocation";
    case Level::Physical: return "physical";
    case Level::Block: return "block";
    case Level::Host: return "host";
  }
  return "allocation";
}

uint64_t ProcessReport::peak_bytes() const {
  uint64_t peak = 0;
  for (const DeviceSummary& d : devices) peak = std::max(peak, d.peak_reserved);
  return peak;
}

uint64_t ProcessReport::leaked_bytes() const { return ended_early() ? 0 : live_when_cut_bytes(); }

uint64_t ProcessReport::live_when_cut_bytes() const {
  uint64_t total = 0;
  for (const LeakGroup& leak : leaks) total += leak.suppressed ? 0 : leak.bytes;
  return total;
}

uint64_t ProcessReport::leaked_count() const {
  if (ended_early()) return 0;
  uint64_t total = 0;
  for (const LeakGroup& leak : leaks) total += leak.suppressed ? 0 : leak.count;
  return total;
}

uint64_t ProcessReport::alive_at_exit_bytes() const {
  uint64_t total = 0;
  for (const HeldAtExit& held : held_at_exit) total += held.reason == "alive_at_exit" ? held.bytes : 0;
  return total;
}

uint64_t ProcessReport::scope_leaked_bytes() const {
  uint64_t largest = 0;
  for (const ScopeReport& scope : scopes) largest = std::max(largest, scope.leaked_bytes);
  return largest;
}

}  // namespace gpumemtrace::report
