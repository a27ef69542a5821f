// report/cli/options.h — the command line of gpumem-report (see `gpumem-report --help`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/outputs/stack_view.h"
#include "report/outputs/folded_output.h"

namespace gpumemtrace::report {

struct PeakIncreaseLimit {
  bool percent = false;  // value is a percentage of the base peak, else bytes
  double value = 0;
};

enum class OutputFormat { Text, Json, Html, Perfetto, Folded };

struct Options {
  bool diff = false;
  OutputFormat format = OutputFormat::Text;
  FoldedSelection folded = FoldedSelection::Peak;  // what --format folded shows
  bool help = false;
  std::string output;  // "" = stdout
  std::string suppressions;
  bool default_suppressions = true;     // the shipped library rules (library_rules.supp)
  bool count_alive_at_exit = false;     // --fail-on-leak also counts blocks alive at exit
  std::optional<uint64_t> fail_on_leak;  // bytes
  bool fail_on_growth = false;
  bool allow_incomplete = false;        // gate cut traces on what they recorded (else exit status 3)
  std::optional<PeakIncreaseLimit> fail_on_peak_increase;
  StackViewOptions stacks;  // text output: --frames, --native, --full-names, --width, --user-code, --library
  bool width_given = false;  // --width: else the terminal's width when the report goes to one
  size_t max_items = 5;
  std::vector<std::string> inputs;  // traces; for diff: BASE NEW
  bool progress = true;             // a progress line on stderr while reading (only when it is a tty)
};

// Throws std::invalid_argument with a message for the user (exit status 2).
Options parse_options(const std::vector<std::string>& args);
extern const char* const kUsage;

}  // namespace gpumemtrace::report
