// report/cli/options.h — the command line of gpumem-report (see `gpumem-report --help`), defined once
// with CLI11 and read both by gpumem-report and by the launcher (which checks the report options it
// passes on before it starts the program).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
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
  bool merge = false;  // `merge REPORT...`: the cross-rank view of per-process JSON reports (rank_merge.h)
  OutputFormat format = OutputFormat::Text;
  FoldedSelection folded = FoldedSelection::Peak;  // what --format folded shows
  bool help = false;
  bool version = false;
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
  bool top_sites = false;           // text output: the "top sites" section
  std::vector<std::string> inputs;  // traces ("-" = standard input); for diff: BASE NEW; for merge: reports
  bool progress = true;             // a progress line on stderr while reading (only when it is a tty)
  size_t jobs = 0;                  // -j: traces analysed at once; 0 = one per CPU (default_jobs())
  std::vector<std::string> what_if; // --what-if: PYTORCH_CUDA_ALLOC_CONF settings to replay (checked)
  std::string recorded_settings;    // --recorded-settings: what the trace ran under, where it cannot tell
  std::optional<double> fail_on_oom_within;  // seconds: exit 1 when growth fills a device sooner
  // The batch what-if (docs/what-if.md, "Another batch size"): predicted peaks at these batch sizes,
  // the largest batch that fits with a margin (bytes, or a share of each device's memory), and the
  // batch of each run that its marks or file name do not give (TRACE as given -> N).
  std::vector<uint64_t> at_batch;
  bool max_batch = false;
  uint64_t batch_margin = 0;
  double batch_margin_share = 0;
  std::vector<std::pair<std::string, uint64_t>> batch_of;
  bool batch() const { return !at_batch.empty() || max_batch; }
  // --export events DIR: the traces' rows for SQL engines (report/outputs/export_events.h), no report.
  std::string export_dir;  // "" = no export

};

// "90s", "30m", "2h", "1d", "1h30m", or plain seconds ("45", "2.5"): seconds; nullopt when malformed.
std::optional<double> parse_duration(const std::string& text);

// A usage error: one line for the user, exit status 2.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// gpumem-report's arguments (argv without the program name). Throws UsageError.
Options parse_options(const std::vector<std::string>& args);

// The report options the launcher passes on, before it appends the run's trace files: the same
// definition, but no trace and no `diff` may be among them. Throws UsageError.
Options parse_forwarded_options(const std::vector<std::string>& args);

// Checks the words before any `--` ahead of CLI11, so that a slip gets a message that says what to
// write instead (throws UsageError, one line):
//  - `--name=` with nothing after '=': "--name: missing value" (CLI11 would take the next word as its
//    value: a trace, or the launcher's CMD);
//  - an option nobody defines: "unknown option --fail-on-laek; did you mean --fail-on-leak?", the
//    nearest of gpumem-report's options and `also_known` (the launcher's own) within two edits;
//  - a size after an option whose value attaches only with '=' (`--fail-on-leak 1MiB`, where 1MiB
//    would be read as a trace): "--fail-on-leak takes its size after '=': --fail-on-leak=1MiB". A word
//    that names an existing file is a trace, as before.
void check_option_words(const std::vector<std::string>& args, const std::vector<std::string>& also_known = {});

// `gpumem-report --help`: generated from the same definition.
std::string help_text();

}  // namespace gpumemtrace::report
