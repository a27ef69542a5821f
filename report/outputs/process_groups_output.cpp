// report/outputs/process_groups_output.cpp — see process_groups_output.h.
#include "report/outputs/process_groups_output.h"

#include <string>

#include "report/outputs/units.h"
#include "util/terminal_text.h"

namespace gpumemtrace::report {

namespace {
std::string plural(uint64_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

void write_group(std::ostream& out, const std::string& name, const ProcessGroup& g) {
  const ProcessTotals& t = g.totals;
  out << "  " << name << ": " << plural(t.processes, "process", "processes") << " (first: pid " << g.first.pid << ", "
      << util::printable(g.first.file) << "), " << plural(t.events, "event", "events") << "; peak ";
  if (t.peak_min.value == t.peak_max.value) {
    out << format_bytes(t.peak_max.value);
  } else {
    out << format_bytes(t.peak_min.value) << " (pid " << t.peak_min.pid << ") to " << format_bytes(t.peak_max.value)
        << " (pid " << t.peak_max.pid << ")";
  }
  out << "; leaked " << format_bytes(t.leaked_bytes) << " in " << plural(t.leaked_count, "allocation", "allocations");
  if (t.ooms) out << "; " << plural(t.ooms, "OOM", "OOMs");
  if (t.failed_allocations) out << "; " << t.failed_allocations << " failed allocations";
  if (t.cut) out << "; " << t.cut << " cut";
  if (t.killed_by_signal) out << "; " << t.killed_by_signal << " killed by a signal";
  if (t.incomplete) out << "; " << t.incomplete << " incomplete (events dropped)";
  out << "\n";
}
}  // namespace

void write_process_groups_note(std::ostream& out, const ProcessGroups& groups, size_t shown) {
  out << (shown + groups.processes()) << " processes: the " << shown
      << " that tell the most are shown in full (an OOM first, then a leak, growth or a cut trace, then the "
         "largest peak); the other "
      << groups.processes() << " are summed by executable and rank at the end\n\n";
}

void write_process_groups_text(std::ostream& out, const ProcessGroups& groups) {
  out << plural(groups.processes(), "more process", "more processes") << ", summed by executable and rank:\n";
  for (const ProcessGroup& g : groups.groups) {
    std::string name = g.exe.empty() ? std::string("(executable not recorded)") : util::printable(g.exe);
    name += g.rank >= 0 ? ", rank " + std::to_string(g.rank) : std::string(", no rank");
    write_group(out, name, g);
  }
  if (groups.other_groups) write_group(out, plural(groups.other_groups, "more executable and rank", "more executables and ranks"), groups.other);
}

}  // namespace gpumemtrace::report
